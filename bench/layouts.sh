#!/bin/bash
# Pipeline stages and ZeRO stages of cpu_short on this machine, each run measured beside what the
# estimate predicts for it (BENCHMARKS.md, "Every layout runs, measured beside predicted"):
# samples/s (the median of epochs 2 on, as the sweep board reads it), the peak resident memory
# of a rank, and for the pipelines the bubble measured from a profiled step beside
# (p-1)/(m+p-1). Run after `./scalebook.sh test` (or `run`) has built the binaries, on an
# otherwise idle machine: about ten minutes.
source "$(dirname "$0")/setup.sh"
pp="pipeline_parallel=2 parallel_order=tp-cp-dp-pp"
variants=(
    "1|one rank|"
    "2|dp 2|"
    "2|pp 2 gpipe m 2|$pp pipeline_schedule=gpipe num_micro_batches=2"
    "2|pp 2 gpipe m 4|$pp pipeline_schedule=gpipe num_micro_batches=4"
    "2|pp 2 gpipe m 8|$pp pipeline_schedule=gpipe num_micro_batches=8"
    "2|pp 2 1f1b m 2|$pp pipeline_schedule=1f1b num_micro_batches=2"
    "2|pp 2 1f1b m 4|$pp pipeline_schedule=1f1b num_micro_batches=4"
    "2|pp 2 1f1b m 8|$pp pipeline_schedule=1f1b num_micro_batches=8"
    "2|pp 2 interleaved m 2|$pp pipeline_schedule=interleaved num_micro_batches=2"
    "2|pp 2 interleaved m 4|$pp pipeline_schedule=interleaved num_micro_batches=4"
    "2|pp 2 interleaved m 8|$pp pipeline_schedule=interleaved num_micro_batches=8"
    "2|dp 2 ZeRO 1|zero_stage=1"
    "2|dp 2 ZeRO 2|zero_stage=2"
    "2|dp 2 ZeRO 3|zero_stage=3"
)
echo "| run | predicted samples/s | measured | measured / predicted | predicted GiB a rank | measured peak RSS GiB | measured / predicted | bubble measured (step 5) | (p-1)/(v·m+p-1) |"
echo "|---|---|---|---|---|---|---|---|---|"
for variant in "${variants[@]}"; do
    IFS='|' read -r nproc name sets <<< "$variant"
    dp=$nproc
    [[ $sets == *pipeline_parallel* ]] && dp=1
    # Three epochs of 32 steps: the median of epochs 2 and 3, step 5 of the first profiled.
    args=(--config cpu_short --seed 1 --run-dir "$work/$name" --set num_iters=96 --set profile=5:6)
    estimate=(--config cpu_short --cluster local --dp "$dp")
    for set in $sets; do args+=(--set "$set"); estimate+=(--set "$set"); done
    "$bin/scalebook-train" launch --nproc "$nproc" -- train "${args[@]}" > "$work/$name.log" 2>&1
    "$bin/scalebook" estimate "${estimate[@]}" --json > "$work/$name.estimate.json"
    "$bin/scalebook" profile "$work/$name" --json > "$work/$name.profile.json"
    python3 - "$work/$name" "$name" <<'PY'
import json, statistics, sys
run, name = sys.argv[1], sys.argv[2]
points = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
rates = [p["value"] for p in points if p["tag"] == "Avg samples per sec"][1:]
peak = max(p["value"] for p in points if p["tag"] == "Run/Peak memory (GiB)")
est = json.load(open(f"{run}.estimate.json"))
measured, predicted = statistics.median(rates), est["samples_per_sec"]
gib = est["memory_gb"]["total"]
bubbles = json.load(open(f"{run}.profile.json")).get("bubbles", [])
bubble = f"{bubbles[0]['fraction']:.3f}" if bubbles else ""
formula = f"{bubbles[0]['formula']:.3f}" if bubbles else ""
print(f"| {name} | {predicted:.1f} | {measured:.1f} | {measured / predicted:.2f} | {gib:.3f} | {peak:.3f} | {peak / gib:.2f} | {bubble} | {formula} |")
PY
done
