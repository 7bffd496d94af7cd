#!/usr/bin/env bash
# On the lent GPU machine (device tool, `carry: [".gpu-bundle"]`, after `bench/gpu/bundle.sh`
# here): the GPU tests, every layout over NCCL against one rank, then the tutorial's single-GPU
# ladder measured with Scalebook beside the PyTorch reference of the same model, `short`-shaped
# training runs (profiled ones among them), a profiled dp=2 run over NCCL, and `short_opt`'s
# steps alone beside a whole run; run directories and recordings come back under $OUT.
#
#     bash bench/gpu/run.sh [tests] [layouts] [attention] [bench] [steps] [profiles] [runs] [serial]
#                           [dp2] [fed] [pytorch] [compiled]   # default: all
#
# Everything it prints goes to $OUT/log.txt too; the last lines are a summary. Each part has
# its own time limit, so a part that hangs costs its limit and not the lease. Run directories,
# recordings and traces are kept under /tmp/keep and packed at the end into two archives under
# $OUT (the device tool brings back at most 8 files).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
# The trainer's tests find the project's files from their package's directory, which cargo
# (and nextest) name at run time; here the bundle's test binaries run without either.
export CARGO_MANIFEST_DIR=$ROOT/backend/trainer
OUT=${OUT:-/tmp/scalebook-gpu}
KEEP=/tmp/keep
mkdir -p "$OUT" "$KEEP/runs" "$KEEP/traces"
exec > >(tee "$OUT/log.txt") 2>&1
parts=${*:-tests layouts attention bench steps profiles runs serial dp2 fed pytorch compiled}
has() { [[ " $parts " == *" $1 "* ]]; }
part() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }

BUNDLE=$ROOT/.gpu-bundle
TRAIN=$BUNDLE/scalebook-train
export PYTHONUNBUFFERED=1

part machine
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)'
nproc
# The trainer finds that PyTorch's libtorch, and HDF5 and its dependencies in the bundle (the
# PyTorch reference runs without them).
TORCH_LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH=$TORCH_LIB:$BUNDLE/lib
ldd "$TRAIN" | grep "not found" && echo "MISSING LIBRARIES"

# The dataset: 360x720 fields as `short` reads them; 264 steps per year covers
# limit_nsamples=256. Written while the tests run.
(timeout 200 "$TRAIN" datagen --out /tmp/data --years 1 --steps-per-year 264 --height 360 --width 720 >/tmp/datagen.log 2>&1
 echo "datagen rc=$?" >>/tmp/datagen.log) &
datagen=$!

if has tests; then
    part "GPU tests"
    # The test binary reads config/ViT.yaml where its sources were when it was built.
    src=$(cat "$BUNDLE/built-in")
    mkdir -p "$src/config" "$src/backend/trainer" && cp config/ViT.yaml "$src/config/"
    timeout 150 "$BUNDLE/gpu-tests" --ignored --test-threads 1
    echo "gpu tests rc=$?"
fi

if has layouts; then
    part "every layout over NCCL against one rank on this GPU"
    src=$(cat "$BUNDLE/built-in")
    mkdir -p "$src/config" "$src/backend/trainer" && cp config/ViT.yaml "$src/config/"
    SCALEBOOK_TRAIN=$TRAIN NCCL_DEBUG=WARN timeout 300 "$BUNDLE/gpu-layouts" --ignored --test-threads 1 --nocapture 2>&1 |
        grep -E "^agreement|^test |test result|panicked|rror|NCCL WARN" | head -80
    echo "gpu layouts rc=${PIPESTATUS[0]}"
fi

wait "$datagen"
tail -2 /tmp/datagen.log

data=(); for key in train:train valid:valid inf:test; do data+=(--set "${key%%:*}_data_path=/tmp/data/${key#*:}"); done
for stat in time_means global_means global_stds; do data+=(--set "${stat}_path=/tmp/data/stats/$stat.npy"); done
short=(--yaml-config config/ViT.yaml --config short "${data[@]}")
python=(env -u LD_LIBRARY_PATH python3 bench/gpu/pytorch_steps.py --yaml-config config/ViT.yaml --config short --steps 20)
# A run directory as a recording for the chapters, and its metrics and logs, kept for $OUT.
keep() {
    local run=$1 name=$2 what=$3
    python3 bench/gpu/fixture.py "/tmp/runs/$run" "$name" --gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" --what "$what" &&
        cp -r "static/recorded/$name" "$KEEP/runs/"
    tar czf "$KEEP/runs/$run-run.tgz" -C /tmp/runs "$run/out.log" "$run/metrics.jsonl"
}

if has bench; then
    part "Scalebook steps (bench: one batch kept on the GPU, 20 timed steps)"
    timeout 80 "$TRAIN" bench "${short[@]}" --tf32 false --steps 20 --workers 0,8 --batches 24
    timeout 40 "$TRAIN" bench "${short[@]}" --steps 20 --workers 0 --batches 1
    for set in "amp_mode=fp16" "amp_mode=bf16" "amp_mode=bf16 enable_fused=true" "amp_mode=fp16 enable_fused=true"; do
        args=(); for kv in $set; do args+=(--set "$kv"); done
        timeout 40 "$TRAIN" bench "${short[@]}" "${args[@]}" --steps 20 --workers 0 --batches 1
    done
fi

if has attention; then
    part "attention kernels at short's shape, each pinned in turn"
    timeout 120 env -u LD_LIBRARY_PATH python3 bench/gpu/attention.py --yaml-config config/ViT.yaml --config short
fi

# Steps alone of the trainer built before this session's changes (`scalebook-train-before`,
# copied into the bundle by hand) beside this build's, with enable_jit's one q/k/v product.
if has steps; then
    part "Scalebook steps: before and after, bf16 and fp16 with fused Adam, enable_jit off and on"
    for set in "amp_mode=bf16 enable_fused=true" "amp_mode=fp16 enable_fused=true" \
               "amp_mode=bf16 enable_fused=true enable_jit=true" "amp_mode=fp16 enable_fused=true enable_jit=true"; do
        args=(); for kv in $set; do args+=(--set "$kv"); done
        for bin in scalebook-train-before scalebook-train; do
            [ -x "$BUNDLE/$bin" ] || continue
            [ "$bin" = scalebook-train-before ] && [[ $set == *enable_jit* ]] && continue
            echo "--- $bin $set"
            timeout 40 "$BUNDLE/$bin" bench "${short[@]}" "${args[@]}" --steps 20 --workers 0 --batches 1 | grep -E "^(Attention|training)"
        done
    done
fi

# Two profiled steps of the same model: Scalebook's (bf16, fused Adam, enable_jit off and on)
# and PyTorch's eager and compiled, summed by kernel class (`bench/gpu/kernels.py`).
if has profiles; then
    part "profiles of two steps: Scalebook bf16 + fused Adam (enable_jit off, on), PyTorch eager and compiled"
    for jit in false true; do
        rm -rf "/tmp/runs/bf16-jit-$jit"
        timeout 60 "$TRAIN" train "${short[@]}" --set amp_mode=bf16 --set enable_fused=true --set enable_jit=$jit \
            --set limit_nsamples=96 --set limit_nsamples_val=16 --set num_iters=6 --seed 0 --profile 3:5 \
            --run-dir "/tmp/runs/bf16-jit-$jit" 2>&1 | grep -E "Attention|Time taken|rror"
        gzip -c "/tmp/runs/bf16-jit-$jit/profile/rank0.trace.json" >"$KEEP/traces/scalebook-bf16-jit-$jit.trace.json.gz"
    done
    timeout 200 "${python[@]}" --variant bf16+fused --compiled bf16+fused --trace-dir "$KEEP/traces"
    python3 bench/gpu/kernels.py "$KEEP"/traces/*.trace.json.gz
fi

if has runs; then
    part "short-shaped runs for the chapters (128 samples, 2 epochs of 8 steps, steps 10 and 11 profiled)"
    few=("${data[@]}" --set limit_nsamples=128 --set num_iters=16 --set limit_nsamples_val=32 --seed 0 --profile 10:12)
    run() {
        local name=$1; shift
        echo "--- $name"
        rm -rf "/tmp/runs/$name"
        timeout 90 "$TRAIN" train --yaml-config config/ViT.yaml "${few[@]}" --run-dir "/tmp/runs/$name" "$@" 2>&1 |
            grep -E "Time taken|Avg (train|val) loss|memory|DONE|rror"
        tar czf "$KEEP/runs/$name.tgz" -C /tmp/runs "$name/out.log" "$name/metrics.jsonl"
        gzip -c "/tmp/runs/$name/profile/rank0.trace.json" >"$KEEP/traces/$name.trace.json.gz"
    }
    run short-0workers --config short
    run short-8workers --config short --set num_data_workers=8
    run short_opt --config short_opt
fi

# The tutorial's data-loading lesson: 0 workers reading one sample after another on the
# training thread (`serial_read`), as its DataLoader does, against 8 workers.
if has serial; then
    part "the tutorial's 0 -> 8 workers lesson with the serial read (short, TF32)"
    timeout 80 "$TRAIN" bench "${short[@]}" --set serial_read=true --steps 0 --workers 0,8 --batches 16
    for workers in 0 8; do
        echo "--- short, $workers workers, serial read"
        rm -rf "/tmp/runs/short-serial-$workers"
        timeout 120 "$TRAIN" train "${short[@]}" --set serial_read=true --set num_data_workers=$workers \
            --set limit_nsamples=128 --set limit_nsamples_val=32 --set num_iters=16 --seed 0 --profile 10:12 \
            --run-dir "/tmp/runs/short-serial-$workers" 2>&1 | grep -E "Time taken|Avg (train|val) loss|rror"
        keep "short-serial-$workers" "h200-short-serial-${workers}workers" "short, $workers workers, samples read one by one (the tutorial's loader)"
    done
fi

if has dp2; then
    part "dp=2 over NCCL on this one GPU, profiled (steps 5 and 6)"
    timeout 150 "$TRAIN" launch --nproc 2 -- train "${short[@]}" --set limit_nsamples=64 --set limit_nsamples_val=16 \
        --set num_iters=8 --seed 0 --profile 5:7 --run-dir /tmp/runs/dp2-nccl 2>&1 |
        grep -E "launch|Setting DP|Time taken|Avg (train|val) loss|DONE|rror|WARN"
    keep dp2-nccl h200-dp2-nccl "short, dp = 2 over NCCL, two ranks sharing one GPU"
fi

if has fed; then
    part "short_opt: steps alone beside a whole run (batches copied on a stream of their own)"
    opt=(--yaml-config config/ViT.yaml --config short_opt "${data[@]}")
    timeout 60 "$TRAIN" bench "${opt[@]}" --steps 20 --workers 0,8 --batches 16
    timeout 200 "$TRAIN" train "${opt[@]}" --set limit_nsamples=256 --set limit_nsamples_val=32 --set num_iters=48 --seed 0 \
        --profile 30:32 --run-dir /tmp/runs/short_opt-fed 2>&1 | grep -E "Time taken|Avg (train|val) loss|memory|DONE|rror"
    keep short_opt-fed h200-short_opt-fed "short_opt, batches copied on a stream of their own"
fi

if has pytorch; then
    part "PyTorch steps, eager (the same measurement)"
    timeout 120 "${python[@]}" --variant fp32 --variant tf32 --variant fp16 --variant bf16 --variant bf16+fused --variant fp16+fused
fi

if has compiled; then
    part "PyTorch steps under torch.compile"
    timeout 200 "${python[@]}" --compiled tf32 --compiled bf16+fused
fi

tar czf "$OUT/runs.tgz" -C "$KEEP" runs
du -sh /tmp/runs/* 2>/dev/null
tar cf "$OUT/traces.tar" -C "$KEEP" traces
ls -la "$OUT"

part summary
grep -E "^(Attention|training|data loader|GPU memory):|^---|^\{\"(variant|dtype|trace)|Time taken for epoch|test result|gpu (layouts|tests) rc|^agreement" "$OUT/log.txt"
