//! Ids that tie a label to its field on a page of many blocks: unique for the page's life.

use std::sync::atomic::{AtomicU32, Ordering};

/// An element id no other block on the page uses (blocks of one kind may appear twice).
pub fn unique_id(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}
