//! The feeds of a connection: tasks that each follow one source (a run's points, the runs'
//! changes, the presentation, the audience, the roster, the class link, the class state, a
//! follower's asks) and send what it says to the connection's outbox, at the pace the
//! connection takes it. `ws::serve` starts them with the connection and stops them with it.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::protocol::{
    Audience, ClassState, FollowerIdentity, Learner, Role, RunId, RunRecord, Secret, ServerMessage, run_list,
};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use super::outbox::{Closed, Outbox};
use crate::class::shared::SharedRuns;
use crate::class::{ClassKey, for_followers};
use crate::classroom::{AUDIENCE_SETTLE, Roster, roster_message};
use crate::runs::RunManager;
use crate::state::AppState;
use crate::stream::{Backlog, Subscription};
use crate::wire::encode;

/// Starts the feeds a connection of `role` gets: the presentation and whether its presenter is
/// connected, the runs' changes (the list again, of `learner`'s runs, for one that fell
/// behind); an instructor's the audience, the class link and the roster; a follower's the runs
/// the instructor asks its learner for, once it is `introduced`; every page but a follower's
/// the state of the class this server follows. They end when aborted or when the connection
/// goes.
pub fn start(
    state: &AppState,
    role: Role,
    learner: watch::Receiver<Option<Learner>>,
    introduced: watch::Receiver<Option<FollowerIdentity>>,
    out: Outbox,
) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(forward_presentations(state.classroom.presentations(role), out.clone())),
        tokio::spawn(forward_presenter(state.classroom.presenter_states(), out.clone())),
        tokio::spawn(forward_updates(state.runs.clone(), role, learner, out.clone())),
    ];
    if role == Role::Instructor {
        tasks.push(tokio::spawn(forward_audience(state.classroom.audiences(), out.clone())));
        tasks.push(tokio::spawn(forward_class_links(state.class.clone(), out.clone())));
        if state.class.is_some() {
            tasks.push(tokio::spawn(forward_roster(state.classroom.rosters(), out.clone())));
        }
    }
    if role != Role::Follower {
        tasks.push(tokio::spawn(forward_class_states(state.following.states(), out.clone())));
    }
    if role == Role::Follower {
        tasks.push(tokio::spawn(forward_asks(state.shared.clone(), introduced, out)));
    }
    tasks
}

/// Sends a subscriber what it missed, then every live message, at the pace the connection
/// takes them. A viewer too slow for the broadcast (it fell more than the channel's capacity
/// behind) is resubscribed from where it got to, so it skips nothing and repeats nothing, and
/// reads what it missed from the file.
pub async fn forward(runs: Arc<RunManager>, id: RunId, mut subscription: Subscription, out: Outbox) {
    loop {
        let Subscription { backlog, replay, mut cursor, mut live } = subscription;
        if let Some(backlog) = backlog
            && send_backlog(backlog, &id, &out).await.is_err()
        {
            return;
        }
        for text in replay {
            if out.send_paced(text).await.is_err() {
                return;
            }
        }
        subscription = loop {
            match live.recv().await {
                Ok(frame) => {
                    cursor = frame.cursor;
                    if out.send_paced(frame.text).await.is_err() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => match runs.subscribe(&id, Some(cursor.points), Some(cursor.log)).await {
                    Ok(again) => break again,
                    Err(_) => return,
                },
                Err(broadcast::error::RecvError::Closed) => return,
            }
        };
    }
}

/// Sends the points a subscriber missed from the run's file, one page read per message sent,
/// so only one page is ever in flight.
async fn send_backlog(backlog: Backlog, id: &RunId, out: &Outbox) -> Result<(), Closed> {
    let mut backlog = Some(backlog);
    while let Some(rest) = backlog.take() {
        match rest.read_next().await {
            Ok(Some((text, rest))) => {
                out.send_paced(text).await?;
                backlog = Some(rest);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("run {id}: cannot read its metrics for a viewer behind: {e}"),
        }
    }
    Ok(())
}

/// Sends one connection the presentation as it stands, then each new one. A connection that
/// was busy meanwhile skips to the latest: a follower needs where the instructor is now.
async fn forward_presentations(mut presentations: watch::Receiver<Utf8Bytes>, out: Outbox) {
    while presentations.changed().await.is_ok() {
        let text = presentations.borrow_and_update().clone();
        if out.send(text).await.is_err() {
            return;
        }
    }
}

/// Sends an instructor's connection the head count, then each change once it settled.
async fn forward_audience(mut audiences: watch::Receiver<Audience>, out: Outbox) {
    while audiences.changed().await.is_ok() {
        tokio::time::sleep(AUDIENCE_SETTLE).await;
        let audience = *audiences.borrow_and_update();
        if out.send(encode(&ServerMessage::Audience(audience))).await.is_err() {
            return;
        }
    }
}

/// Whether a connection of `role` sees `record` (a follower server: see [`for_followers`]).
pub fn shown_to(role: Role, record: &RunRecord) -> bool {
    role != Role::Follower || for_followers(record)
}

/// The run list a connection of `role` whose learner is `mine` is sent (see
/// [`run_list::page`]).
pub async fn run_list(runs: &RunManager, role: Role, mine: Option<&Learner>, before: Option<RunId>) -> ServerMessage {
    let shown = runs.shown().await.into_iter().filter(|r| shown_to(role, r)).collect();
    let (runs, older) = run_list::page(shown, mine, before.as_ref(), run_list::RUN_PAGE);
    ServerMessage::Runs { runs, older, before }
}

/// Forwards every run's changes (those its role sees) to one connection; one that fell behind
/// gets the list's first page again (its learner's, from `learner`).
async fn forward_updates(runs: Arc<RunManager>, role: Role, learner: watch::Receiver<Option<Learner>>, out: Outbox) {
    let mut updates = runs.updates();
    loop {
        let text = match updates.recv().await {
            Ok(text) if role == Role::Follower => match serde_json::from_str::<ServerMessage>(text.as_str()) {
                Ok(ServerMessage::RunUpdate { run }) if !shown_to(role, &run) => continue,
                _ => text,
            },
            Ok(text) => text,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let mine = learner.borrow().clone();
                encode(&run_list(&runs, role, mine.as_ref(), None).await)
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if out.send(text).await.is_err() {
            return;
        }
    }
}

/// Sends a follower's connection what the instructor charts of its learner's runs (`share_run`),
/// once it introduced itself and whenever the instructor charts another.
async fn forward_asks(shared: Arc<SharedRuns>, mut introduced: watch::Receiver<Option<FollowerIdentity>>, out: Outbox) {
    let mut charts = shared.charts();
    let mut asked = HashSet::new();
    loop {
        let identity = introduced.borrow_and_update().clone();
        for ask in match &identity {
            Some(identity) => shared.asks(identity, &mut asked).await,
            None => vec![],
        } {
            if out.send(encode(&ask)).await.is_err() {
                return;
            }
        }
        tokio::select! {
            changed = introduced.changed() => {
                if changed.is_err() {
                    return;
                }
                asked.clear();
            }
            changed = charts.changed() => if changed.is_err() { return },
        }
    }
}

/// Sends an instructor's connection the roster, then each change once it settled.
///
/// Bounded in bytes ([`roster_message`]) and sent at the page's pace: a roster waits for the
/// one before it to leave, so however large the room and however often it changes, the
/// instructor's page is never dropped for being behind (it gets the latest roster next).
async fn forward_roster(mut rosters: watch::Receiver<Roster>, out: Outbox) {
    while rosters.changed().await.is_ok() {
        tokio::time::sleep(AUDIENCE_SETTLE).await;
        let message = roster_message(&rosters.borrow_and_update());
        if out.send_paced(encode(&message)).await.is_err() {
            return;
        }
    }
}

/// Sends an instructor's connection the class link (none without a class listener) with
/// whether its class listener listens, then again at each new link and each change of that.
async fn forward_class_links(key: Option<Arc<ClassKey>>, out: Outbox) {
    let Some(key) = key else {
        let _ = out.send(encode(&ServerMessage::ClassLink { link: None, unbound: None })).await;
        return;
    };
    let (mut changes, mut unbound) = (key.changes(), key.unbound());
    loop {
        let link = Some(Secret(key.link().to_string()));
        let message = ServerMessage::ClassLink { link, unbound: unbound.borrow_and_update().clone() };
        if out.send(encode(&message)).await.is_err() {
            return;
        }
        let changed = tokio::select! {
            changed = changes.changed() => changed,
            changed = unbound.changed() => changed,
        };
        if changed.is_err() {
            return;
        }
    }
}

/// Sends a connection where this server stands with the class it follows, then each change.
async fn forward_class_states(mut states: watch::Receiver<ClassState>, out: Outbox) {
    loop {
        let state = states.borrow_and_update().clone();
        if out.send(encode(&ServerMessage::Class(state))).await.is_err() || states.changed().await.is_err() {
            return;
        }
    }
}

/// Sends a connection whether the presenting page is connected, then each change.
async fn forward_presenter(mut states: watch::Receiver<bool>, out: Outbox) {
    loop {
        let connected = *states.borrow_and_update();
        if out.send(encode(&ServerMessage::Presenter { connected })).await.is_err() || states.changed().await.is_err() {
            return;
        }
    }
}
