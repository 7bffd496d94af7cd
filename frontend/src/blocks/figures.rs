//! A figure block: one of the pictures the app draws (`scalebook_page::blocks::figures`), its
//! `vit` one sized by a training config once the configs are here.

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::config::ConfigFile;

use super::picture_view::PictureFigure;
use crate::library::{Library, when_loaded};
pub use scalebook_page::blocks::figures::Figure;

/// `config` is only read for the `vit` figure (the chapter parser refuses it elsewhere).
#[component]
pub fn FigureBlock(figure: Figure, config: Option<String>, caption: String) -> impl IntoView {
    let Some(config) = config else {
        return view! { <PictureFigure picture=figure.picture(None) kind="figure" name=figure.name().to_owned() source=None caption /> }
            .into_any();
    };
    let library = expect_context::<Library>();
    when_loaded(
        "training configs",
        move || library.configs.into_future(),
        move |file: Arc<ConfigFile>| match file.get(&config) {
            Ok(values) => {
                let picture = figure.picture(Some((&config, &values)));
                view! { <PictureFigure picture kind="figure" name=figure.name().to_owned() source=None caption=caption.clone() /> }
                    .into_any()
            }
            Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
        },
    )
    .into_any()
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;
    use crate::testing::{mount, provide_configs, settle};

    fn with_configs<V: IntoView + 'static>(view: impl FnOnce() -> V + 'static) -> crate::testing::Mounted {
        mount(move || {
            provide_configs();
            view()
        })
    }

    #[wasm_bindgen_test]
    async fn the_vit_figure_shows_a_configs_numbers() {
        let block =
            with_configs(|| view! { <FigureBlock figure=Figure::Vit config=Some("base".to_owned()) caption="The model.".to_owned() /> });
        settle().await;
        assert!(block.text("svg").contains("360×720 / 8 = 45×90 = 4050 patches"), "{}", block.text("svg"));
        assert_eq!(block.text("figcaption").trim(), "The model.");
        let missing = with_configs(|| view! { <FigureBlock figure=Figure::Vit config=Some("huge".to_owned()) caption=String::new() /> });
        settle().await;
        assert!(missing.text(".error").contains("huge"), "{}", missing.text(".error"));
    }

    #[wasm_bindgen_test]
    async fn a_figure_without_a_config_needs_no_library() {
        let block = mount(|| view! { <FigureBlock figure=Figure::Collectives config=None caption=String::new() /> });
        settle().await;
        assert_eq!(block.attr("figure.figure", "data-name").as_deref(), Some("collectives"));
        assert!(block.find("figcaption").is_none());
        assert!(block.text("svg").contains("all-reduce"));
    }
}
