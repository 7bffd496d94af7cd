//! The launcher with the real trainer: a data-parallel run writes the same outputs as a
//! single-process one, a rank that dies takes the whole run down at once, and what a run
//! shows of itself (step profiles on every rank, weather maps every epoch) is there.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use scalebook_shared::metrics::tags;
use scalebook_shared::profile::trace::{ProfileSummary, RankSummary, TOP_OPS};
use scalebook_shared::profile::{ranges, trace_file};
use scalebook_shared::rundir;
use scalebook_shared::weather::{MAPPED_CHANNELS, MapIndex, map_file};

mod support;
use support::python::run_python;
use support::runs::{self, generate_sized, launch_config, points};

fn scratch(name: &str) -> tempfile::TempDir {
    runs::scratch(&format!("launch-{name}"))
}

fn generate(dir: &Path) {
    generate_sized(dir, 48, [36, 72]);
}

/// `launch --nproc N -- train --config cpu_tiny` on `data`, plus `extra` overrides.
fn launch_cmd(nproc: usize, data: &Path, run_dir: &Path, extra: &[&str]) -> Command {
    launch_config("cpu_tiny", nproc, data, run_dir, extra)
}

#[test]
fn a_data_parallel_run_writes_what_a_single_process_run_writes() {
    let scratch_dir = scratch("dp");
    let root = scratch_dir.path();
    generate(&root.join("data"));
    let out = launch_cmd(2, &root.join("data"), &root.join("run"), &["num_iters=8"]).env_remove("OMP_WAIT_POLICY").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[rank 0]") && stderr.contains("Setting DP = 2, TP = 1, CP = 1, PP = 1"), "{stderr}");
    // The machine's 2 cores (or however many) split between the ranks, waiting passively even
    // where the caller did not say so (the launch below removes the variable).
    assert!(stderr.contains("CPU threads per rank: ") && stderr.contains("(OMP_WAIT_POLICY PASSIVE)"), "{stderr}");
    assert!(!stderr.contains("[rank 1] 20"), "only rank 0 logs: {stderr}");
    let pts = points(&root.join("run"));
    for tag in tags::ALL {
        assert!(pts.iter().any(|p| p.tag == tag), "no {tag}");
    }
    // 16 samples over dp 2 at local batch 2: 4 iterations per epoch, 2 epochs.
    let valid: Vec<u64> = pts.iter().filter(|p| p.tag == tags::LOSS_VALID).map(|p| p.step).collect();
    assert_eq!(valid, vec![0, 4, 8]);
    assert!(root.join("run/checkpoints/last.ot").exists() && root.join("run/out.log").exists());
}

#[test]
fn a_tensor_and_data_parallel_run_of_the_cpu_config_learns() {
    let scratch_dir = scratch("tpdp");
    let root = scratch_dir.path();
    generate_sized(&root.join("data"), 160, [90, 180]);
    let run = root.join("run");
    let out = launch_config("cpu_mp", 4, &root.join("data"), &run, &["tensor_parallel=2"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Setting DP = 2, TP = 2, CP = 1, PP = 1"), "{stderr}");
    let valid: Vec<f64> = points(&run).iter().filter(|p| p.tag == tags::LOSS_VALID).map(|p| p.value).collect();
    assert_eq!(valid.len(), 3, "step 0 and two epochs: {valid:?}");
    assert!(valid[2] < 0.9 * valid[0], "validation loss should fall: {valid:?}");
    // Each epoch's step split names the groups that talked, with their time and bytes per
    // step: tp and dp, not cp (one rank).
    let pts = points(&run);
    for (token, time_tag, bytes_tag) in tags::split::GROUPS {
        let per_epoch = |tag: &str| pts.iter().filter(|p| p.tag == tag).map(|p| p.value).collect::<Vec<_>>();
        let (time, bytes) = (per_epoch(time_tag), per_epoch(bytes_tag));
        match token {
            "cp" => assert!(time.is_empty() && bytes.is_empty(), "cp has one rank: {time:?} {bytes:?}"),
            _ => {
                assert_eq!((time.len(), bytes.len()), (2, 2), "{token}: one point per epoch");
                assert!(time.iter().all(|t| *t > 0.0) && bytes.iter().all(|b| *b > 0.0), "{token}: {time:?} {bytes:?}");
                assert_eq!(bytes[0], bytes[1], "{token}: every step moves the same bytes");
            }
        }
    }
    // Each tensor-parallel rank keeps its own shard.
    for shard in ["last.mp0.ot", "last.mp1.ot", "last.json"] {
        assert!(run.join("checkpoints").join(shard).exists(), "no {shard}");
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else { continue };
        // The parent pid is the second field after the parenthesised command name.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        if after.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            out.push(child);
        }
    }
    out
}

#[test]
fn killing_one_rank_ends_the_whole_run_with_a_clear_error() {
    let scratch_dir = scratch("kill");
    let root = scratch_dir.path();
    generate(&root.join("data"));
    let run_dir = root.join("run");
    let mut launcher =
        launch_cmd(4, &root.join("data"), &run_dir, &["num_iters=100000"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // Wait until training is under way.
    let start = Instant::now();
    while !points(&run_dir).iter().any(|p| p.step >= 2) {
        assert!(start.elapsed() < Duration::from_secs(120), "training never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let ranks = children_of(launcher.id());
    assert_eq!(ranks.len(), 4, "{ranks:?}");
    Command::new("kill").args(["-KILL", &ranks[2].to_string()]).status().unwrap();
    let killed_at = Instant::now();
    let status = loop {
        if let Some(status) = launcher.try_wait().unwrap() {
            break status;
        }
        assert!(killed_at.elapsed() < Duration::from_secs(60), "the launcher did not stop after a rank died");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(launcher.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("was killed by a signal; stopping the other ranks"), "{stderr}");
    for pid in ranks {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "rank process {pid} outlived the launcher");
    }
}

/// A user range of a trace: its name, start and end in microseconds.
struct Span {
    name: String,
    start: f64,
    end: f64,
}

/// The user ranges in `rank`'s trace, after checking it is Chrome-trace JSON with operators
/// in it.
fn trace_spans(run_dir: &Path, rank: usize) -> Vec<Span> {
    let path = run_dir.join(rundir::PROFILE_DIR).join(trace_file(rank));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let trace: serde_json::Value = serde_json::from_str(&text).expect("Chrome-trace JSON");
    let events = trace["traceEvents"].as_array().expect("a traceEvents list");
    let complete = |cat: &'static str| events.iter().filter(move |e| e["ph"] == "X" && e["cat"] == cat);
    assert!(complete("cpu_op").any(|e| e["name"] == "aten::mm" && e["dur"].as_f64().is_some()), "operators with durations");
    complete("user_annotation")
        .filter_map(|e| {
            let (start, dur) = (e["ts"].as_f64()?, e["dur"].as_f64()?);
            Some(Span { name: e["name"].as_str()?.to_owned(), start, end: start + dur })
        })
        .collect()
}

fn trace_ranges(run_dir: &Path, rank: usize) -> Vec<String> {
    trace_spans(run_dir, rank).into_iter().map(|s| s.name).collect()
}

#[test]
fn a_single_rank_cpu_short_run_profiles_its_steps_draws_maps_every_epoch_and_rolls_out_a_forecast() {
    let scratch_dir = scratch("inside");
    let root = scratch_dir.path();
    generate_sized(&root.join("data"), 24, [90, 180]);
    let run = root.join("run");
    let extra = ["limit_nsamples=16", "limit_nsamples_val=8", "num_iters=4", "profile=2:4"];
    let out = launch_config("cpu_short", 1, &root.join("data"), &run, &extra).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let names = trace_ranges(&run, 0);
    for range in ranges::STEP.iter().chain(&["step 2", "step 3"]) {
        assert!(names.iter().any(|n| n == range), "{range} missing from {names:?}");
    }
    assert!(!names.iter().any(|n| n == "step 1" || n == "step 4"), "only steps 2 and 3: {names:?}");

    let index: MapIndex = serde_json::from_slice(&std::fs::read(run.join(rundir::MAPS_DIR).join(rundir::MAPS_INDEX)).unwrap()).unwrap();
    for epoch in 1..=2 {
        for channel in MAPPED_CHANNELS {
            let png = std::fs::read(run.join(rundir::MAPS_DIR).join(map_file(epoch, channel))).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
            let entry = index.maps.iter().find(|m| m.epoch == epoch && m.channel == channel).expect("listed");
            assert!(entry.range[0] > 200.0 || channel != "t2m", "t2m in kelvin: {:?}", entry.range);
        }
    }
    // After the last epoch, the model rolled out two days ahead from its final weights.
    let rollout = index.rollout.expect("a rollout after the last epoch");
    assert_eq!((rollout.epoch, rollout.step), (2, 4));
    assert_eq!(rollout.leads.iter().map(|l| l.hours).collect::<Vec<_>>(), [6, 12, 18, 24, 30, 36, 42, 48]);
    for lead in &rollout.leads {
        assert_eq!(lead.errors.iter().map(|e| e.channel.as_str()).collect::<Vec<_>>(), MAPPED_CHANNELS);
        assert!(lead.errors.iter().all(|e| e.model.is_finite() && e.model > 0.0 && e.persistence > 0.0), "{:?}", lead.errors);
        for entry in &lead.maps {
            let png = std::fs::read(run.join(rundir::MAPS_DIR).join(&entry.file)).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{}", entry.file);
        }
        assert_eq!(lead.maps.len(), 2);
    }
    let first = &rollout.leads[0].errors;
    let last = &rollout.leads[7].errors;
    assert!(last[0].persistence > first[0].persistence, "the weather moves: persistence errs more two days ahead: {first:?} {last:?}");
    let log = std::fs::read_to_string(run.join("out.log")).unwrap_or_default()
        + &String::from_utf8_lossy(&out.stdout)
        + &String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("Rollout +48h: RMSE t2m"), "the log lists the rollout");
    let script = r#"
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"images": 0}); acc.Reload()
for tag in sorted(acc.Tags()["images"]):
    print(tag, ",".join(f"{e.step}:{e.width}x{e.height}" for e in acc.Images(tag)))
"#;
    let out = run_python(script, &run.join(rundir::EVENTS_DIR));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("Visualization, t2m 2:") && lines[0].contains(",4:"), "{out}");
    assert!(lines[1].starts_with("Visualization, u10 2:"), "{out}");
}

#[test]
fn every_rank_of_a_data_parallel_run_profiles_the_same_ranges() {
    let scratch_dir = scratch("profile-dp");
    let root = scratch_dir.path();
    generate(&root.join("data"));
    let run = root.join("run");
    // Small buckets: backward fills several, and DDP's overlap issues each as it fills.
    let out = launch_cmd(2, &root.join("data"), &run, &["profile=3:5", "bucket_cap_mb=0.05", "first_bucket_cap_mb=0.05"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all_reduce = format!("{}all_reduce", ranges::COLLECTIVE_PREFIX);
    for rank in 0..2 {
        let spans = trace_spans(&run, rank);
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        for range in ranges::STEP.iter().chain(&[ranges::GRAD_ALLREDUCE, all_reduce.as_str(), "step 3", "step 4"]) {
            assert!(names.contains(range), "rank {rank}: {range} missing from {names:?}");
        }
        let backward: Vec<&Span> = spans.iter().filter(|s| s.name == ranges::BACKWARD).collect();
        let inside =
            spans.iter().filter(|s| s.name == all_reduce && backward.iter().any(|b| b.start <= s.start && s.start < b.end)).count();
        assert!(inside >= 2, "rank {rank}: {inside} all-reduces start inside a backward range");
    }

    // The summary the server gives of these traces: each rank's two steps split by range,
    // its communication, and one straggler row per all-reduce call of both ranks.
    let ranks: Vec<RankSummary> = (0..2)
        .map(|rank| {
            let trace = std::fs::File::open(run.join(rundir::PROFILE_DIR).join(trace_file(rank))).unwrap();
            RankSummary::read(rank, std::io::BufReader::new(trace)).unwrap()
        })
        .collect();
    let calls = trace_spans(&run, 0).iter().filter(|s| s.name == all_reduce).count();
    let summary = ProfileSummary::new(ranks, vec![]);
    for rank in &summary.ranks {
        assert_eq!(rank.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [3, 4], "rank {}", rank.rank);
        for step in &rank.steps {
            for range in ranges::STEP.iter().chain(&[ranges::GRAD_ALLREDUCE]) {
                let time = step.ranges.iter().find(|r| r.name == *range).map_or(0.0, |r| r.us);
                assert!(time > 0.0 && time < step.total_us, "rank {} step {}: {range} took {time} µs", rank.rank, step.step);
            }
        }
        assert!(rank.communication_us > 0.0 && rank.overlapped_us <= rank.communication_us, "{rank:?}");
        assert_eq!(rank.top_ops.len(), TOP_OPS);
    }
    assert_eq!(summary.stragglers.len(), calls);
    assert!(
        summary.stragglers.iter().all(|s| s.collective == all_reduce && s.last_rank < 2 && s.wait_us >= 0.0),
        "{:?}",
        summary.stragglers
    );
}
