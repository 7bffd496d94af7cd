#!/usr/bin/env bash
# Builds, on this machine, what the lent GPU machine needs to run Scalebook's CUDA trainer:
# `.gpu-bundle/` in the project root, carried by the device tool (`carry: [".gpu-bundle"]`)
# and used by `bench/gpu/run.sh` there.
#
# That machine has CUDA 13 and PyTorch 2.11 (cu130) but no Rust and no package registry, and
# at most 64 MiB travels with a call, so libtorch cannot go with the trainer: the trainer is
# built here against PyTorch 2.11's own libraries and headers (the same wheel, fetched here)
# and finds that machine's copies at run time. tch 0.26 is generated for libtorch 2.13; the few
# operators 2.11 lacks are stubbed in a copy of torch-sys (`stub_missing_ops.py`), which this
# build alone patches in. Everything else the binaries link that is not part of glibc, libstdc++
# or libtorch (HDF5 and its dependencies) goes into `.gpu-bundle/lib`.
#
#     bench/gpu/bundle.sh            # TORCH=2.11.0 by default
#
# About 4 minutes the first time (1.4 GB of wheels, then the trainer in release mode), seconds
# after that.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TORCH=${TORCH:-2.11.0}
WORK=${SCALEBOOK_GPU_WORK:-$HOME/.cache/scalebook/gpu-torch-$TORCH}
BUNDLE=$ROOT/.gpu-bundle
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_18_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
fetch() { python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" -d "$WORK/whl" "$@"; }

mkdir -p "$WORK/whl" "$WORK/site"
if [ ! -f "$WORK/site/.unpacked" ]; then
    say "fetching torch $TORCH and the CUDA headers its C++ API includes"
    fetch --no-deps "torch==$TORCH"
    meta=$(unzip -p "$WORK"/whl/torch-"$TORCH"-*.whl '*/METADATA')
    pin() { grep -o "^Requires-Dist: $1[^;]*" <<<"$meta" | sed 's/^Requires-Dist: //; s/ //g'; }
    # Headers only: NCCL's, and the CUDA toolkit's that ATen's CUDA headers include.
    fetch --no-deps "$(pin nvidia-nccl-cu13)"
    fetch "$(pin cuda-toolkit | sed 's/\[[^]]*\]/[cudart,cublas,cusparse,cusolver,nvtx]/')"
    fetch --no-deps nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85
    (cd "$WORK/site" && unzip -q -o "$WORK"/whl/torch-"$TORCH"-*.whl 'torch/lib/*' 'torch/include/*' &&
        for w in "$WORK"/whl/nvidia_*.whl; do unzip -q -o "$w" 'nvidia/*/include/*' 'nvidia/cu13/lib/*' 2>/dev/null || true; done)
    touch "$WORK/site/.unpacked"
fi

tch_src=$(ls -d "$HOME"/.cargo/registry/src/*/torch-sys-0.26.0 | head -1)
if [ ! -f "$WORK/torch-sys/.stubbed" ]; then
    say "stubbing the operators libtorch $TORCH lacks in a copy of torch-sys"
    rm -rf "$WORK/torch-sys" && cp -r "$tch_src" "$WORK/torch-sys"
    python3 "$ROOT/bench/gpu/stub_missing_ops.py" "$WORK/torch-sys" "$WORK/site/torch"
    touch "$WORK/torch-sys/.stubbed"
fi

say "building the trainer and its GPU tests with --features cuda"
# A copy of the sources, so that the patch's lock file stays out of the project. Only files
# whose content changed are copied, stamped with the time of the copy: cargo decides what to
# rebuild by modification times, and an edit older than the last build must still count.
mkdir -p "$WORK/src"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | rsync -rl --checksum --from0 --files-from=- ./ "$WORK/src/")
cd "$WORK/src"
export LIBTORCH=$WORK/site/torch LIBTORCH_BYPASS_VERSION_CHECK=1 CARGO_TARGET_DIR=$WORK/target
# libtorch_cuda's CUDA libraries (cuBLAS, cuDNN, ...) are on the GPU machine, not here.
export RUSTFLAGS="-C link-arg=-Wl,--allow-shlib-undefined"
patch=(--config "patch.crates-io.torch-sys.path=\"$WORK/torch-sys\"")
cargo build -q "${patch[@]}" --release -p scalebook-trainer --features cuda --bin scalebook-train
# The GPU tests: gpu (the model, Adam, the precisions) and gpu_layouts (every layout over NCCL).
tests_json=$(cargo test -q "${patch[@]}" --release -p scalebook-trainer --features cuda --test gpu --test gpu_layouts --no-run --message-format=json)
test_bin() { python3 -c 'import json,sys; print(*[m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m["target"]["name"] == sys.argv[1]])' "$1" <<<"$tests_json"; }

say "assembling $BUNDLE"
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/lib"
cp "$CARGO_TARGET_DIR/release/scalebook-train" "$BUNDLE/"
cp "$(test_bin gpu)" "$BUNDLE/gpu-tests"
cp "$(test_bin gpu_layouts)" "$BUNDLE/gpu-layouts"
# The tests read config/ViT.yaml from where the sources were when they were compiled.
echo "$WORK/src" >"$BUNDLE/built-in"
# Every library the binaries resolve here outside libtorch, its CUDA libraries and the C and
# C++ runtimes (the GPU machine's own, newer ones serve).
ldd "$BUNDLE/scalebook-train" "$BUNDLE/gpu-tests" "$BUNDLE/gpu-layouts" | awk '/=> \//{print $3}' | sort -u |
    grep -v -E "$WORK|/(libc|libm|libdl|librt|libpthread|libutil|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so" |
    xargs -r cp -L -t "$BUNDLE/lib/"
du -sh "$BUNDLE"
