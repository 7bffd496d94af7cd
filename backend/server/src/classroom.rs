//! Presenter mode: the latest presentation of the instructor's page, the room's head count, and
//! the roster of follower servers on the class listener (with the instructor's power to remove
//! one).
//!
//! All three are `watch` channels: a page that falls behind needs only the latest presentation, not
//! every step the instructor took, so a burst of navigation costs each follower one message.
//! The presentation is kept encoded, so five hundred followers share one serialisation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::protocol::{Audience, Follower, FollowerId, Introduction, Presentation, Role, RunId, RunSummary, ServerMessage};
use tokio::sync::{Notify, watch};

use crate::clock::now;
use crate::wire::encode;

/// The follower servers on the class listener, by their number.
pub type Roster = BTreeMap<FollowerId, Follower>;

/// How long the instructor's head count waits after a change before it is sent, so a room
/// joining at once costs the instructor one message, not five hundred.
pub const AUDIENCE_SETTLE: Duration = Duration::from_millis(100);
/// How long the presenting page may be away before the room is told it is gone: a reload
/// comes back well within it.
pub const PRESENTER_GRACE: Duration = Duration::from_secs(5);

pub struct Classroom {
    /// The encoded `presenting` message for the latest presentation.
    presenting: watch::Sender<Utf8Bytes>,
    audience: watch::Sender<Audience>,
    roster: watch::Sender<Roster>,
    /// What ends each follower's connection when the instructor removes it.
    dismissals: Mutex<HashMap<FollowerId, Arc<Notify>>>,
    /// Names the instructor removed, kept out until the next class link.
    barred: Mutex<HashSet<String>>,
    /// The seat that presents, by number (`None`: nobody presents).
    presenter: Mutex<Option<u64>>,
    /// Whether that seat's page is connected (see [`PRESENTER_GRACE`]).
    presenter_connected: watch::Sender<bool>,
    next_seat: AtomicU64,
}

impl Default for Classroom {
    fn default() -> Self {
        Classroom {
            presenting: watch::Sender::new(encode(&ServerMessage::Presenting { presentation: None })),
            audience: watch::Sender::new(Audience::default()),
            roster: watch::Sender::new(Roster::new()),
            dismissals: Mutex::default(),
            barred: Mutex::default(),
            presenter: Mutex::default(),
            presenter_connected: watch::Sender::new(true),
            next_seat: AtomicU64::new(1),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Classroom {
    /// `presentation` is presented (`None`: nobody presents), by a page of this server or,
    /// on a server following a class, by the class's instructor.
    pub fn present(&self, presentation: Option<Presentation>) {
        self.presenting.send_replace(encode(&ServerMessage::Presenting { presentation }));
    }

    /// Whether the presenting page is connected (on a server following a class: as the
    /// class listener says).
    pub fn presenter_connected(&self, connected: bool) {
        self.presenter_connected.send_if_modified(|now| std::mem::replace(now, connected) != connected);
    }

    /// Whether the presenting page is connected, now and at every change.
    pub fn presenter_states(&self) -> watch::Receiver<bool> {
        self.presenter_connected.subscribe()
    }

    /// Every presentation from now on, starting with the current one.
    pub fn presentations(&self) -> watch::Receiver<Utf8Bytes> {
        let mut receiver = self.presenting.subscribe();
        receiver.mark_changed();
        receiver
    }

    /// Counts a connection in until the returned seat is dropped; a follower server also
    /// joins the roster.
    pub fn join(self: &Arc<Self>, role: Role) -> Seat {
        self.audience.send_modify(|a| *a = counted(*a, role, 1));
        let number = self.next_seat.fetch_add(1, Ordering::Relaxed);
        let follower = (role == Role::Follower).then(|| {
            let id = number;
            let dismissal = Arc::new(Notify::new());
            lock(&self.dismissals).insert(id, dismissal.clone());
            self.roster.send_modify(|r| {
                r.insert(id, Follower { id, name: "?".into(), following: false, since: now(), runs: None });
            });
            (id, dismissal)
        });
        Seat { classroom: self.clone(), number, role, following: false, follower }
    }

    /// Every roster from now on, starting with the current one (send each after
    /// [`AUDIENCE_SETTLE`], as the head count).
    pub fn rosters(&self) -> watch::Receiver<Roster> {
        let mut receiver = self.roster.subscribe();
        receiver.mark_changed();
        receiver
    }

    /// The instructor removes follower `id`: its connection ends, and its name is kept out
    /// until the next class link. `false` when there is no such follower.
    pub fn remove(&self, id: FollowerId) -> bool {
        let Some(dismissal) = lock(&self.dismissals).get(&id).cloned() else { return false };
        if let Some(follower) = self.roster.borrow().get(&id) {
            lock(&self.barred).insert(follower.name.clone());
        }
        dismissal.notify_one();
        true
    }

    /// Follower `id`'s name and its summary of run `run`, when it is in the class and shares it.
    pub fn shared_run(&self, id: FollowerId, run: &RunId) -> Option<(String, RunSummary)> {
        let roster = self.roster.borrow();
        let follower = roster.get(&id)?;
        let summary = follower.runs.as_ref()?.iter().find(|r| r.id == *run)?;
        Some((follower.name.clone(), summary.clone()))
    }

    /// A new class link: whoever was removed may join with it.
    pub fn new_class_link(&self) {
        lock(&self.barred).clear();
    }

    /// Every head count from now on, starting with the current one (send each after
    /// [`AUDIENCE_SETTLE`], so changes arriving together go as one).
    pub fn audiences(&self) -> watch::Receiver<Audience> {
        let mut receiver = self.audience.subscribe();
        receiver.mark_changed();
        receiver
    }
}

/// The head count with a connection of `role` in (`by` 1) or out (-1): a viewer page counts as
/// a viewer, a follower server as a follower, an instructor's page as neither.
fn counted(mut audience: Audience, role: Role, by: i32) -> Audience {
    let count = match role {
        Role::Viewer => &mut audience.viewers,
        Role::Follower => &mut audience.followers,
        Role::Instructor => return audience,
    };
    *count = count.saturating_add_signed(by);
    audience
}

/// One connection's place in the head count (and a follower server's in the roster).
pub struct Seat {
    classroom: Arc<Classroom>,
    number: u64,
    role: Role,
    following: bool,
    follower: Option<(FollowerId, Arc<Notify>)>,
}

impl Seat {
    /// This seat's page presents `presentation` (`None`: stops presenting).
    pub fn present(&self, presentation: Option<Presentation>) {
        *lock(&self.classroom.presenter) = presentation.as_ref().map(|_| self.number);
        self.classroom.present(presentation);
        self.classroom.presenter_connected(true);
    }

    /// Whether the page (or a follower server's pages) follows the presentation now.
    pub fn follow(&mut self, following: bool) {
        if following != std::mem::replace(&mut self.following, following) {
            self.classroom.audience.send_modify(|a| if following { a.following += 1 } else { a.following -= 1 });
            self.update(|f| f.following = following);
        }
    }

    /// A follower server's introduction (checked by the caller): its name and shared runs
    /// on the roster. Refused for a name the instructor removed.
    pub fn introduce(&mut self, introduction: Introduction) -> Result<(), String> {
        if lock(&self.classroom.barred).contains(&introduction.name) {
            if let Some((_, dismissal)) = &self.follower {
                dismissal.notify_one();
            }
            return Err(format!("{} was removed from the class by the instructor", introduction.name));
        }
        self.update(|f| (f.name, f.runs) = (introduction.name, introduction.runs));
        Ok(())
    }

    fn update(&self, change: impl FnOnce(&mut Follower)) {
        if let Some((id, _)) = &self.follower {
            self.classroom.roster.send_modify(|r| r.get_mut(id).map_or((), change));
        }
    }

    /// Resolves when the instructor removes this follower (never, for other connections).
    pub async fn dismissed(&self) {
        match &self.follower {
            Some((_, dismissal)) => dismissal.notified().await,
            None => std::future::pending().await,
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        // The presenting page left: unless it (or another) presents again within the grace,
        // the room is told it is gone.
        if *lock(&self.classroom.presenter) == Some(self.number)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (classroom, number) = (self.classroom.clone(), self.number);
            runtime.spawn(async move {
                tokio::time::sleep(PRESENTER_GRACE).await;
                if *lock(&classroom.presenter) == Some(number) {
                    classroom.presenter_connected(false);
                }
            });
        }
        self.follow(false);
        let role = self.role;
        self.classroom.audience.send_modify(|a| *a = counted(*a, role, -1));
        if let Some((id, _)) = self.follower.take() {
            lock(&self.classroom.dismissals).remove(&id);
            self.classroom.roster.send_modify(|r| {
                r.remove(&id);
            });
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
        let follower = classroom.join(Role::Follower);
        assert_eq!(classroom.audiences().borrow().followers, 1);
        drop(follower);
        viewer.follow(true);
        viewer.follow(true);
        instructor.follow(true);
        assert_eq!(*classroom.audiences().borrow(), Audience { viewers: 1, followers: 0, following: 2 });
        instructor.follow(false);
        drop(viewer);
        assert_eq!(*classroom.audiences().borrow(), Audience { viewers: 0, followers: 0, following: 0 });
    }

    #[tokio::test]
    async fn followers_join_the_roster_and_a_removed_name_stays_out_until_a_new_link() {
        let classroom = Arc::new(Classroom::default());
        let mut seat = classroom.join(Role::Follower);
        let introduction = |name: &str| Introduction { name: name.into(), runs: None };
        seat.introduce(introduction("learner1")).unwrap();
        seat.follow(true);
        let id = *classroom.rosters().borrow().keys().next().unwrap();
        assert_eq!(classroom.rosters().borrow()[&id].name, "learner1");
        assert!(classroom.rosters().borrow()[&id].following);
        assert!(classroom.remove(id));
        tokio::time::timeout(Duration::from_secs(10), seat.dismissed()).await.unwrap();
        drop(seat);
        assert!(classroom.rosters().borrow().is_empty() && !classroom.remove(id));
        let mut again = classroom.join(Role::Follower);
        assert!(again.introduce(introduction("learner1")).is_err());
        classroom.new_class_link();
        assert!(again.introduce(introduction("learner1")).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn the_room_is_told_when_the_presenter_is_gone_and_a_reload_in_time_is_no_news() {
        let classroom = Arc::new(Classroom::default());
        let presentation = Presentation { chapter: "intro".into(), block: None, element: None, quiz: None, charts: Default::default() };
        let states = classroom.presenter_states();
        // A reload: the page leaves and presents again within the grace.
        let first = classroom.join(Role::Instructor);
        first.present(Some(presentation.clone()));
        drop(first);
        let reloaded = classroom.join(Role::Instructor);
        reloaded.present(Some(presentation.clone()));
        tokio::time::sleep(PRESENTER_GRACE * 2).await;
        assert!(*states.borrow());
        // Gone for good.
        drop(reloaded);
        tokio::time::sleep(PRESENTER_GRACE * 2).await;
        assert!(!*states.borrow());
        classroom.join(Role::Instructor).present(Some(presentation));
        assert!(*states.borrow());
    }

    #[tokio::test]
    async fn a_late_subscriber_gets_only_the_latest_presentation() {
        let classroom = Classroom::default();
        for chapter in ["intro", "data-parallel"] {
            classroom.present(Some(Presentation {
                chapter: chapter.into(),
                block: None,
                element: None,
                quiz: None,
                charts: Default::default(),
            }));
        }
        let mut later = classroom.presentations();
        later.changed().await.unwrap();
        assert!(later.borrow_and_update().as_str().contains("data-parallel"));
        classroom.present(None);
        later.changed().await.unwrap();
        assert_eq!(later.borrow_and_update().as_str(), r#"{"type":"presenting","presentation":null}"#);
    }
}
