//! A [`Picture`] on the page: its SVG, the source it cites and the chapter's caption.

use leptos::prelude::*;

use super::picture::{Item, Picture, Shape};
use scalebook_page::markdown::to_html;

/// `kind` names the block in its class (`figure`, `published`), `name` what it draws.
#[component]
pub fn PictureFigure(picture: Picture, kind: &'static str, name: String, source: Option<String>, caption: String) -> impl IntoView {
    let items = picture.items.into_iter().map(item).collect_view();
    view! {
        <figure class=format!("block picture {kind}") data-name=name>
            <svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label=picture.label
                viewBox=format!("0 0 {:.0} {:.0}", picture.width, picture.height)
                width=format!("{:.0}", picture.width)>
                {items}
            </svg>
            {source.map(|s| view! { <p class="source muted">"Source: " {s}</p> })}
            {(!caption.is_empty()).then(|| view! { <figcaption class="caption" inner_html=to_html(&caption)></figcaption> })}
        </figure>
    }
}

/// One item as SVG (the layout search draws its scatter's items inside an SVG of its own).
pub(super) fn item(Item { shape, class, tip }: Item) -> AnyView {
    // Built here rather than in each arm's `view!`: only inside an SVG element does the macro
    // make `title` SVG's tooltip rather than HTML's document title.
    let tip = tip.map(|t| leptos::svg::title().child(t));
    match shape {
        Shape::Rect { x, y, w, h } => view! {
            <rect class=class x=format!("{x:.1}") y=format!("{y:.1}") width=format!("{w:.1}") height=format!("{h:.1}")>{tip}</rect>
        }
        .into_any(),
        Shape::Circle { x, y, r } => {
            view! { <circle class=class cx=format!("{x:.1}") cy=format!("{y:.1}") r=format!("{r:.1}")>{tip}</circle> }.into_any()
        }
        Shape::Path(d) => view! { <path class=class d=d>{tip}</path> }.into_any(),
        Shape::Text { x, y, text, anchor } => view! {
            <text class=class x=format!("{x:.1}") y=format!("{y:.1}") text-anchor=anchor.svg()>{text}{tip}</text>
        }
        .into_any(),
    }
}
