//! The static edition (`scalebook export DIR`): the page and every file it reads, written to a
//! directory any static web server can serve, with no Scalebook behind it. The export and the
//! page agree here on how the page knows it is that edition and where it finds what a server
//! would have answered with a query.

/// The `<meta name=…>` the export writes into the page: the page reads it before anything
/// else, so it never opens a WebSocket that no server will answer. A marker in the page itself,
/// not a file fetched at boot, holds under any path prefix and costs no request.
pub const META_NAME: &str = "scalebook-edition";

/// The marker's `content` in the static edition.
pub const STATIC: &str = "static";

/// The marker as the export writes it into the page's `<head>`.
pub fn meta_tag() -> String {
    format!(r#"<meta name="{META_NAME}" content="{STATIC}">"#)
}

/// Where the static edition keeps the listing of a `code` block (item `item` of the source file
/// `path`), relative to the API's directory: a server answers `api/code?path=…&item=…`, and a
/// static server answers no query, so each listing is a file of its own. Stable, and one name
/// per listing: the path's segments as directories (a source path is plain, relative segments),
/// then the item with `::` read as `.` (an item is Rust names, which never hold a `.`).
pub fn code_listing(path: &str, item: &str) -> String {
    format!("code/{path}/{}.json", item.replace("::", "."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_are_files_named_by_their_path_and_item() {
        assert_eq!(code_listing("shared/src/layout/groups.rs", "Layout::groups"), "code/shared/src/layout/groups.rs/Layout.groups.json");
        assert_eq!(code_listing("backend/trainer/src/train/mod.rs", "train"), "code/backend/trainer/src/train/mod.rs/train.json");
        assert_ne!(code_listing("a.rs", "A::b"), code_listing("a.rs", "A_b"));
    }

    #[test]
    fn the_marker_is_one_meta_element() {
        assert_eq!(meta_tag(), r#"<meta name="scalebook-edition" content="static">"#);
    }
}
