//! Runs across nodes (issue #29), on a real two-node Slurm cluster: a data-parallel run of four
//! ranks on two nodes trains to the end over Gloo, each rank where the layout places it, and
//! learns exactly what the same layout learns on one machine.

use scalebook_shared::layout::Placement;
use scalebook_shared::metrics::{MetricPoint, tags};
use scalebook_shared::protocol::RunState;
use scalebook_shared::rundir::{self, RankPlacement};
use serde_json::json;

use crate::cluster::SlurmCluster;
use crate::harness::tiny_overrides;
use crate::runs::{launch, start_server};

fn valid_losses(run_dir: &std::path::Path) -> Vec<(u64, f64)> {
    let text = std::fs::read_to_string(run_dir.join(rundir::METRICS)).unwrap_or_default();
    let points = text.lines().filter_map(|l| serde_json::from_str::<MetricPoint>(l).ok());
    points.filter(|p| p.tag == tags::LOSS_VALID).map(|p| (p.step, p.value)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_ranks_on_two_nodes_train_where_the_layout_places_them_and_learn_as_on_one() {
    let cluster = SlurmCluster::with_nodes("nodes", 2);
    let server = start_server("slurm-nodes", &cluster, &["--max-local-ranks", "4"]);
    let mut client = server.connect().await;
    let overrides = tiny_overrides(&["num_iters=16"]);
    let mut across = launch(overrides.clone(), json!({ "kind": "slurm", "cluster": "testbox", "nodes": 2 }));
    across["dp"] = json!(4);
    let id = client.launch_json(across).await;
    let finished = server.wait_for(&id, |r| r.state().is_final().then(|| r.clone())).await;
    let run_dir = server.runs_dir.join(id.as_str());
    let log = std::fs::read_to_string(run_dir.join(rundir::JOB_LOG)).unwrap_or_default();
    assert_eq!(finished.state(), RunState::Completed, "{:?}\n{log}\n{}", finished.reason(), cluster.logs());
    let script = std::fs::read_to_string(run_dir.join(rundir::SCRIPT)).unwrap();
    assert!(script.contains("#SBATCH --nodes=2\n"), "{script}");

    // Every rank says where it ran: two on each node, in the order the layout places them
    // (consecutive ranks fill a node), numbered on their node as Slurm numbers its tasks.
    let placement = Placement::new(2).unwrap();
    for rank in 0..4usize {
        let file = run_dir.join(rundir::PLACEMENT_DIR).join(rundir::placement_file(rank));
        let place: RankPlacement = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let node = placement.node_of(rank as u32) as usize;
        assert_eq!(place, RankPlacement { rank, local_rank: rank % 2, node: cluster.nodes[node].clone() }, "{log}");
    }

    // The same layout on this machine alone, from the same seed: the same losses.
    let mut here = launch(overrides, json!({ "kind": "local" }));
    here["dp"] = json!(4);
    let local = client.launch_json(here).await;
    let done = server.wait_for(&local, |r| r.state().is_final().then(|| r.state())).await;
    assert_eq!(done, RunState::Completed);
    let (two_nodes, one) = (valid_losses(&run_dir), valid_losses(&server.runs_dir.join(local.as_str())));
    // 16 samples over dp 4 at a local batch of 1: 4 steps an epoch, 4 epochs, and step 0.
    assert_eq!(two_nodes.len(), 5, "step 0 and every epoch: {two_nodes:?}");
    assert_eq!(two_nodes.iter().map(|p| p.0).collect::<Vec<_>>(), one.iter().map(|p| p.0).collect::<Vec<_>>());
    for ((step, a), (_, b)) in two_nodes.iter().zip(&one) {
        assert!((a - b).abs() <= 1e-4 * b.abs(), "step {step}: {a} on two nodes, {b} on one");
    }
}
