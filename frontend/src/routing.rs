//! Where the page is: the chapter its URL's fragment names (`#/slug`). The fragment never reaches
//! the server or a proxy, so links work under any prefix.

/// The chapter a location hash names: `#/rank-groups` → `rank-groups`.
pub fn slug_from_hash(hash: &str) -> Option<String> {
    let slug = hash.trim_start_matches('#').trim_start_matches('/').trim_end_matches('/');
    (!slug.is_empty()).then(|| slug.to_owned())
}

/// The link to chapter `slug`.
pub fn href(slug: &str) -> String {
    format!("#/{slug}")
}

/// Goes to chapter `slug` (the `hashchange` listener updates the page).
pub fn navigate(slug: &str) {
    let _ = leptos::prelude::window().location().set_hash(&format!("/{slug}"));
}
