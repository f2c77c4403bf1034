#!/usr/bin/env python3
"""How the reference Cutie (cutie.py) fares when its convs' matrix products take rounded inputs,
as ckey's `--track-precision tf32|fp16` does on the GPU.

    python3 tools/reference/cutie_precision.py [--threads N]

Runs the 30-frame clip of tests/fixtures/cutie/clip.safetensors with the fixture checkpoint three
times: plain fp32, then with every Conv2d's input and weight rounded (to nearest) to TF32's 10-bit
mantissa, then to fp16, the products summed in fp32 as tensor cores do. Prints, per run, each
frame's max abs error of the probabilities against the fixture and the worst object IoU of the
argmax masks. Needs torch and numpy (CPU is enough); a diagnostic, not a fixture maker.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_cutie_fixtures as M  # noqa: E402
from cutie import Cutie  # noqa: E402
from fixture_io import read_safetensors  # noqa: E402


def rounded(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x with its float32 mantissa rounded to `bits` bits (10: TF32), or to fp16 (bits 16)."""
    if bits == 16:
        return x.half().float()
    drop = 23 - bits
    i = x.contiguous().view(torch.int32)
    return ((i + (1 << (drop - 1))) & ~((1 << drop) - 1)).view(torch.float32)


def run(net, frames, mask0, bits):
    hooks = []
    if bits:
        for m in net.modules():
            if isinstance(m, torch.nn.Conv2d):
                def pre(mod, inp, bits=bits):
                    mod._exact = mod.weight.data
                    mod.weight.data = rounded(mod._exact, bits)
                    return (rounded(inp[0], bits),) + tuple(inp[1:])

                def post(mod, inp, out):
                    mod.weight.data = mod._exact
                hooks += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    try:
        probs, _ = M.run_clip(net, M.CLIP_PARAMS, frames, mask0, [1, 2])
    finally:
        for h in hooks:
            h.remove()
    return probs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default="tests/fixtures/cutie")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    net = Cutie.from_state_dict(torch.load(os.path.join(args.fixtures, "cutie_tiny.pth"), weights_only=True),
                                num_heads=M.TINY.num_heads)
    frames, mask0 = M.synthetic_clip(M.CLIP_SEED, 30, 49, 113)
    want = np.asarray(read_safetensors(os.path.join(args.fixtures, "clip.safetensors"))[0]["prob"], np.float32)
    for name, bits in (("fp32", 0), ("tf32", 10), ("fp16", 16)):
        p = run(net, frames, mask0, bits)
        errs, ious = [], []
        for f in range(p.shape[0]):
            errs.append(float(np.abs(p[f] - want[f]).max()))
            a, b = p[f].argmax(0), want[f].argmax(0)
            worst = 1.0
            for k in (1, 2):
                u = np.logical_or(a == k, b == k).sum()
                worst = min(worst, np.logical_and(a == k, b == k).sum() / u if u else 1.0)
            ious.append(worst)
        print(f"{name}: worst err {max(errs):.3g}, worst IoU {min(ious):.4f}")
        print(f"  per frame err  " + " ".join(f"{e:.2g}" for e in errs))
        print(f"  per frame IoU  " + " ".join(f"{i:.2f}" for i in ious), flush=True)


if __name__ == "__main__":
    main()
