#!/usr/bin/env python3
"""Where a frame's GPU time goes, from ncu's per-launch durations.

On a machine with an NVIDIA GPU and Nsight Compute:
  ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \\
      build/bench/bench-forward --device cuda --size 2048 --runs 0 > frame.csv
  python3 bench/ncu_frame.py frame.csv [--start im2col] [--top 40]

With --start '' every launch is the frame (a profile of one frame, e.g.
bench-cutie --profile under ncu --profile-from-start off). Otherwise the
frame is taken from the last launch of the --start kernel (a substring
of the first kernel of a forward pass; the patch embedding's im2col by
default) to the end, so the session's one-time weight conversions are left
out. Prints the frame's launches grouped by kernel and grid (count, total,
mean, share; the largest first), then by kernel alone. Standard library
only.
"""
import argparse
import csv
import sys
from collections import OrderedDict


def read_launches(path):
    """(kernel name, grid, block, microseconds) per launch, in launch order."""
    out = []
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu's own log lines start with ==PROF==
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "ns")
        v = float(row["Metric Value"].replace(",", ""))
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit, 1e-3)
        out.append((row["Kernel Name"], row.get("Grid Size", ""), row.get("Block Size", ""), v * scale))
    return out


def short(name):
    """The kernel's function name without namespaces, template arguments or parameters."""
    depth, cut = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            cut.append(ch)
    s = "".join(cut).strip()
    s = s.split(" ")[-1]
    return s.split("::")[-1] or name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--start", default="im2col",
                    help="substring of the frame's first kernel ('': every launch, for a profile of one frame)")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    launches = read_launches(a.csv)
    if not launches:
        sys.exit(f"{a.csv}: no gpu__time_duration.sum rows (run ncu with --csv --metrics gpu__time_duration.sum)")
    starts = [i for i, l in enumerate(launches) if a.start in l[0]] if a.start else []
    frame = launches[starts[-1]:] if starts else launches
    total = sum(l[3] for l in frame)
    print(f"{len(frame)} launches, {total / 1e3:.3f} ms of kernels in the frame"
          f"{'' if starts or not a.start else ' (no --start kernel found: all launches)'}")
    by = OrderedDict()
    for name, grid, block, us in frame:
        k = (short(name), grid, block)
        c, t = by.get(k, (0, 0.0))
        by[k] = (c + 1, t + us)
    print(f"\n{'kernel':<44} {'grid':<16} {'block':<12} {'n':>4} {'total us':>10} {'mean us':>9} {'share':>6}")
    for (name, grid, block), (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"{name[:44]:<44} {grid[:16]:<16} {block[:12]:<12} {c:>4} {t:>10.1f} {t / c:>9.1f} {100 * t / total:>5.1f}%")
    fam = OrderedDict()
    for name, _, _, us in frame:
        c, t = fam.get(short(name), (0, 0.0))
        fam[short(name)] = (c + 1, t + us)
    print(f"\n{'n':>4} {'total ms':>9} {'share':>6}  kernel (all grids; cuBLAS's names give its tile and cluster)")
    for name, (c, t) in sorted(fam.items(), key=lambda kv: -kv[1][1]):
        print(f"{c:>4} {t / 1e3:>9.3f} {100 * t / total:>5.1f}%  {name}")


if __name__ == "__main__":
    main()
