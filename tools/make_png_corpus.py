#!/usr/bin/env python3
"""Seed corpus for fuzz/fuzz-png.c, also decoded by tests/test-image.c.

Small PNGs covering every color type, bit depth and interlacing the reader
handles, plus broken ones. Written with a minimal zlib-based encoder (no PIL)
so that each file is exactly what this script says. Pixel values follow
fixed patterns that tests/test-image.c recomputes:

  8-bit sample   (x*37 + y*11 + c*71) & 255
  16-bit sample  (x*4099 + y*257 + c*7919) & 65535
  palette index  (x + 3*y) % 16, entry i = (16i, 255-16i, 8i), tRNS alpha 17i
  1-bit gray     (x + y) & 1

Usage: python3 tools/make_png_corpus.py [outdir]   (default fuzz/corpus/png)
"""
import os
import struct
import sys
import zlib

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def chunk(kind, data):
    c = struct.pack(">I", len(data)) + kind + data
    return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(samples, depth):
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return bytes(samples)
    out, acc, nbits = bytearray(), 0, 0
    for s in samples:
        acc = (acc << depth) | s
        nbits += depth
        if nbits == 8:
            out.append(acc)
            acc, nbits = 0, 0
    if nbits:
        out.append(acc << (8 - nbits))
    return bytes(out)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filter_row(kind, row, prev, bpp):
    """PNG filter `kind` (0..4) applied to one row of bytes."""
    out = bytearray(len(row))
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i] if prev else 0
        c = prev[i - bpp] if prev and i >= bpp else 0
        pred = (0, a, b, (a + b) >> 1, paeth(a, b, c))[kind]
        out[i] = (x - pred) & 255
    return bytes(out)


def png_filtered(width, height, depth, ctype, pixel, filters, extra=b"", idat_size=0, window=15):
    """A non-interlaced PNG whose row y is filtered by filters(y) (0..4), its
    IDAT stream cut into chunks of idat_size bytes (0: one chunk), deflated
    with a window of 2^window bytes, which the zlib header declares."""
    bpp = max(1, CHANNELS[ctype] * depth // 8)
    raw, prev = bytearray(), None
    for y in range(height):
        row = pack_row([s for x in range(width) for s in pixel(x, y)], depth)
        kind = filters(y)
        raw += bytes((kind,)) + filter_row(kind, row, prev, bpp)
        prev = row
    comp = zlib.compressobj(9, zlib.DEFLATED, window)
    z = comp.compress(bytes(raw)) + comp.flush()
    step = idat_size or len(z)
    idat = b"".join(chunk(b"IDAT", z[i:i + step]) for i in range(0, len(z), step))
    ihdr = struct.pack(">IIBBBBB", width, height, depth, ctype, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + idat + chunk(b"IEND", b"")


def png(width, height, depth, ctype, pixel, interlace=False, extra=b""):
    """pixel(x, y) -> tuple of samples for one pixel."""
    raw = bytearray()
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    for x0, y0, dx, dy in passes:
        xs = list(range(x0, width, dx))
        ys = list(range(y0, height, dy))
        if not xs or not ys:
            continue
        for y in ys:
            samples = [s for x in xs for s in pixel(x, y)]
            raw += b"\0" + pack_row(samples, depth)
    ihdr = struct.pack(">IIBBBBB", width, height, depth, ctype, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra +
            chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def s8(x, y, c):
    return (x * 37 + y * 11 + c * 71) & 255


def s16(x, y, c):
    return (x * 4099 + y * 257 + c * 7919) & 65535


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/png"
    os.makedirs(out, exist_ok=True)
    files = {}
    for ctype, name in ((0, "gray"), (4, "graya"), (2, "rgb"), (6, "rgba")):
        n = CHANNELS[ctype]
        files[f"{name}8.png"] = png(13, 7, 8, ctype, lambda x, y, n=n: [s8(x, y, c) for c in range(n)])
        files[f"{name}16.png"] = png(9, 5, 16, ctype, lambda x, y, n=n: [s16(x, y, c) for c in range(n)])
    files["rgb8_interlaced.png"] = png(11, 10, 8, 2, lambda x, y: [s8(x, y, c) for c in range(3)], True)
    files["graya16_interlaced.png"] = png(6, 9, 16, 4, lambda x, y: [s16(x, y, c) for c in range(2)], True)
    files["gray1.png"] = png(10, 3, 1, 0, lambda x, y: [(x + y) & 1])
    plte = chunk(b"PLTE", b"".join(bytes((16 * i, 255 - 16 * i, 8 * i)) for i in range(16)))
    trns = chunk(b"tRNS", bytes(17 * i for i in range(16)))
    files["palette4_trns.png"] = png(7, 6, 4, 3, lambda x, y: [(x + 3 * y) % 16], extra=plte + trns)
    files["palette8.png"] = png(5, 4, 8, 3, lambda x, y: [(x + 3 * y) % 16], extra=plte)
    files["one_pixel.png"] = png(1, 1, 8, 0, lambda x, y: [200])
    # every row filter (row y: y % 5), several IDAT chunks, ancillary chunks:
    # what the reader's fast path (libdeflate) decodes
    files["filters_rgb8.png"] = png_filtered(13, 10, 8, 2, lambda x, y: [s8(x, y, c) for c in range(3)],
                                             lambda y: y % 5, idat_size=40)
    files["filters_rgba16.png"] = png_filtered(9, 10, 16, 6, lambda x, y: [s16(x, y, c) for c in range(4)],
                                               lambda y: y % 5, idat_size=100)
    anc = (chunk(b"gAMA", struct.pack(">I", 45455)) + chunk(b"sRGB", b"\0") +
           chunk(b"tEXt", b"Comment\0filtered rows"))
    files["filters_graya8.png"] = png_filtered(11, 10, 8, 4, lambda x, y: [s8(x, y, c) for c in range(2)],
                                               lambda y: (y * 3) % 5, extra=anc)
    # deflated with a 512-byte window, smaller than the image: zlib checks
    # the references against the window, libdeflate does not, so the fast
    # path leaves it to libpng
    files["zlib_window.png"] = png_filtered(200, 8, 8, 2, lambda x, y: [s8(x, 0, c) for c in range(3)],
                                            lambda y: 2, window=9)
    good = files["rgb8.png"]
    files["truncated.png"] = good[: len(good) // 2]
    files["no_iend.png"] = good[:-12]
    bad_crc = bytearray(good)
    bad_crc[29] ^= 0xFF  # inside the IHDR CRC
    files["crc_error.png"] = bytes(bad_crc)
    huge = struct.pack(">IIBBBBB", 40000, 40000, 8, 2, 0, 0, 0)
    files["huge_header.png"] = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", huge)
    files["not_png.png"] = b"GIF89a this is not a PNG\n"
    broken = {"truncated.png", "no_iend.png", "crc_error.png", "huge_header.png", "not_png.png"}
    for name, data in sorted(files.items()):
        # fuzz/README.md convention: seed-* are valid inputs, bad-* malformed
        prefix = "bad-" if name in broken else "seed-"
        with open(os.path.join(out, prefix + name), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files to {out}")


if __name__ == "__main__":
    main()
