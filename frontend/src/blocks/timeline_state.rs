//! The timeline view's signals: the window shown, what the pointer is over, a drag under way,
//! the bars and lanes drawn for the window, and what the pointer and the wheel do to them, so
//! the component itself only lays them out. What they compute is `scalebook_page`'s timeline
//! drawing.

use std::sync::Arc;

use leptos::ev::{MouseEvent, PointerEvent, WheelEvent};
use leptos::prelude::*;
use scalebook_shared::profile::trace::{Bar, Timeline, Window, bars};

use super::timeline_drawing::{
    LABEL_WIDTH, LanePicture, Layout, describe_at, dragged, fraction_at, picture, plot_pixels, to_drawing, wheel_factor, window_line,
    window_of_bar_at,
};

/// The window shown and the span it stays inside, owned by whoever draws the view: a view
/// drawn again from a finer excerpt of the same traces shows the same window.
#[derive(Clone, Copy)]
pub struct Shown {
    pub window: RwSignal<Window>,
    /// The whole trace: no window reaches past it.
    pub bounds: Window,
}

impl Shown {
    /// The whole of `timeline`, shown from its start to its end.
    pub fn whole(timeline: &Timeline) -> Shown {
        let bounds = timeline.bounds();
        Shown { window: RwSignal::new(bounds), bounds }
    }
}

#[derive(Clone, Copy)]
pub struct TimelineState {
    timeline: StoredValue<Arc<Timeline>>,
    pub layout: StoredValue<Arc<Layout>>,
    /// The whole trace: no window reaches past it.
    pub bounds: Window,
    /// The drawing's height in SVG units.
    pub height: f64,
    /// The part of the trace shown.
    pub window: RwSignal<Window>,
    /// What the pointer is over, in words.
    pub hover: RwSignal<Option<String>>,
    /// Where a drag began: the pointer's x (SVG units) and the window then.
    pub drag: StoredValue<Option<(f64, Window)>>,
    /// The bars the window shows at this width.
    drawn: Memo<Arc<Vec<Bar>>>,
    pub lanes: Memo<Vec<LanePicture>>,
    pub svg: NodeRef<leptos::svg::Svg>,
}

impl TimelineState {
    pub fn new(timeline: Arc<Timeline>, Shown { window, bounds }: Shown) -> TimelineState {
        let layout = Arc::new(Layout::new(&timeline));
        let height = layout.height;
        let drawn: Memo<Arc<Vec<Bar>>> = {
            let timeline = timeline.clone();
            Memo::new(move |_| Arc::new(bars(&timeline, window.get(), plot_pixels())))
        };
        let lanes: Memo<Vec<LanePicture>> = {
            let (timeline, layout) = (timeline.clone(), layout.clone());
            Memo::new(move |_| drawn.with(|d| picture(&timeline, &layout, window.get(), d)))
        };
        TimelineState {
            timeline: StoredValue::new(timeline),
            layout: StoredValue::new(layout),
            bounds,
            height,
            window,
            hover: RwSignal::new(None),
            drag: StoredValue::new(None),
            drawn,
            lanes,
            svg: NodeRef::new(),
        }
    }

    /// The pointer at `(client_x, client_y)` in the drawing's units, once it is on the page.
    fn pointer_at(&self, client_x: i32, client_y: i32) -> Option<(f64, f64)> {
        let rect = self.svg.get()?.get_bounding_client_rect();
        let (client, origin, size) = ((f64::from(client_x), f64::from(client_y)), (rect.left(), rect.top()), (rect.width(), rect.height()));
        Some(to_drawing(client, origin, size, self.height))
    }

    /// Zooms by `factor` (below 1 zooms in) around `anchor`, a fraction of the plot's width.
    pub fn zoom(&self, factor: f64, anchor: f64) {
        let bounds = self.bounds;
        self.window.update(|w| *w = w.zoom(factor, anchor, bounds));
    }

    /// Pans by `fraction` of the window's width (positive: later).
    pub fn pan(&self, fraction: f64) {
        let bounds = self.bounds;
        self.window.update(|w| *w = w.pan(fraction, bounds));
    }

    /// The pointer moved: a drag pans, else the line below names what it is over.
    pub fn on_move(&self, ev: PointerEvent) {
        let Some((x, y)) = self.pointer_at(ev.client_x(), ev.client_y()) else { return };
        if let Some((x0, start)) = self.drag.get_value() {
            self.window.set(dragged(start, x0, x, self.bounds));
            return;
        }
        let window = self.window.get_untracked();
        let said = self
            .timeline
            .with_value(|timeline| self.layout.with_value(|layout| self.drawn.with(|d| describe_at(timeline, layout, window, d, x, y))));
        self.hover.set(said);
    }

    /// A press on the plot begins a drag (the labels' column is not the plot).
    pub fn on_down(&self, ev: PointerEvent) {
        let Some((x, _)) = self.pointer_at(ev.client_x(), ev.client_y()) else { return };
        if x >= LABEL_WIDTH {
            self.drag.set_value(Some((x, self.window.get_untracked())));
            if let Some(svg) = self.svg.get() {
                let _ = svg.set_pointer_capture(ev.pointer_id());
            }
        }
    }

    /// The wheel over the plot zooms around the pointer (and does not scroll the page).
    pub fn on_wheel(&self, ev: WheelEvent) {
        let Some((x, _)) = self.pointer_at(ev.client_x(), ev.client_y()) else { return };
        if x < LABEL_WIDTH {
            return;
        }
        ev.prevent_default();
        self.zoom(wheel_factor(ev.delta_y()), fraction_at(x));
    }

    /// A double click zooms to the bar under the pointer.
    pub fn on_double_click(&self, ev: MouseEvent) {
        let Some((x, y)) = self.pointer_at(ev.client_x(), ev.client_y()) else { return };
        let window = self.window.get_untracked();
        if let Some(w) = self.layout.with_value(|layout| self.drawn.with(|d| window_of_bar_at(layout, window, d, x, y))) {
            self.window.set(w.inside(self.bounds));
        }
    }

    /// The window shown, in words.
    pub fn shown(&self) -> String {
        window_line(self.window.get(), self.bounds)
    }
}
