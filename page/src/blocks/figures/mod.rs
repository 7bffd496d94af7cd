//! The pictures the chapters draw with the app rather than copy from the sources: the model,
//! the hardware under it and how ranks talk and wait. Each is built as a [`Picture`] by pure
//! code in its own module; the `vit` one can take its sizes from a training config.

mod collectives;
mod gpu_paths;
mod node;
pub mod pipeline;
mod vit;

use scalebook_shared::config::TrainConfig;

use super::picture::Picture;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Vit,
    Node,
    GpuPaths,
    Collectives,
    Pipeline,
}

impl Figure {
    pub const ALL: [Figure; 5] = [Figure::Vit, Figure::Node, Figure::GpuPaths, Figure::Collectives, Figure::Pipeline];

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
    pub fn picture(self, config: Option<(&str, &TrainConfig)>) -> Picture {
        match self {
            Figure::Vit => vit::picture(config),
            Figure::Node => node::picture(),
            Figure::GpuPaths => gpu_paths::picture(),
            Figure::Collectives => collectives::picture(),
            Figure::Pipeline => pipeline::picture(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_unknown_ones_list_the_figures() {
        for figure in Figure::ALL {
            assert_eq!(Figure::from_name(figure.name()), Ok(figure));
            let picture = figure.picture(None);
            assert!(picture.width <= 700.0 && picture.height > 100.0 && !picture.label.is_empty(), "{}", figure.name());
        }
        assert_eq!(Figure::from_name("gpu").unwrap_err(), "name=gpu: the figures are vit, node, gpu-paths, collectives, pipeline");
    }
}
