//! Four ways data gets from one GPU to another, slowest first: copied through host memory,
//! peer to peer across a PCIe switch, over an NVLink bridge that joins a pair, and through an
//! NVSwitch that joins them all. The wires are grey; the route the data takes is drawn over
//! them with arrows.

use crate::blocks::picture::{Anchor, Picture};

const PANEL: (f64, f64) = (340.0, 214.0);
const SPACING: (f64, f64) = (360.0, 230.0);
const GPU_H: f64 = 36.0;

pub fn picture() -> Picture {
    let mut p = Picture::new(
        SPACING.0 + PANEL.0,
        SPACING.1 + PANEL.1,
        "Four paths from GPU 0 to another GPU: through host memory over PCIe (two copies); peer to peer across a PCIe switch; \
         over an NVLink bridge that joins a pair (other pairs still cross PCIe); through an NVSwitch that joins every GPU",
    );
    host_staging(&mut p, Panel::at(0, 0));
    peer_to_peer(&mut p, Panel::at(1, 0));
    nvlink_bridge(&mut p, Panel::at(0, 1));
    nvswitch(&mut p, Panel::at(1, 1));
    p
}

/// One panel's origin; its drawing is given in coordinates inside it.
#[derive(Debug, Clone, Copy)]
struct Panel(f64, f64);

impl Panel {
    fn at(column: u32, row: u32) -> Panel {
        Panel(f64::from(column) * SPACING.0, f64::from(row) * SPACING.1)
    }

    fn at_point(self, (x, y): (f64, f64)) -> (f64, f64) {
        (self.0 + x, self.1 + y)
    }

    fn points(self, points: &[(f64, f64)]) -> Vec<(f64, f64)> {
        points.iter().map(|&point| self.at_point(point)).collect()
    }

    fn frame(self, p: &mut Picture, title: &str, caption: [&str; 2]) {
        p.rect(self.0, self.1, PANEL.0, PANEL.1, "panel");
        p.text(self.0 + 10.0, self.1 + 18.0, title, Anchor::Start, "heading");
        p.lines(self.0 + 10.0, self.1 + PANEL.1 - 24.0, caption, Anchor::Start, "note");
    }

    fn wire(self, p: &mut Picture, points: &[(f64, f64)], class: &'static str) {
        let points = self.points(points);
        for pair in points.windows(2) {
            p.line(pair[0], pair[1], class);
        }
    }

    fn route(self, p: &mut Picture, points: &[(f64, f64)], class: &'static str) {
        p.route(&self.points(points), class);
    }

    fn gpu(self, p: &mut Picture, x: f64, y: f64, w: f64, name: &str) {
        let (x, y) = self.at_point((x, y));
        p.labelled_box(x, y, w, GPU_H, "gpu", &[name]);
    }

    fn host(self, p: &mut Picture) {
        let (x, y) = self.at_point((90.0, 30.0));
        p.labelled_box(x, y, 160.0, 30.0, "cpu", &["CPU + host memory"]);
    }
}

fn host_staging(p: &mut Picture, panel: Panel) {
    panel.frame(p, "1. Through host memory", ["GPU 0 → PCIe → host memory → PCIe → GPU 1:", "two copies, both over PCIe"]);
    panel.host(p);
    panel.wire(p, &[(40.0, 90.0), (300.0, 90.0)], "pcie");
    panel.wire(p, &[(170.0, 60.0), (170.0, 90.0)], "pcie");
    for x in [75.0, 265.0] {
        panel.wire(p, &[(x, 90.0), (x, 118.0)], "pcie");
    }
    let (x, y) = panel.at_point((305.0, 94.0));
    p.text(x, y, "PCIe", Anchor::End, "note");
    panel.route(p, &[(80.0, 118.0), (80.0, 85.0), (165.0, 85.0), (165.0, 60.0)], "route");
    panel.route(p, &[(175.0, 60.0), (175.0, 85.0), (260.0, 85.0), (260.0, 118.0)], "route");
    panel.gpu(p, 30.0, 118.0, 90.0, "GPU 0");
    panel.gpu(p, 220.0, 118.0, 90.0, "GPU 1");
}

fn peer_to_peer(p: &mut Picture, panel: Panel) {
    panel.frame(p, "2. Peer to peer over PCIe", ["GPU 0 → PCIe switch → GPU 1:", "one copy; host memory is not touched"]);
    panel.host(p);
    panel.wire(p, &[(170.0, 60.0), (170.0, 80.0)], "pcie");
    let (x, y) = panel.at_point((120.0, 80.0));
    p.labelled_box(x, y, 100.0, 26.0, "switch", &["PCIe switch"]);
    panel.wire(p, &[(75.0, 124.0), (140.0, 106.0)], "pcie");
    panel.wire(p, &[(265.0, 124.0), (200.0, 106.0)], "pcie");
    panel.route(p, &[(75.0, 124.0), (140.0, 106.0), (200.0, 106.0), (265.0, 124.0)], "route");
    panel.gpu(p, 30.0, 124.0, 90.0, "GPU 0");
    panel.gpu(p, 220.0, 124.0, 90.0, "GPU 1");
}

fn nvlink_bridge(p: &mut Picture, panel: Panel) {
    panel.frame(p, "3. NVLink bridge", ["GPU 0 → bridge → GPU 1 at NVLink speed;", "GPU 0 → GPU 2 (another pair) still over PCIe"]);
    panel.host(p);
    panel.wire(p, &[(30.0, 84.0), (310.0, 84.0)], "pcie");
    panel.wire(p, &[(170.0, 60.0), (170.0, 84.0)], "pcie");
    let lefts = [16.0, 96.0, 188.0, 268.0];
    for x in lefts {
        panel.wire(p, &[(x + 28.0, 84.0), (x + 28.0, 118.0)], "pcie");
    }
    for pair in [[lefts[0], lefts[1]], [lefts[2], lefts[3]]] {
        panel.wire(p, &[(pair[0] + 56.0, 136.0), (pair[1], 136.0)], "nvlink");
    }
    panel.route(p, &[(72.0, 130.0), (96.0, 130.0)], "route");
    panel.route(p, &[(38.0, 118.0), (38.0, 90.0), (210.0, 90.0), (210.0, 118.0)], "route other");
    for (i, x) in lefts.into_iter().enumerate() {
        panel.gpu(p, x, 118.0, 56.0, &format!("GPU {i}"));
    }
}

fn nvswitch(p: &mut Picture, panel: Panel) {
    panel.frame(p, "4. NVSwitch", ["GPU 0 → NVSwitch → GPU 2: every GPU reaches", "every other at full NVLink speed"]);
    let (x, y) = panel.at_point((90.0, 40.0));
    p.labelled_box(x, y, 160.0, 30.0, "switch", &["NVSwitch"]);
    let lefts = [20.0, 100.0, 180.0, 260.0];
    for (i, left) in lefts.into_iter().enumerate() {
        panel.wire(p, &[(left + 30.0, 124.0), (125.0 + 30.0 * i as f64, 70.0)], "nvlink");
    }
    panel.route(p, &[(50.0, 124.0), (125.0, 70.0), (185.0, 70.0), (210.0, 124.0)], "route");
    for (i, x) in lefts.into_iter().enumerate() {
        panel.gpu(p, x, 124.0, 60.0, &format!("GPU {i}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::picture::Shape;

    #[test]
    fn four_panels_each_with_a_route() {
        let p = picture();
        assert_eq!(p.of_class("panel").count(), 4);
        let titles: Vec<String> = p.texts().into_iter().filter(|t| t.starts_with(char::is_numeric)).map(str::to_owned).collect();
        assert_eq!(titles, ["1. Through host memory", "2. Peer to peer over PCIe", "3. NVLink bridge", "4. NVSwitch"]);
        assert_eq!(p.of_class("route").count(), 2 + 1 + 1 + 1);
        assert_eq!(p.of_class("route other").count(), 1, "the bridge panel's PCIe detour");
    }

    #[test]
    fn every_shape_lies_inside_the_picture() {
        let p = picture();
        for item in &p.items {
            if let Shape::Rect { x, y, w, h } = item.shape {
                assert!(x >= 0.0 && y >= 0.0 && x + w <= p.width && y + h <= p.height, "{item:?}");
            }
        }
    }
}
