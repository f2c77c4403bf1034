#!/usr/bin/env python3
"""Goldens for tests/test-pipeline.c, computed by torch/torchvision themselves.

Everything ckey's src/pixel must reproduce is a torch/torchvision op:
  * TF.resize(..., BILINEAR) on float tensors (torchvision v2: antialias=True,
    i.e. aten::_upsample_bilinear2d_aa)                       -> mode "aa"
  * F.interpolate(mode="bilinear", align_corners=False)       -> mode "bilinear"
  * the piecewise sRGB transfer function (written here with torch ops from its
    definition; upstream CorridorKey code is deliberately not imported)
  * TF.normalize with the ImageNet statistics
  * the official frame pre-processing order (resize, [linear->sRGB], normalize,
    concat hint) and the GPU post-processing resize back to the plate size.

Inputs are not stored: both this script and the C test generate them with the
same integer hash (gen() below), whose values k / 2^24 are exact in float32.
Only outputs (raw little-endian float32, *.f32) and the small colour ramp are
written, plus index.txt describing every case (see README.md there).

Usage: python3 tools/reference/make_pipeline_fixtures.py [outdir]
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
import torchvision.transforms.v2.functional as TF
from torchvision.transforms import InterpolationMode

M64 = (1 << 64) - 1


def gen(seed, n):
    """n floats in [0, 1): splitmix-style hash of (index, seed), top 24 bits."""
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = i * np.uint64(0x9E3779B97F4A7C15) + np.uint64((seed * 0xBF58476D1CE4E5B9) & M64)
        h ^= h >> np.uint64(31)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(29)
    return ((h >> np.uint64(40)).astype(np.float64) / float(1 << 24)).astype(np.float32)


def tv_resize(x, h, w):
    return TF.resize(x, [h, w], interpolation=InterpolationMode.BILINEAR)


def bilinear(x, h, w):
    return F.interpolate(x[None], size=(h, w), mode="bilinear", align_corners=False)[0]


def linear_to_srgb(x):
    x = x.clamp(min=0.0)
    return torch.where(x <= 0.0031308, x * 12.92, 1.055 * torch.pow(x, 1.0 / 2.4) - 0.055)


def srgb_to_linear(x):
    x = x.clamp(min=0.0)
    return torch.where(x <= 0.04045, x / 12.92, torch.pow((x + 0.055) / 1.055, 2.4))


MEAN = torch.tensor([0.485, 0.456, 0.406], dtype=torch.float32)
STD = torch.tensor([0.229, 0.224, 0.225], dtype=torch.float32)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/pipeline"
    os.makedirs(out, exist_ok=True)
    # ATen picks different CPU kernels for 1 thread with 3 channels; pin a
    # multi-threaded configuration so the goldens do not depend on the host.
    torch.set_num_threads(4)
    index = [
        f"# made by tools/reference/make_pipeline_fixtures.py with torch {torch.__version__}, "
        f"torchvision {torchvision.__version__}",
    ]

    def save(name, t):
        a = np.ascontiguousarray(t.detach().cpu().numpy().astype("<f4"))
        a.tofile(os.path.join(out, name + ".f32"))

    resize_cases = [
        # name, mode, seed, c, in_h, in_w, out_h, out_w
        ("up_aa", "aa", 1, 3, 37, 53, 64, 64),
        ("down_aa", "aa", 2, 3, 300, 200, 64, 64),
        ("hint_aa", "aa", 3, 1, 90, 160, 128, 128),       # down in w, up in h
        ("nonsquare_aa", "aa", 4, 3, 50, 70, 40, 120),    # down in h, up in w
        ("width_only_aa", "aa", 5, 2, 64, 100, 64, 48),
        ("height_only_aa", "aa", 6, 2, 30, 64, 77, 64),
        ("uhd_down_aa", "aa", 7, 1, 1080, 1920, 96, 96),  # a realistic 20x reduction
        ("same_aa", "aa", 8, 1, 16, 24, 16, 24),
        ("tiny_aa", "aa", 9, 1, 1, 1, 5, 3),
        ("decoder_small", "bilinear", 10, 8, 8, 8, 64, 64),   # ATen's vectorized kernel
        ("decoder_large", "bilinear", 11, 2, 16, 16, 72, 72),  # ATen's generic kernel
        ("logits_up", "bilinear", 12, 1, 32, 32, 80, 80),
        ("down_bilinear", "bilinear", 13, 3, 137, 153, 59, 81),
        ("down_bilinear_small", "bilinear", 14, 3, 37, 53, 20, 30),
        ("nonsquare_bilinear", "bilinear", 15, 2, 17, 5, 100, 31),
    ]
    for name, mode, seed, c, ih, iw, oh, ow in resize_cases:
        x = torch.from_numpy(gen(seed, c * ih * iw).reshape(c, ih, iw))
        y = tv_resize(x, oh, ow) if mode == "aa" else bilinear(x, oh, ow)
        save(name, y)
        index.append(f"resize {name} {mode} {seed} {c} {ih} {iw} {oh} {ow}")

    # Colour ramp: below 0, across both thresholds (with their float32
    # neighbours), through 1 and beyond.
    pts = [np.linspace(-0.5, 2.5, 1201, dtype=np.float32)]
    for t in (0.0031308, 0.04045, 1.0, 0.0):
        c = np.float32(t)
        below = above = c
        near = [c]
        for _ in range(3):
            below = np.nextafter(below, np.float32(-10))
            above = np.nextafter(above, np.float32(10))
            near += [below, above]
        pts.append(np.array(near, np.float32))
    pts.append(np.geomspace(1e-6, 1e-1, 200).astype(np.float32))
    ramp = np.concatenate(pts).astype(np.float32)
    ramp.astype("<f4").tofile(os.path.join(out, "ramp.in.f32"))
    save("srgb_to_linear", srgb_to_linear(torch.from_numpy(ramp)))
    save("linear_to_srgb", linear_to_srgb(torch.from_numpy(ramp)))
    index.append(f"color srgb_to_linear {ramp.size}")
    index.append(f"color linear_to_srgb {ramp.size}")

    x = torch.from_numpy(gen(20, 3 * 16 * 16).reshape(3, 16, 16))
    save("normalize", TF.normalize(x, MEAN, STD))
    index.append("normalize normalize 20 256")

    # The official _preprocess_input order on a [3, h, w] plate + [1, h, w] hint.
    pre_cases = [
        ("pre_down", 30, 120, 200, 64, 0),
        ("pre_down_linear", 31, 120, 200, 32, 1),
        ("pre_up", 32, 40, 50, 64, 0),
    ]
    for name, seed, h, w, size, linear in pre_cases:
        rgb = torch.from_numpy(gen(seed, 3 * h * w).reshape(3, h, w))
        hint = torch.from_numpy(gen(seed + 1, h * w).reshape(1, h, w))
        img = tv_resize(rgb, size, size)
        if linear:
            img = linear_to_srgb(img)
        img = TF.normalize(img, MEAN, STD)
        m = tv_resize(hint, size, size)
        save(name, torch.cat((img, m), -3))
        index.append(f"preprocess {name} {seed} {h} {w} {size} {linear}")

    # The GPU post-processing resize of alpha [1, S, S] and fg [3, S, S].
    post_cases = [("post_up", 40, 64, 60, 100), ("post_down", 41, 96, 40, 30)]
    for name, seed, size, h, w in post_cases:
        alpha = torch.from_numpy(gen(seed, size * size).reshape(1, size, size))
        fg = torch.from_numpy(gen(seed + 1, 3 * size * size).reshape(3, size, size))
        save(name + ".alpha", tv_resize(alpha, h, w))
        save(name + ".fg", tv_resize(fg, h, w))
        index.append(f"postprocess {name} {seed} {size} {h} {w}")

    with open(os.path.join(out, "index.txt"), "w") as f:
        f.write("\n".join(index) + "\n")
    print(f"wrote {len(index) - 1} cases to {out}")


if __name__ == "__main__":
    main()
