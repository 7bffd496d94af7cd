//! Presenter mode: the latest presentation of the instructor's page, and the room's head count.
//!
//! Both are `watch` channels: a page that falls behind needs only the latest presentation, not
//! every step the instructor took, so a burst of navigation costs each follower one message.
//! The presentation is kept encoded, so five hundred followers share one serialisation.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::protocol::{Audience, Presentation, Role, ServerMessage};
use tokio::sync::watch;

use crate::wire::encode;

/// How long the instructor's head count waits after a change before it is sent, so a room
/// joining at once costs the instructor one message, not five hundred.
pub const AUDIENCE_SETTLE: Duration = Duration::from_millis(100);

pub struct Classroom {
    /// The encoded `presenting` message for the latest presentation.
    presenting: watch::Sender<Utf8Bytes>,
    audience: watch::Sender<Audience>,
}

impl Default for Classroom {
    fn default() -> Self {
        Classroom {
            presenting: watch::Sender::new(encode(&ServerMessage::Presenting { presentation: None })),
            audience: watch::Sender::new(Audience::default()),
        }
    }
}

impl Classroom {
    /// The instructor presents `presentation` (`None`: stops presenting).
    pub fn present(&self, presentation: Option<Presentation>) {
        self.presenting.send_replace(encode(&ServerMessage::Presenting { presentation }));
    }

    /// Every presentation from now on, starting with the current one.
    pub fn presentations(&self) -> watch::Receiver<Utf8Bytes> {
        let mut receiver = self.presenting.subscribe();
        receiver.mark_changed();
        receiver
    }

    /// Counts a connection in until the returned seat is dropped.
    pub fn join(self: &Arc<Self>, role: Role) -> Seat {
        let viewer = role == Role::Viewer;
        if viewer {
            self.audience.send_modify(|a| a.viewers += 1);
        }
        Seat { classroom: self.clone(), viewer, following: false }
    }

    /// Every head count from now on, starting with the current one (send each after
    /// [`AUDIENCE_SETTLE`], so changes arriving together go as one).
    pub fn audiences(&self) -> watch::Receiver<Audience> {
        let mut receiver = self.audience.subscribe();
        receiver.mark_changed();
        receiver
    }
}

/// One connection's place in the head count.
pub struct Seat {
    classroom: Arc<Classroom>,
    viewer: bool,
    following: bool,
}

impl Seat {
    /// Whether the page follows the presentation now.
    pub fn follow(&mut self, following: bool) {
        if following != std::mem::replace(&mut self.following, following) {
            self.classroom.audience.send_modify(|a| if following { a.following += 1 } else { a.following -= 1 });
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.follow(false);
        if self.viewer {
            self.classroom.audience.send_modify(|a| a.viewers -= 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn seats_count_viewers_and_followers_until_they_leave() {
        let classroom = Arc::new(Classroom::default());
        let mut viewer = classroom.join(Role::Viewer);
        let mut instructor = classroom.join(Role::Instructor);
        viewer.follow(true);
        viewer.follow(true);
        instructor.follow(true);
        assert_eq!(*classroom.audiences().borrow(), Audience { viewers: 1, following: 2 });
        instructor.follow(false);
        drop(viewer);
        assert_eq!(*classroom.audiences().borrow(), Audience { viewers: 0, following: 0 });
    }

    #[tokio::test]
    async fn a_late_subscriber_gets_only_the_latest_presentation() {
        let classroom = Classroom::default();
        for chapter in ["intro", "data-parallel"] {
            classroom.present(Some(Presentation { chapter: chapter.into(), block: None, quiz: None, charts: Default::default() }));
        }
        let mut later = classroom.presentations();
        later.changed().await.unwrap();
        assert!(later.borrow_and_update().as_str().contains("data-parallel"));
        classroom.present(None);
        later.changed().await.unwrap();
        assert_eq!(later.borrow_and_update().as_str(), r#"{"type":"presenting","presentation":null}"#);
    }
}
