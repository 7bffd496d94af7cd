//! One chapter: its Markdown fetched, split into prose and blocks, and rendered. The chapter's
//! blocks share one working config (the editor changes it, the run block launches it).

use leptos::prelude::*;

use super::markdown::{Segment, segments};
use crate::blocks::{Block, Pending};
use crate::classroom::Classroom;
use crate::library::{load, when_loaded};
use crate::net::urls;
use crate::working::WorkingConfig;

const FIRST_RENDER_MARK: &str = "scalebook-first-chapter";

#[component]
pub fn ChapterPage(slug: String, title: String) -> impl IntoView {
    let content = load("chapter", urls::resolve(&format!("chapters/{slug}.md")), |text| Ok(segments(text)));
    provide_context(WorkingConfig::for_chapter(&slug));
    let pending = Pending::new();
    provide_context(pending);
    let classroom = expect_context::<Classroom>();
    classroom.chapter_opened();

    let article = NodeRef::<leptos::html::Article>::new();
    let placed = slug.clone();
    Effect::new(move |_| {
        if content.get().is_some_and(|c| c.is_ok()) {
            // Moving to another chapter starts at its top, with the keyboard focus in it; the
            // first page of a visit keeps the focus where the browser put it. A page following
            // the presentation here is placed by the classroom alone: two scrolls would race.
            if !mark_first_render() && !classroom.places(&placed) {
                window().scroll_to_with_x_and_y(0.0, 0.0);
                if let Some(article) = article.get() {
                    let _ = article.focus();
                }
            }
        }
    });
    // Told from inside the rendered text, so it runs once the blocks are on the page, and
    // every one of them has arrived: a following page then scrolls to the presented block.
    let rendered = slug.clone();
    let show = move |segments: std::sync::Arc<Vec<Segment>>| {
        let rendered = rendered.clone();
        Effect::new(move |_| {
            if pending.settled() {
                classroom.chapter_rendered(&rendered);
            }
        });
        segments.iter().cloned().map(segment_view).collect_view()
    };

    // Busy (for assistive technology, and for tests) until the text and every block are here.
    let busy = move || (content.get().is_none() || !pending.settled()).to_string();
    view! {
        <article class="chapter" node_ref=article tabindex="-1" aria-label=title aria-busy=busy data-chapter=slug>
            {when_loaded("chapter", move || content.into_future(), show)}
        </article>
    }
}

fn segment_view(segment: Segment) -> AnyView {
    match segment {
        Segment::Html(html) => view! { <div class="prose" inner_html=html></div> }.into_any(),
        Segment::Block(spec) => view! { <Block spec /> }.into_any(),
        Segment::Broken { info, reason } => view! {
            <div class="block broken" role="alert">
                <p class="error">"This block cannot be shown: " {reason}</p>
                <code>"```scalebook " {info}</code>
            </div>
        }
        .into_any(),
    }
}

/// Marks when the first chapter's text is on the page (read by the browser test that
/// measures time to first render), once per page load; whether this was that first time.
fn mark_first_render() -> bool {
    let Some(performance) = window().performance() else { return false };
    let first = performance.get_entries_by_name(FIRST_RENDER_MARK).length() == 0;
    if first {
        let _ = performance.mark(FIRST_RENDER_MARK);
    }
    first
}
