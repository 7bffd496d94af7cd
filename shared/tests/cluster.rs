//! The shipped `config/clusters.yaml` loads with the hardware facts the estimates rely on, and
//! bad cluster files get clear problems.

use scalebook_shared::Error;
use scalebook_shared::cluster::{Clusters, ExecutorKind};

const SHIPPED: &str = include_str!("../shipped/clusters.yaml");

#[test]
fn the_shipped_file_describes_local_and_perlmutter() {
    let clusters = Clusters::parse(SHIPPED).unwrap();
    assert_eq!(clusters.names().collect::<Vec<_>>(), ["local", "perlmutter"]);

    let local = clusters.get("local").unwrap();
    assert_eq!((local.executor, local.gpus_per_node), (ExecutorKind::Local, 0));
    assert_eq!(local.data_root, "data/synthetic");

    let pm = clusters.get("perlmutter").unwrap();
    assert_eq!((pm.executor, pm.gpus_per_node), (ExecutorKind::Slurm, 4));
    assert_eq!(pm.data_root, "/pscratch/sd/s/shas1693/data/dl-at-scale-training-data");
    let link = pm.interconnect.unwrap();
    assert_eq!((link.nvlink_gb_per_s, link.network_gb_per_s), (300.0, 25.0));
    let a40 = pm.gpu("a100-40gb").unwrap();
    let a80 = pm.gpu("a100-80gb").unwrap();
    assert_eq!((a40.memory_gb, a40.hbm_tb_per_s, a40.constraint.as_deref()), (40.0, 1.55, Some("gpu")));
    assert_eq!((a80.memory_gb, a80.hbm_tb_per_s, a80.constraint.as_deref()), (80.0, 2.0, Some("gpu&hbm80g")));
    let peak = a40.peak_tflops;
    assert_eq!((peak.fp32, peak.tf32, peak.fp16, peak.bf16), (19.5, 156.0, 312.0, 312.0));
    let slurm = pm.slurm.as_ref().unwrap();
    assert_eq!((slurm.account.as_str(), slurm.qos.as_str(), slurm.cpus_per_task), ("trn011", "regular", 32));
    assert_eq!(slurm.shared_qos.as_deref(), Some("shared"));
    assert_eq!(slurm.reservation, None);
}

#[test]
fn unknown_clusters_list_the_known_ones() {
    let clusters = Clusters::parse(SHIPPED).unwrap();
    let problems = clusters.get("frontier").unwrap_err().problems();
    assert!(problems.0[0].message.contains("local, perlmutter"), "{problems}");
}

const BAD: &str = "
gpu_box:
  executor: slurm
  gpus_per_node: 0
  data_root: ''
  gpus:
    - name: a100
      memory_gb: 0
      hbm_tb_per_s: 1.5
      peak_tflops: { fp32: 19.5, tf32: 156, fp16: 312, bf16: -1 }
    - name: a100
      memory_gb: 40
      hbm_tb_per_s: 1.5
      peak_tflops: { fp32: 19.5, tf32: 156, fp16: 312, bf16: 312 }
      constraint: 'gpu; rm -rf'
  slurm:
    account: ''
    qos: regular
    time: '25:99:00'
    cpus_per_task: 0
    modules: ['gpu', 'a b']
laptop:
  executor: local
  gpus_per_node: 0
  data_root: data
  slurm:
    account: x
    qos: y
    time: '10'
    cpus_per_task: 1
";

#[test]
fn every_problem_of_a_bad_file_is_reported() {
    let Err(Error::Invalid(problems)) = Clusters::parse(BAD) else { panic!("should fail") };
    let expected = [
        ("gpu_box.data_root", "must not be empty"),
        ("gpu_box.gpus_per_node", "lists GPU models"),
        ("gpu_box.gpus.a100.memory_gb", "positive"),
        ("gpu_box.gpus.a100.peak_tflops.bf16", "got -1"),
        ("gpu_box.gpus.a100.constraint", "is required on a slurm cluster"),
        ("gpu_box.gpus.a100.name", "listed twice"),
        ("gpu_box.gpus.a100.constraint", "`gpu; rm -rf` must be one non-empty word"),
        ("gpu_box.slurm.account", "must be one non-empty word"),
        ("gpu_box.slurm.modules", "`a b`"),
        ("gpu_box.slurm.time", "`25:99:00` is not a Slurm time"),
        ("gpu_box.slurm.cpus_per_task", "at least 1"),
        ("gpu_box.interconnect", "needs its link speeds"),
        ("laptop.slurm", "only applies to executor slurm"),
    ];
    for (field, fragment) in expected {
        assert!(
            problems.for_field(field).any(|p| p.message.contains(fragment)),
            "no problem on {field} containing {fragment:?} in:\n{problems}"
        );
    }
    assert_eq!(problems.0.len(), expected.len(), "{problems}");
}

#[test]
fn unknown_keys_and_empty_files_are_errors() {
    let typo = "local:\n  executor: local\n  gpus_per_node: 0\n  data_root: d\n  gpu_per_node: 1\n";
    match Clusters::parse(typo) {
        Err(Error::Parse { message, .. }) => assert!(message.contains("gpu_per_node"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(Clusters::parse("").unwrap_err().problems().0[0].message.contains("no clusters"));
}

#[test]
fn perlmutter_names_every_estimate_factor() {
    let clusters = Clusters::parse(SHIPPED).unwrap();
    assert!(clusters.get("local").unwrap().estimate.is_none());
    let factors = clusters.get("perlmutter").unwrap().estimate.unwrap();
    // The measured bus bandwidths product.md gives: ~200 of 300 GB/s inside a node, 85-96%
    // of the NICs across nodes.
    assert!((factors.nvlink_efficiency * 300.0 - 200.0).abs() < 2.0);
    assert!((0.85..=0.96).contains(&factors.network_efficiency));
    assert_eq!(factors.attention_full_rate_head_dim, 128);
    assert_eq!(factors.compute_efficiency.fp16, factors.compute_efficiency.bf16);
    assert!(factors.allocator_factor >= 1.0);
    // A Perlmutter GPU node's 256 GB of host memory, a quarter per GPU.
    let loader = factors.loader.unwrap();
    assert_eq!(loader.page_cache_gb_per_gpu, 256.0 / 4.0);
    assert!(loader.prepare_gb_per_s > 0.0 && loader.storage_gb_per_s > 0.0);
}

#[test]
fn bad_estimate_factors_are_reported() {
    let text = "
box:
  executor: local
  gpus_per_node: 1
  data_root: d
  estimate:
    compute_efficiency: { fp32: 0.5, tf32: 1.5, fp16: 0, bf16: 0.4 }
    attention_full_rate_head_dim: 0
    nvlink_efficiency: 0.7
    network_efficiency: -1
    runtime_overhead_gb: -2
    dali_overhead_gb: 1
    allocator_factor: 0.9
    loader: { prepare_gb_per_s: 0, storage_gb_per_s: 1, page_cache_gb_per_gpu: -64 }
";
    let Err(Error::Invalid(problems)) = Clusters::parse(text) else { panic!("should fail") };
    let expected = [
        ("box.estimate.compute_efficiency.tf32", "fraction in (0, 1], got 1.5"),
        ("box.estimate.compute_efficiency.fp16", "got 0"),
        ("box.estimate.network_efficiency", "got -1"),
        ("box.estimate.attention_full_rate_head_dim", "at least 1"),
        ("box.estimate.runtime_overhead_gb", "got -2"),
        ("box.estimate.allocator_factor", "at least 1, got 0.9"),
        ("box.estimate.loader.prepare_gb_per_s", "positive number, got 0"),
        ("box.estimate.loader.page_cache_gb_per_gpu", "0 or more, got -64"),
    ];
    for (field, fragment) in expected {
        assert!(problems.for_field(field).any(|p| p.message.contains(fragment)), "no {field}: {fragment} in\n{problems}");
    }
    assert_eq!(problems.0.len(), expected.len(), "{problems}");
}

#[test]
fn a_slurm_cluster_of_cpu_nodes_needs_no_gpu_figures() {
    let cpu =
        "cpubox:\n  executor: slurm\n  gpus_per_node: 0\n  data_root: d\n  slurm: { account: a, qos: q, time: '10', cpus_per_task: 1 }\n";
    let clusters = Clusters::parse(cpu).unwrap();
    assert_eq!(clusters.get("cpubox").unwrap().executor, ExecutorKind::Slurm);
    let gpus_without_models = cpu.replace("gpus_per_node: 0", "gpus_per_node: 4");
    let problems = Clusters::parse(&gpus_without_models).unwrap_err().problems();
    let fields: Vec<&str> = problems.0.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["cpubox.gpus", "cpubox.interconnect"], "{problems}");
}
