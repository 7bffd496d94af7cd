//! The layout search block's model: which search to run for what the learner chose (a config,
//! a cluster, its GPU and a GPU count), and the answer in the words the block shows: a
//! headline, what limits each layout, the best few and why, where the tutorial's own choice
//! stands, and the layouts left out by rule. Input the search cannot answer becomes sentences
//! that say why, never an empty plot. The search itself is `shared::search`, the same code as
//! `scalebook search`; the scatter is drawn by [`super::layout_search_drawing`].

use scalebook_shared::cluster::Clusters;
use scalebook_shared::config::ConfigFile;
use scalebook_shared::layout::Token;
use scalebook_shared::numbers::thousands;
use scalebook_shared::search::{Answer, Judgement, Ranked, Space, StepPart, search};

/// The GPU counts the block's slider offers: powers of two from 1 to 1,024.
pub const GPU_COUNTS: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// The config the block searches unless the chapter names another: the tutorial's
/// model-parallel one.
pub const DEFAULT_CONFIG: &str = "mp";

/// The GPU count it starts from unless the chapter names another: the tutorial's 16.
pub const DEFAULT_GPUS: u32 = 16;

/// The rank layouts the block explains part by part.
pub const EXPLAINED: usize = 3;

/// Parts of a step below this share of it are left out of a "why".
const SHOWN_SHARE: f64 = 0.01;

/// What limits a layout's step, as the scatter colours it: the kind of the step's largest
/// part ([`scalebook_shared::search::Split::limit`]), whichever link a group's traffic takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    Arithmetic,
    ElementWise,
    Recompute,
    Optimizer,
    Tp,
    Cp,
    Dp,
    /// A pipeline's bubble and its stages' transfers.
    Pipeline,
    Data,
}

impl Limit {
    pub const ALL: [Limit; 9] = [
        Limit::Arithmetic,
        Limit::ElementWise,
        Limit::Recompute,
        Limit::Optimizer,
        Limit::Tp,
        Limit::Cp,
        Limit::Dp,
        Limit::Pipeline,
        Limit::Data,
    ];

    pub fn of(part: StepPart) -> Limit {
        match part {
            StepPart::Arithmetic => Limit::Arithmetic,
            StepPart::ElementWise => Limit::ElementWise,
            StepPart::Recompute => Limit::Recompute,
            StepPart::Optimizer => Limit::Optimizer,
            StepPart::DataLoading => Limit::Data,
            StepPart::Bubble => Limit::Pipeline,
            StepPart::Collectives { group, .. } | StepPart::GradientSync { group, .. } => match group {
                g if g == Token::PP => Limit::Pipeline,
                g if g == Token::TP => Limit::Tp,
                g if g == Token::CP => Limit::Cp,
                _ => Limit::Dp,
            },
        }
    }

    /// The legend's words.
    pub const fn name(self) -> &'static str {
        match self {
            Limit::Arithmetic => "arithmetic (matmuls, attention)",
            Limit::ElementWise => "element-wise work (memory bandwidth)",
            Limit::Recompute => "recomputed forward pass",
            Limit::Optimizer => "optimizer step",
            Limit::Tp => "tp communication",
            Limit::Cp => "cp communication",
            Limit::Dp => "dp gradient all-reduce",
            Limit::Pipeline => "pipeline bubble and transfers",
            Limit::Data => "data loading",
        }
    }

    /// A short name for attributes and tests.
    pub const fn key(self) -> &'static str {
        match self {
            Limit::Arithmetic => "arithmetic",
            Limit::ElementWise => "element-wise",
            Limit::Recompute => "recompute",
            Limit::Optimizer => "optimizer",
            Limit::Tp => "tp",
            Limit::Cp => "cp",
            Limit::Dp => "dp",
            Limit::Pipeline => "pipeline",
            Limit::Data => "data",
        }
    }

    /// A point's class in the drawing (the colours are the style sheet's).
    pub const fn class(self) -> &'static str {
        match self {
            Limit::Arithmetic => "search-point limit-arithmetic",
            Limit::ElementWise => "search-point limit-element-wise",
            Limit::Recompute => "search-point limit-recompute",
            Limit::Optimizer => "search-point limit-optimizer",
            Limit::Tp => "search-point limit-tp",
            Limit::Cp => "search-point limit-cp",
            Limit::Dp => "search-point limit-dp",
            Limit::Pipeline => "search-point limit-pipeline",
            Limit::Data => "search-point limit-data",
        }
    }
}

/// What the learner asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub config: String,
    pub cluster: String,
    /// The cluster's first GPU when `None`.
    pub gpu: Option<String>,
    pub gpus: u32,
}

/// Why there is nothing to plot: a sentence, and each problem as the search words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub headline: String,
    pub reasons: Vec<String>,
}

/// Runs the search `query` asks for on the served files, or says why it cannot.
pub fn run(query: &Query, configs: &ConfigFile, clusters: &Clusters) -> Result<Answer, Refusal> {
    let refuse = |headline: String, reasons: Vec<String>| Refusal { headline, reasons };
    let config = configs.get(&query.config).map_err(|e| refuse(format!("No config `{}` to search.", query.config), reasons(&e)))?;
    let cluster = clusters.get(&query.cluster).map_err(|e| refuse(format!("No cluster `{}` to search on.", query.cluster), reasons(&e)))?;
    let space = Space {
        config_name: &query.config,
        config: &config,
        cluster_name: &query.cluster,
        cluster,
        gpu: query.gpu.as_deref(),
        gpus: query.gpus,
    };
    search(&space).map_err(|e| {
        let (gpus, config) = (query.gpus, &query.config);
        let plural = if gpus == 1 { "" } else { "s" };
        refuse(format!("Nothing to plot: no layout of {gpus} GPU{plural} on {} runs {config}, because:", query.cluster), reasons(&e))
    })
}

fn reasons(e: &scalebook_shared::Error) -> Vec<String> {
    let problems = e.problems().0;
    match problems.is_empty() {
        true => vec![e.to_string()],
        false => problems.iter().map(ToString::to_string).collect(),
    }
}

/// The clusters the search can use: those with GPUs (a cluster of CPU cores has no GPU count
/// to lay out), in the file's order.
pub fn gpu_clusters(clusters: &Clusters) -> Vec<String> {
    clusters.names().filter(|n| clusters.get(n).is_ok_and(|c| c.gpus_per_node > 0 && !c.gpus.is_empty())).map(str::to_owned).collect()
}

/// The count in one line: how many layouts, how many run, how many were left out.
pub fn headline(query: &Query, answer: &Answer) -> String {
    let valid = answer.ranked.len() as u64;
    format!(
        "{} on {} × {} {} ({:.0} GiB each): {} layouts searched, {} run, {} left out by the rules below.",
        query.config,
        answer.gpus,
        query.cluster,
        answer.gpu,
        answer.memory_limit_gb,
        thousands(answer.searched),
        thousands(valid),
        thousands(answer.searched - valid),
    )
}

/// One layout, field by field, as the hover read-out shows it.
pub fn fields(r: &Ranked) -> Vec<(&'static str, String)> {
    let c = &r.candidate;
    let s = c.sizes;
    let micro = c.micro_batches;
    vec![
        ("tp", s.tp.to_string()),
        ("cp", s.cp.to_string()),
        ("dp", s.dp.to_string()),
        ("pp", s.pp.to_string()),
        ("order", c.order.to_string()),
        ("ZeRO", zero_words(c.zero)),
        ("recomputation", if c.recompute { "on".into() } else { "off".into() }),
        ("micro-batches", micro_batch_words(micro, r.global_batch / u64::from(s.dp) / u64::from(micro))),
        ("samples/s", format!("{:.1}", r.samples_per_sec)),
        ("GiB per GPU", format!("{:.1}", r.memory_gb)),
        ("limited by", r.limit.to_string()),
    ]
}

fn micro_batch_words(micro_batches: u32, samples: u64) -> String {
    let plural = if samples == 1 { "" } else { "s" };
    match micro_batches {
        1 => format!("1 (the rank's {samples} sample{plural} at once)"),
        m => format!("{m}, of {samples} sample{plural} each"),
    }
}

fn zero_words(stage: u8) -> String {
    let what = match stage {
        0 => "DDP: every GPU holds the whole training state",
        1 => "the optimizer state sharded over dp",
        2 => "the optimizer state and the gradients sharded over dp",
        _ => "the weights sharded over dp too",
    };
    format!("{stage} ({what})")
}

/// One layout in one line.
pub fn one_line(r: &Ranked) -> String {
    format!("{}: {:.1} samples/s, {:.1} GiB per GPU", r.candidate, r.samples_per_sec, r.memory_gb)
}

/// One of the best layouts, with why it is as fast as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Best {
    /// Its place in the ranking, from 1.
    pub rank: usize,
    pub layout: String,
    pub limit: Limit,
    /// The step's parts, largest first: what it is, seconds, share of the step.
    pub parts: Vec<(String, f64, f64)>,
}

/// The fastest layout of each of the `n` fastest rank layouts (sizes and order: their ZeRO and
/// micro-batch variants split their steps alike), fastest first.
pub fn best(answer: &Answer, n: usize) -> Vec<Best> {
    let mut seen = Vec::new();
    let mut rows = Vec::new();
    for (i, r) in answer.ranked.iter().enumerate() {
        let layout = (r.candidate.sizes, r.candidate.order);
        if seen.len() == n {
            break;
        }
        if !seen.contains(&layout) {
            seen.push(layout);
            rows.push(best_row(i, r));
        }
    }
    rows
}

fn best_row(i: usize, r: &Ranked) -> Best {
    let total = r.step_time_s.max(f64::MIN_POSITIVE);
    let mut parts: Vec<(String, f64, f64)> =
        r.split.parts().into_iter().filter(|(_, s)| *s / total >= SHOWN_SHARE).map(|(part, s)| (part.to_string(), s, s / total)).collect();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    Best { rank: i + 1, layout: one_line(r), limit: Limit::of(r.limit), parts }
}

/// Where one of the tutorial's layouts stands.
#[derive(Debug, Clone, PartialEq)]
pub struct TutorialRow {
    pub command: String,
    pub checklist: &'static str,
    /// Its index in the ranking, when it runs.
    pub index: Option<usize>,
    pub verdict: String,
    /// What makes it slower than the best, when it is.
    pub behind: Option<String>,
}

/// The tutorial's own layouts for this config and GPU count (none when it made no choice).
pub fn tutorial(answer: &Answer) -> Vec<TutorialRow> {
    let valid = thousands(answer.ranked.len() as u64);
    answer
        .tutorial
        .iter()
        .map(|standing| {
            let verdict = match (&standing.judgement, standing.rank) {
                (Judgement::Valid(r), Some(rank)) => {
                    format!(
                        "rank {rank} of {valid}: {:.1} samples/s, {:.1} GiB per GPU, limited by {}",
                        r.samples_per_sec, r.memory_gb, r.limit
                    )
                }
                (Judgement::Valid(r), None) => format!("runs: {}", one_line(r)),
                (Judgement::Excluded { rule, reason }, _) => format!("left out ({}): {reason}", rule.field()),
            };
            let behind = standing.behind_best.map(|d| {
                let ratio = answer.ranked.first().zip(standing.rank.and_then(|rank| answer.ranked.get(rank - 1)));
                let times = ratio.map_or_else(String::new, |(best, this)| {
                    format!("the best is {:.1}× as fast, ", best.samples_per_sec / this.samples_per_sec)
                });
                format!(
                    "{times}mostly by {}: {:.2} ms per sample here against the best's {:.2}",
                    d.part, d.slower_ms_per_sample, d.faster_ms_per_sample
                )
            });
            TutorialRow {
                command: standing.choice.command.to_owned(),
                checklist: standing.choice.checklist,
                index: standing.rank.map(|rank| rank - 1),
                verdict,
                behind,
            }
        })
        .collect()
}

/// Layouts left out under one rule, in the block's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExclusionRow {
    pub count: String,
    pub field: &'static str,
    pub sentence: &'static str,
    pub example: String,
}

pub fn exclusions(answer: &Answer) -> Vec<ExclusionRow> {
    answer
        .exclusions
        .iter()
        .map(|e| ExclusionRow { count: thousands(e.count), field: e.field, sentence: e.sentence, example: e.example.clone() })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use scalebook_shared::search::Rule;

    use super::*;

    pub fn files() -> (ConfigFile, Clusters) {
        (
            ConfigFile::parse(include_str!("../../shipped/ViT.yaml")).unwrap(),
            Clusters::parse(include_str!("../../shipped/clusters.yaml")).unwrap(),
        )
    }

    pub fn query(config: &str, cluster: &str, gpu: Option<&str>, gpus: u32) -> Query {
        Query { config: config.into(), cluster: cluster.into(), gpu: gpu.map(Into::into), gpus }
    }

    #[test]
    fn mp_on_16_a100s_is_answered_with_the_tutorials_choice_beside_the_best() {
        let (configs, clusters) = files();
        let q = query("mp", "perlmutter", None, 16);
        let answer = run(&q, &configs, &clusters).unwrap();
        let line = headline(&q, &answer);
        assert!(line.starts_with("mp on 16 × perlmutter a100-40gb (40 GiB each): "), "{line}");
        assert!(line.contains(&format!("{} layouts searched", thousands(answer.searched))), "{line}");

        let best = best(&answer, EXPLAINED);
        assert_eq!(best.len(), EXPLAINED, "{best:?}");
        assert_eq!(best[0].rank, 1);
        assert!(best.windows(2).all(|w| w[0].rank < w[1].rank), "{best:?}");
        for b in &best {
            let shares: f64 = b.parts.iter().map(|p| p.2).sum();
            assert!(shares > 0.9 && shares <= 1.0 + 1e-9, "{b:?}");
            assert!(b.parts.windows(2).all(|w| w[0].1 >= w[1].1), "largest first: {b:?}");
            assert_eq!(b.limit, Limit::of(answer.ranked[b.rank - 1].limit));
        }

        // The tutorial ran tp 4 × dp 4 and cp 4 × dp 4 on 16 GPUs: both run, behind the best.
        let rows = tutorial(&answer);
        assert_eq!(rows.len(), 2);
        for row in &rows {
            let index = row.index.unwrap_or_else(|| panic!("{row:?}"));
            assert!(index > 0 && row.verdict.starts_with(&format!("rank {} of ", index + 1)), "{row:?}");
            let behind = row.behind.as_deref().unwrap();
            assert!(behind.starts_with("the best is ") && behind.contains("× as fast, mostly by "), "{behind}");
        }
        assert!(rows[0].command.contains("--tensor_parallel=4"));

        let left_out = exclusions(&answer);
        assert_eq!(left_out.len(), answer.exclusions.len());
        let heads = left_out.iter().find(|e| e.field == "tensor_parallel").unwrap();
        assert_eq!(heads.sentence, Rule::HeadsNotDivisibleByTp.sentence());
        assert!(heads.example.starts_with("tp 16 does not divide num_heads 8"), "{heads:?}");
    }

    #[test]
    fn a_layout_reads_field_by_field() {
        let (configs, clusters) = files();
        let answer = run(&query("mp", "perlmutter", None, 16), &configs, &clusters).unwrap();
        let r = &answer.ranked[0];
        let shown = fields(r);
        let names: Vec<&str> = shown.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            ["tp", "cp", "dp", "pp", "order", "ZeRO", "recomputation", "micro-batches", "samples/s", "GiB per GPU", "limited by"]
        );
        assert_eq!(shown[2].1, r.candidate.sizes.dp.to_string());
        assert_eq!(shown[8].1, format!("{:.1}", r.samples_per_sec));
        assert_eq!(shown[10].1, r.limit.to_string());
        let micro = &shown[7].1;
        assert!(micro.starts_with(&format!("{}, of ", r.candidate.micro_batches)) || micro.starts_with("1 (the rank's"), "{micro}");
        assert!(one_line(r).starts_with(&r.candidate.to_string()));
    }

    #[test]
    fn input_no_layout_can_use_says_why() {
        let (configs, clusters) = files();
        let no_gpu = run(&query("mp", "perlmutter", Some("h100"), 16), &configs, &clusters).unwrap_err();
        assert!(no_gpu.headline.starts_with("Nothing to plot: no layout of 16 GPUs on perlmutter runs mp"), "{no_gpu:?}");
        assert!(no_gpu.reasons.iter().any(|r| r.contains("unknown GPU `h100` on perlmutter; it has: a100-40gb, a100-80gb")), "{no_gpu:?}");
        let cores = run(&query("mp", "local", None, 2), &configs, &clusters).unwrap_err();
        assert!(cores.reasons.iter().any(|r| r.contains("runs ranks on CPU cores")), "{cores:?}");
        let unknown = run(&query("gpt", "perlmutter", None, 16), &configs, &clusters).unwrap_err();
        assert_eq!(unknown.headline, "No config `gpt` to search.");
        assert!(!unknown.reasons.is_empty());
        let nowhere = run(&query("mp", "frontier", None, 16), &configs, &clusters).unwrap_err();
        assert_eq!(nowhere.headline, "No cluster `frontier` to search on.");
        assert_eq!(gpu_clusters(&clusters), ["perlmutter"]);
    }

    #[test]
    fn a_config_whose_smallest_layout_does_not_fit_names_the_memory_it_needs() {
        let (_, clusters) = files();
        let yaml = format!("{}\nhuge:\n  <<: *mp\n  embed_dim: 8192\n  depth: 48\n", include_str!("../../shipped/ViT.yaml"));
        let configs = ConfigFile::parse(&yaml).unwrap();
        let refusal = run(&query("huge", "perlmutter", None, 1), &configs, &clusters).unwrap_err();
        assert!(refusal.headline.starts_with("Nothing to plot: no layout of 1 GPU on perlmutter runs huge"), "{refusal:?}");
        assert!(
            refusal.reasons.iter().any(|r| r.starts_with("memory: the layout that needs least, tp 1 × cp 1 × pp 1 × dp 1")),
            "{refusal:?}"
        );
    }

    /// `n` as the chapters write a place in a ranking: 1st, 2nd, 62nd, 172nd.
    fn ordinal(n: usize) -> String {
        let suffix = match (n % 10, n % 100) {
            (_, 11..=13) => "th",
            (1, _) => "st",
            (2, _) => "nd",
            (3, _) => "rd",
            _ => "th",
        };
        format!("{n}{suffix}")
    }

    /// The figures rank-groups and beyond quote from the block they show, as the search
    /// computes them now: a change to the estimate that moves one fails here, naming the figure
    /// to write.
    #[test]
    fn the_chapters_quote_the_searchs_figures() {
        use scalebook_shared::estimate::Link;
        let (configs, clusters) = files();
        let search = |gpus| run(&query("mp", "perlmutter", None, gpus), &configs, &clusters).unwrap();
        let says = |chapter: &str, text: &str, figure: &str| {
            assert!(text.contains(figure), "{chapter}.md should say `{figure}`, the search's figure now");
        };
        let rank_groups = include_str!("../../../static/chapters/rank-groups.md").split_whitespace().collect::<Vec<_>>().join(" ");
        let says_here = |figure: &str| says("rank-groups", &rank_groups, figure);
        let answer = search(16);
        let best = &answer.ranked[0];
        assert_eq!((best.candidate.sizes.tp, best.candidate.sizes.cp, best.candidate.sizes.dp), (1, 1, 16), "{}", one_line(best));
        says_here(&format!("dp = 16, at {:.1} samples/s", best.samples_per_sec));
        says_here(&format!("of the {} layouts that run", thousands(answer.ranked.len() as u64)));
        // The same rank layout as the trainer runs it in one piece, in micro-batches, with ZeRO 2.
        let dp16 = |zero, micro_batches| {
            let r = answer.ranked.iter().find(|r| {
                let c = r.candidate;
                c.sizes == best.candidate.sizes && c.zero == zero && c.micro_batches == micro_batches && !c.recompute
            });
            format!("{:.1}", r.unwrap().memory_gb)
        };
        says_here(&format!("{} GiB per GPU in one piece", dp16(0, 1)));
        says_here(&format!("({} with the batch in four micro-batches, {} when ZeRO stage 2", dp16(0, 4), dp16(2, 4)));
        let [tp4, cp4] = [0, 1].map(|i| match &answer.tutorial[i].judgement {
            Judgement::Valid(r) => (answer.tutorial[i].rank.unwrap(), **r),
            other => panic!("{other:?}"),
        });
        assert_eq!(tp4.1.candidate.sizes.tp, 4);
        says_here(&format!("ranks {} of the", ordinal(tp4.0)));
        says_here(&format!("{:.1} samples/s predicted", tp4.1.samples_per_sec));
        says_here(&format!("at {:.1} GiB per GPU", tp4.1.memory_gb));
        assert_eq!(format!("{:.1}", best.samples_per_sec / tp4.1.samples_per_sec), "2.0", "twice as fast");
        let behind = answer.tutorial[0].behind_best.unwrap();
        assert_eq!(behind.part, StepPart::ElementWise, "the term that makes most of the difference");
        let seconds = |r: &Ranked, part| format!("{:.2} s", r.split.seconds(part));
        assert_eq!(seconds(best, StepPart::Arithmetic), seconds(&tp4.1, StepPart::Arithmetic));
        says_here(&format!("the same, {} a step", seconds(best, StepPart::Arithmetic)));
        says_here(&format!(
            "{} a step of element-wise work against {}",
            seconds(&tp4.1, StepPart::ElementWise),
            seconds(best, StepPart::ElementWise)
        ));
        says_here(&format!(
            "{} that the computation waits for",
            seconds(&tp4.1, StepPart::Collectives { group: Token::TP, link: Link::Nvlink })
        ));
        says_here(&format!("ranks {} at {:.1} samples/s", ordinal(cp4.0), cp4.1.samples_per_sec));
        let (on_64, on_128) = (search(64), search(128));
        assert_eq!((on_128.ranked[0].candidate.sizes.tp, on_128.ranked[0].candidate.sizes.dp), (2, 64));
        says_here(&format!(
            "adds tp = 2 ({:.1} samples/s against {:.1}",
            on_128.ranked[0].samples_per_sec, on_64.ranked[0].samples_per_sec
        ));

        let beyond = include_str!("../../../static/chapters/beyond.md").split_whitespace().collect::<Vec<_>>().join(" ");
        let answer = search(1024);
        let best = &answer.ranked[0];
        let s = best.candidate.sizes;
        says("beyond", &beyond, &format!("tp = {}, cp = {}, dp = {}, at {:.1} samples/s", s.tp, s.cp, s.dp, best.samples_per_sec));
        says("beyond", &beyond, &format!("twice the {:.1} of dp = 64", on_64.ranked[0].samples_per_sec));
        assert_eq!(Limit::of(best.limit), Limit::Tp, "its largest part is tp's all-reduces");
        assert!(matches!(best.limit, StepPart::Collectives { link: Link::Network, .. }), "over the network");
        let pipelined = answer.ranked.iter().filter(|r| r.candidate.sizes.pp > 1).count() as u64;
        says("beyond", &beyond, &format!("{} of the {} layouts that run", thousands(pipelined), thousands(answer.ranked.len() as u64)));
    }

    #[test]
    fn every_step_part_has_a_colour() {
        use scalebook_shared::estimate::Link;
        let group = |group| StepPart::GradientSync { group, link: Link::Network };
        assert_eq!(Limit::of(group(Token::DP)), Limit::Dp);
        assert_eq!(Limit::of(StepPart::Collectives { group: Token::TP, link: Link::Nvlink }), Limit::Tp);
        assert_eq!(Limit::of(group(Token::CP)), Limit::Cp);
        assert_eq!(Limit::of(StepPart::DataLoading), Limit::Data);
        let classes: std::collections::HashSet<_> = Limit::ALL.iter().map(|l| l.class()).collect();
        assert_eq!(classes.len(), Limit::ALL.len());
        assert!(Limit::ALL.iter().all(|l| l.class().ends_with(l.key())));
    }
}
