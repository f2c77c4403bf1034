#!/usr/bin/env python3
"""Write the checkpoint-reader fixtures in tests/fixtures/ckpt/ (used by tests/test-checkpoint.c).

    python3 tools/reference/make_ckpt_fixtures.py [--out tests/fixtures/ckpt]

Only torch and the standard library are used. The .pth files are real torch.save output; the
.safetensors files are written here by hand (struct + json), independently of ckey's writer:

    basic.pth           state dict of a Linear+BatchNorm1d (with its _metadata and the int64
                        num_batches_tracked) plus tensors of every dtype ckey reads, a transposed
                        view and a slice with storage_offset > 0 (both sharing `base`'s storage),
                        an nn.Parameter, a 0-d scalar, an empty tensor, and float16/bfloat16
                        specials (inf, nan, subnormals, max). Pickle protocol 2 (torch's default).
    proto4.pth          the same dict with pickle_protocol=4 (FRAME, STACK_GLOBAL, MEMOIZE, ...).
    nested.pth          {'state_dict': <subset>, 'epoch': 3, 'lr': 0.5, 'optimizer': {...tensors,
                        lists, int keys...}, 'name': 'run-1'}
    orig_mod.pth        a subset with '_orig_mod.' and 'module.' key prefixes.
    dup.pth             '_orig_mod.w' and 'w': duplicate names once prefixes are removed.
    expected.safetensors every tensor of basic.pth made dense; float tensors as F32, the others in
                        their own dtype. The exact values the C test expects.
    mixed.safetensors   the tensors of basic.pth in their native dtypes (F16, BF16, F64, I64, ...).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import struct

import torch

ST_DTYPE = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL",
}


def raw_bytes(t: torch.Tensor) -> bytes:
    """Little-endian bytes of a dense copy of t (bf16 via its int16 bit pattern)."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path: str, tensors: "dict[str, torch.Tensor]", meta: "dict[str, str]") -> None:
    header: dict = {"__metadata__": meta}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        b = raw_bytes(t)
        header[name] = {"dtype": ST_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def basic_state_dict() -> "collections.OrderedDict[str, torch.Tensor]":
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    m.train()
    m(torch.randn(4, 3))  # num_batches_tracked = 1, running stats move
    sd = m.state_dict()   # an OrderedDict carrying _metadata (pickled through BUILD)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.25 - 2.0
    sd["base"] = base
    sd["base_t"] = base.t()             # stride (1, 6): a view of base's storage
    sd["slice"] = base[1:3, 2:5]        # storage_offset 8, stride (6, 1)
    sd["half"] = torch.tensor([1.0, -2.5, 65504.0, float("inf"), float("-inf"), float("nan"),
                               6e-8, -3e-5, 0.1, 0.0], dtype=torch.float16)
    sd["bf"] = torch.tensor([[1.0, -2.5, 3e38, float("inf")],
                             [float("nan"), 1e-40, -0.1, 0.0]], dtype=torch.bfloat16)
    sd["dbl"] = torch.randn(2, 2, dtype=torch.float64)
    sd["half_t"] = torch.randn(3, 4).half().t()  # a non-dense float16 view
    sd["i32"] = torch.tensor([1, -2, 2147483647], dtype=torch.int32)
    sd["u8"] = torch.tensor([0, 7, 255], dtype=torch.uint8)
    sd["flag"] = torch.tensor([True, False, True])
    sd["scalar"] = torch.tensor(3.5)
    sd["empty"] = torch.zeros(0, 3)
    sd["param"] = torch.nn.Parameter(torch.randn(3))  # torch._utils._rebuild_parameter
    sd["big_i64"] = torch.tensor([2 ** 40, -(2 ** 40)], dtype=torch.int64)
    return sd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/ckpt")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    out = lambda name: os.path.join(args.out, name)

    sd = basic_state_dict()
    torch.save(sd, out("basic.pth"))
    torch.save(sd, out("proto4.pth"), pickle_protocol=4)

    subset = collections.OrderedDict((k, sd[k]) for k in ["0.weight", "0.bias", "base", "slice", "bf"])
    optimizer = {"state": {0: {"step": torch.tensor(5.0), "exp_avg": torch.zeros(2, 3)}},
                 "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1]}]}
    torch.save({"state_dict": subset, "epoch": 3, "lr": 0.5, "optimizer": optimizer,
                "name": "run-1", "stray": torch.ones(2)}, out("nested.pth"))

    prefixed = collections.OrderedDict()
    for i, (k, v) in enumerate(subset.items()):
        prefixed[("_orig_mod." if i % 2 == 0 else "module.") + k] = v
    torch.save(prefixed, out("orig_mod.pth"))

    torch.save({"_orig_mod.w": torch.ones(2), "w": torch.zeros(2)}, out("dup.pth"))

    dense = collections.OrderedDict()
    for k, v in sd.items():
        v = v.detach()
        dense[k] = v.float() if v.is_floating_point() else v
    write_safetensors(out("expected.safetensors"), dense,
                      {"generator": "make_ckpt_fixtures.py", "torch": torch.__version__})
    write_safetensors(out("mixed.safetensors"), collections.OrderedDict(
        (k, v.detach()) for k, v in sd.items()), {"kind": "mixed"})


if __name__ == "__main__":
    main()
