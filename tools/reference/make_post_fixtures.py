#!/usr/bin/env python3
"""Goldens for src/pixel/post.c and the Lanczos4 resize of src/pixel/resize.c.

Upstream CorridorKey (CorridorKeyModule/inference_engine.py) has two
post-processing paths after the network:

  _postprocess_opencv (the official CLI's default, `--cpu-post`):
     cv2.resize(INTER_LANCZOS4) back to the plate, clean_matte_opencv,
     despill_opencv, sRGB -> linear, premultiply, checkerboard comp.
  _postprocess_torch (process_frame's own default, `--gpu-post`):
     torchvision TF.resize bilinear (antialiased), clean_matte_torch,
     despill_torch, the same colour math in torch.

This script re-states both with plain numpy / cv2 / torch calls and the
official parameters (it does not import CorridorKey), and writes:

  post      the OpenCV path after the resize, colours included:
            mask = alpha > 0.5 as uint8 0/255; cv2.connectedComponentsWithStats
            (connectivity 8); keep areas >= despeckle_size; cv2.dilate with a
            51x51 MORPH_ELLIPSE; cv2.GaussianBlur 11x11 sigma 0; alpha *=
            mask / 255. Despill "average" blended by strength; sRGB -> linear;
            premultiply; comp over a 128 px 0.15 / 0.55 checkerboard taken to
            linear and back to sRGB. Matte and FG passes are the raw inputs.
  despeckle the matte cleanup alone, OpenCV (clean_matte_opencv) or torch
            (clean_matte_torch: alpha > 0.25; labels torch.randperm(h*w) + 1
            after torch.manual_seed(seed); area // 20 rounds of a 9x9
            max_pool2d on the mask pixels; torch.bincount areas; dilation // 2
            rounds of a 5x5 max_pool2d; torchvision gaussian_blur 11x11 with
            its default sigma; alpha * mask). The torch labels are saved so
            that the C code can start from the same permutation.
  lanczos   cv2.resize(img, (w, h), interpolation=cv2.INTER_LANCZOS4) on
            float32 images, 1 and 3 channels, up and down.

Inputs are stored as uint16 codes u (value = (u - 2048) / 61439 in float32,
so [-0.0333, 1.0333]: Lanczos overshoot fits) to keep the files small; the
script computes from exactly those float32 values. Outputs are float32.
Everything is little-endian and planar [C, H, W] like ckey's buffers. Files
under OUT (default tests/fixtures/post), described by OUT/index.txt:

  post NAME h w despill_strength despeckle area
       NAME.in.u16 [4, h, w] (alpha, fg r g b), NAME.processed.f32 [4, h, w],
       NAME.comp.f32 [3, h, w]
  despeckle NAME h w mode area        (mode opencv | torch)
       NAME.alpha.u16 [h, w], NAME.out.f32 [h, w], NAME.labels.u32 [h, w] (torch)
  lanczos NAME c in_h in_w out_h out_w
       NAME.in.u16 [c, in_h, in_w], NAME.out.f32 [c, out_h, out_w]

Usage: python3 tools/reference/make_post_fixtures.py [OUT] [--check-upstream DIR]

--check-upstream DIR imports color_utils.py from DIR (a checkout's
CorridorKeyModule/core; nothing of it is written anywhere) and checks this
script's re-statements against upstream's own functions on every case.
"""

import argparse
import importlib.util
import os

import cv2
import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF

CHECKER = 128
DARK, LIGHT = 0.15, 0.55
DILATION, BLUR = 25, 5
U16_OFFSET, U16_SCALE = 2048, 61439


# ---------------------------------------------------------------- encoding

def to_u16(x):
    return np.clip(np.rint(np.asarray(x, np.float64) * U16_SCALE + U16_OFFSET), 0, 65535).astype("<u2")


def from_u16(u):
    return (u.astype(np.float32) - np.float32(U16_OFFSET)) / np.float32(U16_SCALE)


def chw(x):
    return np.ascontiguousarray(np.transpose(x, (2, 0, 1)), dtype="<f4")


# ------------------------------------------------------- the OpenCV path

def srgb_to_linear(x):
    x = np.clip(x, 0.0, None)
    return np.where(x <= 0.04045, x / 12.92, np.power((x + 0.055) / 1.055, 2.4))


def linear_to_srgb(x):
    x = np.clip(x, 0.0, None)
    return np.where(x <= 0.0031308, x * 12.92, 1.055 * np.power(x, 1.0 / 2.4) - 0.055)


def safe_zone_opencv(alpha, area):
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


def post_opencv(alpha, fg, strength, despeckle, area):
    """alpha [H, W, 1], fg [H, W, 3] float32 -> (processed, comp) HWC float32."""
    h, w = alpha.shape[:2]
    pa = alpha * safe_zone_opencv(alpha[..., 0], area)[..., None] if despeckle else alpha
    fg_lin = srgb_to_linear(despill(fg, strength))
    processed = np.concatenate([fg_lin * pa, pa], axis=-1)
    bg_lin = srgb_to_linear(checkerboard(h, w))
    comp = linear_to_srgb(fg_lin * pa + bg_lin * (1.0 - pa))
    return processed.astype(np.float32), comp.astype(np.float32)


# -------------------------------------------------------- the torch path

def clean_matte_torch(alpha, area, seed):
    """alpha [H, W] float32 -> (cleaned [H, W], labels [H, W] uint32)."""
    h, w = alpha.shape
    a = torch.from_numpy(np.ascontiguousarray(alpha))[None, None]
    mask = a > 0.25
    torch.manual_seed(seed)
    comp = (torch.randperm(h * w, dtype=torch.float32) + 1.1).view(1, 1, h, w)
    labels = comp.long().numpy().reshape(h, w).astype("<u4")
    comp[~mask] = 0
    for _ in range(area // 20):
        comp[mask] = F.max_pool2d(comp, kernel_size=9, stride=1, padding=4)[mask]
    comp = comp.long()
    sizes = torch.bincount(comp.flatten())
    big = torch.nonzero(sizes >= area).flatten()
    big = big[big > 0]
    keep = torch.isin(comp, big).float()
    for _ in range(DILATION // 2):
        keep = F.max_pool2d(keep, 5, stride=1, padding=2)
    k = 2 * BLUR + 1
    keep = TF.gaussian_blur(keep, [k, k])
    return (a * keep)[0, 0].numpy().astype(np.float32), labels


# ------------------------------------------------------------- the inputs

def synthetic(h, w, seed):
    """A soft-edged subject over green with spill, specks and overshoot."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cy, cx = 0.55 * h, 0.45 * w
    d = np.sqrt(((yy - cy) / (0.32 * h)) ** 2 + ((xx - cx) / (0.28 * w)) ** 2)
    alpha = np.clip((1.15 - d) / 0.3, 0.0, 1.0)
    # specks: a 3x3, a 5x5 block, a diagonal pair
    alpha[2:5, 2:5] = 0.9
    alpha[h - 8:h - 3, w - 9:w - 4] = 0.7
    alpha[4, w - 6] = alpha[5, w - 5] = 1.0
    # faint haze under the thresholds and Lanczos-like overshoots
    alpha += 0.02 * rng.random((h, w), dtype=np.float32)
    alpha[0, 0], alpha[h // 2, w // 2] = -0.03, 1.03
    subject = np.stack([0.7 + 0.2 * rng.random((h, w)), 0.5 + 0.3 * rng.random((h, w)),
                        0.4 + 0.2 * rng.random((h, w))], axis=-1)
    green = np.array([0.1, 0.85, 0.15])
    spill = 0.35 * (1.0 - alpha[..., None])
    fg = subject * (1.0 - spill) + green * spill
    fg[1, 1] = (-0.02, 1.03, 0.5)
    return from_u16(to_u16(alpha))[..., None], from_u16(to_u16(fg))


def islands(h, w, seed):
    """A 100 x 160 matte with components of many areas for the despeckle,
    more than the dilation + blur reach (30 px) apart unless noted: areas 1,
    2 (a diagonal pair), 9, 25, two 15 x 15 blobs 3 px apart (one component
    for the torch path, which joins pixels within 4 px), 399, 400, 401 (with
    a soft 0.35 ring, counted only by the torch path's 0.25 threshold), a
    4 x 115 bar (area 460, longer than area // 20 = 20 rounds of 4 px can
    label, so the torch path splits it into pieces) and a faint 0.3 island;
    plus noise under both thresholds."""
    rng = np.random.default_rng(seed)
    a = np.zeros((h, w), np.float32)
    a[3, 3] = 0.9
    a[3, 35] = a[4, 36] = 0.8
    a[3:6, 66:69] = 0.7
    a[3:8, 98:103] = 0.95
    a[3:18, 118:133] = 0.6
    a[3:18, 136:151] = 0.6
    a[40:59, 2:23] = 0.9          # 19 x 21 = 399
    a[40:60, 56:76] = 0.9         # 20 x 20 = 400
    a[38:62, 108:132] = 0.35      # ring
    a[40:60, 110:130] = 0.9
    a[60, 110] = 0.9              # 401
    a[94:98, 2:117] = 0.75        # 460, long
    a[94:98, 150:154] = 0.3
    a += 0.02 * rng.random((h, w), dtype=np.float32)
    return from_u16(to_u16(a))


POST_CASES = [
    # name, h, w, despill_strength, despeckle, area, seed
    ("default", 40, 48, 1.0, 1, 400, 1),
    ("half_area50", 40, 48, 0.5, 1, 50, 2),
    ("nodespeckle", 40, 48, 0.3, 0, 400, 3),
    ("checker", 24, 136, 1.0, 1, 9, 5),
]

DESPECKLE_CASES = [
    # name, h, w, mode, area, seed
    ("islands_cv", 100, 160, "opencv", 400, 11),
    ("islands_torch", 100, 160, "torch", 400, 12),
    ("small_torch", 40, 48, "torch", 400, 13),
    ("small_torch_a100", 40, 48, "torch", 100, 14),
]

LANCZOS_CASES = [
    # name, c, in_h, in_w, out_h, out_w, seed
    ("down1", 1, 64, 64, 37, 53, 21),
    ("up3", 3, 20, 24, 49, 51, 22),
    ("plate1", 1, 128, 128, 72, 128, 23),   # S -> a 16:9 plate, one side kept
    ("plate3", 3, 64, 64, 36, 100, 24),     # down on one side, up on the other
]


def lanczos_input(c, h, w, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = 0.5 + 0.45 * np.sin(xx / 5.0 + 0.7 * np.arange(c)[:, None, None]) * np.cos(yy / 7.0)
    edge = (xx > w * 0.4).astype(np.float32)  # a hard edge rings under Lanczos
    img = 0.6 * base + 0.4 * edge + 0.05 * rng.random((c, h, w))
    return from_u16(to_u16(np.clip(img, 0.0, 1.0)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join("tests", "fixtures", "post"))
    ap.add_argument("--check-upstream", metavar="DIR",
                    help="directory holding upstream's color_utils.py, to cross-check against")
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    up = None
    if args.check_upstream:
        spec = importlib.util.spec_from_file_location(
            "upstream_color_utils", os.path.join(args.check_upstream, "color_utils.py"))
        up = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(up)
    lines = []

    for name, h, w, strength, desp, area, seed in POST_CASES:
        alpha, fg = synthetic(h, w, seed)
        processed, comp = post_opencv(alpha, fg, strength, desp, area)
        if up is not None:  # upstream's _postprocess_opencv sequence, its own functions
            pa = up.clean_matte_opencv(alpha, area_threshold=area, dilation=DILATION,
                                       blur_size=BLUR) if desp else alpha
            lin = up.srgb_to_linear(up.despill_opencv(fg, green_limit_mode="average", strength=strength))
            uproc = np.concatenate([up.premultiply(lin, pa), pa], axis=-1)
            bg = up.srgb_to_linear(up.create_checkerboard(w, h, checker_size=128, color1=0.15, color2=0.55))
            ucomp = up.linear_to_srgb(up.composite_straight(lin, bg, pa))
            print(f"check {name}: processed {np.abs(uproc - processed).max():.3g} "
                  f"comp {np.abs(ucomp - comp).max():.3g}")
        to_u16(np.concatenate([chw(alpha), chw(fg)])).tofile(os.path.join(out, f"{name}.in.u16"))
        chw(processed).tofile(os.path.join(out, f"{name}.processed.f32"))
        chw(comp).tofile(os.path.join(out, f"{name}.comp.f32"))
        lines.append(f"post {name} {h} {w} {strength!r} {desp} {area}")

    for name, h, w, mode, area, seed in DESPECKLE_CASES:
        alpha = islands(h, w, seed) if h >= 100 else synthetic(h, w, seed)[0][..., 0]
        if mode == "opencv":
            cleaned = (alpha * safe_zone_opencv(alpha, area)).astype(np.float32)
            if up is not None:
                ref = up.clean_matte_opencv(alpha, area_threshold=area, dilation=DILATION, blur_size=BLUR)
                print(f"check {name}: {np.abs(ref - cleaned).max():.3g}")
        else:
            cleaned, labels = clean_matte_torch(alpha, area, seed)
            labels.tofile(os.path.join(out, f"{name}.labels.u32"))
            if up is not None:
                torch.manual_seed(seed)
                ref = up.clean_matte_torch(torch.from_numpy(alpha)[None, None], area, dilation=DILATION,
                                           blur_size=BLUR)[0, 0].numpy()
                print(f"check {name}: {np.abs(ref - cleaned).max():.3g}")
        to_u16(alpha).tofile(os.path.join(out, f"{name}.alpha.u16"))
        cleaned.astype("<f4").tofile(os.path.join(out, f"{name}.out.f32"))
        lines.append(f"despeckle {name} {h} {w} {mode} {area}")

    for name, c, ih, iw, oh, ow, seed in LANCZOS_CASES:
        img = lanczos_input(c, ih, iw, seed)
        hwc = np.ascontiguousarray(np.transpose(img, (1, 2, 0)))
        res = cv2.resize(hwc, (ow, oh), interpolation=cv2.INTER_LANCZOS4)
        if res.ndim == 2:
            res = res[:, :, None]
        to_u16(img).tofile(os.path.join(out, f"{name}.in.u16"))
        chw(res).tofile(os.path.join(out, f"{name}.out.f32"))
        lines.append(f"lanczos {name} {c} {ih} {iw} {oh} {ow}")

    with open(os.path.join(out, "index.txt"), "w") as f:
        f.write("# made by tools/reference/make_post_fixtures.py (cv2 %s, numpy %s, torch %s)\n"
                % (cv2.__version__, np.__version__, torch.__version__))
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} cases to {out}")


if __name__ == "__main__":
    main()
