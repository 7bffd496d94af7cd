//! Presenter mode: the latest presentation of the instructor's page, the room's head count, and
//! the roster of follower servers on the class listener (with the instructor's power to remove
//! one). A follower is who the class listener established it is ([`FollowerIdentity`]), never
//! the name it introduces itself by: the head count counts people, and Remove bars the person.
//!
//! All three are `watch` channels: a page that falls behind needs only the latest presentation, not
//! every step the instructor took, so a burst of navigation costs each follower one message.
//! The presentation is kept encoded, so five hundred followers share one serialisation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::ws::Utf8Bytes;
use scalebook_shared::protocol::{
    Audience, Follower, FollowerId, FollowerIdentity, Introduction, MAX_ROSTER_RUN_BYTES, Presentation, Role, RunId, RunSummary,
    ServerMessage,
};
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
    /// The same for follower servers: without the runs the class listener does not show them
    /// (learners' runs and the copies of them), which they could never chart.
    presenting_to_followers: watch::Sender<Utf8Bytes>,
    audience: watch::Sender<Audience>,
    roster: watch::Sender<Roster>,
    /// What ends each follower's connection when the instructor removes it.
    dismissals: Mutex<HashMap<FollowerId, Arc<Notify>>>,
    /// Identities the instructor removed, kept out until the next class link.
    barred: Mutex<HashSet<FollowerIdentity>>,
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
            presenting_to_followers: watch::Sender::new(encode(&ServerMessage::Presenting { presentation: None })),
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
    /// on a server following a class, by the class's instructor; follower servers get
    /// `to_followers`, the same without the runs they are not shown.
    pub fn present(&self, presentation: Option<Presentation>, to_followers: Option<Presentation>) {
        self.presenting.send_replace(encode(&ServerMessage::Presenting { presentation }));
        self.presenting_to_followers.send_replace(encode(&ServerMessage::Presenting { presentation: to_followers }));
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

    /// Every presentation from now on, starting with the current one, as a connection of
    /// `role` gets it.
    pub fn presentations(&self, role: Role) -> watch::Receiver<Utf8Bytes> {
        let sender = if role == Role::Follower { &self.presenting_to_followers } else { &self.presenting };
        let mut receiver = sender.subscribe();
        receiver.mark_changed();
        receiver
    }

    /// Counts a page's connection in until the returned seat is dropped.
    pub fn join(self: &Arc<Self>, role: Role) -> Seat {
        self.audience.send_modify(|a| *a = counted(*a, role, 1));
        let number = self.next_seat.fetch_add(1, Ordering::Relaxed);
        Seat { classroom: self.clone(), number, role, following: false, follower: None }
    }

    /// Counts a follower server's connection in, as `identity`, and puts it on the roster until
    /// the returned seat is dropped. An identity the instructor removed is dismissed at once.
    pub fn join_follower(self: &Arc<Self>, identity: FollowerIdentity) -> Seat {
        let mut seat = self.join(Role::Follower);
        let id = seat.number;
        let dismissal = Arc::new(Notify::new());
        if lock(&self.barred).contains(&identity) {
            dismissal.notify_one();
        }
        lock(&self.dismissals).insert(id, dismissal.clone());
        self.roster.send_modify(|r| {
            r.insert(id, Follower { id, identity, name: "?".into(), following: false, since: now(), runs: None });
        });
        self.count_people();
        seat.follower = Some((id, dismissal));
        seat
    }

    /// The head count's followers: the identities on the roster, however many connections
    /// each has.
    fn count_people(&self) {
        let people = self.roster.borrow().values().map(|f| &f.identity).collect::<HashSet<_>>().len();
        let people = u32::try_from(people).unwrap_or(u32::MAX);
        self.audience.send_if_modified(|a| std::mem::replace(&mut a.followers, people) != people);
    }

    /// Every roster from now on, starting with the current one (send each after
    /// [`AUDIENCE_SETTLE`], as the head count).
    pub fn rosters(&self) -> watch::Receiver<Roster> {
        let mut receiver = self.roster.subscribe();
        receiver.mark_changed();
        receiver
    }

    /// The instructor removes follower `id`: every connection of its identity ends, and the
    /// identity is kept out until the next class link, whatever name it comes back under.
    /// `false` when there is no such follower.
    pub fn remove(&self, id: FollowerId) -> bool {
        let Some(identity) = self.roster.borrow().get(&id).map(|f| f.identity.clone()) else { return false };
        lock(&self.barred).insert(identity.clone());
        let theirs: Vec<FollowerId> = self.roster.borrow().values().filter(|f| f.identity == identity).map(|f| f.id).collect();
        let dismissals = lock(&self.dismissals);
        for dismissal in theirs.iter().filter_map(|id| dismissals.get(id)) {
            dismissal.notify_one();
        }
        true
    }

    /// Follower `id`'s identity and its summary of run `run`, when it is in the class and
    /// shares it.
    pub fn shared_run(&self, id: FollowerId, run: &RunId) -> Option<(FollowerIdentity, RunSummary)> {
        let roster = self.roster.borrow();
        let follower = roster.get(&id)?;
        let summary = follower.runs.as_ref()?.iter().find(|r| r.id == *run)?;
        Some((follower.identity.clone(), summary.clone()))
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

/// The roster as the instructor's pages get it: every follower, each with its runs until the
/// summaries reach [`MAX_ROSTER_RUN_BYTES`], the rest without (counted in `withheld`).
pub fn roster_message(roster: &Roster) -> ServerMessage {
    let mut budget = MAX_ROSTER_RUN_BYTES;
    let mut withheld = 0u32;
    let followers = roster
        .values()
        .map(|follower| {
            let mut follower = follower.clone();
            let bytes = follower.runs.as_ref().map_or(0, |runs| serde_json::to_vec(runs).map_or(usize::MAX, |json| json.len()));
            match budget.checked_sub(bytes) {
                Some(left) => budget = left,
                None => {
                    follower.runs = None;
                    withheld += 1;
                }
            }
            follower
        })
        .collect();
    ServerMessage::Roster { followers, withheld }
}

/// The head count with a connection of `role` in (`by` 1) or out (-1): a viewer page counts as
/// a viewer, an instructor's page as nothing; followers are counted by identity
/// ([`Classroom::join_follower`]).
fn counted(mut audience: Audience, role: Role, by: i32) -> Audience {
    let count = match role {
        Role::Viewer => &mut audience.viewers,
        Role::Follower | Role::Instructor => return audience,
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
    /// This seat's page presents `presentation` (`None`: stops presenting); follower servers
    /// get `to_followers` (see [`Classroom::present`]).
    pub fn present(&self, presentation: Option<Presentation>, to_followers: Option<Presentation>) {
        *lock(&self.classroom.presenter) = presentation.as_ref().map(|_| self.number);
        self.classroom.present(presentation, to_followers);
        self.classroom.presenter_connected(true);
    }

    /// Whether the page (or a follower server's pages) follows the presentation now.
    pub fn follow(&mut self, following: bool) {
        if following != std::mem::replace(&mut self.following, following) {
            self.classroom.audience.send_modify(|a| if following { a.following += 1 } else { a.following -= 1 });
            self.update(|f| f.following = following);
        }
    }

    /// A follower server's introduction (checked by the caller): its name (a label beside its
    /// identity) and shared runs on the roster.
    pub fn introduce(&mut self, introduction: Introduction) {
        self.update(|f| (f.name, f.runs) = (introduction.name, introduction.runs));
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
            self.classroom.count_people();
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
        let follower = classroom.join_follower(account("learner1"));
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

    fn account(user: &str) -> FollowerIdentity {
        FollowerIdentity::Account { user: user.into() }
    }

    #[tokio::test]
    async fn followers_join_the_roster_and_a_removed_identity_stays_out_under_any_name_until_a_new_link() {
        let classroom = Arc::new(Classroom::default());
        let mut seat = classroom.join_follower(account("learner1"));
        let introduction = |name: &str| Introduction { name: name.into(), runs: None };
        seat.introduce(introduction("learner1"));
        seat.follow(true);
        let id = *classroom.rosters().borrow().keys().next().unwrap();
        assert_eq!(classroom.rosters().borrow()[&id].name, "learner1");
        assert!(classroom.rosters().borrow()[&id].following);
        assert!(classroom.remove(id));
        tokio::time::timeout(Duration::from_secs(10), seat.dismissed()).await.unwrap();
        drop(seat);
        assert!(classroom.rosters().borrow().is_empty() && !classroom.remove(id));
        // Back under another name: still who it was, dismissed as it joins.
        let mut again = classroom.join_follower(account("learner1"));
        again.introduce(introduction("learner1 again"));
        tokio::time::timeout(Duration::from_secs(10), again.dismissed()).await.unwrap();
        drop(again);
        classroom.new_class_link();
        let welcome = classroom.join_follower(account("learner1"));
        assert!(tokio::time::timeout(Duration::from_millis(50), welcome.dismissed()).await.is_err(), "a new link lets them in");
    }

    #[tokio::test]
    async fn the_head_count_counts_people_and_remove_ends_all_of_ones_connections() {
        let classroom = Arc::new(Classroom::default());
        let mut learner1 = classroom.join_follower(account("learner1"));
        let mut posing = classroom.join_follower(account("learner2"));
        learner1.introduce(Introduction { name: "learner1".into(), runs: None });
        // learner2 claims learner1's name: the roster shows who it is beside it.
        posing.introduce(Introduction { name: "learner1".into(), runs: None });
        let second = classroom.join_follower(account("learner2"));
        assert_eq!(classroom.audiences().borrow().followers, 2, "two people, three connections");
        let roster = classroom.rosters().borrow().clone();
        let identities: Vec<(String, FollowerIdentity)> = roster.values().map(|f| (f.name.clone(), f.identity.clone())).collect();
        assert_eq!(identities[..2], [("learner1".into(), account("learner1")), ("learner1".into(), account("learner2"))]);
        let posing_id = roster.values().find(|f| f.identity == account("learner2")).unwrap().id;
        assert!(classroom.remove(posing_id));
        for seat in [&posing, &second] {
            tokio::time::timeout(Duration::from_secs(10), seat.dismissed()).await.unwrap();
        }
        assert!(tokio::time::timeout(Duration::from_millis(50), learner1.dismissed()).await.is_err(), "learner1 stays");
        drop((posing, second));
        assert_eq!(classroom.audiences().borrow().followers, 1);
    }

    #[test]
    fn the_roster_carries_runs_up_to_its_bound_and_says_how_many_it_left_out() {
        let run = RunSummary {
            id: RunId::parse(&"r".repeat(60)).unwrap(),
            config: "c".repeat(60),
            layout: Default::default(),
            state: scalebook_shared::protocol::RunState::Running,
            loss: None,
            samples_per_sec: None,
        };
        let runs = Some(vec![run; 32]);
        let per_follower = serde_json::to_vec(&runs).unwrap().len();
        let count = MAX_ROSTER_RUN_BYTES / per_follower + 3;
        let roster: Roster = (0..count as u64)
            .map(|id| (id, Follower { id, identity: account("x"), name: "x".into(), following: false, since: 0.0, runs: runs.clone() }))
            .collect();
        let ServerMessage::Roster { followers, withheld } = roster_message(&roster) else { unreachable!() };
        assert_eq!((followers.len(), withheld), (count, 3));
        assert!(followers[..count - 3].iter().all(|f| f.runs.is_some()) && followers[count - 3..].iter().all(|f| f.runs.is_none()));
        assert!(crate::wire::encode(&ServerMessage::Roster { followers, withheld }).len() < MAX_ROSTER_RUN_BYTES + (count << 8));
    }

    #[tokio::test(start_paused = true)]
    async fn the_room_is_told_when_the_presenter_is_gone_and_a_reload_in_time_is_no_news() {
        let classroom = Arc::new(Classroom::default());
        let presentation = Presentation { chapter: "intro".into(), block: None, element: None, quiz: None, charts: Default::default() };
        let states = classroom.presenter_states();
        // A reload: the page leaves and presents again within the grace.
        let first = classroom.join(Role::Instructor);
        first.present(Some(presentation.clone()), None);
        drop(first);
        let reloaded = classroom.join(Role::Instructor);
        reloaded.present(Some(presentation.clone()), None);
        tokio::time::sleep(PRESENTER_GRACE * 2).await;
        assert!(*states.borrow());
        // Gone for good.
        drop(reloaded);
        tokio::time::sleep(PRESENTER_GRACE * 2).await;
        assert!(!*states.borrow());
        classroom.join(Role::Instructor).present(Some(presentation), None);
        assert!(*states.borrow());
    }

    #[tokio::test]
    async fn a_late_subscriber_gets_only_the_latest_presentation_and_followers_their_own() {
        let classroom = Classroom::default();
        let at =
            |chapter: &str| Presentation { chapter: chapter.into(), block: None, element: None, quiz: None, charts: Default::default() };
        for chapter in ["intro", "data-parallel"] {
            classroom.present(Some(at(chapter)), Some(at(&format!("{chapter}-for-followers"))));
        }
        let mut later = classroom.presentations(Role::Viewer);
        later.changed().await.unwrap();
        assert!(later.borrow_and_update().as_str().contains("\"data-parallel\""));
        let mut follower = classroom.presentations(Role::Follower);
        assert!(follower.borrow_and_update().as_str().contains("data-parallel-for-followers"));
        classroom.present(None, None);
        later.changed().await.unwrap();
        assert_eq!(later.borrow_and_update().as_str(), r#"{"type":"presenting","presentation":null}"#);
    }
}
