//! Every kind of block a chapter can hold, declared once: the parser reads a block's kind into
//! a [`BlockKind`] before its settings, the page draws each kind with the part of its module
//! named here, the reading rule counts the kinds a learner acts on, and a test holds the docs'
//! tables to [`BlockKind::ALL`]. A new kind is a new row of the table below; every exhaustive
//! `match` on the kind (the parser's, the page's) then fails to compile until it handles it.

use std::fmt;

/// The parts the page's module is cut in (`frontend/src/blocks/deferred.rs`): the main module,
/// fetched with the page, and the split parts, each fetched the first time a chapter shows a
/// block of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PagePart {
    /// The light blocks every chapter has, drawn at once.
    Main,
    /// The config editor.
    Editor,
    /// Runs and what is read of them or predicted for them: runs, charts, sweeps, estimates,
    /// rank grids, layout searches.
    Runs,
    /// What the app draws from data: figures, data samples, weather maps, pipelines.
    Pictures,
    /// A run's step profile.
    Timeline,
}

/// Declares [`BlockKind`] from one table, so that [`BlockKind::ALL`] and the facts of each
/// kind cannot drift apart from the variants.
macro_rules! block_kinds {
    ($($kind:ident: $name:literal, acts: $acts:literal, $part:ident, $about:literal;)+) => {
        /// A kind of chapter block, as its fence names it (`scalebook rank-grid …`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum BlockKind {
            $(#[doc = $about] $kind,)+
        }

        impl BlockKind {
            /// Every kind, in the order messages and the docs list them.
            pub const ALL: &[BlockKind] = &[$(BlockKind::$kind),+];

            /// The kind as a chapter writes it, after `scalebook`.
            pub fn name(self) -> &'static str {
                match self {
                    $(BlockKind::$kind => $name,)+
                }
            }

            /// Whether a learner acts on the block (runs, edits, explores) rather than reads it:
            /// the reading rule ([`super::reading_stretches`]) counts words between these.
            pub fn acts(self) -> bool {
                match self {
                    $(BlockKind::$kind => $acts,)+
                }
            }

            /// The part of the page's module that draws the block.
            pub fn part(self) -> PagePart {
                match self {
                    $(BlockKind::$kind => PagePart::$part,)+
                }
            }

            /// What the block shows, in a line, for the docs.
            pub fn about(self) -> &'static str {
                match self {
                    $(BlockKind::$kind => $about,)+
                }
            }
        }
    };
}

block_kinds! {
    Config: "config", acts: true, Editor, "The config editor: a training config as a form and as YAML, checked as it changes.";
    RankGrid: "rank-grid", acts: true, Runs, "The ranks of a layout on nodes, coloured by one group.";
    Estimate: "estimate", acts: true, Runs, "Memory and time of one step of a config on a layout.";
    LayoutSearch: "layout-search", acts: true, Runs, "Every layout of a config on N GPUs, searched and ranked as the controls move.";
    Run: "run", acts: true, Runs, "Launches a config here, with its state, progress and log.";
    Chart: "chart", acts: true, Runs, "Live charts of this session's runs.";
    Code: "code", acts: false, Main, "One item of this project's source, as the file has it now.";
    Sweep: "sweep", acts: true, Runs, "Variants of a config run one after another and compared.";
    Quiz: "quiz", acts: false, Main, "A question, with its answer on demand.";
    Data: "data", acts: true, Pictures, "One channel of one sample of a config's dataset.";
    Maps: "maps", acts: true, Pictures, "A run's weather maps, epoch by epoch.";
    Timeline: "timeline", acts: true, Timeline, "A run's step profile: a lane per rank and thread, and the ops by time.";
    Pipeline: "pipeline", acts: true, Pictures, "A pipeline's schedules (GPipe, 1F1B, interleaved 1F1B) on one time axis, with their bubble.";
    Figure: "figure", acts: false, Pictures, "A picture drawn by the app.";
    Published: "published", acts: false, Main, "A chart of runs the sources publish.";
}

impl BlockKind {
    /// The kind a chapter names `name`, if there is one.
    pub fn from_name(name: &str) -> Option<BlockKind> {
        BlockKind::ALL.iter().copied().find(|kind| kind.name() == name)
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_are_unique() {
        for kind in BlockKind::ALL {
            assert_eq!(BlockKind::from_name(kind.name()), Some(*kind));
        }
        assert_eq!(BlockKind::from_name("graph"), None);
        assert_eq!(BlockKind::from_name("Quiz"), None, "kinds are written in lowercase");
    }
}
