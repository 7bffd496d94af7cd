//! The search on the tutorial's own configs and clusters (`config/*.yaml`, as shipped).

use std::time::Instant;

use super::*;
use crate::cluster::Clusters;
use crate::config::ConfigFile;
use crate::estimate::{EstimateOptions, Link, estimate};
use crate::layout::{Sizes, Token};

fn config(name: &str) -> TrainConfig {
    ConfigFile::parse(include_str!("../../shipped/ViT.yaml")).unwrap().get(name).unwrap()
}

fn clusters() -> Clusters {
    Clusters::parse(include_str!("../../shipped/clusters.yaml")).unwrap()
}

/// `name` on `gpus` of Perlmutter's `gpu` (its first, the 40 GB A100, when `None`).
fn space<'a>(name: &'a str, config: &'a TrainConfig, cluster: &'a Cluster, gpu: Option<&'a str>, gpus: u32) -> Space<'a> {
    Space { config_name: name, config, cluster_name: "perlmutter", cluster, gpu, gpus }
}

fn candidate(tp: u32, cp: u32, pp: u32, dp: u32, order: &str) -> Candidate {
    let sizes = Sizes { tp, cp, pp, dp };
    Candidate { sizes, order: Order::parse(order, sizes).unwrap(), zero: 0, recompute: false, micro_batches: 1 }
}

fn rule_of(judgement: &Judgement) -> Option<Rule> {
    match judgement {
        Judgement::Valid(_) => None,
        Judgement::Excluded { rule, .. } => Some(*rule),
    }
}

#[test]
fn search_finds_the_tutorials_published_mp_layouts() {
    let (mp, clusters) = (config("mp"), clusters());
    let perlmutter = clusters.get("perlmutter").unwrap();
    for gpu in ["a100-40gb", "a100-80gb"] {
        let answer = search(&space("mp", &mp, perlmutter, Some(gpu), 16)).unwrap();
        assert_eq!(answer.tutorial.len(), 2);
        for standing in &answer.tutorial {
            let wanted = standing.choice.candidate().unwrap();
            let rank = standing.rank.unwrap_or_else(|| panic!("{gpu}: {wanted} is not ranked: {:?}", standing.judgement));
            assert_eq!(answer.ranked[rank - 1].candidate, wanted);
        }
    }
    // The tutorial's tp 1 run took 80 GB GPUs: on 40 GB ones the search leaves it out, as the
    // tutorial's own run ran out of memory.
    let on_80 = search(&space("mp", &mp, perlmutter, Some("a100-80gb"), 4)).unwrap();
    assert!(on_80.tutorial[0].rank.is_some(), "{:?}", on_80.tutorial[0]);
    let on_40 = search(&space("mp", &mp, perlmutter, None, 4)).unwrap();
    assert_eq!(rule_of(&on_40.tutorial[0].judgement), Some(Rule::OutOfMemory));
}

#[test]
fn search_on_16_a100s_says_how_its_best_beats_tp4_dp4_and_why() {
    let (mp, clusters) = (config("mp"), clusters());
    let answer = search(&space("mp", &mp, clusters.get("perlmutter").unwrap(), None, 16)).unwrap();
    let best = &answer.ranked[0];
    let tp4 = answer.tutorial.iter().find(|s| s.choice.sizes.tp == 4).unwrap();
    let Judgement::Valid(tutorial) = &tp4.judgement else { panic!("{tp4:?}") };
    let rank = tp4.rank.unwrap();
    let behind = tp4.behind_best.unwrap();
    println!(
        "mp on 16 × a100-40gb: best {} at {:.1} samples/s ({:.1} GiB); tp4 × dp4 ranks {rank} of {} at {:.1} samples/s ({:.1} GiB); \
         the difference is mostly {}: {:.2} ms per sample against {:.2}",
        best.candidate,
        best.samples_per_sec,
        best.memory_gb,
        answer.ranked.len(),
        tutorial.samples_per_sec,
        tutorial.memory_gb,
        behind.part,
        behind.slower_ms_per_sample,
        behind.faster_ms_per_sample,
    );
    assert!(rank > 1 && best.samples_per_sec > tutorial.samples_per_sec);
    assert!(behind.slower_ms_per_sample > behind.faster_ms_per_sample, "{behind:?}");
    // The term is one of the tutorial's parts, and tp 4's all-reduces between layers are a
    // cost the best layout pays less of.
    assert!(tutorial.split.parts().iter().any(|(part, s)| *part == behind.part && *s > 0.0), "{behind:?}");
    let tp_waits = |r: &Ranked| r.split.seconds(StepPart::Collectives { group: Token::TP, link: Link::Nvlink });
    assert!(tp_waits(tutorial) > tp_waits(best), "{:?} vs {:?}", tutorial.split, best.split);
    assert!(!answer.front.is_empty() && answer.front[0] == 0);
}

#[test]
fn search_excludes_every_rule_with_a_case() {
    let (mp, tiny, clusters) = (config("mp"), config("cpu_tiny"), clusters());
    let perlmutter = clusters.get("perlmutter").unwrap();
    let mut odd = config("mp");
    odd.embed_dim = 1540;
    let zero_on_one_replica = Candidate { zero: 2, ..candidate(4, 4, 1, 1, "tp-cp") };
    let eight_micro_batches = Candidate { micro_batches: 8, ..candidate(1, 1, 1, 16, "dp") };
    let zero_on_stages = Candidate { zero: 1, micro_batches: 2, ..candidate(1, 1, 2, 8, "dp-pp") };
    let one_micro_batch_on_stages = candidate(1, 1, 2, 8, "dp-pp");
    let cases: [(Space<'_>, Candidate, Rule); 10] = [
        (space("mp", &mp, perlmutter, None, 16), candidate(16, 1, 1, 1, "tp"), Rule::HeadsNotDivisibleByTp),
        (space("cpu_tiny", &tiny, perlmutter, None, 128), candidate(1, 128, 1, 1, "cp"), Rule::MoreCpThanTokens),
        (space("mp", &mp, perlmutter, None, 16), candidate(1, 1, 16, 1, "pp"), Rule::MoreStagesThanBlocks),
        (space("mp", &mp, perlmutter, None, 3), candidate(1, 1, 1, 3, "dp"), Rule::BatchNotDivisibleByDp),
        (space("mp", &mp, perlmutter, None, 16), eight_micro_batches, Rule::BatchNotDivisibleByMicroBatches),
        (space("mp", &mp, perlmutter, None, 16), zero_on_one_replica, Rule::ZeroWithoutDp),
        (space("mp", &mp, perlmutter, None, 16), zero_on_stages, Rule::ZeroWithPipeline),
        (space("mp", &mp, perlmutter, None, 16), one_micro_batch_on_stages, Rule::FewerMicroBatchesThanStages),
        (space("mp", &odd, perlmutter, None, 4), candidate(4, 1, 1, 1, "tp"), Rule::ConfigRule),
        (space("mp", &mp, perlmutter, None, 4), candidate(1, 1, 1, 4, "dp"), Rule::OutOfMemory),
    ];
    for (space, case, rule) in &cases {
        let judgement = judge(space, *case).unwrap();
        let Judgement::Excluded { rule: found, reason } = &judgement else { panic!("{case} runs") };
        println!("{:<34} {case}: {reason}", format!("{rule:?}"));
        assert_eq!(found, rule, "{case}: {reason}");
        // The search counts it under the same rule.
        if space.config_name == "mp" && space.config.embed_dim == 1536 {
            let answer = search(space).unwrap();
            assert!(answer.exclusions.iter().any(|e| e.rule == *rule && e.count > 0), "{rule:?} not counted");
            assert!(answer.ranked.iter().all(|r| r.candidate != *case));
        }
    }
    assert!(Rule::ALL.iter().all(|rule| cases.iter().any(|(_, _, r)| r == rule)), "a rule without a case");
    let reasons: Vec<String> = cases.iter().map(|(s, c, _)| format!("{:?}", judge(s, *c).unwrap())).collect();
    assert!(reasons[0].contains("tp 16 does not divide num_heads 8"), "{}", reasons[0]);
    assert!(reasons[1].contains("cp 128 is more than the 72 tokens"), "{}", reasons[1]);
    assert!(reasons[4].contains("8 micro-batches do not divide the 4 samples"), "{}", reasons[4]);
    assert!(reasons[6].contains("the trainer shards a whole model's units"), "{}", reasons[6]);
    assert!(reasons[7].contains("1 micro-batch on 2 stages"), "{}", reasons[7]);
    assert!(reasons[8].contains("1540 is not divisible by num_heads 8"), "{}", reasons[8]);
    assert!(reasons[9].contains("GiB per GPU; the a100-40gb has 40"), "{}", reasons[9]);
}

#[test]
fn search_counts_every_layout_once() {
    let (mp, clusters) = (config("mp"), clusters());
    let answer = search(&space("mp", &mp, clusters.get("perlmutter").unwrap(), None, 16)).unwrap();
    // 16 = 2⁴ over four factors: 35 factorisations; with their orders (the permutations of the
    // factors above 1), 7 micro-batch counts (1 to 64) and 8 ZeRO × recomputation variants.
    let mut layouts = 0;
    candidate::factorisations(16, |sizes| layouts += candidate::order_count(sizes) * 7 * 8);
    assert_eq!(layouts, 7616);
    let excluded: u64 = answer.exclusions.iter().map(|e| e.count).sum();
    assert_eq!(answer.searched, layouts);
    assert_eq!(excluded + answer.ranked.len() as u64, layouts);
    assert!(answer.ranked.windows(2).all(|w| w[0].samples_per_sec >= w[1].samples_per_sec));
    for &i in &answer.front {
        let r = &answer.ranked[i];
        assert!(!answer.ranked.iter().any(|o| o.samples_per_sec >= r.samples_per_sec && o.memory_gb < r.memory_gb), "{i} is dominated");
    }
}

#[test]
fn search_predicts_with_the_estimate_every_run_records() {
    let (mp, clusters) = (config("mp"), clusters());
    let perlmutter = clusters.get("perlmutter").unwrap();
    let space = space("mp", &mp, perlmutter, None, 16);
    let Judgement::Valid(ranked) = judge(&space, candidate(4, 1, 1, 4, "tp-cp-dp")).unwrap() else { panic!() };
    let tp4 = TrainConfig { tensor_parallel: 4, ..mp.clone() };
    let recorded = estimate(&tp4, &tp4.layout(16).unwrap(), perlmutter, &perlmutter.gpus[0], &EstimateOptions::default()).unwrap();
    assert!((ranked.step_time_s - recorded.step_time_s).abs() < 1e-12, "{} vs {}", ranked.step_time_s, recorded.step_time_s);
    assert!((ranked.memory_gb - recorded.memory_gb.total).abs() < 1e-12);
    // Two micro-batches: half the activations, the same arithmetic, the optimizer once.
    let two = Candidate { micro_batches: 2, ..ranked.candidate };
    let Judgement::Valid(halves) = judge(&space, two).unwrap() else { panic!() };
    assert!(halves.memory_gb < ranked.memory_gb);
    assert!((halves.split.arithmetic_s - ranked.split.arithmetic_s).abs() < 1e-9);
    assert_eq!(halves.split.optimizer_s, ranked.split.optimizer_s);
    // Recomputation costs time and saves memory; so does ZeRO, by as much as the estimate of
    // the same run with its `zero_stage` says.
    let recompute = Candidate { recompute: true, ..ranked.candidate };
    let Judgement::Valid(again) = judge(&space, recompute).unwrap() else { panic!() };
    assert!(again.memory_gb < ranked.memory_gb && again.step_time_s > ranked.step_time_s);
    for zero in 1..=3 {
        let Judgement::Valid(sharded) = judge(&space, Candidate { zero, ..ranked.candidate }).unwrap() else { panic!() };
        let config = TrainConfig { zero_stage: zero.into(), ..tp4.clone() };
        let recorded =
            estimate(&config, &config.layout(16).unwrap(), perlmutter, &perlmutter.gpus[0], &EstimateOptions::default()).unwrap();
        assert!(sharded.memory_gb < ranked.memory_gb && sharded.step_time_s > ranked.step_time_s, "ZeRO {zero}");
        assert!(
            (sharded.step_time_s - recorded.step_time_s).abs() < 1e-9,
            "ZeRO {zero}: {} vs {}",
            sharded.step_time_s,
            recorded.step_time_s
        );
        assert!((sharded.memory_gb - recorded.memory_gb.total).abs() < 1e-9, "ZeRO {zero}");
    }
}

#[test]
fn search_says_why_when_the_input_has_no_answer() {
    let (mp, clusters) = (config("mp"), clusters());
    let perlmutter = clusters.get("perlmutter").unwrap();
    let problems = |space: Space<'_>| search(&space).unwrap_err().problems().to_string();
    let none = problems(space("mp", &mp, perlmutter, None, 0));
    assert!(none.contains("gpus: must be at least 1, got 0"), "{none}");
    let h100 = problems(space("mp", &mp, perlmutter, Some("h100"), 16));
    assert!(h100.contains("gpu: unknown GPU `h100` on perlmutter; it has: a100-40gb, a100-80gb"), "{h100}");
    let local = problems(Space { cluster_name: "local", cluster: clusters.get("local").unwrap(), ..space("mp", &mp, perlmutter, None, 2) });
    assert!(local.contains("cluster: `local` runs ranks on CPU cores"), "{local}");
    // A model too wide for one GPU however it is laid out: the answer names the rule and the
    // least memory any layout needed.
    let mut wide = config("mp");
    wide.embed_dim = 8192;
    wide.depth = 48;
    let huge = problems(space("mp", &wide, perlmutter, None, 1));
    assert!(huge.contains("gpus: no layout of 1 GPU runs `mp` on the a100-40gb"), "{huge}");
    assert!(huge.contains("memory: ") && huge.contains("the layout that needs least, tp 1 × cp 1 × pp 1 × dp 1"), "{huge}");
    // A GPU count no layout can use: with one token per sample and six blocks, tp 7 does not
    // divide 8 heads, cp 7 is more than the token, pp 7 more than the blocks, dp 7 does not
    // divide 64.
    let mut short = config("mp");
    short.img_size = [8, 8];
    short.patch_size = 8;
    short.depth = 6;
    let prime = problems(space("mp", &short, perlmutter, None, 7));
    assert!(prime.contains("no layout of 7 GPUs") && prime.contains("context_parallel: "), "{prime}");
}

/// The figure BENCHMARKS.md quotes: `mp`'s whole space on Perlmutter at every power-of-two GPU
/// count, searched one count after another. Printed, not asserted: a test must not fail on a
/// slow machine.
#[test]
fn search_benchmark_mp_on_perlmutter_every_power_of_two() {
    let (mp, clusters) = (config("mp"), clusters());
    let perlmutter = clusters.get("perlmutter").unwrap();
    let start = Instant::now();
    let (mut searched, mut estimates, mut valid) = (0, 0, 0);
    for gpus in (0..=10).map(|k| 1u32 << k) {
        let answer = search(&space("mp", &mp, perlmutter, None, gpus)).unwrap();
        searched += answer.searched;
        estimates += answer.estimates;
        valid += answer.ranked.len();
    }
    let elapsed = start.elapsed();
    println!(
        "search benchmark: mp on perlmutter a100-40gb, 1..1024 GPUs: {searched} layouts searched, {valid} valid, {estimates} estimates, {:.1} ms",
        elapsed.as_secs_f64() * 1e3
    );
    assert!(valid > 0 && searched > valid as u64);
}

#[test]
fn search_splits_out_the_data_loading_a_step_waits_for() {
    let clusters = clusters();
    let perlmutter = clusters.get("perlmutter").unwrap();
    // `base` read as the tutorial reads it with 0 workers (one sample after another), with
    // `short_opt`'s fast step: the whole dataset, mostly from the file system, outlasts it.
    let mut base = config("base");
    base.apply_overrides(&["serial_read=true", "amp_mode=fp16", "enable_jit=true"]).unwrap();
    let one = space("base", &base, perlmutter, None, 1);
    let Judgement::Valid(serial) = judge(&one, candidate(1, 1, 1, 1, "dp")).unwrap() else { panic!() };
    assert_eq!(serial.limit, StepPart::DataLoading, "{:?}", serial.split);
    assert_eq!(serial.limit.to_string(), "data loading the step waits for");
    let recorded = estimate(&base, &base.layout(1).unwrap(), perlmutter, &perlmutter.gpus[0], &EstimateOptions::default()).unwrap();
    assert!((serial.split.seconds(StepPart::DataLoading) - recorded.time.exposed_data_s).abs() < 1e-12);
    assert!((serial.step_time_s - recorded.step_time_s).abs() < 1e-12);
    // Micro-batches read the same batch: the same wait, in as many slices.
    let Judgement::Valid(halves) = judge(&one, Candidate { micro_batches: 2, ..serial.candidate }).unwrap() else { panic!() };
    assert!((halves.split.seconds(StepPart::DataLoading) - serial.split.seconds(StepPart::DataLoading)).abs() < 1e-9);
    // Eight workers read beside the step: they need less than it takes, so nothing is waited for.
    base.apply_overrides(&["num_data_workers=8"]).unwrap();
    let workers = space("base", &base, perlmutter, None, 1);
    let Judgement::Valid(fed) = judge(&workers, candidate(1, 1, 1, 1, "dp")).unwrap() else { panic!() };
    assert!(fed.split.data_overlapped && fed.split.data_s > 0.0 && fed.split.seconds(StepPart::DataLoading) == 0.0);
    assert_ne!(fed.limit, StepPart::DataLoading);
}

#[test]
fn recomputation_hides_more_of_the_workers_reading_without_counting_it_twice() {
    let clusters = clusters();
    let perlmutter = clusters.get("perlmutter").unwrap();
    // `base` fp16 + compile with one worker: the reading (about 1.1 s a batch) outlasts the
    // step (about 0.4 s), so the step waits for part of it; recomputation lengthens the
    // step, and the wait shrinks by as much.
    let mut base = config("base");
    base.apply_overrides(&["num_data_workers=1", "amp_mode=fp16", "enable_jit=true"]).unwrap();
    let one = space("base", &base, perlmutter, None, 1);
    let Judgement::Valid(kept) = judge(&one, candidate(1, 1, 1, 1, "dp")).unwrap() else { panic!() };
    let Judgement::Valid(again) = judge(&one, Candidate { recompute: true, ..kept.candidate }).unwrap() else { panic!() };
    assert!(kept.split.seconds(StepPart::DataLoading) > 0.0 && kept.limit == StepPart::DataLoading, "{:?}", kept.split);
    assert!(again.split.recompute_s > 0.0);
    assert!(
        (again.step_time_s - kept.step_time_s).abs() < 1e-9,
        "the worker still sets the pace: {} vs {}",
        again.step_time_s,
        kept.step_time_s
    );
    let recorded = |set: &str| {
        let mut c = base.clone();
        c.apply_overrides(&[set]).unwrap();
        estimate(&c, &c.layout(1).unwrap(), perlmutter, &perlmutter.gpus[0], &EstimateOptions::default()).unwrap().step_time_s
    };
    assert!((again.step_time_s - recorded("activation_checkpointing=true")).abs() < 1e-9);
}
