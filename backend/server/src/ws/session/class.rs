//! A session's class messages: on the instructor's server, the class link, invitations,
//! removing a follower and charting a learner's shared run; from a follower server, its
//! introduction and the points of the runs its learner shares; and on any server, joining or
//! leaving the class it follows.

use std::sync::Arc;

use scalebook_shared::protocol::{
    ClassLink, ErrorCode, ErrorReport, FollowerId, FollowerIdentity, Introduction, RunId, Secret, SeqPoint, ServerMessage,
};

use super::reply::{refusal, report};
use super::{Answer, Session};
use crate::class::ClassKey;

impl Session {
    /// A follower server says it is ready, with the runs its learner shares.
    pub(super) async fn introduce(&mut self, introduction: Introduction) -> Answer {
        let problems = introduction.problems();
        if !problems.is_empty() {
            return Err(ErrorReport::new(ErrorCode::BadMessage, "the introduction was refused").with_problems(problems));
        }
        let identity = self.follower_identity()?.clone();
        let shared = introduction.runs.clone().unwrap_or_default();
        self.seat.introduce(introduction);
        self.state.shared.update(&identity, &shared).await;
        self.introduced.send_if_modified(|now| now.replace(identity.clone()).as_ref() != Some(&identity));
        Ok(None)
    }

    /// The instructor charts a run a follower's learner shares: that follower is asked for it.
    pub(super) async fn chart_shared_run(&self, follower: FollowerId, run: RunId) -> Answer {
        self.class_key()?;
        let (identity, summary) = self.state.classroom.shared_run(follower, &run).ok_or_else(|| {
            let message = format!("follower {follower} shares no run {run} (not in the class, or not shared)");
            ErrorReport::new(ErrorCode::UnknownRun, message).with_run(run.clone())
        })?;
        self.state.shared.chart(&identity, &summary).await.map_err(|e| refusal(&e, "the run was not charted").with_run(run))?;
        Ok(None)
    }

    /// A follower sends the points of a shared run it was asked for.
    pub(super) async fn shared_points(&self, run: RunId, after: u64, points: Vec<SeqPoint>) -> Answer {
        let identity = self.follower_identity()?.clone();
        self.state.shared.points(&identity, &run, after, points).await.map_err(|e| refusal(&e, "the points were refused").with_run(run))
    }

    pub(super) fn new_class_link(&self) -> Answer {
        self.class_key()?.renew().map_err(|e| report(&e, None))?;
        self.state.classroom.new_class_link();
        Ok(None)
    }

    pub(super) fn invite(&self, name: String) -> Answer {
        let link = self.class_key()?.invitation(&name).map_err(|e| refusal(&e, "no invitation was made"))?;
        tracing::info!(%name, "an invitation was made");
        Ok(Some(ServerMessage::Invitation { name, link: Secret(link.to_string()) }))
    }

    pub(super) fn remove_follower(&self, follower: FollowerId) -> Answer {
        self.class_key()?;
        match self.state.classroom.remove(follower) {
            true => Ok(None),
            false => Err(ErrorReport::new(ErrorCode::BadMessage, format!("no follower {follower} is in the class"))),
        }
    }

    /// This server follows the class of `link` (and keeps following it across restarts).
    pub(super) fn join_class(&self, Secret(text): Secret) -> Answer {
        let link = ClassLink::parse(&text)
            .map_err(|problems| ErrorReport::new(ErrorCode::BadMessage, "that is not a class link").with_problems(problems))?;
        self.state.following.join_and_keep(link);
        Ok(None)
    }

    pub(super) async fn leave_class(&self) -> Answer {
        self.state.following.leave().await;
        Ok(None)
    }

    /// Who this follower connection is (every follower has an identity; see [`Session::new`]).
    fn follower_identity(&self) -> Result<&FollowerIdentity, ErrorReport> {
        self.identity.as_ref().ok_or_else(|| ErrorReport::new(ErrorCode::Forbidden, "this connection has no follower identity"))
    }

    /// The class listener's key, or the refusal of a class message on a server without one.
    fn class_key(&self) -> Result<&Arc<ClassKey>, ErrorReport> {
        self.state.class.as_ref().ok_or_else(|| {
            ErrorReport::new(ErrorCode::BadMessage, "this server has no class listener: start it with --class-listen ADDRESS:PORT")
        })
    }
}
