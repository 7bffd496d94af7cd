//! The table of contents and the previous/next links.

use leptos::prelude::*;

use super::{ChapterIndex, href};

#[component]
pub fn TableOfContents(index: ChapterIndex, current: Signal<String>) -> impl IntoView {
    let items = index
        .chapters
        .into_iter()
        .enumerate()
        .map(|(i, chapter)| {
            let slug = chapter.slug.clone();
            let is_current = move || current.with(|c| *c == slug);
            view! {
                <li>
                    <a href=href(&chapter.slug) aria-current=move || is_current().then_some("page")>
                        <span class="number">{i + 1}". "</span>
                        {chapter.title}
                    </a>
                </li>
            }
        })
        .collect_view();
    view! {
        <nav class="toc" aria-label="Chapters">
            <ol>{items}</ol>
            <p class="muted keys">"Keys: ← previous, → next chapter"</p>
        </nav>
    }
}

#[component]
pub fn Pager(index: ChapterIndex, current: Signal<String>) -> impl IntoView {
    let link = move |step: isize, rel: &'static str, arrow: &'static str| {
        let index = index.clone();
        move || {
            current.with(|slug| index.neighbour(slug, step).cloned()).map(|chapter| {
                let label = if step < 0 { format!("{arrow} {}", chapter.title) } else { format!("{} {arrow}", chapter.title) };
                view! { <a class=format!("pager-{rel}") rel=rel href=href(&chapter.slug)>{label}</a> }
            })
        }
    };
    view! {
        <nav class="pager" aria-label="Previous and next chapter">
            {link(-1, "prev", "←")}
            <span class="spacer"></span>
            {link(1, "next", "→")}
        </nav>
    }
}
