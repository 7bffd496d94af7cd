//! A session's presenting messages: the instructor presents (and stops), every page follows
//! the presentation or not.

use std::collections::HashSet;

use scalebook_shared::protocol::{ErrorCode, ErrorReport, Presentation};

use super::{Answer, Session};
use crate::class::for_followers;

impl Session {
    /// Shows `presentation` to every page that follows, and (without the runs they cannot
    /// chart) to the follower servers.
    pub(super) async fn present(&self, presentation: Presentation) -> Answer {
        let problems = presentation.problems();
        if !problems.is_empty() {
            return Err(ErrorReport::new(ErrorCode::BadMessage, "the presentation was refused").with_problems(problems));
        }
        let to_followers = self.followers_view(presentation.clone()).await;
        self.seat.present(Some(presentation), Some(to_followers));
        Ok(None)
    }

    pub(super) fn stop_presenting(&self) -> Answer {
        self.seat.present(None, None);
        Ok(None)
    }

    pub(super) fn follow(&mut self, following: bool) -> Answer {
        self.seat.follow(following);
        Ok(None)
    }

    /// `presentation` as follower servers get it: without the runs they are not shown (a
    /// learner's run, the copy of one), which their pages could never chart.
    async fn followers_view(&self, mut presentation: Presentation) -> Presentation {
        let runs = &self.state.runs;
        let mut shown = HashSet::new();
        for id in &presentation.charts.runs {
            if runs.record(id).await.is_some_and(|record| for_followers(&record)) {
                shown.insert(id.clone());
            }
        }
        presentation.charts.retain(|id| shown.contains(id));
        presentation
    }
}
