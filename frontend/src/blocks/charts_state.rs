//! The charts block's signals: the page-wide axis and smoothing, the block's own log scale,
//! baseline, legend and charts, the event files dropped on it and the curves all of them make,
//! so the component itself only lays them out. What they decide is `scalebook_page`'s charts
//! model.

use std::collections::HashSet;

use leptos::prelude::*;
use leptos::task::spawn_local;
use scalebook_page::blocks::charts_model::{self, Curve};
use scalebook_page::runs::names;
use wasm_bindgen_futures::JsFuture;

use super::ChartSpec;
use super::chart_drawing::{Overlay, Settings, Source};
use crate::classroom::{ChartControls, Classroom};
use crate::library::{Library, Ready};
use crate::routing::slug_from_hash;
use crate::runs::{Runs, start_wall};

#[derive(Clone, Copy)]
pub struct ChartsState {
    /// The page's axis and smoothing: every chart block shows the same, so one presentation
    /// carries them.
    controls: RwSignal<Option<ChartControls>>,
    /// The spec's axis and smoothing, shown while the page has none.
    own: ChartControls,
    pub log: RwSignal<bool>,
    /// Whether the tutorial's baseline is drawn.
    pub baseline: RwSignal<bool>,
    /// The keys of the curves the legend hides.
    pub hidden: RwSignal<HashSet<String>>,
    /// The tags charted, one chart each, in order.
    pub tags: RwSignal<Vec<String>>,
    /// The event files dropped on the block (this page only).
    pub overlays: RwSignal<Vec<Overlay>>,
    /// Why each dropped file that was not read could not be.
    pub refused: RwSignal<Vec<String>>,
    /// Whether a file is being dragged over the block.
    pub dragging: RwSignal<bool>,
    /// Every curve the block may draw.
    pub sources: Memo<Vec<Source>>,
    /// The curves the legend leaves shown.
    pub visible: Memo<Vec<Source>>,
    pub settings: Memo<Settings>,
}

impl ChartsState {
    pub fn new(spec: ChartSpec) -> ChartsState {
        let runs = expect_context::<Runs>();
        let library = expect_context::<Library>();
        // The chapter's first chart block starts the page's axis and smoothing from its spec.
        let own = ChartControls { axis: spec.axis, smoothing: spec.smoothing };
        let classroom = use_context::<Classroom>();
        let controls = classroom.map_or_else(|| RwSignal::new(None), |classroom| classroom.charts);
        if controls.get_untracked().is_none() {
            controls.set(Some(own));
        }
        let log = RwSignal::new(spec.log);
        let baseline = RwSignal::new(spec.baseline);
        let hidden = RwSignal::new(HashSet::new());
        let overlays = RwSignal::new(Vec::<Overlay>::new());
        // The chapter this block is in: its charts show the runs launched from it.
        let chapter = slug_from_hash(&window().location().hash().unwrap_or_default());
        let sources = Memo::new(move |_| {
            // A following page shows what the presentation charts; its own list, otherwise.
            let shown = match classroom.and_then(Classroom::presented_charts) {
                Some(view) => view.named(),
                None => runs.names.with(|names| runs.charted.with(|charted| names::named_in_chapter(charted, names, chapter.as_deref()))),
            };
            let charted: Vec<Option<Curve>> = shown
                .iter()
                .map(|(id, name)| {
                    let series = runs.stream(id)?.series.get();
                    let config = runs.record(id).map(|r| r.config);
                    let label = names::label(id, name.as_deref(), config.as_deref());
                    Some(Curve::run(id.to_string(), label, start_wall(&series).unwrap_or(0.0), series))
                })
                .collect();
            let dropped = overlays.get().into_iter().map(|overlay| {
                let start = start_wall(&overlay.series).unwrap_or(0.0);
                Curve::overlay(overlay, start)
            });
            let shown_baseline = baseline.get().then(|| library.baseline.ready()).flatten().map(|series| (*series).clone());
            charts_model::sources(charted, dropped.collect(), shown_baseline)
        });
        let visible = Memo::new(move |_| sources.with(|all| hidden.with(|h| charts_model::visible(all, h))));
        let settings = Memo::new(move |_| {
            let shown = controls.get().unwrap_or(own);
            Settings {
                axis: shown.axis,
                smoothing: shown.smoothing,
                log: log.get(),
                utc_offset_minutes: -(js_sys::Date::new_0().get_timezone_offset() as i32),
            }
        });
        ChartsState {
            controls,
            own,
            log,
            baseline,
            hidden,
            tags: RwSignal::new(spec.tags),
            overlays,
            refused: RwSignal::new(Vec::new()),
            dragging: RwSignal::new(false),
            sources,
            visible,
            settings,
        }
    }

    /// The axis and smoothing shown: the page's.
    pub fn shown(&self) -> ChartControls {
        self.controls.get().unwrap_or(self.own)
    }

    /// Changes the page's axis or smoothing.
    pub fn change(&self, edit: &dyn Fn(&mut ChartControls)) {
        let own = self.own;
        self.controls.update(|c| edit(c.get_or_insert(own)));
    }

    /// The tags "add a chart" offers.
    pub fn available(&self) -> Vec<String> {
        let shown = self.tags.get();
        self.sources.with(|sources| charts_model::available_tags(sources, &shown))
    }

    /// Reads the files dropped on the block, in the browser: each event file is overlaid (with
    /// charts for its tags if the block shows none of them), any other file explained.
    pub fn drop_files(&self, ev: web_sys::DragEvent) {
        ev.prevent_default();
        self.dragging.set(false);
        let Some(files) = ev.data_transfer().and_then(|transfer| transfer.files()) else { return };
        self.refused.set(Vec::new());
        for file in (0..files.length()).filter_map(|i| files.get(i)) {
            let state = *self;
            spawn_local(async move {
                match read_dropped(&file).await {
                    Ok(overlay) => {
                        state.tags.update(|shown| charts_model::add_tags_for(shown, &overlay));
                        state.overlays.update(|all| charts_model::add_overlay(all, overlay));
                    }
                    Err(message) => state.refused.update(|all| all.push(message)),
                }
            });
        }
    }
}

/// A dropped file's scalars, or the message the block shows for it.
async fn read_dropped(file: &web_sys::File) -> Result<Overlay, String> {
    let name = file.name();
    let bytes = JsFuture::from(file.array_buffer()).await.map_err(|_| format!("{name}: the browser cannot read this file"))?;
    Overlay::read(&name, &js_sys::Uint8Array::new(&bytes).to_vec())
}
