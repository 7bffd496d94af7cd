//! `scalebook` as a user runs it from the project root, for the CLI tests: a subcommand's
//! output, its stdout when it succeeds, and its stderr when it refuses the input.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The project root, where the configs and clusters files are found.
pub fn root() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..")
}

/// `scalebook COMMAND ARGS...`, run from the project root.
pub fn scalebook(command: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scalebook")).current_dir(root()).arg(command).args(args).output().unwrap()
}

/// The standard output of a command that succeeded.
pub fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The standard error of a command that refused its input: status 2, nothing on stdout.
pub fn stderr_of_invalid(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(2), "stdout: {}", String::from_utf8_lossy(&output.stdout));
    assert!(output.stdout.is_empty());
    String::from_utf8(output.stderr.clone()).unwrap()
}
