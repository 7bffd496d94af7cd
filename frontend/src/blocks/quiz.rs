//! A question with its answer hidden until asked for (a native `<details>`, so it opens with
//! the keyboard and screen readers announce it).

use leptos::prelude::*;

use crate::chapters::markdown::to_html;

#[component]
pub fn Quiz(question: String, answer: String) -> impl IntoView {
    view! {
        <section class="block quiz" aria-label="Question">
            <div class="question" inner_html=to_html(&question)></div>
            <details>
                <summary>"Show the answer"</summary>
                <div class="answer" inner_html=to_html(&answer)></div>
            </details>
        </section>
    }
}
