//! The crate's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config that breaks the rules the model or the training loop rely on.
    #[error(transparent)]
    Config(#[from] scalebook_shared::Error),
    /// libtorch refused an operation (shape mismatch, out of memory, ...).
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A call into the C++ shim failed; `message` is libtorch's own.
    #[error("{what}: {message}")]
    Native { what: String, message: String },
    /// A broken invariant of this crate (a parameter without a gradient, a state of the wrong
    /// length): a bug to report, not bad input.
    #[error("{what}: {message}")]
    Internal { what: String, message: String },
    /// The ranks could not meet at the rendezvous store (a peer never came, a wrong address).
    #[error("rendezvous at {address} failed: {message}")]
    Rendezvous { address: String, message: String },
    /// The launch environment (RANK, WORLD_SIZE, SLURM_*) is missing or inconsistent.
    #[error("distributed environment: {0}")]
    Environment(String),
    /// Reading or writing a run's files failed.
    #[error("{}: {source}", path.display())]
    Io { path: std::path::PathBuf, source: std::io::Error },
    /// The run directory cannot hold a run (not writable, or a file in the way).
    #[error("run directory {}: {message}", path.display())]
    RunDir { path: std::path::PathBuf, message: String },
    /// `--resume` found no usable checkpoint.
    #[error("cannot resume from {}: {message}", path.display())]
    Resume { path: std::path::PathBuf, message: String },
    /// Data that is not in the tutorial's format: a missing directory, no `.h5` files, a file
    /// without a usable `fields` dataset, statistics of the wrong shape, an unreadable file.
    #[error("{}: {message}", path.display())]
    Data { path: std::path::PathBuf, message: String },
    /// A data-generator or loader setting out of its range (a shard id past the shard count,
    /// a batch size of 0, ...).
    #[error("{0}")]
    DataSetting(String),
    /// A sample index past the end of a dataset: a bug in the caller, not bad input.
    #[error("sample {index} is past the end of a dataset of {len} samples")]
    SampleIndex { index: usize, len: usize },
    /// A data-loading worker thread ended without delivering its batch: a bug, not bad input.
    #[error("data loader worker {worker} stopped before delivering batch {batch}")]
    LoaderWorker { worker: usize, batch: usize },
}

impl Error {
    /// Whether the user can fix this by changing their input (a config, a path, a flag), as
    /// opposed to a failure while working.
    pub fn is_user_input(&self) -> bool {
        matches!(
            self,
            Error::Config(_)
                | Error::Environment(_)
                | Error::RunDir { .. }
                | Error::Resume { .. }
                | Error::Data { .. }
                | Error::DataSetting(_)
        )
    }

    pub fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io { path: path.to_owned(), source }
    }
}
