//! What every request handler may read: the configs and clusters loaded at start-up, the
//! WebSocket's limits, and the runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::ConfigFile;

use crate::Error;
use crate::class::ClassKey;
use crate::class::follow::Following;
use crate::class::shared::SharedRuns;
use crate::classroom::Classroom;
use crate::learners::{Identities, LaunchRates};
use crate::limits::LaunchLimits;
use crate::runs::RunManager;

/// The training configs the notebook offers and launches run from.
#[derive(Debug)]
pub struct Configs {
    /// The parsed `config/ViT.yaml`; the browser and the launcher must agree on it.
    pub file: ConfigFile,
    /// The raw text of that file, served to the browser's editor unchanged.
    pub yaml: String,
    /// The typed configs as JSON, what the page reads (`/api/configs.json`): written once here.
    pub json: String,
    /// Where it is (absolute).
    pub path: PathBuf,
}

impl Configs {
    /// The project the config file belongs to (`<project>/config/ViT.yaml`).
    pub fn project_root(&self) -> PathBuf {
        self.path.parent().and_then(Path::parent).map_or_else(|| self.path.clone(), Path::to_path_buf)
    }

    /// Loads the config file once at start-up, so a typo in it stops the server with a clear
    /// message instead of failing later in the middle of a demo.
    pub fn load(config_path: &Path) -> Result<Configs, Error> {
        let wrap = |source: Box<dyn std::error::Error + Send + Sync>| Error::ConfigFile { path: config_path.to_owned(), source };
        let yaml = std::fs::read_to_string(config_path).map_err(|e| wrap(Box::new(e)))?;
        let file = ConfigFile::parse(&yaml).map_err(|e| wrap(Box::new(e)))?;
        let path = std::fs::canonicalize(config_path).map_err(|e| wrap(Box::new(e)))?;
        let json = serde_json::to_string(&file).map_err(|e| wrap(Box::new(e)))?;
        Ok(Configs { file, yaml, json, path })
    }
}

/// The clusters file (`config/clusters.yaml` by default): where Slurm runs may go.
#[derive(Debug)]
pub struct ClustersFile {
    pub path: PathBuf,
    /// `None` when there is no such file: the server then runs local runs only.
    pub clusters: Option<Clusters>,
}

impl ClustersFile {
    /// Loads the file once at start-up; a broken one stops the server with its problems,
    /// a missing one only disables Slurm launches.
    pub fn load(path: &Path) -> Result<ClustersFile, Error> {
        let wrap = |source: Box<dyn std::error::Error + Send + Sync>| Error::ConfigFile { path: path.to_owned(), source };
        let clusters = match std::fs::read_to_string(path) {
            Ok(text) => Some(Clusters::parse(&text).map_err(|e| wrap(Box::new(e)))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(wrap(Box::new(e))),
        };
        Ok(ClustersFile { path: path.to_owned(), clusters })
    }
}

/// Limits and timings of the WebSocket.
#[derive(Debug, Clone)]
pub struct WsSettings {
    /// The largest message read; larger ones are refused with an error.
    pub max_message_bytes: usize,
    pub heartbeat: Duration,
    /// Messages per second a connection may send on average...
    pub messages_per_sec: f64,
    /// ...and in a burst.
    pub burst: f64,
    /// Bytes queued for one connection before it is dropped as too slow (its page reconnects
    /// and resumes from its cursors): a classroom's worth of slow readers stays within memory.
    pub max_queued_bytes: usize,
}

impl Default for WsSettings {
    fn default() -> Self {
        WsSettings {
            max_message_bytes: 64 << 10,
            heartbeat: Duration::from_secs(20),
            messages_per_sec: 20.0,
            burst: 40.0,
            max_queued_bytes: 4 << 20,
        }
    }
}

/// What every request handler may read.
pub struct AppState {
    pub configs: Configs,
    pub clusters: ClustersFile,
    /// What one launch may ask of this machine and its files.
    pub limits: LaunchLimits,
    /// The project's checkout, whose sources the chapters' code blocks show.
    pub source_root: PathBuf,
    pub runs: Arc<RunManager>,
    pub ws: WsSettings,
    /// What the instructor presents, and who follows.
    pub classroom: Arc<Classroom>,
    /// The class listener's key, when this server has one (`--class-listen`).
    pub class: Option<Arc<ClassKey>>,
    /// The learners' runs the instructor charts, copied from their followers.
    pub shared: Arc<SharedRuns>,
    /// The class this server follows, if any (`--follow`, or the page's "Join a class").
    pub following: Arc<Following>,
    /// The learner identities viewers launch under.
    pub identities: Identities,
    /// Each client address's rate of learner launches.
    pub launch_rates: LaunchRates,
}
