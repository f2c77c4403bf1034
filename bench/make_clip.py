#!/usr/bin/env python3
"""Write a synthetic green-screen clip for the end-to-end benchmark (not a test).

    python3 bench/make_clip.py OUT_DIR [--frames 24] [--size 3840x2160]

OUT_DIR/Input/plate_NNNNN.png (8-bit RGB) and OUT_DIR/AlphaHint/plate_NNNNN.png
(8-bit gray): a lit green backdrop with grain, a subject (an ellipse with a
soft, noisy edge) moving across it, and a coarse hint (the subject's mask,
dilated and blurred). The content only has to look like a plate to the
pipeline (sizes, decode and encode work); the network weights are random.
Needs numpy only (PNG written with zlib).
"""
import argparse
import os
import struct
import zlib

import numpy as np


def write_png(path, img):
    h, w = img.shape[:2]
    ch = 1 if img.ndim == 2 else img.shape[2]
    raw = np.zeros((h, 1 + w * ch), np.uint8)  # filter byte 0 per row
    raw[:, 1:] = img.reshape(h, w * ch)
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    hdr = struct.pack(">IIBBBBB", w, h, 8, 0 if ch == 1 else 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", hdr) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)) + chunk(b"IEND", b"")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def box_blur(a, r):
    for axis in (0, 1):
        c = np.cumsum(np.pad(a, [(r + 1, r) if i == axis else (0, 0) for i in range(2)], mode="edge"), axis=axis)
        a = (np.take(c, range(2 * r + 1, c.shape[axis]), axis=axis) - np.take(c, range(0, c.shape[axis] - 2 * r - 1), axis=axis)) / (2 * r + 1)
    return a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--size", default="3840x2160")
    a = ap.parse_args()
    w, h = (int(v) for v in a.size.split("x"))
    rng = np.random.default_rng(7)
    os.makedirs(os.path.join(a.out, "Input"), exist_ok=True)
    os.makedirs(os.path.join(a.out, "AlphaHint"), exist_ok=True)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    light = 0.75 + 0.25 * np.exp(-(((xx - w / 2) / w) ** 2 + ((yy - h / 2) / h) ** 2) * 3)
    back = np.stack([0.10 * light, 0.62 * light, 0.22 * light], -1)
    for i in range(a.frames):
        cx, cy = w * (0.3 + 0.4 * i / max(1, a.frames - 1)), h * 0.55
        d = np.sqrt(((xx - cx) / (0.18 * w)) ** 2 + ((yy - cy) / (0.38 * h)) ** 2)
        edge = 0.02 * rng.standard_normal((h, w)).astype(np.float32)
        alpha = np.clip((1.0 - d + edge) * 25.0, 0.0, 1.0)
        subj = np.stack([0.75 - 0.2 * yy / h, 0.55 - 0.1 * xx / w, 0.45 + 0.0 * xx], -1)
        img = alpha[..., None] * subj + (1 - alpha[..., None]) * back
        img += 0.01 * rng.standard_normal(img.shape).astype(np.float32)
        hint = np.clip(box_blur((d < 1.08).astype(np.float32), 12), 0, 1)
        name = f"plate_{i:05d}.png"
        write_png(os.path.join(a.out, "Input", name), (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8))
        write_png(os.path.join(a.out, "AlphaHint", name), (hint * 255 + 0.5).astype(np.uint8))
    print(f"{a.out}: {a.frames} frames of {w} x {h}")


if __name__ == "__main__":
    main()
