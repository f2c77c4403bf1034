#!/usr/bin/env python3
"""Make examples/plate.png and examples/hint.png: a small synthetic keying case.

plate.png  320x180 8-bit RGB: a textured foreground figure with soft edges and
           a few semi-transparent "hair" strands over an uneven green screen,
           with green spill on the figure near its edges.
hint.png   320x180 8-bit gray: the coarse alpha hint CorridorKey expects -- the
           true matte thresholded, eroded and blurred, so fine detail is left
           for the network.

Deterministic (fixed seed); needs only numpy and zlib (no torch, no PIL).
Usage: python3 tools/make_example.py [outdir]   (default examples/)
"""
import os
import struct
import sys
import zlib

import numpy as np

W, H = 320, 180


def write_png(path, img):
    """img: uint8 [H, W] (gray) or [H, W, 3] (RGB)."""
    h, w = img.shape[:2]
    ctype = 0 if img.ndim == 2 else 2
    # PNG filter "Up" on every row: cheap and compresses smooth images well.
    rows = img.reshape(h, -1).astype(np.int16)
    up = np.diff(np.vstack([np.zeros_like(rows[:1]), rows]), axis=0) % 256
    raw = b"".join(b"\x02" + r.astype(np.uint8).tobytes() for r in up)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data)


def smoothstep(e0, e1, x):
    t = np.clip((x - e0) / (e1 - e0), 0.0, 1.0)
    return t * t * (3 - 2 * t)


def box_blur(a, r):
    """Separable box blur of radius r with edge clamping."""
    for axis in (0, 1):
        pad = [(0, 0), (0, 0)]
        pad[axis] = (r + 1, r)
        c = np.cumsum(np.pad(a, pad, mode="edge"), axis=axis)
        n = a.shape[axis]
        hi = np.take(c, np.arange(2 * r + 1, 2 * r + 1 + n), axis=axis)
        lo = np.take(c, np.arange(0, n), axis=axis)
        a = (hi - lo) / (2 * r + 1)
    return a


def erode(mask, r):
    out = mask.copy()
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            if dx * dx + dy * dy <= r * r:
                out = np.minimum(out, np.roll(np.roll(mask, dy, 0), dx, 1))
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "examples"
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)

    # Green screen: uneven lighting (gradient + soft hot spot), slight noise.
    light = 0.85 + 0.15 * (1 - y / H) + 0.1 * np.exp(-(((x - 90) / 120) ** 2 + ((y - 50) / 90) ** 2))
    bg = np.stack([0.08 * light, 0.62 * light, 0.22 * light], -1)
    bg += rng.normal(0, 0.006, bg.shape)

    # Foreground figure: head + shoulders/torso as soft-edged implicit shapes.
    head = 1 - np.hypot((x - 160) / 30, (y - 62) / 36)
    torso = 1 - np.maximum(np.abs((x - 160) / 78), 0) ** 4 - ((y - 185) / 80) ** 2
    neck = 1 - np.hypot((x - 160) / 14, (y - 100) / 18)
    field = np.maximum.reduce([head * 30, torso * 40, neck * 14])  # ~pixels inside the edge
    alpha = smoothstep(-1.5, 1.5, field)

    # Hair: thin, partly transparent strands rising from the head.
    for k in range(26):
        x0 = 160 + rng.uniform(-26, 26)
        bend = rng.uniform(-0.5, 0.5)
        top = rng.uniform(8, 22)
        t = np.clip((y - top) / (40 - top), 0, 1)
        cx = x0 + bend * (40 - y) * (1 - t)
        strand = np.exp(-((x - cx) ** 2) / (2 * 0.6 ** 2)) * ((y > top) & (y < 45))
        alpha = np.maximum(alpha, 0.55 * strand)

    # Foreground colour: skin-ish head, striped shirt with a little noise.
    skin = np.stack([0.80, 0.58, 0.46])
    shirt_a, shirt_b = np.stack([0.70, 0.20, 0.18]), np.stack([0.92, 0.88, 0.80])
    stripes = smoothstep(-0.2, 0.2, np.sin((x + 0.4 * y) / 4.0))[..., None]
    shirt = shirt_a * stripes + shirt_b * (1 - stripes)
    is_shirt = smoothstep(100, 108, y)[..., None]
    hair = np.stack([0.25, 0.16, 0.10])
    fg = skin * (1 - is_shirt) + shirt * is_shirt
    fg = np.where((y < 48)[..., None] & (field < 12)[..., None], hair, fg)
    fg = fg * (0.92 + 0.08 * np.sin(x / 9.0) * np.cos(y / 11.0))[..., None]
    fg += rng.normal(0, 0.01, fg.shape)

    # Spill: green bounce light on the figure within ~8 px of its edge.
    spill = 0.35 * np.exp(-np.clip(field, 0, None) / 5.0)[..., None]
    fg = fg + spill * np.stack([-0.05, 0.35, -0.02])

    plate = fg * alpha[..., None] + bg * (1 - alpha[..., None])
    plate8 = np.clip(np.round(plate * 255), 0, 255).astype(np.uint8)

    # Coarse hint: threshold, erode, blur -- hair and soft edges are left out.
    core = (alpha > 0.5).astype(np.float64)
    hint = box_blur(erode(core, 4), 6)
    hint8 = np.clip(np.round(hint * 255), 0, 255).astype(np.uint8)

    n1 = write_png(os.path.join(out, "plate.png"), plate8)
    n2 = write_png(os.path.join(out, "hint.png"), hint8)
    print(f"plate.png {n1} bytes, hint.png {n2} bytes ({W}x{H})")


if __name__ == "__main__":
    main()
