//! The tutorial's chapters: Markdown files under `static/chapters/`, listed in order in
//! `chapters/index.json`, each with its own URL (`#/slug`), read into prose and blocks.

pub mod markdown;

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

/// The chapter a location hash names: `#/rank-groups` → `rank-groups`.
pub fn slug_from_hash(hash: &str) -> Option<String> {
    let slug = hash.trim_start_matches('#').trim_start_matches('/').trim_end_matches('/');
    (!slug.is_empty()).then(|| slug.to_owned())
}

/// The link to chapter `slug`.
pub fn href(slug: &str) -> String {
    format!("#/{slug}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> ChapterIndex {
        serde_json::from_str(r#"{"chapters": [{"slug": "a", "title": "A"}, {"slug": "b", "title": "B"}]}"#).unwrap()
    }

    #[test]
    fn hashes_name_chapters() {
        assert_eq!(slug_from_hash("#/rank-groups"), Some("rank-groups".into()));
        assert_eq!(slug_from_hash("#rank-groups/"), Some("rank-groups".into()));
        assert_eq!(slug_from_hash(""), None);
        assert_eq!(slug_from_hash("#/"), None);
        assert_eq!(href("b"), "#/b");
    }

    #[test]
    fn neighbours_stop_at_the_ends() {
        let index = index();
        assert_eq!(index.neighbour("a", 1).map(|c| c.slug.as_str()), Some("b"));
        assert_eq!(index.neighbour("a", -1), None);
        assert_eq!(index.neighbour("b", 1), None);
        assert_eq!(index.neighbour("zz", 1), None);
    }
}
