//! Do the layouts learn the same? The sweep's `agreement` measure: every variant's validation
//! loss against the first variant's at each epoch, a verdict in words, and why two runs may
//! part (what a variant changes besides the layout). One seed for every variant makes the
//! comparison fair: the same initial weights and the same samples in the same order.

use scalebook_shared::charts::{format_number, log_ticks};
use scalebook_shared::config::{AmpMode, TrainConfig};

use super::sweep_model::{CURVES_HEIGHT, CURVES_MARGIN, WIDTH, polyline};

/// How far two runs of one model on two layouts may be apart and still agree: relative
/// difference of the validation loss at every epoch. Only the order of float32 sums differs
/// between them (a few parts in 10^7 after a few hundred steps of cpu_short, BENCHMARKS.md);
/// the tensor-parallel tests hold each layer to the same 1e-4.
pub const BAND: f64 = 1e-4;

/// The smallest difference the picture draws: runs equal to the last bit sit on its floor.
pub const FLOOR: f64 = 1e-9;

/// One variant's run as the verdict sees it: its effective config and its data-parallel size.
pub struct Setup<'a> {
    pub config: &'a TrainConfig,
    pub dp: u32,
}

impl Setup<'_> {
    fn global_batch(&self) -> usize {
        self.config.local_batch_size.map_or(self.config.global_batch_size, |local| local * self.dp as usize)
    }
}

/// What besides the layout makes `variant` learn differently from `reference`, in words: each
/// a reason the curves may part. None means only the layout differs.
pub fn reasons(reference: &Setup<'_>, variant: &Setup<'_>) -> Vec<String> {
    let (a, b) = (reference.config, variant.config);
    let mut why = Vec::new();
    let model = [
        ("embed_dim", a.embed_dim, b.embed_dim),
        ("depth", a.depth, b.depth),
        ("num_heads", a.num_heads, b.num_heads),
        ("patch_size", a.patch_size, b.patch_size),
        ("n_in_channels", a.n_in_channels, b.n_in_channels),
    ];
    let mut changed: Vec<String> = model.iter().filter(|(_, x, y)| x != y).map(|(k, x, y)| format!("{k} {x} → {y}")).collect();
    if a.img_size != b.img_size {
        changed.push(format!("img_size {:?} → {:?}", a.img_size, b.img_size));
    }
    if !changed.is_empty() {
        why.push(format!("it changes the model ({}): another model learns another curve", changed.join(", ")));
    }
    let optimisation = a.lr != b.lr || a.optimizer != b.optimizer || a.warmup != b.warmup || a.lr_schedule != b.lr_schedule;
    if optimisation {
        why.push("it changes the optimizer or its learning rate: each step moves the weights differently".to_owned());
    }
    if reference.global_batch() != variant.global_batch() {
        why.push(format!(
            "the global batch is {} against {}: the sampler deals other samples to each step",
            variant.global_batch(),
            reference.global_batch()
        ));
    }
    let half = [a.amp_mode, b.amp_mode].into_iter().find_map(|m| match m {
        AmpMode::Bf16 => Some(("bf16", 8)),
        AmpMode::Fp16 => Some(("fp16", 11)),
        AmpMode::None => None,
    });
    if let Some((name, bits)) = half {
        why.push(format!(
            "{name} keeps {bits} bits of each product's inputs, so sums taken in another order round differently and the curves drift slowly apart"
        ));
    }
    let dropout = a.dropout.max(b.dropout);
    if dropout > 0.0 {
        why.push(format!("dropout {dropout} draws its masks from each rank's random stream, and another layout draws other masks"));
    }
    why
}

/// The verdict on one variant against the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `None` until both curves have a common epoch.
    pub agrees: Option<bool>,
    /// The largest relative difference and the step it was at.
    pub worst: Option<(f64, u64)>,
    pub text: String,
}

/// `curve`'s relative difference from `reference` at each step both have.
pub fn differences(reference: &[(f64, f64)], curve: &[(f64, f64)]) -> Vec<(f64, f64)> {
    curve
        .iter()
        .filter_map(|&(step, loss)| {
            let &(_, base) = reference.iter().find(|(s, _)| *s == step)?;
            let scale = base.abs().max(f64::MIN_POSITIVE);
            Some((step, (loss - base).abs() / scale))
        })
        .collect()
}

/// The verdict on a variant whose curve differs from the reference's by `differences`, where
/// `why` says what it changes besides the layout (from [`reasons`]).
pub fn verdict(reference_label: &str, differences: &[(f64, f64)], why: &[String]) -> Verdict {
    let worst = differences.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
    let Some((step, by)) = worst else {
        return Verdict { agrees: None, worst: None, text: "waiting for an epoch of both runs".to_owned() };
    };
    let agrees = by <= BAND;
    let at = format!("{} at most, at step {step}", relative(by));
    let text = match (agrees, why.is_empty()) {
        (true, true) => format!(
            "agrees with {reference_label} at every epoch ({at}): the same model, samples and order on another layout; only the order of float32 sums differs"
        ),
        (false, true) => format!(
            "differs from {reference_label} ({at}), beyond the band of {}: the same model, samples and order should agree on any layout, so look for a bug (a group that sums where it should average, a rank that reads other samples)",
            relative(BAND)
        ),
        (true, false) => format!("agrees with {reference_label} within the band ({at}), though {}", why.join("; ")),
        (false, false) => format!("differs from {reference_label} ({at}), as expected: {}", why.join("; ")),
    };
    Verdict { agrees: Some(agrees), worst: Some((by, step as u64)), text }
}

/// A relative difference as people read it: `0` when equal, else `2.3e-7`.
fn relative(value: f64) -> String {
    if value == 0.0 { "0 (equal)".to_owned() } else { format!("{value:.1e}") }
}

/// The differences drawn on a log scale from [`FLOOR`] to 1, in the sweep's curve box: one
/// path per variant (none for the reference), the band's height, and the y ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct DifferencePicture {
    pub paths: Vec<Option<String>>,
    pub band_y: f64,
    pub y_ticks: Vec<(f64, String)>,
}

pub fn difference_picture(per_variant: &[Option<Vec<(f64, f64)>>], x_max: f64) -> DifferencePicture {
    let m = CURVES_MARGIN;
    let decades = -FLOOR.log10();
    let y_at = |d: f64| CURVES_HEIGHT - m / 2.0 - (d.max(FLOOR).log10() + decades) / decades * (CURVES_HEIGHT - m);
    let x_at = |x: f64| m + x / x_max.max(1.0) * (WIDTH - 1.5 * m);
    let paths = per_variant.iter().map(|points| polyline(points.as_deref()?, &x_at, &y_at)).collect();
    let y_ticks = log_ticks(FLOOR, 1.0, 5).into_iter().map(|t| (y_at(t), format_number(t))).collect();
    DifferencePicture { paths, band_y: y_at(BAND), y_ticks }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short() -> TrainConfig {
        TrainConfig { embed_dim: 128, depth: 4, num_heads: 4, global_batch_size: 8, dropout: 0.0, ..TrainConfig::default() }
    }

    #[test]
    fn a_layout_alone_agrees_within_the_band_and_a_bug_does_not() {
        let reference = [(0.0, 1.0228868), (32.0, 0.6763333), (64.0, 0.6292844)];
        let tp = [(0.0, 1.0228865), (32.0, 0.6763333), (64.0, 0.6292844)];
        let d = differences(&reference, &tp);
        assert_eq!(d.len(), 3);
        let v = verdict("serial", &d, &[]);
        assert_eq!(v.agrees, Some(true), "{v:?}");
        assert_eq!(v.worst.map(|w| w.1), Some(0));
        assert!(v.text.contains("2.9e-7") && v.text.contains("float32 sums"), "{}", v.text);
        let off = [(0.0, 1.0228868), (32.0, 0.68), (64.0, 0.6292844)];
        let v = verdict("serial", &differences(&reference, &off), &[]);
        assert_eq!(v.agrees, Some(false));
        assert!(v.text.contains("bug") && v.text.contains("step 32"), "{}", v.text);
        assert_eq!(verdict("serial", &differences(&reference, &[(16.0, 0.7)]), &[]).agrees, None, "no common epoch yet");
    }

    #[test]
    fn what_a_variant_changes_besides_the_layout_is_named() {
        let a = short();
        let same = reasons(&Setup { config: &a, dp: 1 }, &Setup { config: &a, dp: 2 });
        assert!(same.is_empty(), "dp alone keeps the global batch: {same:?}");
        let wider = TrainConfig { embed_dim: 96, ..short() };
        let why = reasons(&Setup { config: &a, dp: 1 }, &Setup { config: &wider, dp: 1 });
        assert_eq!(why.len(), 1);
        assert!(why[0].contains("embed_dim 128 → 96"), "{why:?}");
        let v = verdict("serial", &[(64.0, 0.1)], &why);
        assert_eq!(v.agrees, Some(false));
        assert!(v.text.contains("as expected") && v.text.contains("changes the model"), "{}", v.text);
        let local = TrainConfig { local_batch_size: Some(8), ..short() };
        let why = reasons(&Setup { config: &a, dp: 1 }, &Setup { config: &local, dp: 2 });
        assert!(why.iter().any(|w| w.contains("global batch is 16 against 8")), "{why:?}");
        let bf16 = TrainConfig { amp_mode: AmpMode::Bf16, dropout: 0.1, ..short() };
        let why = reasons(&Setup { config: &a, dp: 1 }, &Setup { config: &bf16, dp: 1 });
        assert!(why.iter().any(|w| w.starts_with("bf16 keeps 8 bits")), "{why:?}");
        assert!(why.iter().any(|w| w.starts_with("dropout 0.1")), "{why:?}");
    }

    #[test]
    fn the_picture_puts_equal_runs_on_the_floor_and_the_band_between() {
        let p = difference_picture(&[None, Some(vec![(0.0, 0.0), (64.0, 1.0)])], 64.0);
        assert!(p.paths[0].is_none());
        let d = p.paths[1].as_deref().unwrap();
        let floor = CURVES_HEIGHT - CURVES_MARGIN / 2.0;
        assert!(d.starts_with(&format!("M{:.1} {floor:.1}", CURVES_MARGIN)), "{d}");
        assert!(p.band_y < floor && p.band_y > CURVES_MARGIN / 2.0, "{}", p.band_y);
        assert!(!p.y_ticks.is_empty());
    }
}
