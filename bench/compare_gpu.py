#!/usr/bin/env python3
"""ckey on the GPU vs PyTorch on the same GPU, side by side (not a test).

    python3 bench/compare_gpu.py [--sizes 1024 2048] [--runs 10]

Runs build/bench/bench-forward --device cuda (ckey; `make bench` builds it) and
bench/torch_gpu.py (the reference GreenFormer: eager fp32, eager fp16 autocast,
torch.compile fp16) for each size, each in its own process, and prints a markdown table of
ms/frame with ckey's time as a ratio of torch.compile's, plus device memory. Raw JSON lines go
to stderr.

Both sides are timed as PyTorch times itself: CUDA events around the network on the device,
input already there (torch_gpu.py: x on the GPU; ckey: device_mean_s, from the uploaded fp32
input to the output on the device). ckey's time per call of ckey_session_forward, which also
uploads the fp32 input from host memory and downloads alpha and fg (2 x 64 MiB at S = 2048,
page-locked), is printed as well.
"""
import argparse
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def json_lines(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
    sys.stderr.write(out.stderr)
    recs = []
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            sys.stderr.write(line + "\n")
            recs.append(json.loads(line))
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--precisions", nargs="+", default=["fp16", "bf16", "fp32"])
    a = ap.parse_args()
    print("| S | ckey precision | ckey ms/frame (on the GPU) | ckey with host transfers | ckey device memory (measured) | "
          "eager fp32 | eager fp16 | torch.compile fp16 | ckey / compile | compile peak allocated |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in a.sizes:
        th = json_lines([sys.executable, os.path.join(here, "torch_gpu.py"), "--sizes", str(s), "--runs", str(a.runs)])
        by = {r.get("mode"): r for r in th}

        def ms(m):
            return by.get(m, {}).get("ms_per_frame", float("nan"))
        comp = ms("compile_fp16")
        mem = by.get("compile_fp16", {}).get("max_memory_allocated_bytes", float("nan")) / 2**30
        for p in a.precisions:
            ck = json_lines([os.path.join(root, "build/bench/bench-forward"), "--device", "cuda", "--size", str(s),
                             "--runs", str(a.runs), "--precision", p])
            r = ck[-1] if ck else {}
            ck_ms = r.get("device_mean_s", float("nan")) * 1000
            ck_host_ms = r.get("mean_s", float("nan")) * 1000
            used = r.get("device_used_mib", float("nan")) / 1024
            print(f"| {s} | {p} | {ck_ms:.1f} | {ck_host_ms:.1f} | {used:.2f} GiB | {ms('eager_fp32'):.1f} | "
                  f"{ms('eager_fp16'):.1f} | {comp:.1f} | {ck_ms / comp:.2f} | {mem:.2f} GiB |")

if __name__ == "__main__":
    main()
