"""Scalebook beside the tutorial's own PyTorch code, on the same files and config.

Started by `./scalebook.sh bench`, which installs the reference's environment and builds the
binaries `./scalebook.sh run` starts. Runs alternate (Scalebook, reference, Scalebook, ...), so
a machine that slows down or speeds up during the benchmark affects both alike; each figure is
the median of the repeats. A benchmark, not a test: it reports, it asserts nothing about time.

- training: `scalebook-train train` and `reference.py train`, the whole run: samples/s of
  epochs 2 to last (the tutorial's own log lines; epoch 1 includes warm-up), wall time, peak
  resident memory, and each epoch's train and validation loss side by side;
- loading: `scalebook-train bench --steps 0` and `reference.py load`: the loader alone (read,
  normalise, batch), samples/s over a second pass of the config's training samples, for each
  worker count.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "bench", "reference.py")
EPOCH = re.compile(r"Time taken for epoch (\d+) is ([0-9.]+) sec, avg ([0-9.]+) samples/sec")
TRAIN_LOSS = re.compile(r"Avg train loss=([0-9.]+)")
VALID_LOSS = re.compile(r"Avg val loss=([0-9.]+)")
LOADER = re.compile(r"data loader:\s+([0-9.]+) samples/s\s+\((\d+) workers\)")


def run(cmd, env=None):
    """Runs `cmd` to the end; returns its output, wall seconds and peak resident MiB."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} failed:\n{output[-4000:]}")
    return output, wall, usage.ru_maxrss / 1024


def training_run(cmd):
    output, wall, rss = run(cmd)
    epochs = [float(m.group(3)) for m in EPOCH.finditer(output)]
    if len(epochs) < 2:
        sys.exit(f"no epoch lines from {cmd[0]}:\n{output[-4000:]}")
    return {
        "samples_per_sec": statistics.mean(epochs[1:]),
        "wall": wall,
        "rss": rss,
        "train_loss": [float(m.group(1)) for m in TRAIN_LOSS.finditer(output)],
        "valid_loss": [float(m.group(1)) for m in VALID_LOSS.finditer(output)],
    }


def loader_rates(cmd, parse):
    output, _, _ = run(cmd)
    return parse(output)


def median(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer", required=True, help="the scalebook-train binary")
    parser.add_argument("--config", default="cpu_short")
    parser.add_argument("--yaml-config", default="config/ViT.yaml")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each side")
    parser.add_argument("--workers", default="0,2,8", help="loader worker counts")
    parser.add_argument("--seed", type=int, default=1, help="both sides' initialisation seed")
    parser.add_argument("--skip-training", action="store_true")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    python = sys.executable
    common = ["--yaml-config", args.yaml_config, "--config", args.config]
    print(f"# side by side: {args.config}, {args.repeats} alternating runs per side, medians", flush=True)

    loads = {"scalebook": {w: [] for w in workers}, "reference": {w: [] for w in workers}}
    for repeat in range(args.repeats):
        ours = loader_rates(
            [args.trainer, "bench", *common, "--steps", "0", "--batches", "1000000", "--workers", args.workers],
            lambda out: {int(m.group(2)): float(m.group(1)) for m in LOADER.finditer(out)},
        )
        for w in workers:
            loads["scalebook"][w].append(ours[w])
            ref = loader_rates([python, REFERENCE, "load", *common, "--workers", str(w)], reference_rate)
            loads["reference"][w].append(ref)
        print(f"loading, repeat {repeat + 1}: " + ", ".join(f"{w} workers {ours[w]:.0f} vs {loads['reference'][w][-1]:.0f}" for w in workers), flush=True)

    trains = {"scalebook": [], "reference": []}
    if not args.skip_training:
        for repeat in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="scalebook-bench-") as run_dir:
                trains["scalebook"].append(training_run([args.trainer, "train", *common, "--seed", str(args.seed), "--run-dir", run_dir]))
            trains["reference"].append(training_run([python, REFERENCE, "train", *common, "--seed", str(args.seed)]))
            s, r = trains["scalebook"][-1], trains["reference"][-1]
            print(f"training, repeat {repeat + 1}: {s['samples_per_sec']:.2f} vs {r['samples_per_sec']:.2f} samples/s, {s['wall']:.1f} vs {r['wall']:.1f} s", flush=True)

    print()
    print("| what | Scalebook | reference (PyTorch) | ratio |")
    print("|---|---|---|---|")
    if trains["scalebook"]:
        s, r = trains["scalebook"], trains["reference"]
        print(f"| training samples/s, epochs 2 on | {median(s, 'samples_per_sec'):.2f} | {median(r, 'samples_per_sec'):.2f} | {median(s, 'samples_per_sec') / median(r, 'samples_per_sec'):.2f}x |")
        print(f"| whole run, wall | {median(s, 'wall'):.1f} s | {median(r, 'wall'):.1f} s | {median(r, 'wall') / median(s, 'wall'):.2f}x faster |")
        print(f"| peak resident memory | {median(s, 'rss'):.0f} MiB | {median(r, 'rss'):.0f} MiB | {median(s, 'rss') / median(r, 'rss'):.2f}x |")
    for w in workers:
        ours, ref = statistics.median(loads["scalebook"][w]), statistics.median(loads["reference"][w])
        print(f"| loader samples/s, {w} workers | {ours:.0f} | {ref:.0f} | {ours / ref:.2f}x |")
    if trains["scalebook"]:
        print_losses(trains["scalebook"][0], trains["reference"][0], args.seed)


def print_losses(ours, ref, seed):
    """Each epoch's losses, from the first run of each side (both seeded, so every run of a side
    has the same curve up to the order of floating-point sums)."""
    print()
    print(f"Loss per epoch (seed {seed} on both sides; the initialisations differ, PyTorch's and libtorch's generators being used differently):")
    print()
    print("| epoch | train, Scalebook | train, reference | difference | validation, Scalebook | validation, reference | difference |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for epoch, (ts, tr, vs, vr) in enumerate(zip(ours["train_loss"], ref["train_loss"], ours["valid_loss"], ref["valid_loss"]), 1):
        dt, dv = (ts - tr) / tr, (vs - vr) / vr
        worst = max(worst, abs(dt), abs(dv))
        print(f"| {epoch} | {ts:.6f} | {tr:.6f} | {dt:+.2%} | {vs:.6f} | {vr:.6f} | {dv:+.2%} |")
    print()
    print(f"largest difference: {worst:.2%} ({'within' if worst <= 0.01 else 'OUTSIDE'} 1%)")


def reference_rate(output):
    for line in output.splitlines():
        if line.startswith("{"):
            return json.loads(line)["samples_per_sec"]
    sys.exit(f"no result from the reference loader:\n{output[-4000:]}")


if __name__ == "__main__":
    main()
