//! The Slurm executor against a real Slurm cluster (one node, or several) that each test starts for itself
//! (Debian's `slurm-wlm` and `munge`, as the toolchain notes describe): jobs submitted
//! through the server over the WebSocket, and the poller reading real `squeue` and `scontrol`
//! answers. The run tests need the trainer built beside the server (`cargo build --bins`).

#[allow(dead_code, unused_imports, reason = "the serve tests' harness, of which these tests use a part")]
#[path = "../serve/harness.rs"]
mod harness;
mod nodes;
mod poll;
mod runs;
mod states;
