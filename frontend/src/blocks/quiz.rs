//! A question with its answer hidden until asked for (a native `<details>`, so it opens with
//! the keyboard and screen readers announce it). Opening or closing it is told to the
//! classroom: a presenting instructor's open answer opens on the pages that follow.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::classroom::Classroom;
use scalebook_page::markdown::to_html;

#[component]
pub fn Quiz(question: String, answer: String) -> impl IntoView {
    let classroom = use_context::<Classroom>();
    let on_toggle = move |ev: web_sys::Event| {
        let details = ev.target().and_then(|target| target.dyn_into::<web_sys::Element>().ok());
        if let (Some(classroom), Some(details)) = (classroom, details) {
            classroom.quiz_toggled(&details, details.has_attribute("open"));
        }
    };
    view! {
        <section class="block quiz" aria-label="Question">
            <div class="question" inner_html=to_html(&question)></div>
            <details on:toggle=on_toggle>
                <summary>"Show the answer"</summary>
                <div class="answer" inner_html=to_html(&answer)></div>
            </details>
        </section>
    }
}
