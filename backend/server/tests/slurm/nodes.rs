//! Runs across nodes (issue #29), on a real two-node Slurm cluster: runs of four ranks on two
//! nodes (dp = 4, tp = 2 x dp = 2, and pp = 2 x dp = 2) train to the end over Gloo, each rank
//! where the layout places it (no tensor-parallel group crosses a node; pipeline stages do, one a
//! node), and learn what the same layout learns on one machine; one that loses a node fails naming it and resumes from its checkpoint.

use std::path::Path;
use std::time::Duration;

use scalebook_shared::layout::{Layout, Placement, Sizes, Token};
use scalebook_shared::metrics::{MetricPoint, tags};
use scalebook_shared::protocol::{ClientMessage, RunState, ServerMessage};
use scalebook_shared::rundir::{self, RankPlacement};
use serde_json::json;

use crate::harness::{Server, tiny_overrides};
use crate::runs::{launch, start_server};
use scalebook_harness::slurm::SlurmCluster;

fn valid_losses(run_dir: &Path) -> Vec<(u64, f64)> {
    let text = std::fs::read_to_string(run_dir.join(rundir::METRICS)).unwrap_or_default();
    let points = text.lines().filter_map(|l| serde_json::from_str::<MetricPoint>(l).ok());
    points.filter(|p| p.tag == tags::LOSS_VALID).map(|p| (p.step, p.value)).collect()
}

/// Runs cpu_tiny with `extra` overrides on `dp` data-parallel ranks across the cluster's two
/// nodes, then on this machine alone, from the same seed: checks the first ends completed on
/// both nodes with its ranks where `layout` places them (two a node), and both learn the same.
/// Returns where each rank ran.
async fn across_and_here(server: &Server, cluster: &SlurmCluster, extra: &[&str], dp: u32, layout: &Layout) -> Vec<RankPlacement> {
    let mut client = server.connect().await;
    let overrides = tiny_overrides(&[&["num_iters=16"], extra].concat());
    let mut across = launch(overrides.clone(), json!({ "kind": "slurm", "cluster": "testbox", "nodes": 2 }));
    across["dp"] = json!(dp);
    let id = client.launch_json(across).await;
    let finished = server.wait_for(&id, |r| r.state().is_final().then(|| r.clone())).await;
    let run_dir = server.runs_dir.join(id.as_str());
    let log = std::fs::read_to_string(run_dir.join(rundir::JOB_LOG)).unwrap_or_default();
    assert_eq!(finished.state(), RunState::Completed, "{:?}\n{log}\n{}", finished.reason(), cluster.logs());
    let script = std::fs::read_to_string(run_dir.join(rundir::SCRIPT)).unwrap();
    assert!(script.contains("#SBATCH --nodes=2\n"), "{script}");

    // Every rank says where it ran: consecutive ranks fill a node, as the layout's placement
    // of two ranks a node has them, numbered on their node as Slurm numbers its tasks.
    let placement = Placement::new(2).unwrap();
    let places: Vec<RankPlacement> = (0..layout.world() as usize)
        .map(|rank| {
            let file = run_dir.join(rundir::PLACEMENT_DIR).join(rundir::placement_file(rank));
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
        })
        .collect();
    for (rank, place) in places.iter().enumerate() {
        let node = cluster.nodes[placement.node_of(rank as u32) as usize].clone();
        assert_eq!(place, &RankPlacement { rank, local_rank: rank % 2, node }, "{log}");
    }
    // The server serves them by rank, as the run view reads them.
    let served: Vec<RankPlacement> = serde_json::from_str(&server.get(&format!("/api/runs/{id}/placement")).body).unwrap();
    assert_eq!(served, places);

    let mut here = launch(overrides, json!({ "kind": "local" }));
    here["dp"] = json!(dp);
    let local = client.launch_json(here).await;
    let done = server.wait_for(&local, |r| r.state().is_final().then(|| r.state())).await;
    assert_eq!(done, RunState::Completed);
    let (two_nodes, one) = (valid_losses(&run_dir), valid_losses(&server.runs_dir.join(local.as_str())));
    assert!(two_nodes.len() >= 3, "step 0 and every epoch: {two_nodes:?}");
    assert_eq!(two_nodes.iter().map(|p| p.0).collect::<Vec<_>>(), one.iter().map(|p| p.0).collect::<Vec<_>>());
    for ((step, a), (_, b)) in two_nodes.iter().zip(&one) {
        assert!((a - b).abs() <= 1e-4 * b.abs(), "step {step}: {a} on two nodes, {b} on one");
    }
    places
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_data_parallel_ranks_on_two_nodes_learn_as_on_one() {
    let cluster = SlurmCluster::with_nodes("nodes-dp", 2);
    let server = start_server("slurm-nodes-dp", &cluster, &["--max-local-ranks", "4"]);
    let layout = Layout::new(Sizes { dp: 4, ..Sizes::default() }, "tp-cp-dp").unwrap();
    let places = across_and_here(&server, &cluster, &[], 4, &layout).await;
    let nodes: Vec<&str> = places.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(nodes, ["node1", "node1", "node2", "node2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tensor_parallel_groups_stay_inside_a_node_and_data_parallel_ones_cross() {
    let cluster = SlurmCluster::with_nodes("nodes-tp", 2);
    let server = start_server("slurm-nodes-tp", &cluster, &["--max-local-ranks", "4"]);
    let layout = Layout::new(Sizes { tp: 2, dp: 2, ..Sizes::default() }, "tp-cp-dp").unwrap();
    let places = across_and_here(&server, &cluster, &["tensor_parallel=2"], 2, &layout).await;
    let node_of = |rank: &u32| places[*rank as usize].node.as_str();
    for group in &layout.groups(Token::TP) {
        assert!(group.iter().all(|r| node_of(r) == node_of(&group[0])), "tp group {group:?} crosses nodes: {places:?}");
    }
    for group in &layout.groups(Token::DP) {
        assert!(group.iter().any(|r| node_of(r) != node_of(&group[0])), "dp group {group:?} stays on a node: {places:?}");
    }
}

/// The rank grid's layout of pp 2 × dp 2 on two-GPU nodes: each stage's two replicas on one
/// node, the activations crossing between the nodes, as a pipeline wants its light traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_stages_run_a_node_each_as_the_rank_grid_places_them() {
    let cluster = SlurmCluster::with_nodes("nodes-pp", 2);
    let server = start_server("slurm-nodes-pp", &cluster, &["--max-local-ranks", "4"]);
    let layout = Layout::new(Sizes { pp: 2, dp: 2, ..Sizes::default() }, "tp-cp-dp-pp").unwrap();
    let stages = ["pipeline_parallel=2", "num_micro_batches=2", "parallel_order=tp-cp-dp-pp"];
    let places = across_and_here(&server, &cluster, &stages, 2, &layout).await;
    let node_of = |rank: &u32| places[*rank as usize].node.as_str();
    for group in &layout.groups(Token::PP) {
        assert_eq!(group.iter().map(node_of).collect::<Vec<_>>(), ["node1", "node2"], "pp group {group:?}: {places:?}");
    }
    for group in &layout.groups(Token::DP) {
        assert!(group.iter().all(|r| node_of(r) == node_of(&group[0])), "dp group {group:?} crosses nodes: {places:?}");
    }
}

/// The trainer processes of run `run` on `node` (by the node Slurm started them on), or on any
/// node when `node` is `None`. Zombies have ended and do not count.
fn ranks_of(run: &str, node: Option<&str>) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if !cmdline.contains("scalebook-train") || !cmdline.contains(run) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.rfind(')').and_then(|end| stat.get(end + 2..end + 3)) == Some("Z") {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let on = |n: &str| environ.split(|b| *b == 0).any(|v| v == format!("SLURMD_NODENAME={n}").as_bytes());
        if node.is_none_or(on) {
            pids.push(pid);
        }
    }
    pids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_loses_a_node_ends_failed_naming_it_leaves_no_rank_behind_and_resumes() {
    let cluster = SlurmCluster::with_nodes("nodes-lost", 2);
    let server = start_server("slurm-nodes-lost", &cluster, &[]);
    let mut client = server.connect().await;
    // 100 epochs of 4 steps: long enough to lose a node in, short enough to finish after.
    let mut request = launch(tiny_overrides(&["num_iters=400"]), json!({ "kind": "slurm", "cluster": "testbox", "nodes": 2 }));
    request["dp"] = json!(4);
    let id = client.launch_json(request).await;
    let run_dir = server.runs_dir.join(id.as_str());
    // Training under way on both nodes, past its first checkpoint.
    let checkpoint = rundir::RunDir::new(&run_dir).checkpoint_position();
    server.wait_for(&id, |_| (checkpoint.is_file() && ranks_of(id.as_str(), Some("node2")).len() == 2).then_some(())).await;

    for pid in ranks_of(id.as_str(), Some("node2")) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let finished = server.wait_for(&id, |r| r.state().is_final().then(|| r.clone())).await;
    let log = std::fs::read_to_string(run_dir.join(rundir::JOB_LOG)).unwrap_or_default();
    assert_eq!(finished.state(), RunState::Failed, "{log}");
    let reason = finished.reason().unwrap_or_default();
    assert!(reason.contains("on node node2 were killed"), "{reason}\n{log}");
    // No rank is left on either node.
    server.wait_for(&id, |_| ranks_of(id.as_str(), None).is_empty().then_some(())).await;

    // The page's `resume`: the same run, its saved script submitted again, goes on from the
    // last checkpoint to the end (the job log keeps the first attempt's lines).
    let stopped_at = valid_losses(&run_dir).last().map(|p| p.0).unwrap();
    client.send(&ClientMessage::Resume { run: id.clone() }).await;
    let resumed = server.wait_for(&id, |r| (r.state() == RunState::Completed).then(|| r.clone())).await;
    let log = std::fs::read_to_string(run_dir.join(rundir::JOB_LOG)).unwrap_or_default();
    assert_eq!(log.matches("+ srun ").count(), 2, "both attempts' lines are kept:\n{log}");
    assert!(log.contains("Resuming after epoch"), "{log}");
    let losses = valid_losses(&run_dir);
    assert_eq!(losses.last().map(|p| p.0), Some(400), "{losses:?}");
    assert!(stopped_at < 400 && stopped_at > 0, "lost at step {stopped_at}");
    let states: Vec<RunState> = resumed.history.iter().map(|c| c.state).collect();
    assert_eq!(&states[states.len() - 4..], [RunState::Failed, RunState::Queued, RunState::Running, RunState::Completed], "{states:?}");
    // What Slurm said of the finished job: its nodes, how long it ran, what it held.
    let slurm = resumed.slurm.expect("Slurm's word on the job");
    assert_eq!(slurm.nodes.as_deref(), Some("node[1-2]"), "{slurm:?}");
    assert!(slurm.elapsed_s.is_some_and(|s| s >= 1.0) && slurm.cpus == Some(4), "{slurm:?}");

    // A completed run has nothing to go on with: refused, naming why.
    client.send(&ClientMessage::Resume { run: id.clone() }).await;
    let refused = client
        .recv_until(Duration::from_secs(60), |m| match m {
            ServerMessage::Error(e) => Some(e.clone()),
            _ => None,
        })
        .await;
    assert!(refused.message.contains("cannot be resumed: it completed"), "{refused:?}");
}
