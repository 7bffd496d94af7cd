#!/bin/bash
# This machine's model made beside a CPU hog (one busy process per core), then made again once
# the machine is idle, and cpu_short predicted from each against cpu_short measured (BENCHMARKS.md,
# "Contention the load average misses is caught"). Run after `./scalebook.sh test` (or `run`)
# has built the binaries, on an otherwise idle machine: about three minutes.
source "$(dirname "$0")/setup.sh"
model() {
    python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(sys.argv[2], 'load', m['load_at_measurement'],
  [(r['threads'], round(r['cpu_share'], 2), round(r['matmul_gflops'][-1])) for r in m['by_threads']])" "$work/machine.json" "$1"
}
predicted() {
    "$bin/scalebook" estimate --config cpu_short --cluster local --machine "$work/machine.json" --json |
        python3 -c "import json, sys; print('$1: cpu_short predicted', round(json.load(sys.stdin)['samples_per_sec'], 1), 'samples/s')"
}
hogs=()
for _ in $(seq "$(nproc)"); do yes > /dev/null & hogs+=($!); done
sleep 20
predicted "beside the hog"
kill "${hogs[@]}"
model "made beside the hog (threads, share of the cores, GFLOP/s at width 384):"
until python3 -c "import sys; sys.exit(float(open('/proc/loadavg').read().split()[0]) >= 0.5 * $(nproc))"; do sleep 5; done
predicted "once idle"
model "made again once idle:"
"$bin/scalebook-train" train --config cpu_short --seed 1 --run-dir "$work/run" 2>&1 | grep "samples/sec"
