//! The tutorial's chapters: Markdown files under `static/chapters/`, listed in order in
//! `chapters/index.json`, so instructors edit the text without rebuilding anything. Each
//! chapter has its own URL (`#/slug`); the part after `#` never reaches the server or the
//! proxy, so deep links work under any prefix.

pub mod markdown;
mod page;
mod toc;

pub use page::ChapterPage;
pub use toc::{Pager, TableOfContents};

pub use crate::routing::{href, navigate, slug_from_hash};

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChapterIndex {
    pub chapters: Vec<ChapterEntry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChapterEntry {
    /// The URL name and the file name (`chapters/<slug>.md`).
    pub slug: String,
    pub title: String,
}

impl ChapterIndex {
    pub fn position(&self, slug: &str) -> Option<usize> {
        self.chapters.iter().position(|c| c.slug == slug)
    }

    /// The chapter before (`-1`) or after (`+1`) `slug`.
    pub fn neighbour(&self, slug: &str, step: isize) -> Option<&ChapterEntry> {
        let at = self.position(slug)?;
        self.chapters.get(at.checked_add_signed(step)?)
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    fn index() -> ChapterIndex {
        serde_json::from_str(r#"{"chapters": [{"slug": "a", "title": "A"}, {"slug": "b", "title": "B"}]}"#).unwrap()
    }

    #[wasm_bindgen_test]
    fn hashes_name_chapters() {
        assert_eq!(slug_from_hash("#/rank-groups"), Some("rank-groups".into()));
        assert_eq!(slug_from_hash("#rank-groups/"), Some("rank-groups".into()));
        assert_eq!(slug_from_hash(""), None);
        assert_eq!(slug_from_hash("#/"), None);
        assert_eq!(href("b"), "#/b");
    }

    #[wasm_bindgen_test]
    fn neighbours_stop_at_the_ends() {
        let index = index();
        assert_eq!(index.neighbour("a", 1).map(|c| c.slug.as_str()), Some("b"));
        assert_eq!(index.neighbour("a", -1), None);
        assert_eq!(index.neighbour("b", 1), None);
        assert_eq!(index.neighbour("zz", 1), None);
    }
}
