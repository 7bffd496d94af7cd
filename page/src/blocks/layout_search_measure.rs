//! "Run the top three": the layout search on this machine's cores, its three fastest rank
//! layouts turned into a sweep's variants (run here one after another, each predicted at
//! launch), and the verdict once they are measured: whether the measured ranking is the
//! predicted one, and, where the measurement overturns it, which term of the step the
//! prediction of that pair hinged on.
//!
//! This machine is searched as the estimate models it (`MachineModel::for_run`: its measured
//! rates as a device, one node holding every rank). A rank layout's fastest variant is the
//! one run; of equally fast ones (ZeRO stages 1 and 2 and micro-batches change the predicted
//! time by nothing but rounding), the simplest: DDP, the batch in one piece, no recomputation.

use scalebook_shared::config::{ConfigFile, LayoutRun};
use scalebook_shared::machine::MachineModel;
use scalebook_shared::search::{Answer, Difference, Ranked, Space, search};
use scalebook_shared::sweep::Variant;

use super::layout_search_model::Refusal;

/// How many layouts "Run the top three" runs.
pub const MEASURED: usize = 3;

/// The config it runs unless the learner picks another: the small model made for tensor and
/// context parallelism on CPU ranks.
pub const DEFAULT_CONFIG: &str = "cpu_mp";

/// The rank counts it offers: what a learner may run (2), and what the instructor's machine
/// may (4).
pub const RANKS: [u32; 2] = [2, 4];

/// The cluster name the answer is given under.
pub const MACHINE: &str = "this machine";

/// One layout to measure: as the search predicted it, and as the sweep runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Winner {
    /// Its place in the search's ranking, from 1.
    pub rank: usize,
    pub ranked: Ranked,
    pub variant: Variant,
}

/// The search of `config` on `ranks` of this machine's cores, and its fastest rank layouts as
/// a sweep's variants; or why there is nothing to run.
pub fn winners(config_name: &str, configs: &ConfigFile, machine: &MachineModel, ranks: u32) -> Result<(Answer, Vec<Winner>), Refusal> {
    let refuse = |headline: String, e: scalebook_shared::Error| Refusal {
        headline,
        reasons: e.problems().0.iter().map(ToString::to_string).collect(),
    };
    let config = configs.get(config_name).map_err(|e| refuse(format!("No config `{config_name}` to run."), e))?;
    let (cluster, _) = machine
        .for_run(&config, ranks as usize)
        .map_err(|e| refuse(format!("This machine's measurement cannot predict {config_name} on {ranks} ranks:"), e))?;
    let space = Space { config_name, config: &config, cluster_name: MACHINE, cluster: &cluster, gpu: None, gpus: ranks };
    let answer = search(&space).map_err(|e| refuse(format!("No layout of {config_name} on {ranks} of this machine's ranks runs:"), e))?;
    let winners = pick(&answer);
    if winners.len() < 2 {
        let only = winners.first().map_or_else(String::new, |w| format!(" ({})", w.ranked.candidate));
        return Err(Refusal {
            headline: format!("Only one rank layout of {config_name} runs on {ranks} ranks{only}: a sweep compares at least two."),
            reasons: Vec::new(),
        });
    }
    Ok((answer, winners))
}

/// The fastest variant of each of the [`MEASURED`] fastest rank layouts.
fn pick(answer: &Answer) -> Vec<Winner> {
    let mut winners: Vec<Winner> = Vec::new();
    for (i, r) in answer.ranked.iter().enumerate() {
        let same = |w: &Winner| (w.ranked.candidate.sizes, w.ranked.candidate.order) == (r.candidate.sizes, r.candidate.order);
        let full = winners.len() == MEASURED;
        match winners.iter_mut().find(|w| same(w)) {
            Some(w) if r.samples_per_sec == w.ranked.samples_per_sec && simpler(r, &w.ranked) => w.ranked = *r,
            Some(_) => {}
            None if !full => winners.push(Winner { rank: i + 1, ranked: *r, variant: variant(0, r) }),
            None => {}
        }
    }
    for (place, w) in winners.iter_mut().enumerate() {
        w.variant = variant(place + 1, &w.ranked);
    }
    winners
}

fn simpler(a: &Ranked, b: &Ranked) -> bool {
    let key = |r: &Ranked| (r.candidate.zero, r.candidate.micro_batches, r.candidate.recompute);
    key(a) < key(b)
}

/// `r` as a sweep runs it: its dp, and the config keys that make the rest of it.
pub fn variant(place: usize, r: &Ranked) -> Variant {
    let c = r.candidate;
    let s = c.sizes;
    let shown: Vec<String> =
        [("tp", s.tp), ("cp", s.cp), ("pp", s.pp), ("dp", s.dp)].iter().filter(|(_, n)| *n > 1).map(|(d, n)| format!("{d} {n}")).collect();
    let shape = if shown.is_empty() { "one rank".to_owned() } else { shown.join(" × ") };
    let order = c.layout().map_or_else(|_| c.order.to_string(), |l| l.effective_order());
    let run = LayoutRun { zero: c.zero.into(), micro_batches: c.micro_batches, recompute: c.recompute, ..LayoutRun::new(s, order) };
    let overrides = run.overrides();
    Variant { label: format!("#{place} {shape}"), dp: s.dp, overrides }
}

/// Whether the measured ranking is the predicted one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub agrees: bool,
    pub text: String,
}

/// The verdict on `winners` once every one has its samples/s measured and predicted (at
/// launch, as the sweep's bars show them); `None` before.
pub fn verdict(winners: &[Winner], predicted: &[Option<f64>], measured: &[Option<f64>]) -> Option<Verdict> {
    let n = winners.len();
    let predicted: Vec<f64> = predicted.iter().take(n).copied().collect::<Option<_>>()?;
    let measured: Vec<f64> = measured.iter().take(n).copied().collect::<Option<_>>()?;
    if predicted.len() < n || measured.len() < n {
        return None;
    }
    let order = |values: &[f64]| {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
        order
    };
    let (by_prediction, by_measurement) = (order(&predicted), order(&measured));
    let label = |i: usize| winners[i].variant.label.clone();
    let listed = |order: &[usize]| order.iter().map(|&i| format!("{} ({:.1})", label(i), measured[i])).collect::<Vec<_>>().join(", ");
    if by_prediction == by_measurement {
        return Some(Verdict {
            agrees: true,
            text: format!("The measured ranking is the predicted one: {} samples/s, fastest first.", listed(&by_measurement)),
        });
    }
    // The first pair the measurement turns round, in the predicted order.
    let (ahead, behind) = by_prediction
        .iter()
        .enumerate()
        .flat_map(|(k, &a)| by_prediction[k + 1..].iter().map(move |&b| (a, b)))
        .find(|&(a, b)| measured[b] > measured[a])?;
    let (fast, slow) = (&winners[ahead].ranked, &winners[behind].ranked);
    let gap = Difference::between((&fast.split, fast.global_batch as f64), (&slow.split, slow.global_batch as f64));
    Some(Verdict {
        agrees: false,
        text: format!(
            "The measurement overturns the prediction: {} measured {:.1} samples/s against {}'s {:.1}, though predicted slower \
             ({:.1} against {:.1}). The search put the gap between them mostly in {}: {:.2} ms per sample for {} against {:.2} \
             for {}. That is the term this machine's estimate got wrong for this pair. Measured, fastest first: {}.",
            label(behind),
            measured[behind],
            label(ahead),
            measured[ahead],
            predicted[behind],
            predicted[ahead],
            gap.part,
            gap.slower_ms_per_sample,
            label(behind),
            gap.faster_ms_per_sample,
            label(ahead),
            listed(&by_measurement),
        ),
    })
}

#[cfg(test)]
mod tests {
    use scalebook_shared::config::TrainConfig;

    use super::super::layout_search_model::tests::files;
    use super::*;

    /// A two-core machine as `scalebook-train machine` measured it.
    fn machine() -> MachineModel {
        serde_json::from_str(
            r#"{"cores":2,"memory_gb":23.54,"process_baseline_gb":0.115,"by_threads":[
                {"threads":1,"matmul_gflops":[94.6,96.0,95.4],"attention_gflops":[18.6,57.4],"copy_gb_per_s":26.3,"op_overhead_us":1.68,"step_op_us":15.9},
                {"threads":2,"matmul_gflops":[126.7,185.2,185.5],"attention_gflops":[18.2,69.6],"copy_gb_per_s":32.4,"op_overhead_us":1.69,"step_op_us":103.5}],
                "collective_latency_s":0.00227,"collective_gb_per_s":1.37,"measured_at":1795857325,"load_at_measurement":1.0}"#,
        )
        .unwrap()
    }

    #[test]
    fn the_top_three_of_this_machine_run_as_a_sweep() {
        let (configs, _) = files();
        let (answer, winners) = winners("cpu_mp", &configs, &machine(), 4).unwrap();
        assert_eq!(answer.gpus, 4);
        assert_eq!(winners.len(), MEASURED);
        assert_eq!(winners[0].rank, 1, "the fastest first");
        assert!(winners.windows(2).all(|w| w[0].rank < w[1].rank && w[0].ranked.samples_per_sec >= w[1].ranked.samples_per_sec));
        let shapes: Vec<_> = winners.iter().map(|w| (w.ranked.candidate.sizes, w.ranked.candidate.order)).collect();
        assert!(shapes.iter().enumerate().all(|(i, s)| !shapes[..i].contains(s)), "three different rank layouts: {shapes:?}");
        let config = configs.get("cpu_mp").unwrap();
        for w in &winners {
            let v = &w.variant;
            assert!(v.label.starts_with(&format!("#{} ", winners.iter().position(|x| x == w).unwrap() + 1)), "{v:?}");
            assert_eq!(v.dp, w.ranked.candidate.sizes.dp);
            // Every variant is a valid launch of the config on its ranks.
            let mut c: TrainConfig = config.clone();
            c.apply_overrides(&v.overrides).unwrap();
            assert_eq!(c.world(v.dp as usize), 4, "{v:?}");
            c.layout_for_dp(v.dp as usize).unwrap();
        }
        // Of equally fast variants, the simplest runs.
        let first = &winners[0].ranked;
        let twins = answer.ranked.iter().filter(|r| {
            (r.candidate.sizes, r.candidate.order) == (first.candidate.sizes, first.candidate.order)
                && r.samples_per_sec == first.samples_per_sec
        });
        assert!(
            twins.clone().all(|r| (r.candidate.zero, r.candidate.micro_batches) >= (first.candidate.zero, first.candidate.micro_batches))
        );
    }

    #[test]
    fn a_machine_that_runs_one_layout_is_refused_in_words() {
        let (configs, _) = files();
        let refused = winners("cpu_mp", &configs, &machine(), 1).unwrap_err();
        assert!(refused.headline.starts_with("Only one rank layout of cpu_mp runs on 1 ranks"), "{refused:?}");
        let unknown = winners("gpt", &configs, &machine(), 2).unwrap_err();
        assert_eq!(unknown.headline, "No config `gpt` to run.");
    }

    #[test]
    fn the_verdict_says_whether_the_measurement_keeps_the_ranking() {
        let (configs, _) = files();
        let (_, winners) = winners("cpu_mp", &configs, &machine(), 4).unwrap();
        let labels: Vec<&str> = winners.iter().map(|w| w.variant.label.as_str()).collect();
        assert_eq!(verdict(&winners, &[Some(3.0), Some(2.0), None], &[Some(3.0), Some(2.0), Some(1.0)]), None, "not all predicted");
        let kept = verdict(&winners, &[Some(3.0), Some(2.0), Some(1.0)], &[Some(30.0), Some(20.0), Some(10.0)]).unwrap();
        assert!(kept.agrees, "{kept:?}");
        assert_eq!(
            kept.text,
            format!(
                "The measured ranking is the predicted one: {} (30.0), {} (20.0), {} (10.0) samples/s, fastest first.",
                labels[0], labels[1], labels[2]
            )
        );
        let turned = verdict(&winners, &[Some(3.0), Some(2.0), Some(1.0)], &[Some(20.0), Some(30.0), Some(10.0)]).unwrap();
        assert!(!turned.agrees);
        let start = format!(
            "The measurement overturns the prediction: {} measured 30.0 samples/s against {}'s 20.0, though predicted slower (2.0 against 3.0).",
            labels[1], labels[0]
        );
        assert!(turned.text.starts_with(&start), "{}", turned.text);
        assert!(
            turned.text.contains("The search put the gap between them mostly in ") && turned.text.contains("ms per sample"),
            "{}",
            turned.text
        );
    }
}
