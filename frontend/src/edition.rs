//! Which edition this page is: served by a Scalebook (the default), or the static edition that
//! `scalebook export` writes for any static web server, with no Scalebook behind it. The export
//! marks the page (`scalebook_shared::edition`); the page reads the mark once, before it opens
//! anything, so the static edition never opens a WebSocket nobody answers, and says what it is
//! and how to run Scalebook where it does not work alone.

use leptos::prelude::*;
use scalebook_shared::edition;

thread_local! {
    static STATIC: bool = marked_static();
}

/// Whether this page is the static edition.
pub fn is_static() -> bool {
    STATIC.with(|marked| *marked)
}

fn marked_static() -> bool {
    let selector = format!("meta[name='{}']", edition::META_NAME);
    let marker = document().query_selector(&selector).ok().flatten();
    marker.and_then(|m| m.get_attribute("content")).is_some_and(|content| content == edition::STATIC)
}

/// The README's run command, which sets up, builds and starts Scalebook in a clone of its
/// repository, as the page shows it.
#[component]
pub fn RunItYourself() -> impl IntoView {
    view! {
        <pre class="run-it-yourself"><code>"./scalebook.sh run"</code></pre>
    }
}

/// The line under the header of the static edition: what it is, what works here, and how to
/// run the rest.
#[component]
pub fn StaticBanner() -> impl IntoView {
    view! {
        <aside class="static-edition" role="note" aria-label="Static edition">
            <p>
                <strong>"Scalebook, static edition."</strong>
                " The chapters, rank grids, estimates, pipelines, config checks, quizzes and figures work here, in your browser; "
                "the estimates' “this machine” is the machine this edition was exported on. "
                "The blocks that train, chart, sweep or read the dataset need Scalebook running: in a clone of its repository, on a Linux machine,"
            </p>
            <RunItYourself />
        </aside>
    }
}
