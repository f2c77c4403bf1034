#!/usr/bin/env python3
"""ckey vs PyTorch on the same CPU cores, side by side (not a test).

    python3 bench/compare_cpu.py [--sizes 512 1024 2048] [--threads 16] [--runs 2]

Runs build/bench/bench-forward (ckey, fp32, full-size synthetic weights) and
bench/torch_cpu.py (the reference GreenFormer in PyTorch, fp32) for each size,
each in its own process, and prints a markdown table with time and peak-RSS
ratios (ckey / PyTorch). Raw JSON lines go to stderr.
"""
import argparse
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=root)
    sys.stderr.write(out.stderr)
    line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
    sys.stderr.write(line + "\n")
    return json.loads(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--skip-torch", action="store_true")
    a = ap.parse_args()
    rows = []
    for s in a.sizes:
        ck = run_json([os.path.join(root, "build/bench/bench-forward"), "--size", str(s),
                       "--threads", str(a.threads), "--runs", str(a.runs)])
        th = None
        if not a.skip_torch:
            th = run_json([sys.executable, os.path.join(here, "torch_cpu.py"), "--sizes", str(s),
                           "--threads", str(a.threads), "--runs", str(a.runs)])
        rows.append((s, ck, th))
    print(f"CPU, fp32, {a.threads} threads, mean of {a.runs} runs after a warm-up\n")
    print("| S | ckey s/frame | PyTorch s/frame | time ratio | ckey peak RSS | PyTorch peak RSS | RSS ratio | ckey planned peak |")
    print("|---|---|---|---|---|---|---|---|")
    for s, ck, th in rows:
        ck_rss = ck["peak_rss_mib"] / 1024
        if th:
            th_rss = th["peak_rss_bytes"] / 2**30
            print(f"| {s} | {ck['mean_s']:.3f} | {th['sec_per_frame']:.3f} | {ck['mean_s'] / th['sec_per_frame']:.2f} | "
                  f"{ck_rss:.2f} GiB | {th_rss:.2f} GiB | {ck_rss / th_rss:.2f} | {ck['planned_peak_mib'] / 1024:.2f} GiB |")
        else:
            print(f"| {s} | {ck['mean_s']:.3f} | - | - | {ck_rss:.2f} GiB | - | - | {ck['planned_peak_mib'] / 1024:.2f} GiB |")


if __name__ == "__main__":
    main()
