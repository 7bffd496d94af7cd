"""Which of libtorch's attention kernels is fastest for a config's heads: forward and
backward of `scaled_dot_product_attention` at the config's shape (batch, heads, tokens, head
dimension), each backend pinned in turn, in fp16 and bf16, timed with CUDA events.

A benchmark for the GPU issue: it says which backend PyTorch picks by default and what each
one costs, so the trainer's log line (`Attention: ...`) can be read against the fastest.

    python bench/gpu/attention.py --yaml-config config/ViT.yaml --config short
"""

import argparse
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from reference import load_params  # noqa: E402

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def time_ms(fn, warmup=3, repeat=10):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def measure(shape, dtype, backend):
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device="cuda", dtype=dtype)
    with sdpa_kernel([BACKENDS[backend]]):
        forward = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
        out = forward()
        fwd = time_ms(forward)
        both = time_ms(lambda: torch.autograd.grad(forward(), (q, k, v), grad))
    ref = None
    with sdpa_kernel([SDPBackend.MATH]):
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    err = ((out.float() - ref).norm() / ref.norm()).item()
    return {"forward_ms": round(fwd, 3), "backward_ms": round(both - fwd, 3), "rel_err": err}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yaml-config", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    p = load_params(args.yaml_config, args.config, {})
    h, w = p["img_size"]
    tokens = (h // p["patch_size"]) * (w // p["patch_size"])
    shape = (p["global_batch_size"], p["num_heads"], tokens, p["embed_dim"] // p["num_heads"])
    for dtype in (torch.float16, torch.bfloat16):
        q = torch.zeros(shape, device="cuda", dtype=dtype)
        default = torch._fused_sdp_choice(q, q, q)
        for backend in BACKENDS:
            try:
                row = measure(shape, dtype, backend)
            except RuntimeError as e:
                row = {"error": str(e).splitlines()[0][:120]}
            print(json.dumps({"dtype": str(dtype), "shape": shape, "backend": backend, "default": int(default), **row}), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
