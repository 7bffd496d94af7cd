#!/usr/bin/env bash
# Scalebook's one entry point for setting up, building, running and testing.
#
#   ./scalebook.sh run [serve flags...]   set up what is missing, build, start the app
#   ./scalebook.sh test                   set up what is missing, build, run every test
#   ./scalebook.sh cargo ARGS...          cargo with the pinned environment (for developers)
#
# Everything is idempotent: each step checks for its result first, so on a machine that is
# already set up the setup part takes seconds. Downloads and build outputs live in one cache
# ($SCALEBOOK_CACHE, default ~/.cache/scalebook) shared by every clone, so a fresh clone reuses
# libtorch, the tools and the compiled dependencies.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SCALEBOOK_CACHE:-$HOME/.cache/scalebook}

# Versions that must match exactly (see the toolchain notes in README.md).
TORCH_VERSION=2.13.0            # tch 0.26.0 checks for exactly this libtorch
CUDA_RUNTIME_WHEEL=nvidia-cuda-runtime==13.0.96   # libtorch_cpu.so links libcudart ...
CUPTI_WHEEL=nvidia-cuda-cupti==13.0.85            # ... and libcupti, even on CPU
WASM_BINDGEN_VERSION=0.2.130    # must equal the wasm-bindgen crate in Cargo.lock
BINARYEN_VERSION=132.0.0        # Debian's wasm-opt (108) emits modules Chromium rejects

APT_BUILD=(pkg-config libhdf5-dev)
# The Slurm executor's tests start a real one-node cluster (slurm-wlm with munge), as root.
APT_TEST=(chromium chromium-driver slurm-wlm munge)

# The environment torch-sys watches must never change between builds, or it rebuilds its
# C++ wrapper (about two minutes). Absolute paths into the shared cache keep it identical
# across clones.
export LIBTORCH="$CACHE/libtorch"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
export OMP_WAIT_POLICY=PASSIVE
export PATH="$CACHE/tools/bin:$CACHE/binaryen/node_modules/.bin:$PATH"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return
    say "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

setup_libtorch() {
    local venv="$CACHE/torch-venv" stamp="$CACHE/torch-venv/.scalebook-torch-$TORCH_VERSION"
    if [ ! -f "$stamp" ]; then
        say "installing libtorch $TORCH_VERSION (CPU use of the PyPI wheel, about 540 MB)"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --no-deps "torch==$TORCH_VERSION" "$CUDA_RUNTIME_WHEEL" "$CUPTI_WHEEL"
        touch "$stamp"
    fi
    local torch_dir
    torch_dir=$(echo "$venv"/lib/python3*/site-packages/torch)
    [ "$(readlink "$LIBTORCH" 2>/dev/null)" = "$torch_dir" ] || ln -sfn "$torch_dir" "$LIBTORCH"
}

# Python readers the tests check our files with: h5py for the HDF5 data, TensorBoard's own
# event reader for the event files.
PY_TEST_PACKAGES=(h5py==3.12.1 numpy==2.1.3 tensorboard==2.18.0)
setup_python_readers() {
    local venv="$CACHE/py-venv" stamp
    stamp="$venv/.scalebook-$(printf '%s_' "${PY_TEST_PACKAGES[@]}")"
    if [ ! -f "$stamp" ]; then
        say "installing the Python readers used by the tests (${PY_TEST_PACKAGES[*]})"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "${PY_TEST_PACKAGES[@]}"
        touch "$stamp"
    fi
    export SCALEBOOK_PYTHON="$venv/bin/python"
}

setup_wasm() {
    rustup target list --installed | grep -qx wasm32-unknown-unknown || {
        say "adding the wasm32 target"
        rustup target add wasm32-unknown-unknown
    }
    if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
        say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 2 minutes)"
        cargo install -q wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --root "$CACHE/tools"
    fi
    if ! wasm-opt --version 2>/dev/null | grep -q "version ${BINARYEN_VERSION%%.*}"; then
        say "installing binaryen $BINARYEN_VERSION (wasm-opt)"
        npm install --silent --no-audit --no-fund --prefix "$CACHE/binaryen" "binaryen@$BINARYEN_VERSION" >/dev/null
    fi
}

setup() {
    mkdir -p "$CACHE"
    apt_install "${APT_BUILD[@]}" "$@"
    setup_libtorch
    setup_wasm
}

# The front-end: cargo builds the wasm, wasm-bindgen writes the JS glue, wasm-opt shrinks it.
# Output goes to static/dist/, which the server serves next to the chapter files.
build_frontend() {
    say "building the front-end (wasm)"
    cargo build -q --release -p scalebook-frontend --target wasm32-unknown-unknown
    local dist="$ROOT/static/dist" wasm="$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/scalebook-frontend.wasm"
    mkdir -p "$dist"
    wasm-bindgen --target web --no-typescript --out-dir "$dist" --out-name scalebook "$wasm"
    wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
        --enable-mutable-globals --enable-reference-types --enable-multivalue \
        "$dist/scalebook_bg.wasm" -o "$dist/scalebook_bg.wasm"
}

build_native() {
    say "building the server and the trainer"
    cargo build -q --bins
}

cmd_run() {
    setup
    build_frontend
    build_native
    cd "$ROOT"
    if [ ! -d data/synthetic/train ]; then
        say "generating the synthetic ERA5-like dataset for the CPU configs (data/synthetic)"
        "$CARGO_TARGET_DIR/debug/scalebook-train" datagen --out data/synthetic
    fi
    say "starting Scalebook"
    exec "$CARGO_TARGET_DIR/debug/scalebook" serve "$@"
}

cmd_test() {
    setup "${APT_TEST[@]}"
    setup_python_readers
    build_frontend
    build_native
    cd "$ROOT"
    say "running every test"
    # Two cores: keep libtorch and the test harness from fighting over them.
    RUST_TEST_THREADS=${RUST_TEST_THREADS:-2} cargo test -q
    say "running the front-end's component tests in headless Chromium"
    # No -q here: cargo would hand it to wasm-bindgen-test-runner, which refuses it.
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner CHROMEDRIVER=/usr/bin/chromedriver \
        cargo test -p scalebook-frontend --target wasm32-unknown-unknown
}

case "${1:-}" in
    run) shift; cmd_run "$@" ;;
    test) shift; cmd_test "$@" ;;
    cargo) shift; cd "$ROOT"; exec cargo "$@" ;;
    setup) shift; setup "${APT_TEST[@]}" ;;
    *) echo "usage: $0 run [serve flags...] | test | setup | cargo ARGS..." >&2; exit 2 ;;
esac
