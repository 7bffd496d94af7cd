//! The class panel of the owner's page (an instructor's link: the owner of this server), opened
//! from the header. Its parts:
//!
//! - **Join a class**: a learner pastes the class link their instructor gave them; it is
//!   checked as they type, each problem named beside the field; Join makes this server follow
//!   that class, and the panel says where it stands (reaching it, following, refused) with a
//!   Leave button.
//! - **Your class**, when this server has a class listener: the class link to hand out (Copy),
//!   a New class link button (the old link stops working), and the roster of followers;
//!   without one, **Hold a class**: the flag that starts one.

use leptos::prelude::*;
use scalebook_shared::protocol::{ClassState, ClientMessage, Secret};
use wasm_bindgen::JsCast;

use super::class_model::{self, LinkCheck};
use super::roster::Roster;
use crate::ids::unique_id;
use crate::runs::Runs;

#[component]
pub fn ClassPanel(id: &'static str) -> impl IntoView {
    let runs = expect_context::<Runs>();
    view! {
        <div class="class-panel" id=id role="region" aria-label="Class">
            {move || runs.class_link.get().map(|link| view! { <YourClass link=link.0 runs /> })}
            <Show when=move || runs.class.with(|state| class_model::offers_join(runs.class_link.with(Option::is_some), state))>
                <JoinClass runs />
            </Show>
            <Show when=move || class_model::offers_hold(runs.class_link.with(Option::is_some))>
                <HoldClass />
            </Show>
        </div>
    }
}

/// How to hold a class, on a server without a class listener.
#[component]
fn HoldClass() -> impl IntoView {
    view! {
        <section class="hold-class">
            <h2>"Hold a class"</h2>
            <p class="muted">
                "To hold a class of your own, serve with a class listener: "
                <code>{class_model::HOLD_COMMAND}</code>
                " (or add the flag to the command of your Jupyter entry). Its class link then shows here, to hand out to your learners: see \"A class of many Scalebooks\" in the README."
            </p>
        </section>
    }
}

#[component]
fn JoinClass(runs: Runs) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let check = Memo::new(move |_| text.with(|t| class_model::check_link(t)));
    let state = runs.class;
    let join = move || {
        if let LinkCheck::Ready(link) = check.get_untracked()
            && runs.send(&ClientMessage::JoinClass { link: Secret(link.to_string()) })
        {
            text.set(String::new());
        }
    };
    let (field_id, problems_id) = (unique_id("class-link-field"), unique_id("class-link-problems"));
    view! {
        <section class="join-class">
            <h2>"Join a class"</h2>
            <Show when=move || state.with(|s| *s != ClassState::Alone)>
                <p class="class-state" data-state=move || state.with(class_model::state_name) role="status">
                    {move || state.with(class_model::state_words)}
                    " "
                    <button type="button" class="leave" on:click=move |_| { runs.send(&ClientMessage::LeaveClass); }>"Leave"</button>
                </p>
            </Show>
            <Show when=move || state.with(class_model::may_join)>
                <form class="toolbar" on:submit=move |ev| { ev.prevent_default(); join(); }>
                    <label for=field_id.clone()>"class link"</label>
                    <input id=field_id.clone() class="class-link-field" type="text" spellcheck="false" autocomplete="off"
                        placeholder="scalebook-class://HOST:PORT/#token=…&sha256=…"
                        aria-describedby=problems_id.clone()
                        aria-invalid=move || check.with(|c| matches!(c, LinkCheck::Broken(_))).to_string()
                        prop:value=move || text.get()
                        on:input=move |ev| text.set(event_target_value(&ev)) />
                    <button type="submit" class="join" disabled=move || !check.with(|c| matches!(c, LinkCheck::Ready(_)))>"Join"</button>
                </form>
                <ul class="link-problems" id=problems_id.clone()>
                    {move || match check.get() {
                        LinkCheck::Broken(problems) => problems.0.into_iter().map(|p| view! {
                            <li class="error" data-field=p.field.clone()>{p.to_string()}</li>
                        }).collect_view().into_any(),
                        LinkCheck::Ready(link) => view! { <li class="ok">{class_model::link_words(&link)}</li> }.into_any(),
                        LinkCheck::Empty => view! {
                            <li class="muted">"Paste the link your instructor gave you: this Scalebook then follows their presentation and shows their runs."</li>
                        }.into_any(),
                    }}
                </ul>
            </Show>
        </section>
    }
}

#[component]
fn YourClass(link: String, runs: Runs) -> impl IntoView {
    let field_id = unique_id("class-link");
    view! {
        <section class="your-class">
            <h2>"Your class"</h2>
            <div class="toolbar">
                <label for=field_id.clone()>"class link"</label>
                <LinkField link id=field_id />
            </div>
            <p class="muted">
                "Learners paste it into their own Scalebook's class panel. "
                <button type="button" class="new-link" on:click=move |_| {
                    runs.invitations.set(Vec::new());
                    runs.send(&ClientMessage::NewClassLink);
                }>
                    "New class link"
                </button>
                " makes another: the old one stops working, and those who joined with it are disconnected (and every invitation ends)."
            </p>
            <p class="muted">
                "This link admits learners whose Scalebook runs on this machine, each as their own account. A learner on another machine needs an invitation of their own:"
            </p>
            <Invite runs />
            <Roster runs />
        </section>
    }
}

/// Invitations for learners on other hosts: a name (checked as it is typed), and each
/// invitation made, with its link to hand to that learner alone.
#[component]
fn Invite(runs: Runs) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let problem = Memo::new(move |_| name.with(|n| class_model::invitation_problem(n)));
    let invite = move || {
        let typed = name.get_untracked();
        if !typed.is_empty() && problem.with_untracked(Option::is_none) && runs.send(&ClientMessage::Invite { name: typed }) {
            name.set(String::new());
        }
    };
    let (field_id, problem_id) = (unique_id("invite-name"), unique_id("invite-problem"));
    view! {
        <form class="toolbar invite" on:submit=move |ev| { ev.prevent_default(); invite(); }>
            <label for=field_id.clone()>"invite"</label>
            <input id=field_id class="invite-name" type="text" spellcheck="false" autocomplete="off" placeholder="their user name"
                aria-describedby=problem_id.clone()
                aria-invalid=move || problem.with(Option::is_some).to_string()
                prop:value=move || name.get()
                on:input=move |ev| name.set(event_target_value(&ev)) />
            <button type="submit" class="invite" disabled=move || name.with(String::is_empty) || problem.with(Option::is_some)>"Invite"</button>
            <span class="error" id=problem_id>{move || problem.get()}</span>
        </form>
        <ul class="invitations">
            {move || runs.invitations.get().into_iter().map(|(name, link)| view! {
                <li data-invited=name.clone()><span class="mono">{name.clone()}</span>" "<LinkField link=link.0 /></li>
            }).collect_view()}
        </ul>
    }
}

/// A link to hand out, read-only (a click selects all of it), with a Copy button.
#[component]
fn LinkField(link: String, #[prop(optional)] id: Option<String>) -> impl IntoView {
    let field = NodeRef::<leptos::html::Input>::new();
    let copied = RwSignal::new(None::<&'static str>);
    let copy = move |_| {
        copied.set(Some(if field.get().is_some_and(|input| copy_from(&input)) { "copied" } else { "selected: copy it with Ctrl+C" }))
    };
    view! {
        <input id=id class="class-link" type="text" readonly=true spellcheck="false" node_ref=field prop:value=link
            on:focus=move |ev| select_target(&ev) />
        <button type="button" class="copy" on:click=copy>"Copy"</button>
        <span class="muted copied" role="status">{move || copied.get()}</span>
    }
}

/// Selects the text of the field an event came from (a click into the link selects all of it).
fn select_target(ev: &leptos::ev::FocusEvent) {
    if let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) {
        input.select();
    }
}

/// Copies `input`'s text to the clipboard; whether that worked. The field's text is selected
/// either way, for a copy by hand. The old `copy` command works where the Clipboard API does
/// not: on a page served over plain HTTP from another host, as a classroom server may be.
fn copy_from(input: &web_sys::HtmlInputElement) -> bool {
    input.select();
    let document = leptos::prelude::document().unchecked_into::<web_sys::HtmlDocument>();
    document.exec_command("copy").unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use scalebook_shared::layout::Sizes;
    use scalebook_shared::protocol::{ChartView, Follower, FollowerIdentity, Presentation, RunId, RunState, RunSummary};
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::testing::{Mounted, mount, settle};

    fn mount_panel(runs: Runs) -> Mounted {
        mount(move || {
            provide_context(runs);
            view! { <ClassPanel id="class-panel-test" /> }
        })
    }

    fn texts(panel: &Mounted, css: &str) -> Vec<String> {
        let list = panel.root.query_selector_all(css).unwrap();
        (0..list.length()).filter_map(|i| list.item(i)?.text_content()).collect()
    }

    fn click(panel: &Mounted, css: &str) {
        panel.find(css).unwrap_or_else(|| panic!("no {css}")).unchecked_into::<web_sys::HtmlElement>().click();
    }

    #[wasm_bindgen_test]
    async fn a_pasted_link_is_checked_as_it_is_typed_and_the_class_state_is_told_in_words() {
        let runs = Runs::unconnected();
        let panel = mount_panel(runs);
        settle().await;
        assert!(panel.find(".your-class").is_none(), "a server without a class listener has no class of its own");
        assert!(panel.find(".join-class").is_some());
        assert!(panel.text(".hold-class").contains("--class-listen"), "nothing says how to hold a class: {}", panel.text(".class-panel"));
        assert!(panel.find("button.join").unwrap().has_attribute("disabled"));
        panel.input(".class-link-field", "scalebook-class://login01:8443/#token=abc");
        settle().await;
        let fields: Vec<String> =
            texts(&panel, ".link-problems li.error").iter().map(|t| t.split(':').next().unwrap().to_owned()).collect();
        assert_eq!(fields, ["class_link.token", "class_link.sha256"]);
        assert_eq!(panel.attr(".class-link-field", "aria-invalid").as_deref(), Some("true"));
        panel.input(".class-link-field", &format!("scalebook-class://login01:8443/#token={}&sha256={}", "0a".repeat(16), "ab".repeat(32)));
        settle().await;
        assert!(!panel.find("button.join").unwrap().has_attribute("disabled"));
        assert_eq!(panel.text(".link-problems li.ok"), "a class link to login01:8443");

        runs.class.set(ClassState::Connecting { address: "login01:8443".into(), attempt: 1, warning: None });
        settle().await;
        assert_eq!(panel.attr(".class-state", "data-state").as_deref(), Some("connecting"));
        assert!(panel.text(".class-state").starts_with("reaching login01:8443, attempt 2…"));
        assert!(panel.find(".class-link-field").is_none(), "no second class while one is being reached");
        runs.class.set(ClassState::Joined { address: "login01:8443".into() });
        settle().await;
        assert!(panel.text(".class-state").starts_with("following the class at login01:8443"));
        assert!(panel.find(".class-state button.leave").is_some());
    }

    #[wasm_bindgen_test]
    async fn the_roster_lists_followers_and_their_runs_sorted_by_any_column() {
        let runs = Runs::unconnected();
        let panel = mount_panel(runs);
        let summary = |id: &str, loss: f64| RunSummary {
            id: RunId::parse(id).unwrap(),
            config: "cpu_tiny".into(),
            layout: Sizes::default(),
            state: RunState::Running,
            loss: Some(loss),
            samples_per_sec: Some(12.5),
        };
        runs.class_link.set(Some(Secret("scalebook-class://login01:8443/#token=t&sha256=f".into())));
        runs.roster.set(vec![
            Follower {
                id: 1,
                identity: FollowerIdentity::Account { user: "ada".into() },
                name: "ada".into(),
                following: true,
                since: 0.0,
                runs: Some(vec![summary("a1", 0.5), summary("a2", 0.2)]),
            },
            Follower {
                id: 2,
                identity: FollowerIdentity::Invited { name: "bob".into() },
                name: "bob".into(),
                following: false,
                since: 60.0,
                runs: None,
            },
        ]);
        settle().await;
        assert_eq!(panel.text(".roster-counts"), "2 followers, 1 following");
        assert!(panel.find(".join-class").is_none(), "the class's own server offers to join another");
        assert!(panel.find(".hold-class").is_none(), "it holds one already");
        assert_eq!(
            panel.find("input.class-link").unwrap().unchecked_into::<web_sys::HtmlInputElement>().value(),
            runs.class_link.get_untracked().unwrap().0
        );
        let names = || texts(&panel, "table.roster tbody td.name");
        assert_eq!(names(), ["ada", "ada", "bob (invited as bob)"]);
        // Before anyone presents, nobody has broken away; once a presentation is on, bob has.
        assert_eq!(texts(&panel, "table.roster tbody td.following"), ["will follow", "will follow", "not following"]);
        runs.presentation.set(Some(Presentation {
            chapter: "intro".into(),
            block: None,
            element: None,
            quiz: None,
            charts: ChartView::default(),
        }));
        settle().await;
        assert_eq!(texts(&panel, "table.roster tbody td.following"), ["following", "following", "broke away"]);
        assert_eq!(panel.attr("table.roster tr[data-follower='2'] td.following", "data-standing").as_deref(), Some("broke away"));
        // One Remove per follower.
        assert_eq!(panel.root.query_selector_all("table.roster button.remove").unwrap().length(), 2);

        // By loss, lowest first, then the other way; bob, with no run, stays last both ways.
        click(&panel, "table.roster button.sort[data-column='loss']");
        settle().await;
        assert_eq!(texts(&panel, "table.roster tbody tr td:nth-child(7)"), ["0.2", "0.5", ""]);
        assert_eq!(panel.attr("table.roster th[aria-sort='ascending'] button", "data-column").as_deref(), Some("loss"));
        click(&panel, "table.roster button.sort[data-column='loss']");
        settle().await;
        assert_eq!(texts(&panel, "table.roster tbody tr td:nth-child(7)"), ["0.5", "0.2", ""]);
        click(&panel, "table.roster button.sort[data-column='name']");
        click(&panel, "table.roster button.sort[data-column='name']");
        settle().await;
        assert_eq!(names(), ["bob (invited as bob)", "ada", "ada"]);

        // Charting a learner's run charts the instructor's server's copy of it; bob has none.
        assert_eq!(panel.root.query_selector_all("table.roster input.chart-shared").unwrap().length(), 2);
        let a1 = panel.find("table.roster tr[data-run='a1'] input.chart-shared").unwrap().unchecked_into::<web_sys::HtmlInputElement>();
        a1.set_checked(true);
        a1.dispatch_event(&web_sys::Event::new("change").unwrap()).unwrap();
        settle().await;
        assert!(runs.charted.get_untracked().contains(&RunId::parse("l-ada-a1").unwrap()));
        assert!(a1.checked());

        // An invitation's name is checked as it is typed; one made shows its own link.
        panel.input(".invite-name", "Bob Smith");
        settle().await;
        assert!(panel.find("button.invite").unwrap().has_attribute("disabled"));
        assert!(panel.text("form.invite .error").starts_with("name: "));
        panel.input(".invite-name", "cy");
        settle().await;
        assert!(!panel.find("button.invite").unwrap().has_attribute("disabled"));
        runs.invitations.set(vec![("cy".into(), Secret("scalebook-class://login01:8443/#token=c&sha256=f&invite=cy".into()))]);
        settle().await;
        let invited = panel.find("li[data-invited='cy'] input.class-link").unwrap().unchecked_into::<web_sys::HtmlInputElement>();
        assert!(invited.value().ends_with("&invite=cy"));
    }
}
