//! One Perlmutter GPU node, where the tutorial ran: four A100s joined pairwise by NVLink, one
//! AMD EPYC CPU that reaches each GPU and each Slingshot NIC over PCIe, and the NICs out to
//! the network. The links carry their bandwidths, because the gap between them (about 100
//! GB/s inside the node against 25 GB/s per NIC out of it) is why the rank order matters.

use crate::blocks::picture::{Anchor, Picture};

const WIDTH: f64 = 700.0;
const GPUS: usize = 4;
/// GPU boxes: the left edge of the first, width, height, pitch, top.
const GPU: (f64, f64, f64, f64, f64) = (30.0, 130.0, 56.0, 170.0, 232.0);
/// NIC boxes' left edges (two each side of the CPU), width, height, top.
const NIC_X: [f64; GPUS] = [30.0, 135.0, 475.0, 580.0];
const NIC: (f64, f64, f64) = (90.0, 36.0, 64.0);
/// The CPU's box: left, top, width, height.
const CPU: (f64, f64, f64, f64) = (250.0, 118.0, 200.0, 56.0);
const NETWORK_BOTTOM: f64 = 34.0;

pub fn picture() -> Picture {
    let mut p = Picture::new(
        WIDTH,
        440.0,
        "A Perlmutter GPU node: four A100 GPUs with NVLink between every pair (about 100 GB/s per direction), \
         one AMD EPYC CPU joined to each GPU and each of four Slingshot-11 NICs by PCIe 4.0 (about 25 GB/s), \
         the NICs joined to the network (about 25 GB/s each)",
    );
    p.labelled_box(20.0, 8.0, WIDTH - 40.0, NETWORK_BOTTOM - 8.0, "network", &["Slingshot-11 network, to the other nodes"]);
    p.rect(10.0, 50.0, WIDTH - 20.0, 380.0, "node-outline");
    p.text(WIDTH - 22.0, 420.0, "one Perlmutter GPU node", Anchor::End, "note");

    let (cpu_x, cpu_y, cpu_w, cpu_h) = CPU;
    p.labelled_box(cpu_x, cpu_y, cpu_w, cpu_h, "cpu", &["AMD EPYC CPU", "host memory"]);

    let (nic_w, nic_h, nic_y) = NIC;
    for (i, x) in NIC_X.into_iter().enumerate() {
        let centre = x + nic_w / 2.0;
        p.line((centre, nic_y), (centre, NETWORK_BOTTOM), "slingshot");
        // From the CPU's top edge, the outer NICs from nearer its corners.
        let from = if i < 2 { cpu_x + 15.0 + 20.0 * i as f64 } else { cpu_x + cpu_w - 15.0 - 20.0 * (3 - i) as f64 };
        p.line((from, cpu_y), (centre, nic_y + nic_h), "pcie");
        p.labelled_box(x, nic_y, nic_w, nic_h, "nic", &[&format!("NIC {i}"), "Slingshot-11"]);
    }
    p.text(WIDTH / 2.0, 78.0, "Slingshot-11: ~25 GB/s per NIC", Anchor::Middle, "note");

    let (gpu_x, gpu_w, gpu_h, pitch, gpu_y) = GPU;
    let centre = |i: usize| gpu_x + i as f64 * pitch + gpu_w / 2.0;
    for i in 0..GPUS {
        p.line((cpu_x + 40.0 + 40.0 * i as f64, cpu_y + cpu_h), (centre(i), gpu_y), "pcie");
    }
    p.lines(gpu_x, 194.0, ["PCIe 4.0 x16", "~25 GB/s"], Anchor::Start, "note");
    nvlinks(&mut p, &centre, gpu_y + gpu_h / 2.0, gpu_y + gpu_h);
    for i in 0..GPUS {
        p.labelled_box(gpu_x + i as f64 * pitch, gpu_y, gpu_w, gpu_h, "gpu", &[&format!("GPU {i}"), "A100"]);
    }
    p.text(WIDTH / 2.0, 396.0, "NVLink 3 between every pair: 4 links × 25 GB/s = ~100 GB/s per direction", Anchor::Middle, "note");
    p
}

/// NVLink between every pair of GPUs: neighbours side to side at `middle`, the others in arcs
/// below the row, deeper the farther apart.
fn nvlinks(p: &mut Picture, centre: &impl Fn(usize) -> f64, middle: f64, bottom: f64) {
    for a in 0..GPUS {
        for b in a + 1..GPUS {
            if b == a + 1 {
                p.line((centre(a), middle), (centre(b), middle), "nvlink");
                continue;
            }
            let (x1, x2) = (centre(a) + 12.0 * (b - a) as f64, centre(b) - 12.0 * (b - a) as f64);
            let depth = bottom + 35.0 * (b - a) as f64;
            p.path(format!("M{x1:.1} {bottom:.1}C{x1:.1} {depth:.1} {x2:.1} {depth:.1} {x2:.1} {bottom:.1}"), "nvlink");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_of_gpus_has_nvlink_and_every_gpu_and_nic_pcie() {
        let p = picture();
        assert_eq!(p.of_class("gpu").count(), 4);
        assert_eq!(p.of_class("nvlink").count(), 6, "4 choose 2 pairs");
        assert_eq!(p.of_class("pcie").count(), 8, "four GPUs and four NICs");
        assert_eq!(p.of_class("slingshot").count(), 4);
        assert_eq!(p.of_class("cpu").count(), 1);
    }

    #[test]
    fn the_links_carry_their_bandwidths() {
        let texts = picture().texts().join("\n");
        for expected in ["~100 GB/s per direction", "4 links × 25 GB/s", "PCIe 4.0 x16", "~25 GB/s per NIC", "AMD EPYC CPU"] {
            assert!(texts.contains(expected), "{expected:?} not in {texts}");
        }
    }
}
