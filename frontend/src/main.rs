//! Scalebook's browser notebook. Everything it computes (layouts, configs) comes from
//! `scalebook-shared`, the same code the server and the trainer run.

mod app;
mod layout_explorer;

fn main() {
    console_error_panic_hook::set_once();
    if let Some(loading) = leptos::prelude::document().get_element_by_id("loading") {
        loading.remove();
    }
    leptos::mount::mount_to_body(app::App);
}
