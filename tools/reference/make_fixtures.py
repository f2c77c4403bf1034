#!/usr/bin/env python3
"""Write ckey's committed reference fixtures (see tests/fixtures/README.md).

    python3 tools/reference/make_fixtures.py [--out tests/fixtures] [--device cpu|cuda] [--threads N]

Everything runs in float32 with deterministic settings. Outputs:
    <out>/full256.safetensors            full hiera_base_plus GreenFormer, synthetic weights, S=256
    <out>/tiny/tiny.pth (+ _fp16, _bf16) reduced model checkpoints + <name>.json sidecars
    <out>/tiny/tiny_s128.safetensors     goldens at S=128 (no pos-embed resize)
    <out>/tiny/tiny_s64.safetensors      goldens at S=64 (pos-embed resize 32 -> 16)
    <out>/tiny/tiny_s64_strength05.safetensors   refiner strength 0.5 at S=64
"""
from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timm  # noqa: E402

from fixture_io import write_safetensors  # noqa: E402
from greenformer import GreenFormer, GreenFormerConfig, load_state_dict_into  # noqa: E402
from synthetic import model_shapes, synthetic_input, synthetic_state_dict  # noqa: E402

STAGE_KEYS = ["c1", "c2", "c3", "c4", "alpha_logits", "fg_logits", "coarse", "deltas", "alpha", "fg"]
TINY_SEED = 20240607


# --------------------------------------------------------------------------- helpers

def setup_determinism(device: str, threads: int | None) -> None:
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if threads:
        torch.set_num_threads(threads)


def to_np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy()


def run_model(model, x_np: np.ndarray, device: str, strength: float = 1.0) -> dict:
    x = torch.from_numpy(x_np)[None].to(device)
    with torch.no_grad():
        out = model(x, capture=True, refiner_strength=strength)
    return {k: to_np(out[k][0]) for k in STAGE_KEYS}  # batch dim dropped


def report(tag: str, outs: dict) -> None:
    print(f"  {tag}:")
    for k, v in outs.items():
        a = np.abs(v.astype(np.float64))
        line = f"    {k:14s} {str(tuple(v.shape)):18s} min {v.min():+.4e} max {v.max():+.4e} " \
               f"max|v| {a.max():.4e} mean|v| {a.mean():.4e}"
        if k in ("alpha", "fg", "coarse"):
            line += f"  frac<0.01 {np.mean(v < 0.01):.3f} frac>0.99 {np.mean(v > 0.99):.3f}"
        print(line)


def common_meta(extra: dict) -> dict:
    m = {"generator": "tools/reference/make_fixtures.py", "torch": torch.__version__,
         "timm": timm.__version__, "numpy": np.__version__, "dtype": "float32",
         "layout": "NCHW with the batch dim dropped (CHW); pos_embed tensors [tokens, C]"}
    m.update(extra)
    return m


def input_checksum_meta(x: np.ndarray) -> dict:
    # every input value is a dyadic rational with few bits: the float64 sum is exact in any order
    return {"input_sum": repr(float(x.astype(np.float64).sum())),
            "input_channel_sums": json.dumps([float(c) for c in x.astype(np.float64).sum(axis=(1, 2))]),
            "input_first8": json.dumps([float(v) for v in x.reshape(-1)[:8]])}


# --------------------------------------------------------------------------- full256

def make_full256(out_dir: str, device: str, S: int = 256) -> None:
    print(f"[full{S}] synthetic weights for hiera_base_plus GreenFormer at img_size 2048")
    t = time.time()
    sd_np = synthetic_state_dict(model_shapes(2048))
    sd = {k: torch.from_numpy(v) for k, v in sd_np.items()}
    print(f"  generated {sum(v.size for v in sd_np.values())} values in {time.time() - t:.2f} s")
    model = GreenFormer(GreenFormerConfig(img_size=S)).eval()
    load_state_dict_into(model, sd, log=lambda s: print("  " + s))
    model.to(device)
    x = synthetic_input(S)
    t = time.time()
    outs = run_model(model, x, device)
    print(f"  forward S={S}: {time.time() - t:.2f} s")
    report(f"full S={S}", outs)
    pe = to_np(model.encoder.model.pos_embed).reshape(-1)[:4096].copy()
    tensors = dict(outs)
    tensors["pos_embed_0_head"] = pe
    meta = common_meta({
        "case": f"full hiera_base_plus GreenFormer, synthetic weights (docs/synthetic-weights.md) "
                f"generated at img_size 2048, loaded at img_size {S} (pos_embed bicubic resize 512->{S // 4})",
        "S": str(S), "refiner_strength": "1", "head_dim": "56", "groups": "8",
        "input": "not stored: synthetic input rule (key 'input') at S",
        "pos_embed_0_head": "first 4096 values of the flattened resized pos_embed [1, (S/4)^2, 112]",
    })
    meta.update(input_checksum_meta(x))
    path = os.path.join(out_dir, f"full{S}.safetensors")
    write_safetensors(path, tensors, meta)
    print(f"  wrote {path} ({os.path.getsize(path)} bytes)")
    if device.startswith("cuda"):
        make_autocast_errors(out_dir, model, x, outs, device, S)


def make_autocast_errors(out_dir: str, model, x_np: np.ndarray, ref: dict, device: str, S: int) -> None:
    """PyTorch's own reduced-precision error on the full256 case: the bar for ckey's fp16/bf16
    (SPEC.md: mean abs error no worse than 1.5x autocast's). Per dtype a [4] tensor:
    alpha mean abs err, alpha max abs err, fg mean abs err, fg max abs err, vs the fp32 outputs."""
    tensors = {}
    x = torch.from_numpy(x_np)[None].to(device)
    for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        with torch.no_grad(), torch.autocast("cuda", dtype=dt):
            out = model(x, capture=True, refiner_strength=1.0)
        stats = []
        for k in ("alpha", "fg"):
            d = np.abs(to_np(out[k][0]).astype(np.float64) - ref[k].astype(np.float64))
            stats += [d.mean(), d.max()]
        tensors[f"autocast_{name}_err"] = np.array(stats, dtype=np.float32)
        print(f"  autocast {name}: alpha mean {stats[0]:.3e} max {stats[1]:.3e}, fg mean {stats[2]:.3e} "
              f"max {stats[3]:.3e}")
    meta = common_meta({"case": f"torch.autocast('cuda') error of the full{S} case vs its fp32 outputs",
                        "layout": "[alpha mean abs, alpha max abs, fg mean abs, fg max abs]",
                        "device": torch.cuda.get_device_name()})
    path = os.path.join(out_dir, f"full{S}-autocast.safetensors")
    write_safetensors(path, tensors, meta)
    print(f"  wrote {path} ({os.path.getsize(path)} bytes)")


# --------------------------------------------------------------------------- tiny

def _round_to_half_and_bf16(t: torch.Tensor) -> torch.Tensor:
    """Round to a value exactly representable in both bf16 and fp16 (flush |v| < 2^-14 to 0)."""
    r = t.to(torch.bfloat16).to(torch.float32)
    r = torch.where(r.abs() < 2.0 ** -14, torch.zeros_like(r), r)
    assert torch.equal(r.half().float(), r) and torch.equal(r.bfloat16().float(), r)
    return r


def build_tiny_state_dict() -> dict:
    torch.manual_seed(TINY_SEED)
    model = GreenFormer(GreenFormerConfig.tiny(128))
    g = torch.Generator().manual_seed(TINY_SEED + 1)
    sd = model.state_dict()
    new = {}
    for k, v in sd.items():
        if not torch.is_floating_point(v):
            new[k] = v.clone()
            continue
        if k.endswith("pos_embed"):
            r = torch.randn(v.shape, generator=g) * 0.25
        elif k.endswith("running_mean"):
            r = torch.randn(v.shape, generator=g) * 0.5
        elif k.endswith("running_var"):
            r = 0.5 + torch.rand(v.shape, generator=g)
        elif k == "refiner.final.weight":
            r = torch.randn(v.shape, generator=g) * 0.02
        elif k.endswith(".bias"):
            r = torch.randn(v.shape, generator=g) * 0.1
        elif v.dim() == 1:  # LayerNorm / BatchNorm / GroupNorm scales
            r = 1.0 + torch.randn(v.shape, generator=g) * 0.2
        else:  # conv / linear: uniform with variance 1/fan_in (all patch-embed channels live)
            fan_in = v[0].numel()
            b = (3.0 / fan_in) ** 0.5
            r = (torch.rand(v.shape, generator=g) * 2 - 1) * b
        new[k] = _round_to_half_and_bf16(r.contiguous())
    return new


def make_tiny(out_dir: str, device: str) -> None:
    tdir = os.path.join(out_dir, "tiny")
    os.makedirs(tdir, exist_ok=True)
    cfg = GreenFormerConfig.tiny(128)
    sd = build_tiny_state_dict()
    side = {"head_dim": cfg.head_dim, "groups": cfg.refiner_groups}
    # Save through real modules so the pickles look like the official checkpoint's: an OrderedDict
    # (with its `_metadata` attribute) from module.state_dict(); the bf16 one from a torch.compile
    # wrapper, which is where the official '_orig_mod.' prefix comes from.
    m32 = GreenFormer(cfg).eval()
    m32.load_state_dict(sd, strict=True)
    sd32 = m32.state_dict()
    fp16 = copy.deepcopy(m32).half().state_dict()
    m_bf = copy.deepcopy(m32).bfloat16()
    try:
        bf16 = torch.compile(m_bf).state_dict()
    except Exception:  # no compile backend: build the same prefixed dict by hand
        bf16 = collections.OrderedDict(("_orig_mod." + k, v) for k, v in m_bf.state_dict().items())
    assert all(k.startswith("_orig_mod.") for k in bf16)
    files = {"tiny.pth": sd32, "tiny_fp16.pth": {"state_dict": fp16, "epoch": 7}, "tiny_bf16.pth": bf16}
    for name, obj in files.items():
        p = os.path.join(tdir, name)
        torch.save(obj, p)
        with open(p + ".json", "w") as f:
            json.dump(side, f)
            f.write("\n")
        print(f"[tiny] wrote {p} ({os.path.getsize(p)} bytes) + {name}.json")
    # all three files hold the same values: check by loading each through the reference loader
    ref = None
    for name in files:
        m = GreenFormer(cfg).eval()
        load_state_dict_into(m, torch.load(os.path.join(tdir, name), weights_only=True), log=None)
        s = m.state_dict()
        if ref is None:
            ref = s
        else:
            assert all(torch.equal(ref[k], s[k]) for k in ref), name
    n_params = sum(v.numel() for v in sd.values() if torch.is_floating_point(v))
    print(f"[tiny] {n_params} parameters; fp32/fp16/bf16 files hold identical values")

    for S, strengths in ((128, (1.0,)), (64, (1.0, 0.5))):
        model = GreenFormer(GreenFormerConfig.tiny(S)).eval()
        load_state_dict_into(model, torch.load(os.path.join(tdir, "tiny.pth"), weights_only=True),
                             log=lambda s: print("  " + s))
        model.to(device)
        x = synthetic_input(S)
        pe = to_np(model.encoder.model.pos_embed[0])
        for strength in strengths:
            outs = run_model(model, x, device, strength)
            report(f"tiny S={S} strength={strength}", outs)
            if strength == 1.0:
                name = f"tiny_s{S}.safetensors"
                tensors = {"x": x}
                tensors.update(outs)
                if S != 128:
                    tensors["pos_embed_resized"] = pe
            else:
                name = f"tiny_s{S}_strength05.safetensors"
                tensors = {k: outs[k] for k in ("alpha", "fg", "deltas")}
            meta = common_meta({
                "case": f"tiny GreenFormer (tiny/tiny.pth) at S={S}, refiner strength {strength}",
                "S": str(S), "refiner_strength": repr(strength),
                "config": json.dumps(dataclass_dict(cfg) | {"img_size": S}),
                "checkpoint": "tiny/tiny.pth (stored at img_size 128, pos_embed grid 32x32)",
                "head_dim": str(cfg.head_dim), "groups": str(cfg.refiner_groups),
            })
            meta.update(input_checksum_meta(x))
            p = os.path.join(tdir, name)
            write_safetensors(p, tensors, meta)
            print(f"  wrote {p} ({os.path.getsize(p)} bytes)")


def dataclass_dict(cfg) -> dict:
    return {"img_size": cfg.img_size, "embed_dim": cfg.embed_dim, "num_heads": cfg.num_heads,
            "stages": list(cfg.stages), "decoder_dim": cfg.decoder_dim,
            "refiner_hidden": cfg.refiner_hidden, "refiner_groups": cfg.refiner_groups,
            "in_chans": cfg.in_chans}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join("tests", "fixtures"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--only", choices=["full", "tiny"], default=None)
    ap.add_argument("--full-size", type=int, default=256)
    args = ap.parse_args()
    setup_determinism(args.device, args.threads)
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {torch.__version__}, timm {timm.__version__}, numpy {np.__version__}, "
          f"device {args.device}, threads {torch.get_num_threads()}")
    t = time.time()
    if args.only in (None, "tiny"):
        make_tiny(args.out, args.device)
    if args.only in (None, "full"):
        make_full256(args.out, args.device, args.full_size)
    print(f"done in {time.time() - t:.1f} s")


if __name__ == "__main__":
    main()
