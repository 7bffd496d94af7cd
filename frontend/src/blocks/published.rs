//! A run the sources publish, charted from `shared::published` with the source it comes from,
//! so a chapter can set the tutorial's own figures beside what a learner measures here.

use leptos::prelude::*;
use scalebook_shared::published::Table;

use super::picture_view::PictureFigure;
use super::published_chart::bar_chart;

#[component]
pub fn PublishedBlock(table: &'static Table, caption: String) -> impl IntoView {
    view! {
        <PictureFigure picture=bar_chart(table) kind="published" name=table.name.to_owned() source=Some(table.citation()) caption />
    }
}

#[cfg(test)]
mod tests {
    use scalebook_shared::published;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::testing::{mount, settle};

    #[wasm_bindgen_test]
    async fn the_chart_names_its_source_under_it() {
        let table = published::table("sc22-ddp-knobs").unwrap();
        let block = mount(move || view! { <PublishedBlock table caption="Tuning *two* knobs.".to_owned() /> });
        settle().await;
        assert_eq!(block.attr("figure.published", "data-name").as_deref(), Some("sc22-ddp-knobs"));
        assert_eq!(block.root.query_selector_all("svg rect.bar").unwrap().length(), 5);
        assert!(block.text("svg").contains("1271"), "the baseline's last epoch at its bar");
        assert_eq!(block.text("p.source"), "Source: SC22 README (rows 004-47, 004-48, 004-49, 004-50)");
        assert!(block.find("figcaption em").is_some(), "the caption is Markdown");
        let tip = block.find("svg circle.dot title").and_then(|t| t.text_content()).unwrap_or_default();
        assert_eq!(tip, "epoch 2: 1061.4512304471264 samples/s");
    }
}
