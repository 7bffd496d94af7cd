#!/usr/bin/env bash
# On the lent GPU machine (device tool, `carry: [".gpu-bundle"]`, after `bench/gpu/bundle.sh`
# here): the GPU tests, then the tutorial's single-GPU ladder measured with Scalebook beside the
# PyTorch reference of the same model, then `short`-shaped training runs (profiled ones among
# them) whose directories come back as `runs.tgz`.
#
#     bash bench/gpu/run.sh [tests] [bench] [runs] [pytorch] [compiled]   # default: all
#
# Everything it prints goes to $OUT/log.txt too; the last lines are a summary. Each part has
# its own time limit, so a part that hangs costs its limit and not the lease.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=${OUT:-/tmp/scalebook-gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
parts=${*:-tests bench runs pytorch compiled}
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

wait "$datagen"
tail -2 /tmp/datagen.log

data=(); for key in train:train valid:valid inf:test; do data+=(--set "${key%%:*}_data_path=/tmp/data/${key#*:}"); done
for stat in time_means global_means global_stds; do data+=(--set "${stat}_path=/tmp/data/stats/$stat.npy"); done
short=(--yaml-config config/ViT.yaml --config short "${data[@]}")
python=(env -u LD_LIBRARY_PATH python3 bench/gpu/pytorch_steps.py --yaml-config config/ViT.yaml --config short --steps 20)
if has bench; then
    part "Scalebook steps (bench: one batch kept on the GPU, 20 timed steps)"
    timeout 80 "$TRAIN" bench "${short[@]}" --tf32 false --steps 20 --workers 0,8 --batches 24
    timeout 40 "$TRAIN" bench "${short[@]}" --steps 20 --workers 0 --batches 1
    for set in "amp_mode=fp16" "amp_mode=bf16" "amp_mode=bf16 enable_fused=true" "amp_mode=fp16 enable_fused=true"; do
        args=(); for kv in $set; do args+=(--set "$kv"); done
        timeout 40 "$TRAIN" bench "${short[@]}" "${args[@]}" --steps 20 --workers 0 --batches 1
    done
fi


if has runs; then
    part "short-shaped runs for the chapters (128 samples, 2 epochs of 8 steps, steps 10 and 11 profiled)"
    few=("${data[@]}" --set limit_nsamples=128 --set num_iters=16 --set limit_nsamples_val=32 --seed 0 --profile 10:12)
    run() {
        local name=$1; shift
        echo "--- $name"
        timeout 90 "$TRAIN" train --yaml-config config/ViT.yaml "${few[@]}" --run-dir "/tmp/runs/$name" "$@" 2>&1 |
            grep -E "Time taken|Avg (train|val) loss|memory|DONE|rror"
        tar czf "$OUT/$name.tgz" -C /tmp/runs --exclude=checkpoints "$name"
    }
    run short-0workers --config short
    run short-8workers --config short --set num_data_workers=8
    run short_opt --config short_opt
    ls -la "$OUT"
fi

if has pytorch; then
    part "PyTorch steps, eager (the same measurement)"
    timeout 120 "${python[@]}" --variant fp32 --variant tf32 --variant fp16 --variant bf16 --variant bf16+fused --variant fp16+fused
fi

if has compiled; then
    part "PyTorch steps under torch.compile"
    timeout 200 "${python[@]}" --compiled tf32 --compiled bf16+fused
fi

part summary
grep -E "^(training|data loader|GPU memory):|^\{\"variant|Time taken for epoch 2|test result|gpu tests rc" "$OUT/log.txt"
