//! A class's runs directory, written as a server left it: ended runs of the instructor's and
//! of many learners, for the tests of the run list that every page is sent a page at a time.

use std::io;
use std::path::Path;

use scalebook_shared::protocol::{Learner, RunId, RunRecord, RunState};
use scalebook_shared::rundir;

/// Writes `others + 3` completed `cpu_tiny` runs under `runs_dir`, named `r000` upwards in the
/// order they were created: the instructor's first and last (`r000` and the last), `me`'s
/// second (`r001`), and between them one run each of `others` other learners. Returns the ids.
pub fn write_class_runs(runs_dir: &Path, me: &Learner, others: u32) -> io::Result<Vec<RunId>> {
    let last = others + 2;
    (0..=last)
        .map(|i| {
            let learner = match i {
                0 => None,
                1 => Some(me.clone()),
                i if i == last => None,
                i => Some(Learner::parse(&format!("{i:012x}")).map_err(io::Error::other)?),
            };
            let id = RunId::parse(&format!("r{i:03}")).map_err(io::Error::other)?;
            let created = 1.7e9 + f64::from(i);
            let record = RunRecord::sample(id.as_str(), created, learner, RunState::Completed);
            let dir = runs_dir.join(id.as_str());
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join(rundir::RECORD), serde_json::to_vec(&record)?)?;
            Ok(id)
        })
        .collect()
}
