//! What a chapter asks for in a fenced code block: ```` ```scalebook KIND key=value ... ````,
//! e.g. `rank-grid tp=2 cp=2 dp=4 order=tp-cp-dp` or `chart tags="Loss/train,Learning Rate"`.
//! Unknown kinds and keys are errors ([`SpecError`], naming the setting at fault) shown in place
//! of the block, so an instructor editing a chapter sees a typo at once instead of a silently
//! different block.

use scalebook_shared::chapter::BlockKind;
use scalebook_shared::charts::{DEFAULT_SMOOTHING, XAxis};
use scalebook_shared::config::{DEFAULT_CONFIG, TrainConfig};
use scalebook_shared::layout::{DEFAULT_ORDER, Sizes, Token};
use scalebook_shared::metrics::tags;
use scalebook_shared::profile::recorded;
use scalebook_shared::protocol::RunId;
use scalebook_shared::published::{self, Table};
use scalebook_shared::sweep::{Variant, parse_variants};
use scalebook_shared::weather::CHANNELS;

use super::figures::Figure;
use super::layout_search_model as search;
use super::sweep_model::Measure;
use crate::error::SpecError;

/// The sets a data sample can come from.
pub const SETS: [&str; 2] = ["train", "valid"];

#[derive(Debug, Clone, PartialEq)]
pub enum BlockSpec {
    /// The config editor, for `config` on `dp` data-parallel ranks.
    Config {
        config: String,
        dp: u32,
        /// The fields the lesson is about, shown first; the rest are folded away. Empty: every
        /// group as usual.
        fields: Vec<&'static str>,
    },
    RankGrid(GridSpec),
    /// A layout with its rank grid and the estimate of one step of `config` on it.
    Estimate {
        config: String,
        grid: GridSpec,
        cluster: Option<String>,
        gpu: Option<String>,
    },
    /// Launching the chapter's config on `dp` local ranks, with its state and log.
    Run {
        config: String,
        dp: u32,
    },
    Chart(ChartSpec),
    /// One item of this project's source (`path`, from the project root; `item`, a name or
    /// `Type::method`), as the file has it now, with the block's text as its caption.
    Code {
        path: String,
        item: String,
        caption: String,
    },
    /// Variants of `config` run here one after another and compared by `measure`.
    Sweep {
        config: String,
        measure: Measure,
        variants: Vec<Variant>,
    },
    /// A question (Markdown) and its answer, shown on demand.
    Quiz {
        question: String,
        answer: String,
    },
    /// A picture drawn by the app; `config` gives the `vit` one a training config's sizes.
    Figure {
        figure: Figure,
        config: Option<String>,
        caption: String,
    },
    /// A chart of runs the sources publish.
    Published {
        table: &'static Table,
        caption: String,
    },
    /// One channel of one sample of `config`'s dataset (the controls start here).
    Data {
        config: String,
        set: &'static str,
        index: usize,
        channel: &'static str,
    },
    /// A run's weather maps epoch by epoch: run `run`, or the newest.
    Maps {
        run: Option<RunId>,
    },
    /// Every layout of `config` on `gpus` of a cluster's GPUs, searched in the browser as the
    /// controls (which start here) move: a scatter of memory against speed, the best and why,
    /// the tutorial's choice and what was left out by rule.
    LayoutSearch {
        config: String,
        /// The first cluster with GPUs when `None`.
        cluster: Option<String>,
        /// The cluster's first GPU when `None`.
        gpu: Option<String>,
        gpus: u32,
    },
    /// A pipeline's schedules with controls: `stages` stages and `micro_batches` micro-batches
    /// to start from, GPipe's schedule beside 1F1B's, with the bubble and what each holds.
    Pipeline {
        stages: u32,
        micro_batches: u32,
    },
    /// A run's step profile as a timeline and a table of ops: run `run`, the recorded run
    /// `recorded` (one the project keeps, made on a GPU), or else the latest run with a profile.
    Timeline {
        run: Option<RunId>,
        recorded: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct GridSpec {
    pub sizes: Sizes,
    pub order: String,
    pub gpus_per_node: u32,
    /// The token whose groups colour the grid.
    pub colour: Token,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    pub tags: Vec<String>,
    pub baseline: bool,
    pub axis: XAxis,
    pub log: bool,
    pub smoothing: f64,
}

/// The pipeline block's limits: enough to see the bubble shrink, few enough to draw.
pub const MAX_STAGES: u32 = 16;
pub const MAX_MICRO_BATCHES: u32 = 64;

/// Perlmutter's node size, where the tutorial ran.
const DEFAULT_GPUS_PER_NODE: u32 = 4;

impl BlockSpec {
    /// Parses the words after `scalebook` in the info string; `body` is the block's text.
    pub fn parse(info: &str, body: &str) -> Result<BlockSpec, SpecError> {
        let words = split_words(info)?;
        let (kind, settings) = words.split_first().ok_or(SpecError::NoKind)?;
        let kind = BlockKind::from_name(kind).ok_or_else(|| SpecError::UnknownKind(kind.clone()))?;
        let mut settings = Settings::new(kind, settings)?;
        let spec = read(kind, &mut settings, body)?;
        settings.finish()?;
        Ok(spec)
    }

    /// The kind of block this is: the facts of the kind (the part of the page that draws it,
    /// whether a learner acts on it) are [`BlockKind`]'s.
    pub fn kind(&self) -> BlockKind {
        match self {
            BlockSpec::Config { .. } => BlockKind::Config,
            BlockSpec::RankGrid(_) => BlockKind::RankGrid,
            BlockSpec::Estimate { .. } => BlockKind::Estimate,
            BlockSpec::Run { .. } => BlockKind::Run,
            BlockSpec::Chart(_) => BlockKind::Chart,
            BlockSpec::Code { .. } => BlockKind::Code,
            BlockSpec::Sweep { .. } => BlockKind::Sweep,
            BlockSpec::Quiz { .. } => BlockKind::Quiz,
            BlockSpec::Figure { .. } => BlockKind::Figure,
            BlockSpec::Published { .. } => BlockKind::Published,
            BlockSpec::Data { .. } => BlockKind::Data,
            BlockSpec::Maps { .. } => BlockKind::Maps,
            BlockSpec::LayoutSearch { .. } => BlockKind::LayoutSearch,
            BlockSpec::Pipeline { .. } => BlockKind::Pipeline,
            BlockSpec::Timeline { .. } => BlockKind::Timeline,
        }
    }
}

/// A block of `kind` from its settings (each taken as it is read) and its text.
fn read(kind: BlockKind, settings: &mut Settings, body: &str) -> Result<BlockSpec, SpecError> {
    let caption = || body.trim().to_owned();
    Ok(match kind {
        BlockKind::Config => BlockSpec::Config { config: settings.config(), dp: settings.count("dp", 1)?, fields: settings.fields()? },
        BlockKind::RankGrid => BlockSpec::RankGrid(settings.grid()?),
        BlockKind::Estimate => BlockSpec::Estimate {
            config: settings.config(),
            grid: settings.grid()?,
            cluster: settings.take("cluster"),
            gpu: settings.take("gpu"),
        },
        BlockKind::LayoutSearch => BlockSpec::LayoutSearch {
            config: settings.take("config").unwrap_or_else(|| search::DEFAULT_CONFIG.to_owned()),
            cluster: settings.take("cluster"),
            gpu: settings.take("gpu"),
            gpus: settings.gpu_count()?,
        },
        BlockKind::Run => BlockSpec::Run { config: settings.config(), dp: settings.count("dp", 1)? },
        BlockKind::Chart => BlockSpec::Chart(settings.chart()?),
        BlockKind::Code => BlockSpec::Code {
            path: settings.need("path", "FILE (from the project root)")?,
            item: settings.need("item", "NAME (or item=Type::method)")?,
            caption: caption(),
        },
        BlockKind::Sweep => BlockSpec::Sweep {
            config: settings.config(),
            measure: settings.measure()?,
            variants: parse_variants(body).map_err(|rule| SpecError::Body { block: kind, rule })?,
        },
        BlockKind::Quiz => {
            let (question, answer) = split_quiz(body)?;
            BlockSpec::Quiz { question, answer }
        }
        BlockKind::Data => BlockSpec::Data {
            config: settings.config(),
            set: settings.one_of("set", &SETS)?.unwrap_or(SETS[0]),
            index: settings.index()?,
            channel: settings.channel()?,
        },
        BlockKind::Maps => BlockSpec::Maps { run: settings.run()? },
        BlockKind::Timeline => settings.timeline()?,
        BlockKind::Pipeline => settings.pipeline()?,
        BlockKind::Figure => settings.figure(caption())?,
        BlockKind::Published => BlockSpec::Published { table: settings.published_table()?, caption: caption() },
    })
}

/// Words separated by spaces; a value in double quotes may hold spaces (`tags="Learning Rate"`).
fn split_words(text: &str) -> Result<Vec<String>, SpecError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if quoted {
        return Err(SpecError::UnclosedQuote(text.to_owned()));
    }
    if !word.is_empty() {
        words.push(word);
    }
    Ok(words)
}

/// The question, a line of `---`, the answer.
fn split_quiz(body: &str) -> Result<(String, String), SpecError> {
    let mut question = String::new();
    let mut answer: Option<String> = None;
    for line in body.lines() {
        match &mut answer {
            None if line.trim() == "---" => answer = Some(String::new()),
            None => question.push_str(&format!("{line}\n")),
            Some(answer) => answer.push_str(&format!("{line}\n")),
        }
    }
    match answer {
        Some(answer) if !question.trim().is_empty() && !answer.trim().is_empty() => Ok((question, answer)),
        _ => Err(SpecError::Body { block: BlockKind::Quiz, rule: "a quiz block holds a question, a line `---`, and the answer".into() }),
    }
}

/// `key=value` whose value breaks `rule`.
fn bad_value(key: &'static str, value: impl Into<String>, rule: impl Into<String>) -> SpecError {
    SpecError::Value { key, value: value.into(), rule: rule.into() }
}

/// The `key=value` settings of a block of `kind`; each is taken once, and any left over is an
/// error.
struct Settings {
    kind: BlockKind,
    pairs: Vec<(String, String)>,
}

impl Settings {
    fn new(kind: BlockKind, words: &[String]) -> Result<Settings, SpecError> {
        let pairs = words
            .iter()
            .map(|w| match w.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
                _ => Err(SpecError::NotASetting(w.clone())),
            })
            .collect::<Result<_, _>>()?;
        Ok(Settings { kind, pairs })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(at).1)
    }

    /// A setting the block cannot do without; `wanted` says what its value is.
    fn need(&mut self, key: &'static str, wanted: impl Into<String>) -> Result<String, SpecError> {
        self.take(key).ok_or_else(|| SpecError::Missing { block: self.kind, key, wanted: wanted.into() })
    }

    fn config(&mut self) -> String {
        self.take("config").unwrap_or_else(|| DEFAULT_CONFIG.to_owned())
    }

    /// `fields=a,b`: config keys, each one the config has.
    fn fields(&mut self) -> Result<Vec<&'static str>, SpecError> {
        let Some(list) = self.take("fields") else { return Ok(Vec::new()) };
        list.split(',')
            .map(|name| {
                TrainConfig::field(name.trim())
                    .map(|f| f.name)
                    .ok_or_else(|| bad_value("fields", list.as_str(), format!("`{}` is not a config key", name.trim())))
            })
            .collect()
    }

    fn count(&mut self, key: &'static str, default: u32) -> Result<u32, SpecError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| bad_value(key, v, "expected a whole number of at least 1")),
        }
    }

    /// `gpus=N` of a layout search: a count its slider offers.
    fn gpu_count(&mut self) -> Result<u32, SpecError> {
        let gpus = self.count("gpus", search::DEFAULT_GPUS)?;
        match search::GPU_COUNTS.contains(&gpus) {
            true => Ok(gpus),
            false => Err(bad_value("gpus", gpus.to_string(), "the layout search takes a power of two from 1 to 1024 GPUs")),
        }
    }

    fn flag(&mut self, key: &'static str, default: bool) -> Result<bool, SpecError> {
        match self.take(key).as_deref() {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(bad_value(key, v, "expected true or false")),
        }
    }

    fn grid(&mut self) -> Result<GridSpec, SpecError> {
        let sizes = Sizes { tp: self.count("tp", 1)?, cp: self.count("cp", 1)?, dp: self.count("dp", 1)?, pp: self.count("pp", 1)? };
        let colour = match self.take("colour") {
            None => Token::TP,
            Some(text) => text.parse::<Token>().map_err(|e| SpecError::Setting { key: "colour", rule: e.to_string() })?,
        };
        Ok(GridSpec {
            sizes,
            order: self.take("order").unwrap_or_else(|| DEFAULT_ORDER.to_owned()),
            gpus_per_node: self.count("gpus", DEFAULT_GPUS_PER_NODE)?,
            colour,
        })
    }

    fn chart(&mut self) -> Result<ChartSpec, SpecError> {
        let tags = match self.take("tags") {
            Some(list) => list.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect(),
            None => vec![tags::LOSS_TRAIN.to_owned(), tags::LOSS_VALID.to_owned()],
        };
        let axis = match self.take("axis") {
            None => XAxis::Step,
            Some(name) => XAxis::from_name(&name).ok_or_else(|| bad_value("axis", name, "expected step, relative or wall"))?,
        };
        let smoothing = match self.take("smoothing") {
            None => DEFAULT_SMOOTHING,
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|w| (0.0..1.0).contains(w))
                .ok_or_else(|| bad_value("smoothing", v, "expected a number in [0, 1)"))?,
        };
        Ok(ChartSpec { tags, baseline: self.flag("baseline", false)?, axis, log: self.flag("log", false)?, smoothing })
    }

    /// What a sweep compares its variants by; their throughput unless the block says.
    fn measure(&mut self) -> Result<Measure, SpecError> {
        let name = self.take("measure").unwrap_or_else(|| "throughput".into());
        Measure::parse(&name).map_err(|rule| SpecError::Setting { key: "measure", rule })
    }

    /// `name=` the figure; `config=` sizes the `vit` one, and only it.
    fn figure(&mut self, caption: String) -> Result<BlockSpec, SpecError> {
        let name = self.need("name", format!("NAME, one of {}", Figure::names()))?;
        let figure = Figure::from_name(&name).map_err(|rule| SpecError::Setting { key: "name", rule })?;
        let config = self.take("config");
        if config.is_some() && figure != Figure::Vit {
            return Err(SpecError::Setting {
                key: "config",
                rule: format!("config=NAME sizes only the vit figure, not {}", figure.name()),
            });
        }
        Ok(BlockSpec::Figure { figure, config, caption })
    }

    fn published_table(&mut self) -> Result<&'static Table, SpecError> {
        let names = published::NAMES.join(", ");
        let name = self.need("table", format!("NAME, one of {names}"))?;
        published::table(&name).ok_or_else(|| bad_value("table", name, format!("the published tables are {names}")))
    }

    /// `stages=` and `micro_batches=`: where a pipeline block's controls start, within what
    /// they offer.
    fn pipeline(&mut self) -> Result<BlockSpec, SpecError> {
        let (stages, micro_batches) = (self.count("stages", 4)?, self.count("micro_batches", 4)?);
        let key = match ((2..=MAX_STAGES).contains(&stages), micro_batches <= MAX_MICRO_BATCHES) {
            (true, true) => return Ok(BlockSpec::Pipeline { stages, micro_batches }),
            (false, _) => "stages",
            (true, false) => "micro_batches",
        };
        let rule = format!(
            "a pipeline block takes 2 to {MAX_STAGES} stages and 1 to {MAX_MICRO_BATCHES} micro-batches, not {stages} and {micro_batches}"
        );
        Err(SpecError::Setting { key, rule })
    }

    /// A timeline of run `run=`, of the recording `recorded=`, or (neither) of the latest run
    /// with a profile.
    fn timeline(&mut self) -> Result<BlockSpec, SpecError> {
        match (self.run()?, self.recording()?) {
            (Some(_), Some(_)) => {
                Err(SpecError::Setting { key: "recorded", rule: "a timeline block shows run=ID or recorded=NAME, not both".into() })
            }
            (run, recorded) => Ok(BlockSpec::Timeline { run, recorded }),
        }
    }

    /// `key`'s value when it is one of `allowed`.
    fn one_of(&mut self, key: &'static str, allowed: &[&'static str]) -> Result<Option<&'static str>, SpecError> {
        let Some(v) = self.take(key) else { return Ok(None) };
        match allowed.iter().find(|a| **a == v) {
            Some(a) => Ok(Some(a)),
            None => Err(bad_value(key, v, format!("expected one of {}", allowed.join(", ")))),
        }
    }

    fn index(&mut self) -> Result<usize, SpecError> {
        match self.take("index") {
            None => Ok(0),
            Some(v) => v.parse().map_err(|_| bad_value("index", v, "expected a sample number (0, 1, 2, …)")),
        }
    }

    /// A channel by its short name; t2m (the channel the tutorial plots) by default.
    fn channel(&mut self) -> Result<&'static str, SpecError> {
        let names: Vec<&'static str> = CHANNELS.iter().map(|c| c.name).collect();
        Ok(self.one_of("channel", &names)?.unwrap_or("t2m"))
    }

    /// The run a block names with `run=ID`, if it names one.
    fn run(&mut self) -> Result<Option<RunId>, SpecError> {
        self.take("run").map(|id| RunId::parse(&id).map_err(|e| bad_value("run", id, e.to_string()))).transpose()
    }

    /// The recorded run a block names with `recorded=NAME`, if it names one.
    fn recording(&mut self) -> Result<Option<String>, SpecError> {
        match self.take("recorded") {
            Some(name) if !recorded::valid_name(&name) => {
                Err(bad_value("recorded", name, "a recording's name is lowercase letters, digits, - and _ (as under static/recorded/)"))
            }
            name => Ok(name),
        }
    }

    /// Every setting has been read: one left over is one the kind does not take.
    fn finish(self) -> Result<(), SpecError> {
        match self.pairs.into_iter().next() {
            None => Ok(()),
            Some((key, _)) => Err(SpecError::UnknownSetting { block: self.kind, key }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why `info` and `body` are not a block, as the page shows it.
    fn refusal(info: &str, body: &str) -> String {
        BlockSpec::parse(info, body).unwrap_err().to_string()
    }

    #[test]
    fn reads_every_kind_with_its_settings() {
        let grid = BlockSpec::parse("rank-grid tp=2 cp=2 dp=4 order=tp-cp-dp colour=dp", "").unwrap();
        assert_eq!(
            grid,
            BlockSpec::RankGrid(GridSpec {
                sizes: Sizes { tp: 2, cp: 2, dp: 4, pp: 1 },
                order: "tp-cp-dp".into(),
                gpus_per_node: 4,
                colour: Token::DP,
            })
        );
        let estimate = BlockSpec::parse("estimate config=mp tp=4 dp=4 gpu=a100-40gb", "").unwrap();
        let BlockSpec::Estimate { config, grid, gpu, cluster } = estimate else { panic!("{estimate:?}") };
        assert_eq!((config.as_str(), grid.sizes.tp, grid.sizes.dp, gpu.as_deref(), cluster), ("mp", 4, 4, Some("a100-40gb"), None));
        assert_eq!(BlockSpec::parse("run config=cpu_tiny", "").unwrap(), BlockSpec::Run { config: "cpu_tiny".into(), dp: 1 });
        assert_eq!(BlockSpec::parse("config", "").unwrap(), BlockSpec::Config { config: DEFAULT_CONFIG.into(), dp: 1, fields: vec![] });
        let lesson = BlockSpec::parse("config config=cpu_short fields=amp_mode,enable_fused", "").unwrap();
        assert_eq!(lesson, BlockSpec::Config { config: "cpu_short".into(), dp: 1, fields: vec!["amp_mode", "enable_fused"] });
        let typo = refusal("config fields=amp_mod", "");
        assert!(typo.contains("fields=amp_mod: `amp_mod` is not a config key"), "{typo}");
        let chart = BlockSpec::parse(r#"chart tags="Loss/valid, Learning Rate" baseline=true axis=relative"#, "").unwrap();
        let BlockSpec::Chart(chart) = chart else { panic!() };
        assert_eq!(chart.tags, ["Loss/valid", "Learning Rate"]);
        assert!(chart.baseline && !chart.log);
        assert_eq!((chart.axis, chart.smoothing), (XAxis::Relative, DEFAULT_SMOOTHING));
    }

    #[test]
    fn quizzes_split_at_the_rule() {
        let quiz = BlockSpec::parse("quiz", "Why?\n\nThink.\n---\nBecause.\n").unwrap();
        assert_eq!(quiz, BlockSpec::Quiz { question: "Why?\n\nThink.\n".into(), answer: "Because.\n".into() });
        assert!(refusal("quiz", "No answer here\n").contains("`---`"));
    }

    #[test]
    fn code_blocks_name_a_file_and_an_item() {
        let code =
            BlockSpec::parse("code path=backend/trainer/src/data/sampler.rs item=ShardedSampler::indices", "Note the stride.\n").unwrap();
        let expected = BlockSpec::Code {
            path: "backend/trainer/src/data/sampler.rs".into(),
            item: "ShardedSampler::indices".into(),
            caption: "Note the stride.".into(),
        };
        assert_eq!(code, expected);
        assert!(refusal("code item=x", "").contains("path=FILE"));
        assert!(refusal("code path=a.rs", "").contains("item=NAME"));
    }

    #[test]
    fn sweeps_take_a_config_a_measure_and_variant_lines() {
        let sweep = BlockSpec::parse(
            "sweep config=cpu_short measure=efficiency",
            "one | dp=1
two | dp=2 noddp=true
",
        )
        .unwrap();
        let BlockSpec::Sweep { config, measure, variants } = sweep else { panic!("{sweep:?}") };
        assert_eq!((config.as_str(), measure, variants.len()), ("cpu_short", Measure::Efficiency, 2));
        assert_eq!((variants[1].dp, variants[1].overrides.as_slice()), (2, &["noddp=true".to_owned()][..]));
        let BlockSpec::Sweep { measure, .. } = BlockSpec::parse(
            "sweep",
            "a | dp=1
b | dp=2",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(measure, Measure::Throughput);
        assert!(
            refusal(
                "sweep measure=speed",
                "a | dp=1
b | dp=2"
            )
            .contains("throughput, efficiency, scaling, memory, state, loss, step-loss, rmse or agreement")
        );
        assert!(refusal("sweep", "a | dp=1").contains("at least two"));
    }

    #[test]
    fn figures_and_published_charts_name_what_they_draw() {
        let vit = BlockSpec::parse("figure name=vit config=base", "The model.\n").unwrap();
        assert_eq!(vit, BlockSpec::Figure { figure: Figure::Vit, config: Some("base".into()), caption: "The model.".into() });
        let pipeline = BlockSpec::parse("figure name=pipeline", "").unwrap();
        assert_eq!(pipeline, BlockSpec::Figure { figure: Figure::Pipeline, config: None, caption: String::new() });
        assert!(refusal("figure name=gpu", "").contains("the figures are vit, node, gpu-paths, collectives, pipeline"));
        assert!(refusal("figure", "").contains("name=NAME, one of vit"));
        assert!(refusal("figure name=node config=base", "").contains("only the vit figure"));
        assert!(refusal("figure name=node colour=dp", "").contains("no setting `colour`"));

        let benchy = BlockSpec::parse("published table=sc22-benchy", "IO first.").unwrap();
        assert_eq!(benchy, BlockSpec::Published { table: published::table("sc22-benchy").unwrap(), caption: "IO first.".into() });
        assert!(refusal("published table=sc24-ladder", "").contains("tables are dl4sci25-ladder, sc23-ladder"));
        assert!(refusal("published", "").contains("table=NAME"));
        assert!(refusal("published table=jsc-runtimes unit=h", "").contains("no setting `unit`"));
        assert!(refusal("graph", "").contains("figure and published"));
    }

    #[test]
    fn data_and_maps_blocks_name_a_sample_and_a_run() {
        let data = BlockSpec::parse("data config=cpu_tiny set=valid index=5 channel=u10", "").unwrap();
        assert_eq!(data, BlockSpec::Data { config: "cpu_tiny".into(), set: "valid", index: 5, channel: "u10" });
        let data = BlockSpec::parse("data", "").unwrap();
        assert_eq!(data, BlockSpec::Data { config: DEFAULT_CONFIG.into(), set: "train", index: 0, channel: "t2m" });
        assert!(refusal("data set=test", "").contains("expected one of train, valid"));
        assert!(refusal("data channel=t2", "").contains("u10, v10, t2m"));
        assert!(refusal("data index=-1", "").contains("sample number"));
        assert_eq!(BlockSpec::parse("maps", "").unwrap(), BlockSpec::Maps { run: None });
        let run = BlockSpec::parse("maps run=20260101-120000-1", "").unwrap();
        assert_eq!(run, BlockSpec::Maps { run: Some(RunId::parse("20260101-120000-1").unwrap()) });
        assert!(refusal("maps run=../x", "").starts_with("run=../x"));
    }

    #[test]
    fn timelines_name_a_run_or_follow_the_latest_profile() {
        assert_eq!(BlockSpec::parse("timeline", "").unwrap(), BlockSpec::Timeline { run: None, recorded: None });
        let run = BlockSpec::parse("timeline run=20260101-120000-1", "").unwrap();
        assert_eq!(run, BlockSpec::Timeline { run: Some(RunId::parse("20260101-120000-1").unwrap()), recorded: None });
        let recorded = BlockSpec::parse("timeline recorded=h200-short-0workers", "").unwrap();
        assert_eq!(recorded, BlockSpec::Timeline { run: None, recorded: Some("h200-short-0workers".into()) });
        assert!(refusal("timeline recorded=../x", "").starts_with("recorded=../x"));
        let both = refusal("timeline run=20260101-120000-1 recorded=a", "");
        assert!(both.contains("not both"), "{both}");
        assert!(refusal("timeline run=a/b", "").starts_with("run=a/b"));
        assert!(refusal("timeline rank=0", "").contains("no setting `rank`"));
    }

    #[test]
    fn layout_searches_name_a_config_a_cluster_and_a_gpu_count() {
        let search = BlockSpec::parse("layout-search config=mp cluster=perlmutter gpus=16", "").unwrap();
        let expected = BlockSpec::LayoutSearch { config: "mp".into(), cluster: Some("perlmutter".into()), gpu: None, gpus: 16 };
        assert_eq!(search, expected);
        let defaults = BlockSpec::parse("layout-search", "").unwrap();
        assert_eq!(defaults, BlockSpec::LayoutSearch { config: "mp".into(), cluster: None, gpu: None, gpus: 16 });
        let gpu = BlockSpec::parse("layout-search gpu=a100-80gb gpus=1024", "").unwrap();
        assert_eq!(gpu, BlockSpec::LayoutSearch { config: "mp".into(), cluster: None, gpu: Some("a100-80gb".into()), gpus: 1024 });
        assert!(refusal("layout-search gpus=12", "").contains("a power of two from 1 to 1024"));
        assert!(refusal("layout-search gpus=2048", "").contains("a power of two"));
        assert!(refusal("layout-search gpus=0", "").contains("at least 1"));
        assert!(refusal("layout-search tp=2", "").contains("a layout-search block has no setting `tp`"));
    }

    #[test]
    fn pipeline_blocks_start_from_their_stages_and_micro_batches() {
        assert_eq!(BlockSpec::parse("pipeline", "").unwrap(), BlockSpec::Pipeline { stages: 4, micro_batches: 4 });
        assert_eq!(
            BlockSpec::parse("pipeline stages=8 micro_batches=32", "").unwrap(),
            BlockSpec::Pipeline { stages: 8, micro_batches: 32 }
        );
        assert!(refusal("pipeline stages=1", "").contains("2 to 16 stages"));
        assert!(refusal("pipeline micro_batches=65", "").contains("1 to 64 micro-batches"));
    }

    /// The least a chapter writes for a block of `kind`: its settings and its text.
    fn least(kind: BlockKind) -> (String, &'static str) {
        let (settings, body) = match kind {
            BlockKind::Code => ("path=a.rs item=f", ""),
            BlockKind::Figure => ("name=node", ""),
            BlockKind::Published => ("table=sc22-benchy", ""),
            BlockKind::Quiz => ("", "Why?\n---\nBecause.\n"),
            BlockKind::Sweep => ("", "a | dp=1\nb | dp=2\n"),
            BlockKind::Config
            | BlockKind::RankGrid
            | BlockKind::Estimate
            | BlockKind::LayoutSearch
            | BlockKind::Run
            | BlockKind::Chart
            | BlockKind::Data
            | BlockKind::Maps
            | BlockKind::Timeline
            | BlockKind::Pipeline => ("", ""),
        };
        (format!("{kind} {settings}"), body)
    }

    #[test]
    fn every_kind_reads_into_a_spec_of_that_kind() {
        for kind in BlockKind::ALL {
            let (info, body) = least(*kind);
            assert_eq!(BlockSpec::parse(&info, body).map(|spec| spec.kind()), Ok(*kind), "{info}");
        }
    }

    #[test]
    fn refusals_point_at_the_setting_at_fault() {
        let refused = |info: &str| BlockSpec::parse(info, "").unwrap_err();
        let zero = SpecError::Value { key: "tp", value: "0".into(), rule: "expected a whole number of at least 1".into() };
        assert_eq!(refused("rank-grid tp=0"), zero);
        assert_eq!(refused("chart log=true colour=dp"), SpecError::UnknownSetting { block: BlockKind::Chart, key: "colour".into() });
        assert!(matches!(refused("code item=x"), SpecError::Missing { block: BlockKind::Code, key: "path", .. }));
        assert!(matches!(refused("figure name=node config=base"), SpecError::Setting { key: "config", .. }));
        assert!(matches!(refused("pipeline stages=4 micro_batches=65"), SpecError::Setting { key: "micro_batches", .. }));
        assert!(matches!(refused("timeline run=20260101-120000-1 recorded=a"), SpecError::Setting { key: "recorded", .. }));
        assert!(matches!(refused("sweep measure=speed"), SpecError::Setting { key: "measure", .. }));
        assert!(matches!(refused("quiz"), SpecError::Body { block: BlockKind::Quiz, .. }));
    }

    #[test]
    fn typos_are_errors_that_say_what_is_wrong() {
        assert_eq!(
            refusal("graph", ""),
            "unknown block kind `graph`; the kinds are config, rank-grid, estimate, layout-search, run, chart, code, sweep, quiz, data, maps, timeline, pipeline, figure and published"
        );
        assert!(refusal("rank-grid tp=2 cpp=2", "").contains("no setting `cpp`"));
        assert!(refusal("rank-grid tp=0", "").contains("at least 1"));
        assert!(refusal("chart axis=epoch", "").contains("step, relative or wall"));
        assert!(refusal("chart baseline=yes", "").contains("true or false"));
        assert!(refusal("graph", "").contains("unknown block kind `graph`"));
        assert!(refusal("run config", "").contains("key=value"));
        assert!(refusal(r#"chart tags="Loss"#, "").contains("unclosed quote"));
        assert!(BlockSpec::parse("rank-grid colour=xp", "").is_err());
    }
}
