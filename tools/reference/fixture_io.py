"""The minimal safetensors writer and reader the fixture scripts share (numpy only).

The format: a u64 little-endian header length, a JSON header space-padded to a multiple of 8
(`__metadata__` holds strings only), then the raw little-endian row-major data of each tensor in
the order given. This module imports neither torch nor timm, so every fixture script may use it.
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

ST_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64",
             np.dtype(np.float64): "F64", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8"}


def write_safetensors(path: str, tensors: dict, metadata: dict) -> None:
    """Write numpy arrays `tensors` (name -> array, in that order) and `metadata` (values turned
    into strings) to `path`, through a temporary file renamed into place."""
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    blobs, off = [], 0
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        b = a.tobytes()
        header[name] = {"dtype": ST_DTYPES[a.dtype.newbyteorder("=")], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path: str):
    """Read a file `write_safetensors` wrote: (name -> read-only array, metadata dict)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    inv = {v: k for k, v in ST_DTYPES.items()}
    out = {}
    for k, d in header.items():
        a, b = d["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=inv[d["dtype"]].newbyteorder("<")).reshape(d["shape"])
    return out, meta
