//! Scalebook's browser notebook: the tutorial's chapters with interactive blocks. Everything
//! it computes (configs, layouts, estimates, chart arithmetic) comes from `scalebook-shared`,
//! the same code the server and the trainer run.

mod app;
mod blocks;
mod chapters;
mod classroom;
mod download;
mod ids;
mod library;
mod markdown;
mod net;
mod routing;
mod runs;
#[cfg(test)]
mod testing;
mod units;
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
