//! Presenter mode over the protocol: the instructor's presentation reaches every connection,
//! a late joiner gets it as it connects, the instructor is told how many follow, and nothing a
//! viewer sends can present.

use std::time::Duration;

use scalebook_shared::charts::XAxis;
use scalebook_shared::protocol::{Audience, ChartView, ClientMessage, ErrorCode, Presentation, RunId, ServerMessage};

use crate::harness::{Client, Server};
use crate::roles::refusal;

const WAIT: Duration = Duration::from_secs(60);

fn presentation(chapter: &str, runs: &[&str]) -> Presentation {
    Presentation {
        chapter: chapter.into(),
        block: Some(2),
        element: Some(7),
        quiz: Some(5),
        charts: ChartView {
            runs: runs.iter().map(|r| RunId::parse(r).unwrap()).collect(),
            axis: XAxis::Relative,
            smoothing: 0.8,
            names: Vec::new(),
        },
    }
}

/// The next presentation `client` is sent.
async fn presented(client: &mut Client) -> Option<Presentation> {
    client
        .recv_until(WAIT, |m| match m {
            ServerMessage::Presenting { presentation } => Some(presentation.clone()),
            _ => None,
        })
        .await
}

/// Waits for the instructor to be told `expected` (earlier counts may come first).
async fn audience_reaches(instructor: &mut Client, expected: Audience) {
    instructor.recv_until(WAIT, |m| matches!(m, ServerMessage::Audience(a) if *a == expected).then_some(())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_follows_the_instructors_presentation_and_joins_late_where_it_is() {
    let server = Server::start("classroom", &[]);
    let mut instructor = server.connect().await;
    // Nothing presented yet: a new connection is told so at once.
    assert_eq!(presented(&mut instructor).await, None);
    audience_reaches(&mut instructor, Audience { viewers: 0, followers: 0, following: 0 }).await;

    let first = presentation("data-parallel", &["run-a"]);
    instructor.send(&ClientMessage::Present { presentation: first.clone() }).await;
    assert_eq!(presented(&mut instructor).await, Some(first.clone()));

    // Two learners join late: each lands where the instructor is, and is counted.
    let mut learners = vec![server.connect_viewer().await, server.connect_viewer().await];
    for learner in &mut learners {
        assert_eq!(presented(learner).await, Some(first.clone()));
        learner.send(&ClientMessage::Follow { following: true }).await;
    }
    audience_reaches(&mut instructor, Audience { viewers: 2, followers: 0, following: 2 }).await;

    // The instructor moves on; every learner is sent where to, breakaways included (their
    // page decides whether to go).
    learners[1].send(&ClientMessage::Follow { following: false }).await;
    audience_reaches(&mut instructor, Audience { viewers: 2, followers: 0, following: 1 }).await;
    let second = presentation("tensor-parallel", &["run-a", "run-b"]);
    instructor.send(&ClientMessage::Present { presentation: second.clone() }).await;
    for learner in &mut learners {
        assert_eq!(presented(learner).await, Some(second.clone()));
    }

    // A learner leaving is counted out.
    drop(learners.pop());
    audience_reaches(&mut instructor, Audience { viewers: 1, followers: 0, following: 1 }).await;

    // A broken presentation is refused with every problem named, and changes nothing.
    let mut broken = serde_json::to_value(presentation("../secrets", &[])).unwrap();
    broken["charts"]["smoothing"] = serde_json::json!(2.0);
    let text = serde_json::json!({ "type": "present", "presentation": broken }).to_string();
    let refused = refusal(&mut instructor, &text).await.expect("a broken presentation was accepted");
    assert_eq!(refused.code, ErrorCode::BadMessage);
    let fields: Vec<&str> = refused.problems.0.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["chapter", "charts.smoothing"], "{refused:?}");
    let mut late = server.connect_viewer().await;
    assert_eq!(presented(&mut late).await, Some(second.clone()));

    // Stopping is sent to everyone: the pages stay where they are.
    instructor.send(&ClientMessage::StopPresenting).await;
    assert_eq!(presented(&mut learners[0]).await, None);
    assert_eq!(presented(&mut late).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_cannot_present_or_stop_the_presentation() {
    let server = Server::start("classroom-viewer", &[]);
    let mut instructor = server.connect().await;
    let shown = presentation("intro", &[]);
    instructor.send(&ClientMessage::Present { presentation: shown.clone() }).await;
    // Kept once the instructor is sent it back.
    instructor.recv_until(WAIT, |m| matches!(m, ServerMessage::Presenting { presentation: Some(p) } if *p == shown).then_some(())).await;
    let mut viewer = server.connect_viewer().await;
    assert_eq!(presented(&mut viewer).await, Some(shown.clone()));
    for message in [ClientMessage::Present { presentation: presentation("estimates", &[]) }, ClientMessage::StopPresenting] {
        let refused = refusal(&mut viewer, &serde_json::to_string(&message).unwrap()).await.expect("a viewer presented");
        assert_eq!(refused.code, ErrorCode::Forbidden, "{refused:?}");
        assert!(refused.message.contains("viewers cannot present"), "{}", refused.message);
    }
    // Nothing changed for anyone: a page joining now still lands on the instructor's chapter.
    let mut late = server.connect_viewer().await;
    assert_eq!(presented(&mut late).await, Some(shown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presentation_outlives_the_presenters_reload_and_the_room_is_told_when_it_is_gone() {
    let server = Server::start("presenter-gone", &[]);
    let mut learner = server.connect_viewer().await;
    let connected = |m: &ServerMessage| if let ServerMessage::Presenter { connected } = m { Some(*connected) } else { None };
    let mut instructor = server.connect().await;
    let first = presentation("data-parallel", &[]);
    instructor.send(&ClientMessage::Present { presentation: first.clone() }).await;
    learner.recv_until(WAIT, |m| matches!(m, ServerMessage::Presenting { presentation: Some(p) } if *p == first).then_some(())).await;

    // A reload: the page goes and comes back presenting; the room follows it on.
    drop(instructor);
    let mut reloaded = server.connect().await;
    let next = presentation("tensor-parallel", &[]);
    reloaded.send(&ClientMessage::Present { presentation: next.clone() }).await;
    learner.recv_until(WAIT, |m| matches!(m, ServerMessage::Presenting { presentation: Some(p) } if *p == next).then_some(())).await;
    // A learner joining now lands there, and hears the presenter is connected.
    let mut late = server.connect_viewer().await;
    assert_eq!(opening(&mut late).await, (Some(next.clone()), true));

    // The presenting page goes for good: the presentation stays, and the room is told.
    drop(reloaded);
    assert!(!learner.recv_until(WAIT, |m| connected(m).filter(|c| !c)).await);
    let mut again = server.connect_viewer().await;
    assert_eq!(opening(&mut again).await, (Some(next), false));
}

/// What a connection is told as it opens: the presentation, and whether its presenter is
/// connected (sent by two tasks, in either order).
async fn opening(client: &mut Client) -> (Option<Presentation>, bool) {
    let (mut shown, mut told) = (None, None);
    client
        .recv_until(WAIT, |m| {
            match m {
                ServerMessage::Presenting { presentation } => shown = Some(presentation.clone()),
                ServerMessage::Presenter { connected } => told = Some(*connected),
                _ => {}
            }
            shown.clone().zip(told)
        })
        .await
}
