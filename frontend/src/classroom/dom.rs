//! The chapter on screen as the classroom sees it: its blocks in page order, numbered from 0 as
//! a presentation numbers them (every `.block` of the article, broken ones included, so the
//! instructor's and the learners' pages count alike).

use leptos::prelude::document;
use wasm_bindgen::JsCast;

use super::model;

fn blocks() -> Vec<web_sys::Element> {
    let Ok(list) = document().query_selector_all("article.chapter .block") else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.item(i)?.dyn_into().ok()).collect()
}

fn block(position: u32) -> Option<web_sys::Element> {
    blocks().into_iter().nth(usize::try_from(position).ok()?)
}

/// The position of the block in view (see [`model::block_in_view`]).
pub fn block_in_view() -> Option<u32> {
    model::block_in_view(blocks().iter().map(|b| b.get_bounding_client_rect().bottom()))
}

/// The position of the block holding `element`.
pub fn position_of(element: &web_sys::Element) -> Option<u32> {
    let node: &web_sys::Node = element;
    let position = blocks().iter().position(|b| b.contains(Some(node)))?;
    u32::try_from(position).ok()
}

/// Brings block `position` to the top of the window, at once: a follower should be there
/// within a quarter of a second, not watch the page glide.
pub fn scroll_to(position: u32) {
    if let Some(block) = block(position) {
        block.scroll_into_view_with_bool(true);
    }
}

/// Opens or closes the answer of the quiz at `position` (its `<details>`).
pub fn set_answer_open(position: u32, open: bool) {
    let Some(details) = block(position).and_then(|b| b.query_selector("details").ok().flatten()) else { return };
    let _ = if open { details.set_attribute("open", "") } else { details.remove_attribute("open") };
}
