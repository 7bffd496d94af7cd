//! The vision transformer the tutorial trains, top to bottom: the weather state cut into
//! patches, each patch embedded with its position, the stack of transformer blocks, the head
//! that turns each token back into a patch, the forecast. Beside each stage, its sizes: a
//! config's numbers when one is named, otherwise the symbols they stand for.

use std::fmt::Write as _;

use scalebook_shared::config::{TrainConfig, tokens_per_sample};

use crate::blocks::picture::{Anchor, LINE, Picture};

const WIDTH: f64 = 700.0;
/// The drawing's column and where the notes beside it start.
const COLUMN: (f64, f64) = (40.0, 260.0);
const NOTES: f64 = 300.0;
const GAP: f64 = 30.0;

/// The notes beside each stage, from a config or in symbols.
struct Notes {
    title: String,
    input: [String; 2],
    patches: [String; 2],
    embedding: [String; 2],
    blocks: [String; 2],
    repeat: String,
    head: [String; 2],
    output: [String; 2],
}

impl Notes {
    fn of(config: Option<(&str, &TrainConfig)>) -> Notes {
        let Some((name, c)) = config else { return Notes::symbolic() };
        let [h, w] = c.img_size;
        let p = c.patch_size.max(1);
        let (rows, columns) = (h / p, w / p);
        let patch_values = p * p * c.n_in_channels;
        Notes {
            title: format!("The ViT of config {name}"),
            input: [format!("input: {} channels × {h}×{w}", c.n_in_channels), "the weather now, one value a channel and grid point".into()],
            patches: [
                format!("{h}×{w} / {p} = {rows}×{columns} = {} patches", tokens_per_sample(c.img_size, p)),
                format!("each {p}×{p}×{} = {patch_values} values", c.n_in_channels),
            ],
            embedding: [format!("each patch → a vector of width {}", c.embed_dim), "plus a learned vector for its place".into()],
            blocks: [
                format!("{} blocks: attention ({} heads), then MLP", c.depth, c.num_heads),
                format!("{} tokens × {} in, the same shape out", tokens_per_sample(c.img_size, p), c.embed_dim),
            ],
            repeat: format!("× {}", c.depth),
            head: [
                format!("each token's {} values → a {p}×{p} patch", c.embed_dim),
                format!("of {} channels, put back in place", c.n_out_channels),
            ],
            output: [format!("output: {} channels × {h}×{w}", c.n_out_channels), "the forecast, one time step later".into()],
        }
    }

    fn symbolic() -> Notes {
        Notes {
            title: "The ViT: image in, image out".into(),
            input: ["input: C channels × H×W".into(), "the weather now, one value a channel and grid point".into()],
            patches: ["H×W / p = (H/p)×(W/p) patches".into(), "each p×p×C values".into()],
            embedding: ["each patch → a vector of width D".into(), "plus a learned vector for its place".into()],
            blocks: ["N blocks: attention, then MLP".into(), "tokens × D in, the same shape out".into()],
            repeat: "× N".into(),
            head: ["each token's D values → a p×p patch".into(), "of C channels, put back in place".into()],
            output: ["output: C channels × H×W".into(), "the forecast, one time step later".into()],
        }
    }
}

pub fn picture(config: Option<(&str, &TrainConfig)>) -> Picture {
    let notes = Notes::of(config);
    let (left, right) = COLUMN;
    let (width, centre) = (right - left, (left + right) / 2.0);
    let mut p = Picture::new(WIDTH, 0.0, format!("{}: {}; {}; {}", notes.title, notes.input[0], notes.patches[0], notes.blocks[0]));
    p.text(0.0, 16.0, notes.title.clone(), Anchor::Start, "heading");
    let note = |p: &mut Picture, middle: f64, lines: &[String]| {
        p.lines(NOTES, middle - (lines.len() as f64 - 1.0) * LINE / 2.0 + 4.0, lines.iter().cloned(), Anchor::Start, "note");
    };

    let mut y = 34.0;
    image(&mut p, centre, y, "image");
    note(&mut p, y + IMAGE.1 / 2.0, &notes.input);
    y += IMAGE.1;
    y = step_down(&mut p, centre, y);

    // The patches as a row of tokens.
    let token = 16.0;
    for i in 0..8 {
        p.rect(left + 10.0 + f64::from(i) * (token + 6.0), y, token, token, "token");
    }
    p.text(left + 10.0 + 8.0 * (token + 6.0) + 4.0, y + 12.0, "…", Anchor::Start, "");
    note(&mut p, y + token / 2.0, &notes.patches);
    y = step_down(&mut p, centre, y + token);

    p.labelled_box(left, y, width, 40.0, "stage", &["patch embedding", "+ position embedding"]);
    note(&mut p, y + 20.0, &notes.embedding);
    y = step_down(&mut p, centre, y + 40.0);

    // The blocks: two shadows behind say "repeated" (clear of the arrow in).
    let stack = 112.0;
    y += 8.0;
    for shift in [8.0, 4.0] {
        p.rect(left + shift, y - shift, width, stack, "stage shadow");
    }
    p.rect(left, y, width, stack, "stage");
    p.text(left + 10.0, y + 18.0, "transformer block", Anchor::Start, "");
    p.text(right - 10.0, y + 18.0, notes.repeat.clone(), Anchor::End, "heading");
    p.labelled_box(left + 20.0, y + 28.0, width - 40.0, 30.0, "attention", &["self-attention"]);
    p.arrow((centre, y + 58.0), (centre, y + 70.0), "flow");
    p.labelled_box(left + 20.0, y + 70.0, width - 40.0, 30.0, "mlp", &["MLP"]);
    note(&mut p, y + stack / 2.0, &notes.blocks);
    y = step_down(&mut p, centre, y + stack);

    p.labelled_box(left, y, width, 34.0, "stage", &["head (linear)"]);
    note(&mut p, y + 17.0, &notes.head);
    y = step_down(&mut p, centre, y + 34.0);

    image(&mut p, centre, y, "image output");
    note(&mut p, y + IMAGE.1 / 2.0, &notes.output);
    p.height = y + IMAGE.1 + 10.0;
    p
}

/// The input and output images' size: twice as wide as tall, as the 360×720 grid is.
const IMAGE: (f64, f64) = (180.0, 90.0);

/// An image with a patch grid over it, centred on `centre`.
fn image(p: &mut Picture, centre: f64, y: f64, class: &'static str) {
    let (w, h) = IMAGE;
    let x = centre - w / 2.0;
    p.rect(x, y, w, h, class);
    let (columns, rows) = (8, 4);
    let mut grid = String::new();
    for c in 1..columns {
        let gx = x + w * f64::from(c) / f64::from(columns);
        let _ = write!(grid, "M{gx:.1} {y:.1}v{h:.1}");
    }
    for r in 1..rows {
        let gy = y + h * f64::from(r) / f64::from(rows);
        let _ = write!(grid, "M{x:.1} {gy:.1}h{w:.1}");
    }
    p.path(grid, "patch-grid");
}

/// An arrow down to the next stage; returns where it starts.
fn step_down(p: &mut Picture, centre: f64, y: f64) -> f64 {
    p.arrow((centre, y + 4.0), (centre, y + GAP - 4.0), "flow");
    y + GAP
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configs_sizes_are_written_beside_the_stages() {
        let base = TrainConfig::default();
        let picture = picture(Some(("base", &base)));
        let texts = picture.texts();
        for expected in [
            "The ViT of config base",
            "input: 20 channels × 360×720",
            "360×720 / 8 = 45×90 = 4050 patches",
            "each 8×8×20 = 1280 values",
            "each patch → a vector of width 384",
            "12 blocks: attention (8 heads), then MLP",
            "× 12",
        ] {
            assert!(texts.contains(&expected), "{expected:?} not in {texts:?}");
        }
    }

    #[test]
    fn without_a_config_the_sizes_are_symbols() {
        let texts = picture(None).texts().join("\n");
        assert!(texts.contains("(H/p)×(W/p) patches") && texts.contains("× N"), "{texts}");
        assert!(!texts.chars().any(|c| c.is_ascii_digit()), "no numbers without a config: {texts}");
    }

    #[test]
    fn the_stages_run_top_to_bottom_inside_the_picture() {
        let picture = picture(Some(("base", &TrainConfig::default())));
        let images: Vec<f64> = picture
            .of_class("image")
            .chain(picture.of_class("image output"))
            .map(|i| match i.shape {
                crate::blocks::picture::Shape::Rect { y, .. } => y,
                _ => panic!(),
            })
            .collect();
        assert!(images[0] < images[1] && images[1] + IMAGE.1 <= picture.height, "{images:?}");
        assert_eq!(picture.of_class("flow").count(), 6, "five steps down and one inside the block");
    }
}
