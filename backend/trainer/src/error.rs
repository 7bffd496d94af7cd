//! The crate's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config that breaks the rules the model or the training loop rely on.
    #[error(transparent)]
    Config(#[from] scalebook_shared::Error),
    /// libtorch refused an operation (shape mismatch, out of memory, ...).
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}
