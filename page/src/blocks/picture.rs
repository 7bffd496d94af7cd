//! A picture as plain data: boxes, dots, paths and text in SVG units, each with a CSS class
//! (the colours live in the style sheet, so pictures follow the light and dark themes) and an
//! optional tooltip. The figures and the published charts build one of these with pure code,
//! which the tests inspect; one component turns any of them into SVG.

use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    pub fn svg(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Rect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
    },
    Circle {
        x: f64,
        y: f64,
        r: f64,
    },
    Path(String),
    /// `y` is the baseline.
    Text {
        x: f64,
        y: f64,
        text: String,
        anchor: Anchor,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub shape: Shape,
    pub class: &'static str,
    /// Shown when the pointer rests on it (an SVG `title`).
    pub tip: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    pub width: f64,
    pub height: f64,
    /// What the picture shows, for screen readers.
    pub label: String,
    pub items: Vec<Item>,
}

/// Height of a line of the pictures' usual 12-unit text.
pub const LINE: f64 = 15.0;

/// About how wide `text` is at `size` units: pictures place labels before the browser has
/// measured anything, so they allow for an average glyph.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.56
}

impl Picture {
    pub fn new(width: f64, height: f64, label: impl Into<String>) -> Picture {
        Picture { width, height, label: label.into(), items: Vec::new() }
    }

    fn push(&mut self, shape: Shape, class: &'static str) -> &mut Picture {
        self.items.push(Item { shape, class, tip: None });
        self
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, class: &'static str) -> &mut Picture {
        self.push(Shape::Rect { x, y, w, h }, class)
    }

    pub fn circle(&mut self, x: f64, y: f64, r: f64, class: &'static str) -> &mut Picture {
        self.push(Shape::Circle { x, y, r }, class)
    }

    pub fn path(&mut self, d: String, class: &'static str) -> &mut Picture {
        self.push(Shape::Path(d), class)
    }

    pub fn line(&mut self, from: (f64, f64), to: (f64, f64), class: &'static str) -> &mut Picture {
        self.path(format!("M{:.1} {:.1}L{:.1} {:.1}", from.0, from.1, to.0, to.1), class)
    }

    /// A line with a head at `to`.
    pub fn arrow(&mut self, from: (f64, f64), to: (f64, f64), class: &'static str) -> &mut Picture {
        self.route(&[from, to], class)
    }

    /// A line through `points` with a head at the last one (a path data takes between parts).
    pub fn route(&mut self, points: &[(f64, f64)], class: &'static str) -> &mut Picture {
        const HEAD: f64 = 7.0;
        let [.., from, to] = points else { return self };
        let (dx, dy) = (to.0 - from.0, to.1 - from.1);
        let length = dx.hypot(dy).max(f64::EPSILON);
        let (ux, uy) = (dx / length, dy / length);
        let base = (to.0 - ux * HEAD, to.1 - uy * HEAD);
        let (px, py) = (-uy * HEAD * 0.5, ux * HEAD * 0.5);
        let mut line = String::new();
        for (i, (x, y)) in points[..points.len() - 1].iter().chain([&base]).enumerate() {
            let _ = write!(line, "{}{x:.1} {y:.1}", if i == 0 { 'M' } else { 'L' });
        }
        self.path(line, class);
        let mut head = String::new();
        let _ = write!(head, "M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}z", to.0, to.1, base.0 + px, base.1 + py, base.0 - px, base.1 - py);
        self.path(head, "arrow-head")
    }

    pub fn text(&mut self, x: f64, y: f64, text: impl Into<String>, anchor: Anchor, class: &'static str) -> &mut Picture {
        self.push(Shape::Text { x, y, text: text.into(), anchor }, class)
    }

    /// Lines of text, the first with its baseline at `y`.
    pub fn lines<S: Into<String>>(&mut self, x: f64, y: f64, lines: impl IntoIterator<Item = S>, anchor: Anchor, class: &'static str) {
        for (i, line) in lines.into_iter().enumerate() {
            self.text(x, y + i as f64 * LINE, line, anchor, class);
        }
    }

    /// A labelled box: `lines` centred in it.
    pub fn labelled_box(&mut self, x: f64, y: f64, w: f64, h: f64, class: &'static str, lines: &[&str]) {
        self.rect(x, y, w, h, class);
        let first = y + h / 2.0 - (lines.len() as f64 - 1.0) * LINE / 2.0 + 4.0;
        self.lines(x + w / 2.0, first, lines.iter().copied(), Anchor::Middle, "");
    }

    /// Gives the item added last a tooltip.
    pub fn titled(&mut self, tip: impl Into<String>) -> &mut Picture {
        if let Some(item) = self.items.last_mut() {
            item.tip = Some(tip.into());
        }
        self
    }

    /// The items of one class (tests look for the parts of a picture this way).
    #[cfg(test)]
    pub fn of_class<'a>(&'a self, class: &'a str) -> impl Iterator<Item = &'a Item> + 'a {
        self.items.iter().filter(move |i| i.class == class)
    }

    /// Every text of the picture, in order.
    #[cfg(test)]
    pub fn texts(&self) -> Vec<&str> {
        self.items
            .iter()
            .filter_map(|i| match &i.shape {
                Shape::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrow_ends_in_a_head_at_its_point() {
        let mut p = Picture::new(100.0, 100.0, "arrow");
        p.arrow((0.0, 50.0), (100.0, 50.0), "link");
        assert_eq!(p.items.len(), 2);
        assert_eq!(p.items[0].shape, Shape::Path("M0.0 50.0L93.0 50.0".into()));
        let Shape::Path(head) = &p.items[1].shape else { panic!() };
        assert!(head.starts_with("M100.0 50.0"), "{head}");
    }

    #[test]
    fn a_route_bends_at_its_points() {
        let mut p = Picture::new(100.0, 100.0, "route");
        p.route(&[(0.0, 0.0), (0.0, 50.0), (50.0, 50.0)], "route");
        assert_eq!(p.items[0].shape, Shape::Path("M0.0 0.0L0.0 50.0L43.0 50.0".into()));
        p.route(&[(1.0, 1.0)], "nothing");
        assert_eq!(p.items.len(), 2, "one point is no route");
    }

    #[test]
    fn a_tip_goes_to_the_item_added_last() {
        let mut p = Picture::new(10.0, 10.0, "tips");
        p.rect(0.0, 0.0, 1.0, 1.0, "a").circle(1.0, 1.0, 1.0, "b").titled("epoch 2");
        assert_eq!(p.items[0].tip, None);
        assert_eq!(p.items[1].tip.as_deref(), Some("epoch 2"));
    }

    #[test]
    fn a_boxs_lines_are_centred_in_it() {
        let mut p = Picture::new(100.0, 100.0, "box");
        p.labelled_box(0.0, 0.0, 100.0, 60.0, "gpu", &["GPU 0", "A100"]);
        assert_eq!(p.texts(), ["GPU 0", "A100"]);
        let Shape::Text { x, y, anchor, .. } = &p.items[1].shape else { panic!() };
        assert_eq!((*x, *anchor), (50.0, Anchor::Middle));
        assert!(*y < 30.0 && *y + LINE > 30.0, "{y}");
    }
}
