//! The crate's one error type.

use std::path::PathBuf;

use scalebook_shared::protocol::{RunId, RunState};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory the server would serve lacks the built front-end.
    #[error("{} has no built front-end ({missing} is missing); build it with `./scalebook.sh run`", dir.display())]
    FrontendNotBuilt { dir: PathBuf, missing: &'static str },
    /// A config file that cannot be read or does not parse.
    #[error("config file {}: {source}", path.display())]
    ConfigFile { path: PathBuf, source: Box<dyn std::error::Error + Send + Sync> },
    /// A `--token` or `--viewer-token` that could not travel in a URL unchanged.
    #[error("--token and --viewer-token (or $SCALEBOOK_TOKEN, $SCALEBOOK_VIEWER_TOKEN) must be 16 to 256 letters, digits, `-`, `_` or `.`")]
    BadToken,
    /// A viewer token equal to the instructor's, which would give the room the instructor's powers.
    #[error("the viewer token must differ from the instructor's: whoever holds it could launch and cancel runs")]
    SameTokens,
    /// A `--base-path` that is not a plain URL path.
    #[error("--base-path `{0}` must be a URL path like /user/NAME/proxy/absolute/8080 (letters, digits, `-`, `_`, `.`, `~`, `/`; no `..`)")]
    BadBasePath(String),
    #[error("no run {id}")]
    UnknownRun { id: RunId },
    #[error("run {id} has already ended ({state})")]
    NotCancellable { id: RunId, state: RunState },
    /// A run that cannot go on from a checkpoint: `why` says what it lacks.
    #[error("run {id} cannot be resumed: {why}")]
    NotResumable { id: RunId, why: String },
    /// A Slurm run whose batch script cannot be written (a server path no `#SBATCH` line
    /// can carry).
    #[error("cannot write the batch script: {0}")]
    SlurmScript(String),
    /// A Slurm command that could not be started (not installed, not on `PATH`).
    #[error("cannot run {program}: {source}")]
    SlurmUnrunnable { program: String, source: std::io::Error },
    /// A Slurm command that did not answer in time (a slurmctld that hangs).
    #[error("{program} did not answer within {secs} s")]
    SlurmTimeout { program: String, secs: u64 },
    /// A Slurm command that failed, with the reason it gave (the first line of its stderr).
    #[error("{command} refused: {reason}")]
    SlurmRefused { command: &'static str, reason: String },
    /// A Slurm command whose answer this server cannot read.
    #[error("{command} printed what this server cannot read: {answer:?}")]
    SlurmUnreadable { command: &'static str, answer: String },
    /// A chapter's code block names a file outside the project's Rust sources (`dirs`: those it may name).
    #[error("`{path}` is not a Rust file of this project's sources ({dirs})")]
    NotSource { path: String, dirs: String },
    #[error("{path}: {message}")]
    SourceUnreadable { path: String, message: String },
    /// A chapter's code block names an item its file does not have.
    #[error("{path} has no item `{item}`")]
    NoItem { path: String, item: String },
    /// A data block's request with a value that breaks a rule: the query field and the rule.
    #[error("{field}: {message}")]
    BadSample { field: &'static str, message: String },
    /// The dataset a config names cannot be read here: the config key that names it and why.
    #[error("{field}: {message}")]
    NoData { field: &'static str, message: String },
    /// A TensorBoard logdir or event file that cannot be read as runs: the path and the rule.
    #[error("{}: {message}", path.display())]
    Logdir { path: PathBuf, message: String },
    /// A run followed from a TensorBoard logdir: its training runs elsewhere, out of reach.
    #[error("run {id} is followed from a TensorBoard logdir: stop its training where it runs")]
    FollowedRun { id: RunId },
    /// A run of the class this server follows: it trains on the instructor's side.
    #[error("run {id} is the instructor's, followed from the class: only the instructor can stop it")]
    InstructorsRun { id: RunId },
    /// A learner's run shared with this server's class: it trains on the learner's side.
    #[error("run {id} is a learner's, shared with the class: only that learner can stop it")]
    SharedRun { id: RunId },
    /// The class listener or the class link cannot be set up: what failed.
    #[error("class: {0}")]
    Class(String),
    /// A class message, link or name that breaks a rule: the field it is in, and the rule.
    #[error("{field}: {rule}")]
    ClassRule { field: &'static str, rule: String },
    /// A copy of a class run this server cannot keep (its directory or one of its files).
    #[error("cannot keep a class run's copy in {}: {source}", path.display())]
    ClassCopy { path: PathBuf, source: std::io::Error },
    /// The connection to the class listener broke, or what it sent cannot be read.
    #[error("{0}")]
    ClassLink(String),
    /// A learner (or the room) already has as many runs queued or running as the instructor
    /// allows: the message says the limit.
    #[error("{0}")]
    QuotaExceeded(String),
    /// This machine could not be measured for local predictions: what failed.
    #[error("measuring this machine: {0}")]
    Machine(String),
    /// `scalebook export` cannot write its directory there: the path and the rule it breaks.
    #[error("cannot export to {}: {why}", path.display())]
    ExportTarget { path: PathBuf, why: String },
    /// A file of the static edition that could not be read or written: which, and why.
    #[error("exporting {}: {source}", path.display())]
    ExportFile { path: PathBuf, source: std::io::Error },
    /// A chapter's `code` block whose listing cannot be made: the chapter, and why.
    #[error("{}: {source}", chapter.display())]
    ExportListing { chapter: PathBuf, source: Box<Error> },
    /// The built page does not read as `scalebook.sh` writes it: what is missing.
    #[error("{}: {why}; build the page again with `./scalebook.sh export` or `./scalebook.sh run`", path.display())]
    ExportPage { path: PathBuf, why: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
