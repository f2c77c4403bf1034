#!/usr/bin/env python3
"""Seed corpora for fuzz/fuzz-jpeg.c and fuzz/fuzz-tiff.c (needs Pillow).

Small valid files (seed-*) covering the layouts the readers take -- JPEG gray,
RGB 4:2:0 / 4:4:4, progressive; TIFF 8/16-bit gray, RGB, RGBA, 32-bit float,
LZW / deflate / PackBits, strips and tiles -- and broken ones (bad-*):
truncated, CMYK, a header claiming huge dimensions.

Usage: python3 tools/make_jpeg_tiff_corpus.py [fuzz/corpus]
"""
import io
import os
import struct
import sys

from PIL import Image


def pattern(mode, w, h):
    im = Image.new(mode if mode != "F" else "F", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            if mode == "L":
                px[x, y] = (x * 37 + y * 11) & 255
            elif mode == "I;16":
                px[x, y] = (x * 4099 + y * 257) & 65535
            elif mode == "F":
                px[x, y] = (x - y) * 0.37
            elif mode == "RGBA":
                px[x, y] = ((x * 37) & 255, (y * 11) & 255, (x + y) & 255, (x * 9) & 255)
            else:
                px[x, y] = ((x * 37) & 255, (y * 11) & 255, (x + y) & 255)
    return im


def save(im, **kw):
    b = io.BytesIO()
    im.save(b, **kw)
    return b.getvalue()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus"
    jd, td = os.path.join(root, "jpeg"), os.path.join(root, "tiff")
    os.makedirs(jd, exist_ok=True)
    os.makedirs(td, exist_ok=True)
    files = {}
    rgb = pattern("RGB", 20, 13)
    files["jpeg/seed-gray.jpg"] = save(pattern("L", 17, 9), format="JPEG", quality=90)
    files["jpeg/seed-rgb420.jpg"] = save(rgb, format="JPEG", quality=80)
    files["jpeg/seed-rgb444.jpg"] = save(rgb, format="JPEG", quality=95, subsampling=0)
    files["jpeg/seed-progressive.jpg"] = save(rgb, format="JPEG", progressive=True)
    files["jpeg/bad-cmyk.jpg"] = save(rgb.convert("CMYK"), format="JPEG")
    good = files["jpeg/seed-rgb420.jpg"]
    files["jpeg/bad-truncated.jpg"] = good[: len(good) // 2]
    files["jpeg/bad-no-eoi.jpg"] = good[:-2]
    sof = good.index(b"\xff\xc0")
    huge = bytearray(good)
    huge[sof + 5: sof + 9] = struct.pack(">HH", 60000, 60000)
    files["jpeg/bad-huge.jpg"] = bytes(huge)

    files["tiff/seed-gray8.tif"] = save(pattern("L", 17, 9), format="TIFF")
    files["tiff/seed-gray16.tif"] = save(pattern("I;16", 13, 7), format="TIFF", compression="tiff_lzw")
    files["tiff/seed-rgb8-deflate.tif"] = save(rgb, format="TIFF", compression="tiff_adobe_deflate")
    files["tiff/seed-rgb8-packbits.tif"] = save(rgb, format="TIFF", compression="packbits")
    files["tiff/seed-rgb8-tiled.tif"] = save(pattern("RGB", 40, 20), format="TIFF", tile=(16, 16))
    files["tiff/seed-rgba8.tif"] = save(pattern("RGBA", 9, 6), format="TIFF")
    files["tiff/seed-float.tif"] = save(pattern("F", 11, 5), format="TIFF")
    files["tiff/bad-cmyk.tif"] = save(rgb.convert("CMYK"), format="TIFF")
    tgood = files["tiff/seed-rgb8-deflate.tif"]
    files["tiff/bad-truncated.tif"] = tgood[: len(tgood) // 2]
    files["tiff/bad-header-only.tif"] = tgood[:8]
    for name, data in files.items():
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
    print("wrote %d files under %s" % (len(files), root))


if __name__ == "__main__":
    main()
