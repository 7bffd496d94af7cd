//! The page frame: header with the classroom controls and the connection indicator (it stays at
//! the top of the window), the table of contents, the current chapter (from the URL's
//! `#/slug`), previous/next links, and keyboard navigation.

use std::sync::Arc;

use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

use crate::chapters::{self, ChapterIndex, ChapterPage, Pager, TableOfContents};
use crate::classroom::{Classroom, ClassroomControls};
use crate::edition::{self, StaticBanner};
use crate::kept::Kept;
use crate::library::{Library, Ready, load, when_loaded};
use crate::net::urls;
use crate::runs::Runs;

#[component]
pub fn App() -> impl IntoView {
    let library = Library::load();
    provide_context(library);
    let runs = Runs::start();
    provide_context(runs);
    provide_context(Kept::new());

    let index = load("table of contents", urls::resolve("chapters/index.json"), |text| {
        serde_json::from_str::<ChapterIndex>(text).map_err(|e| format!("chapters/index.json: {e}"))
    });

    let hash_slug = RwSignal::new(chapters::slug_from_hash(&window().location().hash().unwrap_or_default()));
    // Without a hash, the first chapter (the address stays as the user typed it).
    let current = Signal::derive(move || {
        hash_slug.get().or_else(|| index.ready().and_then(|i| i.chapters.first().map(|c| c.slug.clone()))).unwrap_or_default()
    });
    let classroom = Classroom::start(runs, current);
    provide_context(classroom);
    let _ = window_event_listener(ev::hashchange, move |_| {
        // The link pasted into this tab: its token is taken (and taken out of the address)
        // before the fragment is read as a chapter.
        if urls::adopt_token_from_address() {
            runs.token_arrived();
            library.retry_failed();
        }
        let slug = chapters::slug_from_hash(&window().location().hash().unwrap_or_default());
        if let Some(slug) = &slug {
            classroom.navigated(slug);
        }
        hash_slug.set(slug);
    });
    let _ = window_event_listener(ev::keydown, move |ev| {
        let step = match ev.key().as_str() {
            "ArrowLeft" => -1,
            "ArrowRight" => 1,
            _ => return,
        };
        if ev.default_prevented() || ev.alt_key() || ev.ctrl_key() || ev.meta_key() || ev.shift_key() || typing_in(&ev) {
            return;
        }
        let target = untrack(|| index.ready()).and_then(|i| current.with_untracked(|c| i.neighbour(c, step).cloned()));
        if let Some(chapter) = target {
            chapters::navigate(&chapter.slug);
        }
    });

    let header = NodeRef::<leptos::html::Header>::new();
    header.on_load(track_height);

    view! {
        <header class="top" node_ref=header>
            <h1>"Scalebook"</h1>
            <span class="tagline">"Deep Learning at Scale, step by step"</span>
            <span class="spacer"></span>
            <ClassroomControls />
            {match edition::is_static() {
                true => view! { <span class="edition">"Static edition"</span> }.into_any(),
                false => view! { <ConnectionBadge runs /> }.into_any(),
            }}
        </header>
        {edition::is_static().then(|| view! { <StaticBanner /> })}
        <Notice runs />
        {when_loaded("table of contents", move || index.into_future(), move |index: Arc<ChapterIndex>| {
            let index = ChapterIndex::clone(&index);
            let page_index = index.clone();
            view! {
                <div class="frame">
                    <TableOfContents index=index.clone() current />
                    <main id="main">
                        {move || chapter_view(&page_index, &current.get())}
                        <Pager index=index.clone() current />
                    </main>
                </div>
            }
        })}
    }
}

fn chapter_view(index: &ChapterIndex, slug: &str) -> AnyView {
    match index.position(slug).map(|at| index.chapters[at].clone()) {
        Some(chapter) => {
            document().set_title(&format!("{} — Scalebook", chapter.title));
            view! { <ChapterPage slug=chapter.slug title=chapter.title /> }.into_any()
        }
        None => view! {
            <p class="error" role="alert">"There is no chapter “" {slug.to_owned()} "”. Pick one from the contents."</p>
        }
        .into_any(),
    }
}

/// Keeps `--header-height` (on the root element) at the sticky header's height, which grows when
/// its controls wrap: the contents' sticky table and jumps to anchors (`scroll-padding-top`)
/// then sit below the header, not under it.
fn track_height(header: web_sys::HtmlElement) {
    let measured = header.clone();
    let resized = Closure::<dyn FnMut()>::new(move || {
        let height = measured.get_bounding_client_rect().height();
        if let Some(root) = document().document_element().and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok()) {
            let _ = root.style().set_property("--header-height", &format!("{height}px"));
        }
    });
    if let Ok(observer) = web_sys::ResizeObserver::new(resized.as_ref().unchecked_ref()) {
        observer.observe(&header);
    }
    // The header lives as long as the page, and so does its observer's callback.
    resized.forget();
}

/// Whether a key press belongs to a form field (arrow keys move its cursor, not the chapter).
fn typing_in(ev: &web_sys::KeyboardEvent) -> bool {
    let Some(element) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlElement>().ok()) else { return false };
    matches!(element.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT") || element.is_content_editable()
}

#[component]
fn ConnectionBadge(runs: Runs) -> impl IntoView {
    let state = runs.connection;
    view! {
        <span class="connection" data-state=move || state.get().name() role="status" aria-live="polite">
            <span class="dot" aria-hidden="true"></span>
            {move || format!("Server: {}", state.get().label())}
        </span>
    }
}

/// The last error the server reported that no block was waiting for.
#[component]
fn Notice(runs: Runs) -> impl IntoView {
    move || {
        runs.notice.get().map(|message| {
            view! {
                <div class="notice" role="alert">
                    <span>{message}</span>
                    <button type="button" on:click=move |_| runs.notice.set(None)>"Dismiss"</button>
                </div>
            }
        })
    }
}
