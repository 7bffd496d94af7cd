//! The crate's one error type.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory the server would serve lacks the built front-end.
    #[error("{} has no built front-end ({missing} is missing); build it with `./scalebook.sh run`", dir.display())]
    FrontendNotBuilt { dir: PathBuf, missing: &'static str },
    /// A config file that cannot be read or does not parse.
    #[error("config file {}: {source}", path.display())]
    ConfigFile { path: PathBuf, source: Box<dyn std::error::Error + Send + Sync> },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
