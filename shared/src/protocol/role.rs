//! Who holds a link. The instructor's link runs the class (launches, cancels, Slurm jobs); the
//! viewer's link, handed to the room, reads and follows. The server decides the role from the
//! token a request carries and enforces it; the page is told its role only to hide what it
//! cannot use.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The instructor's link (or a private Unix socket): everything.
    Instructor,
    /// The room's link: every read, no launch, cancel or Slurm job.
    Viewer,
    /// A learner's own Scalebook following the class through the instructor's class
    /// listener: reads the instructor's runs and follows the presentation, nothing more.
    Follower,
}

impl Role {
    /// Whether this role may start, stop or submit runs (and see a Slurm script before it is
    /// submitted: the preview is the first step of a submission).
    pub fn may_launch(self) -> bool {
        self == Role::Instructor
    }
}

/// The request header the page sends its token in. Not `Authorization`: a proxy in front
/// (Jupyter's, behind JupyterHub) takes that header for a credential of its own and passes it
/// on to its hub to check, so a token sent there would leave this server's hands.
pub const TOKEN_HEADER: &str = "x-scalebook-token";

/// A token as it travels in a message: never shown by `Debug`, so no log line or panic
/// message can carry it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}
