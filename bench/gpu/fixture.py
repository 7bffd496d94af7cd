"""Turns a run directory that came back from the GPU machine into a recorded run the chapters
open: `static/recorded/<name>/` with the run's log, its metrics and its rank-0 trace, the trace
cut down to what the timeline draws (complete events with their name, category, thread and
time; thread and process names and labels), and stored gzip-compressed only (the file server sends `rank0.trace.json.gz` as
`rank0.trace.json` to browsers, which all accept gzip): about 340 kB for two steps of `short`.
Flow arrows, CUDA runtime calls and every event's arguments are left out: the timeline shows
none of them. The GPU's name goes into `recorded.json` beside them.

    python3 bench/gpu/fixture.py RUN_DIR NAME --gpu "NVIDIA H200" --what "short, 0 workers"
"""

import argparse
import gzip
import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DROPPED = {"ac2g", "fwdbwd", "cuda_runtime", "cuda_driver", "overhead"}


def trimmed(trace):
    events = []
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "process_labels", "thread_name", "process_sort_index", "thread_sort_index"):
            events.append({k: e[k] for k in ("ph", "name", "pid", "tid", "args") if k in e})
        elif e.get("ph") == "X" and e.get("cat") not in DROPPED:
            kept = {k: e[k] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if k in e}
            kept["ts"], kept["dur"] = round(kept["ts"], 3), round(kept.get("dur", 0), 3)
            events.append(kept)
    keep = ("schemaVersion", "deviceProperties", "displayTimeUnit", "baseTimeNanoseconds", "traceName")
    out = {k: trace[k] for k in keep if k in trace}
    out["traceEvents"] = events
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("name")
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--what", required=True)
    args = parser.parse_args()
    out = os.path.join(ROOT, "static", "recorded", args.name)
    os.makedirs(out, exist_ok=True)
    for name in ("out.log", "metrics.jsonl"):
        shutil.copy(os.path.join(args.run_dir, name), out)
    with open(os.path.join(args.run_dir, "profile", "rank0.trace.json")) as f:
        trace = trimmed(json.load(f))
    text = json.dumps(trace, separators=(",", ":")).encode()
    with open(os.path.join(out, "rank0.trace.json.gz"), "wb") as f:
        f.write(gzip.compress(text, compresslevel=9, mtime=0))
    with open(os.path.join(out, "recorded.json"), "w") as f:
        json.dump({"gpu": args.gpu, "what": args.what, "measured_by": "Scalebook"}, f, indent=2)
        f.write("\n")
    print(out, sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out)), "bytes")


if __name__ == "__main__":
    main()
