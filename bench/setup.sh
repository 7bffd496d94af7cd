# Sourced by the benchmark scripts: the project root as the working directory, the built
# binaries in `$bin`, a scratch directory `$work` removed on exit, and OpenMP threads that
# sleep when idle (two ranks on two cores would otherwise spin against each other).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${CARGO_TARGET_DIR:-$HOME/.cache/scalebook/target}/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=PASSIVE
