"""Where a profiled step's GPU time goes, by kernel class: reads Chrome traces (Scalebook's
`rank0.trace.json[.gz]` or PyTorch's profiler export) and prints, per trace, milliseconds of
kernel time per step in each class, the share of each, and the kernels' count.

    python bench/gpu/kernels.py TRACE... [--steps 2]

Classes: matrix products (cuBLAS, CUTLASS, nvjet), attention (cuDNN's and PyTorch's fused
attention), layer norm, GELU, element-wise (PyTorch's element-wise and copy kernels), reductions
(sums, such as bias gradients), optimizer, collectives (NCCL), other.
"""

import argparse
import collections
import gzip
import json
import re

CLASSES = [
    ("attention", r"fmha|flash|sdpa|attention|cudnn::fusion|dot_do_o|convert_dq"),
    ("layer norm", r"layer_norm|LayerNorm|GammaBeta"),
    ("matrix products", r"gemm|nvjet|xmma|cutlass|splitKreduce|cublas"),
    ("GELU", r"Gelu|gelu"),
    ("optimizer", r"adam|Adam|multi_tensor_apply|amp_update_scale|FusedOptimizer"),
    ("collectives", r"nccl|ncclDevKernel"),
    ("reductions", r"reduce_kernel"),
    ("element-wise", r"elementwise|copy_kernel|FillFunctor"),
]


def kind(name):
    for label, pattern in CLASSES:
        if re.search(pattern, name):
            return label
    return "other"


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def summary(path, steps):
    kernels = [e for e in load(path) if e.get("cat") == "kernel" and e.get("ph") == "X"]
    time, count = collections.Counter(), collections.Counter()
    for e in kernels:
        time[kind(e["name"])] += e["dur"] / 1000 / steps
        count[kind(e["name"])] += 1 / steps
    total = sum(time.values())
    rows = {k: {"ms": round(v, 2), "share": round(v / total, 3), "kernels": round(count[k])} for k, v in time.most_common()}
    return {"trace": path, "kernel_ms_per_step": round(total, 2), "classes": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--steps", type=int, default=2, help="steps each trace holds")
    args = parser.parse_args()
    for path in args.traces:
        print(json.dumps(summary(path, args.steps)), flush=True)


if __name__ == "__main__":
    main()
