#!/usr/bin/env python3
"""PyTorch CPU baseline: fp32 forward time and peak RSS of the reference GreenFormer.

    python3 bench/torch_cpu.py [--sizes 512 1024 2048] [--threads 16] [--runs 2] [--weights random|synthetic]

Each size runs in a fresh subprocess (so ru_maxrss is per size); one JSON line per size on stdout:
    {"bench": "torch_cpu", "S": 1024, "threads": 16, "sec_per_frame": ..., "sec_min": ...,
     "warmup_s": ..., "peak_rss_bytes": ..., "rss_after_load_bytes": ..., ...}
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "tools", "reference")


def maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024  # Linux reports KiB


def child(args) -> None:
    sys.path.insert(0, REF)
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from greenformer import GreenFormer, GreenFormerConfig, load_state_dict_into

    S = args.child
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = GreenFormer(GreenFormerConfig(img_size=S)).eval()
    if args.weights == "synthetic":
        from synthetic import model_shapes, synthetic_state_dict
        sd = {k: torch.from_numpy(v) for k, v in synthetic_state_dict(model_shapes(2048)).items()}
        load_state_dict_into(model, sd, log=None)
        del sd
    if args.weights == "synthetic":
        from synthetic import synthetic_input
        x = torch.from_numpy(synthetic_input(S))[None]
    else:
        x = torch.randn(1, 4, S, S)
    load_s = time.perf_counter() - t0
    rss_load = maxrss_bytes()
    times = []
    with torch.inference_mode():
        t = time.perf_counter()
        out = model(x)
        warm = time.perf_counter() - t
        for _ in range(args.runs):
            t = time.perf_counter()
            out = model(x)
            times.append(time.perf_counter() - t)
    alpha = out["alpha"]
    rec = {
        "bench": "torch_cpu", "S": S, "threads": args.threads, "dtype": "float32",
        "weights": args.weights, "runs": args.runs,
        "sec_per_frame": sum(times) / len(times) if times else warm, "sec_min": min(times) if times else warm,
        "times_s": times, "warmup_s": warm, "load_s": load_s,
        "peak_rss_bytes": maxrss_bytes(), "rss_after_load_bytes": rss_load,
        "alpha_mean": float(alpha.mean()),
        "torch": torch.__version__, "cpu": platform.processor() or platform.machine(),
        "nproc": os.cpu_count(),
    }
    print(json.dumps(rec), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=2, help="timed runs after one warm-up")
    ap.add_argument("--weights", choices=["random", "synthetic"], default="random")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args)
        return
    rc = 0
    for S in args.sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(S), "--threads", str(args.threads),
               "--runs", str(args.runs), "--weights", args.weights]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        p = subprocess.run(cmd, stdout=subprocess.PIPE, env=env, text=True)
        if p.returncode != 0:
            print(json.dumps({"bench": "torch_cpu", "S": S, "error": f"exit {p.returncode}"}), flush=True)
            rc = 1
        else:
            sys.stdout.write(p.stdout)
            sys.stdout.flush()
    sys.exit(rc)


if __name__ == "__main__":
    main()
