//! The pictures the chapters draw with the app rather than copy from the sources: the model,
//! the hardware under it and how ranks talk and wait. Each is built as a [`Picture`] by pure
//! code in its own module; the `vit` one can take its sizes from a training config.

mod collectives;
mod gpu_paths;
mod node;
mod pipeline;
mod vit;

use std::sync::Arc;

use leptos::prelude::*;
use scalebook_shared::config::{ConfigFile, TrainConfig};

use super::picture::Picture;
use super::picture_view::PictureFigure;
use crate::library::{Library, when_loaded};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Vit,
    Node,
    GpuPaths,
    Collectives,
    Pipeline,
}

impl Figure {
    const ALL: [Figure; 5] = [Figure::Vit, Figure::Node, Figure::GpuPaths, Figure::Collectives, Figure::Pipeline];

    pub fn name(self) -> &'static str {
        match self {
            Figure::Vit => "vit",
            Figure::Node => "node",
            Figure::GpuPaths => "gpu-paths",
            Figure::Collectives => "collectives",
            Figure::Pipeline => "pipeline",
        }
    }

    pub fn from_name(name: &str) -> Result<Figure, String> {
        Figure::ALL.into_iter().find(|f| f.name() == name).ok_or_else(|| format!("name={name}: the figures are {}", Figure::names()))
    }

    /// Every figure's name, for messages.
    pub fn names() -> String {
        Figure::ALL.map(Figure::name).join(", ")
    }

    /// The picture; `config` (a name and its values) sizes the `vit` one.
    fn picture(self, config: Option<(&str, &TrainConfig)>) -> Picture {
        match self {
            Figure::Vit => vit::picture(config),
            Figure::Node => node::picture(),
            Figure::GpuPaths => gpu_paths::picture(),
            Figure::Collectives => collectives::picture(),
            Figure::Pipeline => pipeline::picture(),
        }
    }
}

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
    fn names_read_back_and_unknown_ones_list_the_figures() {
        for figure in Figure::ALL {
            assert_eq!(Figure::from_name(figure.name()), Ok(figure));
            let picture = figure.picture(None);
            assert!(picture.width <= 700.0 && picture.height > 100.0 && !picture.label.is_empty(), "{}", figure.name());
        }
        assert_eq!(Figure::from_name("gpu").unwrap_err(), "name=gpu: the figures are vit, node, gpu-paths, collectives, pipeline");
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
