#!/usr/bin/env python3
"""Cutie on the CPU in PyTorch, beside build/bench/bench-cutie (not a test).

Runs ckey's PyTorch reference tools/reference/cutie.py (our implementation of the official
inference rules, checked against the official code; see tests/fixtures/cutie/README.md), not
upstream Cutie, with the same shapes and schedule as bench-cutie: synthetic cutie-base weights,
one object by default, the frame at its own size, mem_every and max_mem_frames as given, the
shot run until the working memory holds its frames, then `--measure` frames timed. Prints the
whole step's frames per second and the process's peak RSS, then the memory read alone
(similarity, top-k softmax and readout as the reference computes them: the N x HW matrices
are built) at the same N and HW, its reads per second and the RSS it adds.

    python3 bench/cutie_torch.py --size 480p --mem-frames 5 --mem-every 1 --measure 3 --threads 2
"""
import argparse
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "reference"))
from cutie import Cutie, CutieConfig, InferenceParams, InferenceRunner, similarity, topk_softmax  # noqa: E402
from make_cutie_fixtures import synthetic_state_dict  # noqa: E402

SIZES = {"480p": (854, 480), "1080p": (1920, 1080), "2160p": (3840, 2160)}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=SIZES, default="480p")
    ap.add_argument("--mem-frames", type=int, default=5)
    ap.add_argument("--mem-every", type=int, default=5)
    ap.add_argument("--measure", type=int, default=5)
    ap.add_argument("--objects", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    W, H = SIZES[a.size]
    cfg = CutieConfig()
    net = Cutie(cfg)
    net.load_state_dict(synthetic_state_dict(cfg, 4321), strict=False)
    net.eval()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, peak RSS {peak_rss_mib():.1f} MiB "
          "after loading")
    p = InferenceParams(mem_every=a.mem_every, max_mem_frames=a.mem_frames, top_k=30)
    run = InferenceRunner(net, p)
    g = torch.Generator().manual_seed(1)
    mask = (torch.arange(W)[None, :].expand(H, W) * (a.objects + 1) // W).long()
    objects = list(range(1, a.objects + 1))
    fill = (a.mem_frames - 1) * a.mem_every + 1
    total = 0.0
    with torch.inference_mode():
        for f in range(fill + a.measure):
            img = torch.rand((3, H, W), generator=g)
            t0 = time.perf_counter()
            run.step(img, mask if f == 0 else None, objects if f == 0 else None)
            dt = time.perf_counter() - t0
            if f >= fill:
                total += dt
            n = run.mem_key.shape[-1]
            print(f"frame {f:3d}  {dt * 1e3:8.1f} ms  memory {n} tokens{'  measured' if f >= fill else ''}",
                  flush=True)
        hw = ((H + 15) // 16) * ((W + 15) // 16)
        N = run.mem_key.shape[-1]
        print(f"whole step: {W} x {H}, {a.objects} object(s), {torch.get_num_threads()} threads, {N} memory tokens "
              f"({a.mem_frames} frames): {total / a.measure * 1e3:.1f} ms a frame over {a.measure} frames, "
              f"{a.measure / total:.3f} frames/s; peak RSS {peak_rss_mib():.1f} MiB")
        # the read alone, as InferenceRunner._read computes it
        del run
        CK, CV, K = cfg.key_dim, cfg.value_dim, a.objects
        N = a.mem_frames * hw
        mk, ms = torch.rand((1, CK, N), generator=g) * 2 - 1, torch.rand((1, 1, N), generator=g) + 1
        qk, qe = torch.rand((1, CK, hw), generator=g) * 2 - 1, torch.rand((1, CK, hw), generator=g)
        mv = torch.rand((1, K * CV, N), generator=g) * 2 - 1
        before = peak_rss_mib()
        best, runs, t_all = 1e30, 0, time.perf_counter()
        while runs < 3 or time.perf_counter() - t_all < 2.0:
            t0 = time.perf_counter()
            aff = topk_softmax(similarity(mk, ms, qk, qe), p.top_k)
            _ = mv @ aff
            best = min(best, time.perf_counter() - t0)
            runs += 1
            del aff, _
        print(f"read alone: N {N} x HW {hw}, {torch.get_num_threads()} threads: {best * 1e3:.1f} ms (best of {runs}), "
              f"{1 / best:.2f} reads/s; peak RSS {peak_rss_mib():.1f} MiB ({peak_rss_mib() - before:.1f} MiB above "
              "the inputs)")


if __name__ == "__main__":
    main()
