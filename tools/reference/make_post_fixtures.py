#!/usr/bin/env python3
"""Goldens for src/pipeline/post.c: the official CPU/OpenCV post-processing.

Re-states, with plain numpy + cv2 calls and the official parameters, what
CorridorKey's `_postprocess_opencv` does after the resize back to the plate
size (this script does not import CorridorKey):

  A. despeckle (auto_despeckle): mask = alpha > 0.5 as uint8 0/255;
     cv2.connectedComponentsWithStats(connectivity=8); keep components with
     area >= despeckle_size (default 400); cv2.dilate with a 51x51
     MORPH_ELLIPSE (dilation 25); cv2.GaussianBlur ksize 11, sigma 0
     (blur_size 5, default BORDER_REFLECT_101); alpha *= mask / 255.
  B. despill, "average" limit, blended by strength.
  C. sRGB -> linear, premultiply by the cleaned alpha, pack RGBA (Processed).
  D. comp: straight fg over a 128 px checkerboard of 0.15 / 0.55 sRGB taken
     to linear, then back to sRGB (Comp).
  Matte and FG are the raw resized alpha and fg.

Everything runs in float32 HWC numpy, as upstream. Outputs, raw little-endian
float32, planar [C, H, W] like ckey's buffers, under OUT (default
tests/fixtures/post):
  <case>.alpha.f32 [H, W]       <case>.fg.f32 [3, H, W]        (inputs)
  <case>.processed.f32 [4,H,W]  <case>.comp.f32 [3, H, W]      (outputs)
  <case>.safe.f32 [H, W]        the despeckle mask / 255 (1 when off)
  index.txt: one line per case: name h w despill_strength despeckle area

Usage: python3 tools/reference/make_post_fixtures.py [OUT]
"""

import os
import sys

import cv2
import numpy as np

CHECKER = 128
DARK, LIGHT = 0.15, 0.55
DILATION, BLUR = 25, 5


def srgb_to_linear(x):
    x = np.clip(x, 0.0, None)
    return np.where(x <= 0.04045, x / 12.92, np.power((x + 0.055) / 1.055, 2.4))


def linear_to_srgb(x):
    x = np.clip(x, 0.0, None)
    return np.where(x <= 0.0031308, x * 12.92, 1.055 * np.power(x, 1.0 / 2.4) - 0.055)


def safe_zone(alpha, area):
    """Despeckle mask in [0, 1] for alpha [H, W] float32."""
    mask = (alpha > 0.5).astype(np.uint8) * 255
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    keep = np.zeros(n, dtype=bool)
    keep[1:] = stats[1:, cv2.CC_STAT_AREA] >= area
    mask = np.where(keep[labels], 255, 0).astype(np.uint8)
    k = 2 * DILATION + 1
    mask = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    b = 2 * BLUR + 1
    mask = cv2.GaussianBlur(mask, (b, b), 0)
    return mask.astype(np.float32) / 255.0


def despill(img, strength):
    if strength <= 0.0:
        return img
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    spill = np.maximum(g - (r + b) / 2.0, 0.0)
    out = np.stack([r + spill * 0.5, g - spill, b + spill * 0.5], axis=-1)
    if strength < 1.0:
        out = img * (1.0 - strength) + out * strength
    return out


def checkerboard(h, w):
    ty = (np.arange(h) // CHECKER)[:, None]
    tx = (np.arange(w) // CHECKER)[None, :]
    v = np.where((tx + ty) % 2 == 0, DARK, LIGHT).astype(np.float32)
    return np.stack([v, v, v], axis=-1)


def post(alpha, fg, strength, despeckle, area):
    """alpha [H, W, 1], fg [H, W, 3] float32 -> dict of HWC float32 arrays."""
    h, w = alpha.shape[:2]
    if despeckle:
        safe = safe_zone(alpha[..., 0], area)
        pa = alpha * safe[..., None]
    else:
        safe = np.ones((h, w), np.float32)
        pa = alpha
    fg_lin = srgb_to_linear(despill(fg, strength))
    processed = np.concatenate([fg_lin * pa, pa], axis=-1)
    bg_lin = srgb_to_linear(checkerboard(h, w))
    comp = linear_to_srgb(fg_lin * pa + bg_lin * (1.0 - pa))
    return {"processed": processed, "comp": comp, "safe": safe}


def synthetic(h, w, seed):
    """A soft-edged subject over green with spill, specks and overshoot."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cy, cx = 0.55 * h, 0.45 * w
    d = np.sqrt(((yy - cy) / (0.32 * h)) ** 2 + ((xx - cx) / (0.28 * w)) ** 2)
    alpha = np.clip((1.15 - d) / 0.3, 0.0, 1.0)
    # specks: a 3x3, a 5x5, a diagonal pair, a 20x20 block (area 400)
    alpha[2:5, 2:5] = 0.9
    alpha[h - 8:h - 3, w - 9:w - 4] = 0.7
    alpha[4, w - 6] = alpha[5, w - 5] = 1.0
    if h >= 60 and w >= 90:
        alpha[h - 24:h - 4, 4:24] = 0.8
    # faint haze under the threshold and a few Lanczos-like overshoots
    alpha += 0.02 * rng.random((h, w), dtype=np.float32)
    alpha[0, 0], alpha[h // 2, w // 2] = -0.03, 1.04
    alpha = alpha.astype(np.float32)
    subject = np.stack([0.7 + 0.2 * rng.random((h, w)), 0.5 + 0.3 * rng.random((h, w)),
                        0.4 + 0.2 * rng.random((h, w))], axis=-1)
    green = np.array([0.1, 0.85, 0.15])
    spill = 0.35 * (1.0 - alpha[..., None])
    fg = subject * (1.0 - spill) + green * spill
    fg[1, 1] = (-0.02, 1.03, 0.5)
    return alpha[..., None], fg.astype(np.float32)


CASES = [
    # name, h, w, despill_strength, despeckle, area, seed
    ("default", 64, 96, 1.0, 1, 400, 1),
    ("half_area50", 64, 96, 0.5, 1, 50, 2),
    ("nodespeckle", 64, 96, 0.3, 0, 400, 3),
    ("nodespill", 48, 64, 0.0, 1, 9, 4),
    ("checker", 260, 300, 1.0, 1, 400, 5),
]


def chw(x):
    return np.ascontiguousarray(np.transpose(x, (2, 0, 1)), dtype="<f4")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "fixtures", "post")
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, h, w, strength, desp, area, seed in CASES:
        alpha, fg = synthetic(h, w, seed)
        r = post(alpha, fg, strength, desp, area)
        chw(alpha).tofile(os.path.join(out, f"{name}.alpha.f32"))
        chw(fg).tofile(os.path.join(out, f"{name}.fg.f32"))
        chw(r["processed"].astype(np.float32)).tofile(os.path.join(out, f"{name}.processed.f32"))
        chw(r["comp"].astype(np.float32)).tofile(os.path.join(out, f"{name}.comp.f32"))
        r["safe"].astype("<f4").tofile(os.path.join(out, f"{name}.safe.f32"))
        lines.append(f"{name} {h} {w} {strength!r} {desp} {area}")
    with open(os.path.join(out, "index.txt"), "w") as f:
        f.write("# name h w despill_strength despeckle area (cv2 %s, numpy %s)\n"
                % (cv2.__version__, np.__version__))
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} cases to {out}")


if __name__ == "__main__":
    main()
