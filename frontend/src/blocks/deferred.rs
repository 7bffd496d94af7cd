//! How each block of a chapter is drawn: the light blocks every chapter has at once, the
//! blocks only some chapters use from parts of the module that the browser fetches when a
//! chapter first shows one of them, so the first visit downloads less before the first chapter
//! can be read.
//!
//! `scalebook.sh` builds the page with `--cfg scalebook_split`: each `*_block` function below is
//! then a split point (`wasm_split`, the splitter Leptos' `#[lazy]` uses), and wasm-split puts
//! the code only it reaches into the part named in its attribute. Every other build (the wasm
//! tests, Trunk) has no splitter; there they are plain functions. A part that cannot be fetched
//! shows why in place of its block, and the next chapter that needs it asks again.

use futures_util::future::LocalBoxFuture;
use leptos::prelude::*;
#[cfg(scalebook_split)]
use leptos::wasm_split::wasm_split;
use scalebook_shared::chapter::PagePart;
use scalebook_shared::protocol::RunId;
use scalebook_shared::sweep::Variant;
use send_wrapper::SendWrapper;

use super::charts::ChartsBlock;
use super::code::CodeBlock;
use super::config_editor::ConfigEditor;
use super::data_block::DataBlock;
use super::estimate::EstimateBlock;
use super::figures::{Figure, FigureBlock};
use super::layout_search::LayoutSearchBlock;
use super::maps_block::MapsBlock;
use super::pipeline::PipelineBlock;
use super::published::PublishedBlock;
use super::quiz::Quiz;
use super::rank_grid::RankGridBlock;
use super::run::RunBlock;
use super::sweep::SweepBlock;
use super::sweep_model::Measure;
use super::timeline::TimelineBlock;
use super::timeline_recorded::RecordedTimeline;
use super::without_server;
use super::{BlockSpec, ChartSpec, GridSpec};
use crate::library::LoadError;
use crate::working::WorkingConfig;

/// The chapter's blocks still waiting for their part of the module. Each arrival makes the
/// chapter longer above whatever follows it, so a page following a presentation is placed once
/// none is left: scrolled while the page is short, it would stop short of the presented place.
#[derive(Clone, Copy)]
pub struct Pending(RwSignal<u32>);

impl Pending {
    pub fn new() -> Self {
        Self(RwSignal::new(0))
    }

    /// Whether every block of the chapter has arrived (or failed to, and says why).
    pub fn settled(self) -> bool {
        self.0.get() == 0
    }

    fn add(self) {
        self.0.update(|n| *n += 1);
    }

    /// A block arrived; the chapter may be gone by then, and its count with it.
    fn arrived(self) {
        self.0.try_update(|n| *n = n.saturating_sub(1));
    }
}

/// A block drawn by a split function once the chapter's `Suspense` asks for it: awaited where
/// the module is split (its part is fetched first, once), called directly in the builds that do
/// not split.
macro_rules! from_part {
    ($call:expr) => {
        Drawn::Later(Box::pin(async move {
            #[cfg(scalebook_split)]
            let view = $call.await;
            #[cfg(not(scalebook_split))]
            let view = $call;
            view
        }))
    };
}

/// `spec`'s block: at once, or with a line saying it is on its way until its part of the
/// module is here; in the static edition, a block that needs a server says so instead
/// ([`without_server`]).
pub fn block(spec: BlockSpec) -> AnyView {
    // The chapter's working config is the first block's that names one, in the chapter's order,
    // whichever block's part of the module arrives first.
    if let BlockSpec::Config { config, dp, .. } | BlockSpec::Run { config, dp } = &spec {
        WorkingConfig::claim(config, *dp);
    }
    if let Some(view) = without_server::stand_in(&spec) {
        return view;
    }
    let kind = spec.kind();
    let drawn = draw(spec);
    // The part the docs give the kind (`BlockKind::part`) is the one `draw` draws it with.
    debug_assert_eq!(matches!(drawn, Drawn::Now(_)), kind.part() == PagePart::Main, "{kind} is drawn apart from its part");
    match drawn {
        Drawn::Now(view) => view,
        Drawn::Later(view) => arriving(view),
    }
}

/// A block drawn now, or one whose part of the module is fetched first.
enum Drawn {
    Now(AnyView),
    Later(LocalBoxFuture<'static, Result<AnyView, LoadError>>),
}

/// Each kind of block's component. One match with an arm for every kind, so a new kind does
/// not compile until it is drawn here, at once or from its part.
fn draw(spec: BlockSpec) -> Drawn {
    match spec {
        BlockSpec::Quiz { question, answer } => Drawn::Now(view! { <Quiz question answer /> }.into_any()),
        BlockSpec::Code { path, item, caption } => Drawn::Now(view! { <CodeBlock path item caption /> }.into_any()),
        BlockSpec::Published { table, caption } => Drawn::Now(view! { <PublishedBlock table caption /> }.into_any()),
        BlockSpec::Config { config, dp, fields } => from_part!(config_block(config, dp, fields)),
        BlockSpec::Run { config, dp } => from_part!(run_block(config, dp)),
        BlockSpec::Chart(spec) => from_part!(chart_block(spec)),
        BlockSpec::Sweep { config, measure, variants } => from_part!(sweep_block(config, measure, variants)),
        BlockSpec::Estimate { config, grid, cluster, gpu } => from_part!(estimate_block(config, grid, cluster, gpu)),
        BlockSpec::RankGrid(spec) => from_part!(rank_grid_block(spec)),
        BlockSpec::LayoutSearch { config, cluster, gpu, gpus } => from_part!(layout_search_block(config, cluster, gpu, gpus)),
        BlockSpec::Figure { figure, config, caption } => from_part!(figure_block(figure, config, caption)),
        BlockSpec::Data { config, set, index, channel } => from_part!(data_block(config, set, index, channel)),
        BlockSpec::Maps { run } => from_part!(maps_block(run)),
        BlockSpec::Pipeline { stages, micro_batches } => from_part!(pipeline_block(stages, micro_batches)),
        BlockSpec::Timeline { run, recorded } => from_part!(timeline_block(run, recorded)),
    }
}

/// The block `view` draws once its part of the module is here, with a line saying it is on its
/// way until then. The line is a `.block` itself, so the classroom numbers a chapter's blocks
/// alike on a page that has the part and on one still fetching it.
fn arriving(view: LocalBoxFuture<'static, Result<AnyView, LoadError>>) -> AnyView {
    let pending = use_context::<Pending>();
    pending.inspect(|p| untrack(|| p.add()));
    let view = SendWrapper::new(async move {
        let view = view.await.unwrap_or_else(|e| view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any());
        pending.inspect(|p| p.arrived());
        view
    });
    view! {
        <Suspense fallback=|| view! { <p class="block muted block-loading">"Loading this block…"</p> }>
            {Suspend::new(view)}
        </Suspense>
    }
    .into_any()
}

// Four parts, grouped as chapters use the blocks, so the first chapter fetches only what it
// shows (the editor and the pictures) and a later chapter a few parts more; the splitter puts
// the code that two parts share into smaller parts of its own, fetched with either.

#[cfg_attr(scalebook_split, wasm_split(editor, wasm_split_path = ::leptos::wasm_split, fallible))]
fn config_block(config: String, dp: u32, fields: Vec<&'static str>) -> Result<AnyView, LoadError> {
    Ok(view! { <ConfigEditor config dp fields /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(runs, wasm_split_path = ::leptos::wasm_split, fallible))]
fn run_block(config: String, dp: u32) -> Result<AnyView, LoadError> {
    Ok(view! { <RunBlock config dp /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(runs, wasm_split_path = ::leptos::wasm_split, fallible))]
fn chart_block(spec: ChartSpec) -> Result<AnyView, LoadError> {
    Ok(view! { <ChartsBlock spec /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(runs, wasm_split_path = ::leptos::wasm_split, fallible))]
fn sweep_block(config: String, measure: Measure, variants: Vec<Variant>) -> Result<AnyView, LoadError> {
    Ok(view! { <SweepBlock config measure variants /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(runs, wasm_split_path = ::leptos::wasm_split, fallible))]
fn estimate_block(config: String, grid: GridSpec, cluster: Option<String>, gpu: Option<String>) -> Result<AnyView, LoadError> {
    Ok(view! { <EstimateBlock config grid cluster gpu /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(runs, wasm_split_path = ::leptos::wasm_split, fallible))]
fn rank_grid_block(spec: GridSpec) -> Result<AnyView, LoadError> {
    Ok(view! { <RankGridBlock spec /> }.into_any())
}

// With the estimate and the rank grid, which it opens a layout in.
#[cfg_attr(scalebook_split, wasm_split(runs, wasm_split_path = ::leptos::wasm_split, fallible))]
fn layout_search_block(config: String, cluster: Option<String>, gpu: Option<String>, gpus: u32) -> Result<AnyView, LoadError> {
    Ok(view! { <LayoutSearchBlock config cluster gpu gpus /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(pictures, wasm_split_path = ::leptos::wasm_split, fallible))]
fn figure_block(figure: Figure, config: Option<String>, caption: String) -> Result<AnyView, LoadError> {
    Ok(view! { <FigureBlock figure config caption /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(pictures, wasm_split_path = ::leptos::wasm_split, fallible))]
fn data_block(config: String, set: &'static str, index: usize, channel: &'static str) -> Result<AnyView, LoadError> {
    Ok(view! { <DataBlock config set index channel /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(pictures, wasm_split_path = ::leptos::wasm_split, fallible))]
fn pipeline_block(stages: u32, micro_batches: u32) -> Result<AnyView, LoadError> {
    Ok(view! { <PipelineBlock stages micro_batches /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(pictures, wasm_split_path = ::leptos::wasm_split, fallible))]
fn maps_block(run: Option<RunId>) -> Result<AnyView, LoadError> {
    Ok(view! { <MapsBlock run /> }.into_any())
}

#[cfg_attr(scalebook_split, wasm_split(timeline, wasm_split_path = ::leptos::wasm_split, fallible))]
fn timeline_block(run: Option<RunId>, recorded: Option<String>) -> Result<AnyView, LoadError> {
    Ok(match recorded {
        Some(name) => view! { <RecordedTimeline name /> }.into_any(),
        None => view! { <TimelineBlock run /> }.into_any(),
    })
}
