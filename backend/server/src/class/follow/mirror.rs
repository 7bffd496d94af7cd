//! The instructor's runs, copied into this server's runs directory as they arrive: each
//! upstream run `ID` becomes the run `i-ID` here, a copy line for line (`crate::class::copy`),
//! so its length is where its stream resumes after a lost connection.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use scalebook_shared::protocol::{ClientMessage, LogLine, MAX_RUN_ID_LEN, Presentation, RunHandle, RunId, RunRecord, SeqPoint};
use scalebook_shared::rundir;

use crate::Error;
use crate::class::copy;
use crate::runs::RunManager;

/// What an upstream run's id is prefixed with here.
const PREFIX: &str = "i-";

/// One upstream run's copy.
struct Copy {
    local: RunId,
    dir: PathBuf,
    /// The run has ended upstream: its stream here is not polled, so copied lines are
    /// announced as they are written.
    ended: bool,
    /// Lines the copy's metrics file and job log hold.
    points: u64,
    log: u64,
    /// Subscribed upstream on the current connection.
    subscribed: bool,
}

pub struct Mirror {
    runs: Arc<RunManager>,
    address: String,
    copies: HashMap<RunId, Copy>,
}

/// The local id of upstream run `upstream`, when it has room for the prefix.
fn local_id(upstream: &RunId) -> Option<RunId> {
    (upstream.as_str().len() + PREFIX.len() <= MAX_RUN_ID_LEN).then(|| RunId::parse(&format!("{PREFIX}{upstream}")).ok()).flatten()
}

impl Mirror {
    pub fn new(runs: Arc<RunManager>, address: String) -> Mirror {
        Mirror { runs, address, copies: HashMap::new() }
    }

    /// A new connection: every run is subscribed again, from where its copy ends.
    pub fn reconnected(&mut self) {
        for copy in self.copies.values_mut() {
            copy.subscribed = false;
        }
    }

    /// Records the instructor's run as it stands upstream; the subscription to send when it
    /// is not yet subscribed on this connection.
    pub async fn adopt(&mut self, upstream: RunRecord) -> Result<Option<ClientMessage>, Error> {
        let Some(local) = local_id(&upstream.id) else {
            tracing::warn!(run = %upstream.id, "the class's run id is too long to copy here");
            return Ok(None);
        };
        if !self.copies.contains_key(&upstream.id) {
            let dir = self.runs.store().run_dir(&local);
            let (points, log) = copy::open(dir.clone()).await?;
            self.copies.insert(upstream.id.clone(), Copy { local: local.clone(), dir, points, log, ended: false, subscribed: false });
        }
        let id = upstream.id.clone();
        if let Some(copy) = self.copies.get_mut(&id) {
            copy.ended = upstream.state().is_final();
        }
        let record = RunRecord {
            id: local,
            handle: Some(RunHandle::Class { address: self.address.clone(), upstream: upstream.id }),
            learner: None,
            cancel_requested: false,
            ..upstream
        };
        self.runs.class_run(record).await;
        Ok(self.copies.get_mut(&id).and_then(|copy| {
            let first = !std::mem::replace(&mut copy.subscribed, true);
            first.then(|| subscribe(&id, copy))
        }))
    }

    /// Appends the points that come next (padding lines upstream that carry none).
    pub async fn points(&mut self, upstream: &RunId, points: Vec<SeqPoint>) -> Result<(), Error> {
        let Some(copy) = self.copies.get_mut(upstream) else { return Ok(()) };
        let (text, upto) = copy::numbered(copy.points, copy::point_lines(points)?);
        copy::append(copy.dir.join(rundir::METRICS), text).await?;
        copy.points = upto;
        self.announce_if_ended(upstream).await;
        Ok(())
    }

    /// Appends the log lines that come next (the lines upstream no longer holds, as empty
    /// ones).
    pub async fn log(&mut self, upstream: &RunId, lines: Vec<LogLine>) -> Result<(), Error> {
        let Some(copy) = self.copies.get_mut(upstream) else { return Ok(()) };
        let (text, upto) = copy::numbered(copy.log, lines.into_iter().map(|line| (line.seq, line.text)));
        copy::append(copy.dir.join(rundir::JOB_LOG), text).await?;
        copy.log = upto;
        self.announce_if_ended(upstream).await;
        Ok(())
    }

    /// Lines copied into a run that has ended reach its viewers at once (nothing polls it).
    async fn announce_if_ended(&self, upstream: &RunId) {
        if let Some(copy) = self.copies.get(upstream).filter(|copy| copy.ended) {
            self.runs.class_run_grew(&copy.local).await;
        }
    }

    /// The instructor's run rewrote its metrics (a resumed run starts its curve again): the
    /// copy starts again too, from the first line.
    pub async fn restart(&mut self, upstream: &RunId) -> Result<Option<ClientMessage>, Error> {
        let Some(copy) = self.copies.get_mut(upstream) else { return Ok(None) };
        copy::restart(&copy.dir).await?;
        copy.points = 0;
        Ok(Some(subscribe(upstream, copy)))
    }

    /// The presentation with the instructor's run ids turned into this server's copies.
    pub fn localise(&self, mut presentation: Presentation) -> Presentation {
        for run in &mut presentation.charts.runs {
            if let Some(local) = local_id(run) {
                *run = local;
            }
        }
        presentation
    }
}

fn subscribe(upstream: &RunId, copy: &Copy) -> ClientMessage {
    ClientMessage::Subscribe { run: upstream.clone(), after_seq: Some(copy.points), after_log_seq: Some(copy.log) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_ids_are_prefixed_when_they_fit() {
        assert_eq!(local_id(&RunId::parse("20250101-120000-1").unwrap()).unwrap().as_str(), "i-20250101-120000-1");
        assert!(local_id(&RunId::parse(&"a".repeat(MAX_RUN_ID_LEN)).unwrap()).is_none());
    }
}
