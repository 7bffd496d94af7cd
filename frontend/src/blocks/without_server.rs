//! What a block that needs a Scalebook server shows in the static edition
//! ([`crate::edition`]), decided here for every kind at once: the blocks the browser computes
//! alone (rank grids, estimates, pipelines, the config editor, quizzes, figures, recorded
//! timelines) are drawn as on a server; a block that trains, or reads what a run or the dataset
//! on the server holds, says what it does and how to run Scalebook, instead of an empty box or
//! a connection error. A block's recording, when the edition carries one, is drawn from here
//! too, in place of that line.

use leptos::prelude::*;

use super::BlockSpec;
use crate::edition::{self, RunItYourself};

/// The block `spec` stands for in the static edition, if it needs a server; `None` on a served
/// page, and for a block that works without one.
pub fn stand_in(spec: &BlockSpec) -> Option<AnyView> {
    if !edition::is_static() {
        return None;
    }
    let does = needs_server(spec)?;
    Some(
        view! {
            <section class="block needs-server" data-kind=spec.kind().name() role="note">
                <p>{does} " It needs Scalebook running, and this is the static edition. To run it yourself, on a Linux machine:"</p>
                <RunItYourself />
            </section>
        }
        .into_any(),
    )
}

/// What a block that needs a server does, in a sentence; `None` for one the browser draws alone.
/// One arm per kind, so a new kind does not compile until it is placed on one side.
fn needs_server(spec: &BlockSpec) -> Option<String> {
    match spec {
        BlockSpec::Run { config, dp } => {
            let ranks = if *dp == 1 { "one rank".to_owned() } else { format!("{dp} ranks") };
            Some(format!(
                "This block runs training: it launches {config} on {ranks} of this machine or a Slurm cluster, with its log and progress."
            ))
        }
        BlockSpec::Sweep { config, variants, .. } => Some(format!(
            "This block runs training: it trains {} variants of {config} one after another and compares them.",
            variants.len()
        )),
        BlockSpec::Chart(_) => Some("This block charts the runs this chapter trains, live, as they train.".to_owned()),
        BlockSpec::Maps { .. } => Some("This block shows the weather maps a run draws as it trains.".to_owned()),
        BlockSpec::Data { config, .. } => Some(format!("This block draws samples of {config}'s dataset, read where the data is.")),
        BlockSpec::Timeline { recorded: None, .. } => Some("This block profiles the steps of a run as it trains.".to_owned()),
        BlockSpec::Timeline { recorded: Some(_), .. }
        | BlockSpec::Quiz { .. }
        | BlockSpec::Code { .. }
        | BlockSpec::Published { .. }
        | BlockSpec::Config { .. }
        | BlockSpec::Estimate { .. }
        | BlockSpec::RankGrid(_)
        | BlockSpec::LayoutSearch { .. }
        | BlockSpec::Figure { .. }
        | BlockSpec::Pipeline { .. } => None,
    }
}
