//! One item of this project's own source, fetched from the server as the file is now (so the
//! text around it can never describe code that no longer runs), with its file, item and lines.

use leptos::prelude::*;
use serde::Deserialize;

use crate::library::{load, when_loaded};
use crate::net::urls;
use scalebook_page::markdown::to_html;

/// What `api/code` answers (and the static edition's file of a listing holds).
#[derive(Debug, Clone, Deserialize)]
struct Snippet {
    path: String,
    item: String,
    first_line: usize,
    last_line: usize,
    text: String,
}

#[component]
pub fn CodeBlock(path: String, item: String, caption: String) -> impl IntoView {
    let snippet = load("source", urls::code_listing(&path, &item), |text| serde_json::from_str::<Snippet>(text).map_err(|e| e.to_string()));
    view! {
        <figure class="block code" data-path=path.clone() data-item=item.clone()>
            {when_loaded("source", move || snippet.into_future(), |s| {
                view! {
                    <figcaption>
                        <code>{s.path.clone()}</code>" — "<code>{s.item.clone()}</code>
                        {format!(" (lines {}–{})", s.first_line, s.last_line)}
                    </figcaption>
                    <pre><code class="language-rust">{s.text.clone()}</code></pre>
                }
            })}
            {(!caption.is_empty()).then(|| view! { <div class="caption" inner_html=to_html(&caption)></div> })}
        </figure>
    }
}
