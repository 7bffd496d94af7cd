//! The tutorial's chapters: Markdown files under `static/chapters/`, listed in order in
//! `chapters/index.json`, so instructors edit the text without rebuilding anything. Each
//! chapter has its own URL (`#/slug`); the part after `#` never reaches the server or the
//! proxy, so deep links work under any prefix.

mod page;
mod toc;

pub use page::ChapterPage;
pub use toc::{Pager, TableOfContents};

pub use scalebook_page::chapters::{ChapterIndex, markdown};

pub use crate::routing::{href, navigate, slug_from_hash};
