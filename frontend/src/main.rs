//! Scalebook's browser notebook: the tutorial's chapters with interactive blocks, as Leptos
//! components. What the page computes without a browser (the chapters' grammar, the blocks'
//! models and drawings) is in `scalebook-page`; what the server and the trainer compute too
//! (configs, layouts, estimates, chart arithmetic) in `scalebook-shared`.

mod app;
mod blocks;
mod chapters;
mod classroom;
mod clock;
mod download;
mod edition;
mod ids;
mod kept;
mod library;
mod net;
mod routing;
mod runs;
mod storage;
#[cfg(test)]
mod testing;
mod working;

fn main() {
    console_error_panic_hook::set_once();
    net::urls::adopt_token_from_address();
    if let Some(loading) = leptos::prelude::document().get_element_by_id("loading") {
        loading.remove();
    }
    leptos::mount::mount_to_body(app::App);
}

#[cfg(test)]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);
