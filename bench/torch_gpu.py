#!/usr/bin/env python3
"""PyTorch CUDA baseline for the reference GreenFormer: time per frame and peak device memory.

    python3 bench/torch_gpu.py [--sizes 1024 2048] [--modes eager_fp32 eager_fp16 compile_fp16]
                               [--runs 10] [--warmup 3] [--tf32] [--compile-mode default]

Modes: eager_fp32 (fp32 weights and math; TF32 off unless --tf32), eager_fp16 (fp32 weights,
torch.autocast float16, as the official engine), compile_fp16 (torch.compile(model, mode=...)
under the same autocast). Each (mode, size) runs in a fresh subprocess; one JSON line each:
    {"bench": "torch_gpu", "mode": ..., "S": ..., "ms_per_frame": ..., "ms_min": ...,
     "max_memory_allocated_bytes": ..., "max_memory_reserved_bytes": ..., "weights_bytes": ..., ...}
Peak memory counters are reset after the weights are on the device, so they include weights plus
everything the forward passes (including warm-up / compilation) allocate.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "tools", "reference")
MODES = ["eager_fp32", "eager_fp16", "compile_fp16"]


def child(args) -> None:
    sys.path.insert(0, REF)
    import torch

    from greenformer import GreenFormer, GreenFormerConfig

    S, mode = args.child_size, args.child_mode
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = GreenFormer(GreenFormerConfig(img_size=S)).eval().to(dev)
    x = torch.randn(1, 4, S, S, device=dev)
    torch.cuda.synchronize()
    weights_bytes = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn = model
    if mode == "compile_fp16":
        fn = torch.compile(model, mode=args.compile_mode)
    use_amp = mode in ("eager_fp16", "compile_fp16")

    def step():
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
            return fn(x)

    t = time.perf_counter()
    for _ in range(args.warmup):
        out = step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t
    times = []
    for _ in range(args.runs):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        out = step()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    rec = {
        "bench": "torch_gpu", "mode": mode, "S": S, "runs": args.runs, "warmup": args.warmup,
        "tf32": args.tf32, "compile_mode": args.compile_mode if mode == "compile_fp16" else None,
        "ms_per_frame": sum(times) / len(times), "ms_min": min(times), "ms_median": sorted(times)[len(times) // 2],
        "warmup_s": warm_s,
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
        "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(),
        "weights_bytes": weights_bytes,
        "alpha_mean": float(out["alpha"].float().mean()),
        "torch": torch.__version__, "device": torch.cuda.get_device_name(),
    }
    print(json.dumps(rec), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument("--child-size", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-mode", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_size is not None:
        child(args)
        return
    rc = 0
    for mode in args.modes:
        for S in args.sizes:
            cmd = [sys.executable, os.path.abspath(__file__), "--child-size", str(S), "--child-mode", mode,
                   "--runs", str(args.runs), "--warmup", str(args.warmup), "--compile-mode", args.compile_mode]
            if args.tf32:
                cmd.append("--tf32")
            p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            if p.returncode != 0:
                print(json.dumps({"bench": "torch_gpu", "mode": mode, "S": S, "error": f"exit {p.returncode}"}),
                      flush=True)
                rc = 1
            else:
                sys.stdout.write(p.stdout)
                sys.stdout.flush()
    sys.exit(rc)


if __name__ == "__main__":
    main()
