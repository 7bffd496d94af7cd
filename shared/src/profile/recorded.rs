//! Recorded runs: runs made once on hardware a learner may not have (a GPU), kept in the
//! project under `static/recorded/<name>/` so the chapters can show what only that hardware
//! shows. Each holds the run's log and metrics, its rank-0 trace cut down to what the
//! timeline draws (served gzip-compressed: only `rank0.trace.json.gz` is on disk), and
//! [`Recording`], which says where and how it was measured. `bench/gpu/fixture.py` writes
//! them from a run directory that came back from the GPU machine.

use serde::{Deserialize, Serialize};

/// The directory of recordings, relative to the static directory the page is served from.
pub const DIR: &str = "recorded";
/// What a recording says about itself, in its directory.
pub const ABOUT_FILE: &str = "recorded.json";

/// Where and how a recorded run was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// The GPU, as the driver names it (`NVIDIA H200`).
    pub gpu: String,
    /// The run in words: config and what was changed (`short, 0 workers`).
    pub what: String,
    /// Who measured it (`Scalebook`).
    pub measured_by: String,
}

/// Whether `name` can name a recording: lowercase letters, digits, `-` and `_`, starting
/// with a letter or digit (so it is one path segment, never `..`).
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// The URL path of `file` of recording `name`, relative to the page.
pub fn path(name: &str, file: &str) -> String {
    format!("{DIR}/{name}/{file}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_plain_path_segment() {
        assert!(valid_name("h200-short-0workers") && valid_name("h200-short_opt"));
        for bad in ["", "..", "-x", "a/b", "A", "a b", "a.b"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert_eq!(path("h200-short_opt", ABOUT_FILE), "recorded/h200-short_opt/recorded.json");
    }
}
