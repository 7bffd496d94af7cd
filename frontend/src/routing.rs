//! Where the page is: the chapter its URL's fragment names (`#/slug`). The fragment never reaches
//! the server or a proxy, so links work under any prefix.

pub use scalebook_page::chapters::{href, slug_from_hash};

/// Goes to chapter `slug` (the `hashchange` listener updates the page).
pub fn navigate(slug: &str) {
    let _ = leptos::prelude::window().location().set_hash(&format!("/{slug}"));
}
