"""The PyTorch reference of Scalebook's model on a GPU: training samples/s of a config's step
(model, relative L2 loss, backward, Adam) on one synthetic batch kept on the GPU, eager or
under `torch.compile`, with the tutorial's precision switches, and the allocator's peak.

The same measurement as `scalebook-train bench --steps N` (no data loading is timed), so the
two can stand side by side on the same GPU. A benchmark: it reports and asserts nothing.

    python bench/gpu/pytorch_steps.py --yaml-config config/ViT.yaml --config short \
        --variant tf32 --variant bf16 --compiled bf16+fused --steps 20

Prints one JSON line per variant: {"variant", "compiled", "samples_per_sec",
"max_memory_allocated_mib", "loss"}.
"""

import argparse
import gzip
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from reference import VisionTransformer, l2_loss, load_params  # noqa: E402

# The tutorial's single-GPU ladder: name -> (TF32, AMP dtype, fused Adam).
VARIANTS = {
    "fp32": (False, None, False),
    "tf32": (True, None, False),
    "fp16": (True, torch.float16, False),
    "bf16": (True, torch.bfloat16, False),
    "bf16+fused": (True, torch.bfloat16, True),
    "fp16+fused": (True, torch.float16, True),
}


def trace(step, path):
    """Two more steps under PyTorch's profiler, as a gzip-compressed Chrome trace at `path`."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(2):
            with torch.profiler.record_function("step"):
                step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    with open(path, "rb") as raw, gzip.open(path + ".gz", "wb") as packed:
        packed.write(raw.read())
    os.remove(path)


def measure(p, variant, compiled, warmup, steps, trace_dir):
    tf32, amp, fused = VARIANTS[variant]
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(0)
    model = VisionTransformer(p).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=p["lr"], betas=(0.9, 0.95), fused=fused)
    scaler = torch.amp.GradScaler("cuda", enabled=amp == torch.float16)
    h, w = p["img_size"]
    shape = (p["global_batch_size"], p["n_in_channels"], h, w)
    inp, tar = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
    forward = torch.compile(model) if compiled else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
            loss = l2_loss(forward(inp), tar)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss = loss.item()
    elapsed = time.perf_counter() - start
    if trace_dir:
        trace(step, os.path.join(trace_dir, f"pytorch-{variant}{'-compiled' if compiled else ''}.trace.json"))
    return {
        "variant": variant,
        "compiled": compiled,
        "samples_per_sec": steps * p["global_batch_size"] / elapsed,
        "max_memory_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
        "loss": loss,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yaml-config", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--variant", action="append", default=[], choices=sorted(VARIANTS), help="measured eager")
    parser.add_argument("--compiled", action="append", default=[], choices=sorted(VARIANTS), help="measured under torch.compile")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation happens here)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--trace-dir", help="also write a profile of two steps per variant here")
    args = parser.parse_args()
    p = load_params(args.yaml_config, args.config, {})
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    for variant, compiled in [(v, False) for v in args.variant] + [(v, True) for v in args.compiled]:
        print(json.dumps(measure(p, variant, compiled, args.warmup, args.steps, args.trace_dir)), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
