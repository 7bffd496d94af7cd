//! The page frame.

use leptos::prelude::*;

use crate::layout_explorer::LayoutExplorer;

#[component]
pub fn App() -> impl IntoView {
    view! {
        <header class="top">
            <h1>"Scalebook"</h1>
            <span class="tagline">"Deep Learning at Scale, step by step"</span>
        </header>
        <main>
            <LayoutExplorer />
        </main>
    }
}
