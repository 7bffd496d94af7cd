//! The chapter on screen as the classroom sees it, numbered as a presentation numbers it, so
//! the instructor's and the learners' pages count alike: its blocks (every `.block` of the
//! article, broken ones included) and its top-level elements (each block, and each paragraph,
//! heading, list, table... of the prose between them).

use leptos::prelude::{document, window};
use wasm_bindgen::JsCast;

use super::model::{self, Place, Scroll};

fn blocks() -> Vec<web_sys::Element> {
    let Ok(list) = document().query_selector_all("article.chapter .block") else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.item(i)?.dyn_into().ok()).collect()
}

/// The element children of `parent`, in order.
fn children(parent: &web_sys::Element) -> impl Iterator<Item = web_sys::Element> {
    std::iter::successors(parent.first_element_child(), web_sys::Element::next_element_sibling)
}

/// The chapter's top-level elements: the article's children, except that each run of prose
/// (one wrapper holding the Markdown's HTML) counts by its own children.
fn elements() -> Vec<web_sys::Element> {
    let Some(article) = document().query_selector("article.chapter").ok().flatten() else { return Vec::new() };
    children(&article)
        .flat_map(|child| if child.matches(".prose").unwrap_or(false) { children(&child).collect() } else { vec![child] })
        .collect()
}

fn nth(list: Vec<web_sys::Element>, position: u32) -> Option<web_sys::Element> {
    list.into_iter().nth(usize::try_from(position).ok()?)
}

/// The top of the window that the reader sees: below the sticky header.
fn top() -> f64 {
    let header = document().query_selector("header.top").ok().flatten();
    header.map_or(0.0, |h| h.get_bounding_client_rect().bottom().max(0.0))
}

fn first_in_view(list: &[web_sys::Element], top: f64) -> Option<u32> {
    model::first_in_view(list.iter().map(|e| e.get_bounding_client_rect().bottom()), top)
}

/// Where the page is now (see [`model::first_in_view`]).
pub fn place() -> Place {
    let top = top();
    Place { block: first_in_view(&blocks(), top), element: first_in_view(&elements(), top) }
}

/// The position of the block holding `element`.
pub fn position_of(element: &web_sys::Element) -> Option<u32> {
    let node: &web_sys::Node = element;
    let position = blocks().iter().position(|b| b.contains(Some(node)))?;
    u32::try_from(position).ok()
}

/// Brings the element or block to the top of the window, below the header, at once: a
/// follower should be there within a quarter of a second, not watch the page glide.
pub fn scroll_to(target: Scroll) {
    let found = match target {
        Scroll::Element(position) => nth(elements(), position),
        Scroll::Block(position) => nth(blocks(), position),
        Scroll::Top => return window().scroll_to_with_x_and_y(0.0, 0.0),
    };
    if let Some(element) = found {
        let window = window();
        let y = model::scroll_target(window.scroll_y().unwrap_or(0.0), element.get_bounding_client_rect().top(), top());
        window.scroll_to_with_x_and_y(window.scroll_x().unwrap_or(0.0), y);
    }
}

/// The answer (`<details>`) of the quiz block at `position`.
fn answer(position: u32) -> Option<web_sys::Element> {
    nth(blocks(), position)?.query_selector("details").ok().flatten()
}

/// Opens or closes the answer of the quiz at `position` (its `<details>`).
pub fn set_answer_open(position: u32, open: bool) {
    let Some(details) = answer(position) else { return };
    let _ = if open { details.set_attribute("open", "") } else { details.remove_attribute("open") };
}

/// Scrolls the quiz at `position`'s answer into view, at once, if any of it is out of view
/// (see [`model::reveal_target`]).
pub fn reveal_answer(position: u32) {
    let Some(details) = answer(position) else { return };
    let window = window();
    let rect = details.get_bounding_client_rect();
    let bottom = window.inner_height().ok().and_then(|h| h.as_f64()).unwrap_or(0.0);
    if let Some(y) = model::reveal_target(window.scroll_y().unwrap_or(0.0), rect.top(), rect.bottom(), top(), bottom) {
        window.scroll_to_with_x_and_y(window.scroll_x().unwrap_or(0.0), y);
    }
}

#[cfg(test)]
mod tests {
    use leptos::prelude::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::testing::{mount, settle};

    /// A chapter as the page renders it: prose, a block, more prose, with room to scroll.
    fn chapter() -> impl IntoView {
        let tall = "height: 300px; margin: 0";
        view! {
            <article class="chapter">
                <div class="prose"><h1 style=tall>"Title"</h1><p style=tall>"Opening"</p><p style=tall>"More"</p></div>
                <section class="block" style=tall>"A block"</section>
                <div class="prose"><p style=tall>"After"</p><ul style=tall><li>"a list"</li></ul></div>
                <div style="height: 3000px"></div>
            </article>
        }
    }

    #[wasm_bindgen_test]
    async fn elements_count_the_proses_children_and_each_block_and_a_follower_lands_on_one() {
        let page = mount(chapter);
        settle().await;
        // Title, Opening, More, the block, After, the list, and the spacer: prose counts by its children.
        assert_eq!(elements().len(), 7);
        let text = |position: u32| nth(elements(), position).and_then(|e| e.text_content()).unwrap_or_default();
        assert_eq!((text(1), text(3), text(5)), ("Opening".into(), "A block".into(), "a list".into()));

        // The second paragraph of the opening text, before any block: at the top, and counted so.
        scroll_to(Scroll::Element(2));
        assert_eq!(place(), Place { block: Some(0), element: Some(2) });
        let top = nth(elements(), 2).unwrap().get_bounding_client_rect().top();
        assert!(top.abs() < 1.0, "the paragraph is at the window's top: {top}");
        // The block itself, by its number among blocks.
        scroll_to(Scroll::Block(0));
        assert_eq!(place(), Place { block: Some(0), element: Some(3) });
        scroll_to(Scroll::Element(4));
        assert_eq!(place(), Place { block: None, element: Some(4) });
        window().scroll_to_with_x_and_y(0.0, 0.0);
        drop(page);
    }

    #[wasm_bindgen_test]
    async fn an_answer_opened_below_the_window_is_brought_into_view() {
        let page = mount(|| {
            view! {
                <article class="chapter">
                    <div class="prose"><p style="height: 300px; margin: 0">"Opening"</p></div>
                    <section class="block quiz">
                        <details><summary>"Answer"</summary><p style="height: 200px; margin: 0">"Because."</p></details>
                    </section>
                    <div style="height: 3000px"></div>
                </article>
            }
        });
        settle().await;
        let height = window().inner_height().unwrap().as_f64().unwrap();
        // The answer's summary just shows at the window's bottom edge: opened, its text is below.
        let summary_top = answer(0).unwrap().get_bounding_client_rect().top() + window().scroll_y().unwrap();
        window().scroll_to_with_x_and_y(0.0, summary_top - height + 10.0);
        set_answer_open(0, true);
        reveal_answer(0);
        let rect = answer(0).unwrap().get_bounding_client_rect();
        assert!(
            rect.bottom() <= height + 0.5 && rect.top() >= 0.0,
            "the answer spans {}..{} of a window {height} high",
            rect.top(),
            rect.bottom()
        );
        // In view already: nothing moves.
        let before = window().scroll_y().unwrap();
        reveal_answer(0);
        assert_eq!(window().scroll_y().unwrap(), before);
        window().scroll_to_with_x_and_y(0.0, 0.0);
        drop(page);
    }
}
