//! The classroom's controls in the page header: "Present", the head count, the class panel's
//! toggle and, while its port is taken, why the class listener does not listen, on an
//! instructor's page; "Following the instructor" and "Catch up" on a page that can
//! follow a presentation. With nothing presented, a learner's header shows none of it. The
//! header stays at the top of the window, so the controls do too.

use leptos::prelude::*;
use scalebook_shared::protocol::Role;

use super::class_panel::ClassPanel;
use super::{Classroom, class_model, model};
use crate::runs::Runs;

const PANEL_ID: &str = "class-panel";

#[component]
pub fn ClassroomControls() -> impl IntoView {
    let classroom = expect_context::<Classroom>();
    let runs = expect_context::<Runs>();
    let (presenting, following) = (classroom.presenting, classroom.following);
    let instructor = move || runs.server.with(|info| info.as_ref().is_some_and(|info| info.role == Role::Instructor));
    let may_follow = move || runs.presentation.with(Option::is_some) && !presenting.get();
    let behind = move || may_follow() && (!following.get() || classroom.differs());
    let panel_open = RwSignal::new(false);
    view! {
        <div class="classroom" role="group" aria-label="Classroom">
            <Show when=instructor>
                <Show when=move || runs.class.with(|state| class_model::offers_present(presenting.get(), state))>
                    <button type="button" class="present" aria-pressed=move || presenting.get().to_string()
                        title="Show the room where this page is: its chapter, the place in the text, the open answer and the charts"
                        on:click=move |_| classroom.set_presenting(!presenting.get_untracked())>
                        "Present"
                    </button>
                </Show>
                <Show when=move || presenting.get()>
                    <span class="audience" role="status">{move || model::audience_label(runs.audience.get())}</span>
                </Show>
                <button type="button" class="class-toggle" aria-controls=PANEL_ID aria-expanded=move || panel_open.get().to_string()
                    title="Join a class, or hand out your own class's link and see who follows"
                    data-class-state=move || runs.class.with(class_model::state_name)
                    on:click=move |_| panel_open.update(|open| *open = !*open)>
                    "Class"
                </button>
                <Show when=move || panel_open.get()>
                    <ClassPanel id=PANEL_ID />
                </Show>
                {move || runs.class_unbound.get().map(|why| view! {
                    <span class="class-unbound" role="alert">"Class listener not listening: " {why}</span>
                })}
            </Show>
            <Show when=may_follow>
                <button type="button" class="follow" aria-pressed=move || following.get().to_string()
                    on:click=move |_| classroom.set_following(!following.get_untracked())>
                    "Following the instructor"
                </button>
                <span class="hint">
                    {move || if following.get() { "Picking another chapter stops following." } else { "On your own." }}
                </span>
                <Show when=move || !runs.presenter_connected.get()>
                    <span class="presenter-gone" role="status"
                        title="The presenting page closed or lost its connection; the presentation stays where it was until it is back">
                        "The instructor's page has left: the presentation stands still."
                    </span>
                </Show>
            </Show>
            <Show when=behind>
                <button type="button" class="catch-up" title="Go where the instructor is, and follow again"
                    on:click=move |_| classroom.set_following(true)>
                    "Catch up"
                </button>
            </Show>
        </div>
    }
}
