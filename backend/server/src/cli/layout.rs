//! `scalebook layout`: the rank groups of a tp/cp/dp/pp layout, as the tutorial's
//! `check_rank_generator.ipynb` prints them, plus which groups leave a node.

use std::fmt;
use std::process::ExitCode;

use scalebook_shared::Error;
use scalebook_shared::layout::{DEFAULT_ORDER, Groups, Layout, Placement, Sizes, Token};
use serde::{Serialize, Serializer};

use super::EXIT_INVALID_INPUT;

#[derive(Debug, clap::Args)]
pub struct LayoutArgs {
    /// Tensor-parallel size.
    #[arg(long, default_value_t = 1)]
    tp: u32,
    /// Context-parallel size.
    #[arg(long, default_value_t = 1)]
    cp: u32,
    /// Data-parallel size.
    #[arg(long, default_value_t = 1)]
    dp: u32,
    /// Pipeline-parallel size.
    #[arg(long, default_value_t = 1)]
    pp: u32,
    /// Dimension names, fastest varying first; names left out must have size 1.
    #[arg(long, default_value = DEFAULT_ORDER)]
    order: String,
    /// GPUs per node; rank r runs on node r / G (Perlmutter has 4).
    #[arg(long, default_value_t = 4)]
    gpus_per_node: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: LayoutArgs) -> anyhow::Result<ExitCode> {
    let sizes = Sizes { tp: args.tp, cp: args.cp, dp: args.dp, pp: args.pp };
    let (layout, placement) = match (Layout::new(sizes, &args.order), Placement::new(args.gpus_per_node)) {
        (Ok(layout), Ok(placement)) => (layout, placement),
        (layout, placement) => {
            let problems: Vec<String> = [layout.err(), placement.err()].iter().flatten().flat_map(problem_lines).collect();
            eprintln!("error: invalid layout: {}", problems.join("; "));
            return Ok(ExitCode::from(EXIT_INVALID_INPUT));
        }
    };
    let report = Report::new(&layout, placement);
    if args.json {
        super::print(format_args!("{}\n", serde_json::to_string(&report)?))?;
    } else {
        super::print(Table { report: &report, layout: &layout, placement })?;
    }
    Ok(ExitCode::SUCCESS)
}

fn problem_lines(err: &Error) -> Vec<String> {
    err.problems().0.iter().map(ToString::to_string).collect()
}

/// The JSON document; its maps keep [`Token::ALL`]'s order so the output reads like the table.
#[derive(Serialize)]
struct Report {
    world: u32,
    order: String,
    groups: TokenMap<Groups>,
    nodes: Vec<Vec<u32>>,
    crosses_nodes: TokenMap<bool>,
}

struct TokenMap<T>(Vec<(Token, T)>);

impl<T: Serialize> Serialize for TokenMap<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(token, value)| (token, value)))
    }
}

/// How wide the groups column may grow, and how many ranks of a group it shows, before
/// eliding the rest (a 65,536-rank world must still print one short line per token).
const GROUPS_WIDTH: usize = 72;
const SHOWN_RANKS: usize = 8;

impl Report {
    fn new(layout: &Layout, placement: Placement) -> Report {
        let groups: Vec<(Token, Groups)> = Token::ALL.iter().map(|&t| (t, layout.groups(t))).collect();
        let crosses = groups.iter().map(|(t, g)| (*t, placement.any_crosses_nodes(g))).collect();
        Report {
            world: layout.world(),
            order: layout.effective_order(),
            groups: TokenMap(groups),
            nodes: placement.nodes(layout.world()),
            crosses_nodes: TokenMap(crosses),
        }
    }
}

/// The readable form: the layout, then one line per token.
struct Table<'a> {
    report: &'a Report,
    layout: &'a Layout,
    placement: Placement,
}

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Sizes { tp, cp, dp, pp } = self.layout.sizes();
        let report = self.report;
        let gpus = self.placement.gpus_per_node();
        writeln!(f, "world {} = tp {tp} × cp {cp} × dp {dp} × pp {pp}", report.world)?;
        writeln!(f, "order {} (leftmost varies fastest)", report.order)?;
        writeln!(f, "{} node(s) of {gpus} GPUs; rank r runs on node r / {gpus}", report.nodes.len())?;
        writeln!(f)?;
        writeln!(f, "{:<9} {:>6} {:>6}  {:<13}  {:<38}  groups", "token", "groups", "size", "crosses nodes", "collective")?;
        for ((token, groups), (_, crosses)) in report.groups.0.iter().zip(&report.crosses_nodes.0) {
            writeln!(
                f,
                "{:<9} {:>6} {:>6}  {:<13}  {:<38}  {}",
                token,
                groups.len(),
                groups.group_size(),
                if *crosses { "yes" } else { "no" },
                token.collective(),
                show_groups(groups)
            )?;
        }
        Ok(())
    }
}

fn show_groups(groups: &Groups) -> String {
    let mut line = String::new();
    for (shown, group) in groups.iter().enumerate() {
        let text = show_ranks(group);
        if shown > 0 && line.len() + 1 + text.len() > GROUPS_WIDTH {
            line.push_str(&format!(" … ({} more)", groups.len() - shown));
            break;
        }
        if shown > 0 {
            line.push(' ');
        }
        line.push_str(&text);
    }
    line
}

fn show_ranks(group: &[u32]) -> String {
    let mut shown: Vec<String> = group.iter().take(SHOWN_RANKS).map(u32::to_string).collect();
    if let Some(last) = group.last().filter(|_| group.len() > SHOWN_RANKS) {
        shown.push(format!("… {last}"));
    }
    format!("[{}]", shown.join(","))
}
