"""Seeded synthetic weights and inputs (numpy), bit-exact with docs/synthetic-weights.md.

Every value is a small dyadic rational computed from a counter-based hash of
(state-dict key, flat element index), so the C implementation
(src/model/synthetic.c) reproduces it exactly.

    python3 tools/reference/synthetic.py          # prints a few checksums

Public API:
    fnv1a64(name) -> int
    uniform(name, n, start=0) -> float64 array u in [-1, 1)  (20-bit grid)
    value_for_key(name, shape) -> numpy array (float32, or int64 for num_batches_tracked)
    synthetic_state_dict(shapes) -> {key: numpy array}
    full_model_shapes(img_size=2048) -> {key: shape} for hiera_base_plus GreenFormer
    synthetic_input(S) -> float32 array [4, S, S]
"""
from __future__ import annotations

import numpy as np

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S44 = np.uint64(44)

# elements per vectorized chunk (bounds temporary memory to ~100 MB)
_CHUNK = 1 << 22


def fnv1a64(name: str) -> int:
    h = FNV_OFFSET
    for b in name.encode("utf-8"):
        h ^= b
        h = (h * FNV_PRIME) & MASK64
    return h


def _u20(h: int, first: int, count: int) -> np.ndarray:
    """Integer k in [-2^19, 2^19) for flat indices first..first+count-1; u = k / 2^19."""
    with np.errstate(over="ignore"):
        idx = np.arange(first + 1, first + 1 + count, dtype=np.uint64)  # i + 1
        x = idx * _GOLDEN
        x += np.uint64(h)
        z = x ^ (x >> _S30)
        z *= _M1
        z ^= z >> _S27
        z *= _M2
        z ^= z >> _S31
        k = (z >> _S44).astype(np.int64)
    k -= 1 << 19
    return k


def uniform(name: str, n: int, start: int = 0) -> np.ndarray:
    """u for flat indices start..start+n-1 of key `name`, float64 (exact)."""
    h = fnv1a64(name)
    out = np.empty(n, dtype=np.float64)
    for c0 in range(0, n, _CHUNK):
        c1 = min(n, c0 + _CHUNK)
        out[c0:c1] = _u20(h, start + c0, c1 - c0) * (2.0 ** -19)
    return out


def _scaled(name: str, n: int, scale: float, offset: float) -> np.ndarray:
    """float32 array of offset + u * scale (exact: every value is a short dyadic rational)."""
    h = fnv1a64(name)
    out = np.empty(n, dtype=np.float32)
    s = scale * (2.0 ** -19)
    for c0 in range(0, n, _CHUNK):
        c1 = min(n, c0 + _CHUNK)
        v = _u20(h, c0, c1 - c0).astype(np.float64) * s
        if offset:
            v += offset
        out[c0:c1] = v  # float64 -> float32 is exact for these values
    return out


def rule_for_key(name: str, shape) -> tuple[str, float, float]:
    """(kind, scale, offset): value = offset + u * scale; kind 'int0' for num_batches_tracked."""
    shape = tuple(int(s) for s in shape)
    numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if name.endswith("pos_embed"):
        return ("float", 1.0 / 32, 0.0)
    if name.endswith("running_mean"):
        return ("float", 0.5, 0.0)
    if name.endswith("running_var"):
        return ("float", 0.5, 1.0)
    if name.endswith("num_batches_tracked"):
        return ("int0", 0.0, 0.0)
    if name == "refiner.final.weight":
        return ("float", 1.0 / 64, 0.0)
    if len(shape) == 1 and name.endswith(".weight"):
        return ("float", 1.0 / 8, 1.0)
    if name.endswith(".bias"):
        return ("float", 1.0 / 16, 0.0)
    fan_in = numel // shape[0]
    e = (fan_in.bit_length() - 1) // 2
    return ("float", 2.0 ** -e, 0.0)


def value_for_key(name: str, shape) -> np.ndarray:
    shape = tuple(int(s) for s in shape)
    kind, scale, offset = rule_for_key(name, shape)
    if kind == "int0":
        return np.zeros(shape, dtype=np.int64)
    numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return _scaled(name, numel, scale, offset).reshape(shape)


def synthetic_state_dict(shapes: dict) -> dict:
    """{key: shape} -> {key: numpy array} following the value table."""
    return {k: value_for_key(k, s) for k, s in shapes.items()}


def synthetic_input(S: int) -> np.ndarray:
    """Model input x [4, S, S] (batch dim not included), key 'input'."""
    n = 4 * S * S
    k = np.empty(n, dtype=np.int64)
    h = fnv1a64("input")
    for c0 in range(0, n, _CHUNK):
        c1 = min(n, c0 + _CHUNK)
        k[c0:c1] = _u20(h, c0, c1 - c0)
    k = k.reshape(4, S, S)
    x = np.empty((4, S, S), dtype=np.float32)
    x[0:3] = k[0:3].astype(np.float64) * (2.0 ** -18)                 # 2u
    x[3] = (k[3].astype(np.float64) + (1 << 19)) * (2.0 ** -20)       # (u + 1) / 2
    return x


def full_model_shapes(img_size: int = 2048) -> dict:
    """State-dict shapes of the official GreenFormer (hiera_base_plus_224, 4 input channels,
    decoders embedding 256, refiner hidden 64) at img_size, in the official key order.
    Built without instantiating anything (no torch needed)."""
    return model_shapes(img_size=img_size)


def model_shapes(img_size=2048, embed_dim=112, num_heads=2, stages=(2, 3, 16, 3),
                 decoder_dim=256, refiner_hidden=64, in_chans=4, mlp_ratio=4.0,
                 q_pool=3) -> dict:
    """Shapes for a GreenFormer configuration, key order as in the official state dict."""
    sh = {}
    g = img_size // 4
    sh["encoder.model.pos_embed"] = (1, g * g, embed_dim)
    sh["encoder.model.patch_embed.proj.weight"] = (embed_dim, in_chans, 7, 7)
    sh["encoder.model.patch_embed.proj.bias"] = (embed_dim,)
    dim, heads = embed_dim, num_heads
    stage_ends = [sum(stages[:i]) - 1 for i in range(1, len(stages) + 1)]
    q_pool_blocks = [x + 1 for x in stage_ends[:q_pool]]
    cur_stage = 0
    chans = []
    for i in range(sum(stages)):
        dim_out = dim
        if i - 1 in stage_ends:
            dim_out = int(dim * 2)
            heads = int(heads * 2)
            cur_stage += 1
        p = f"encoder.model.blocks.{i}."
        sh[p + "norm1.weight"] = (dim,)
        sh[p + "norm1.bias"] = (dim,)
        if dim != dim_out:
            sh[p + "proj.weight"] = (dim_out, dim)
            sh[p + "proj.bias"] = (dim_out,)
        sh[p + "attn.qkv.weight"] = (3 * dim_out, dim)
        sh[p + "attn.qkv.bias"] = (3 * dim_out,)
        sh[p + "attn.proj.weight"] = (dim_out, dim_out)
        sh[p + "attn.proj.bias"] = (dim_out,)
        sh[p + "norm2.weight"] = (dim_out,)
        sh[p + "norm2.bias"] = (dim_out,)
        hid = int(dim_out * mlp_ratio)
        sh[p + "mlp.fc1.weight"] = (hid, dim_out)
        sh[p + "mlp.fc1.bias"] = (hid,)
        sh[p + "mlp.fc2.weight"] = (dim_out, hid)
        sh[p + "mlp.fc2.bias"] = (dim_out,)
        dim = dim_out
        if i in stage_ends:
            chans.append(dim)
    del q_pool_blocks, heads
    for name, out in (("alpha_decoder", 1), ("fg_decoder", 3)):
        p = name + "."
        for j, c in zip((4, 3, 2, 1), chans[::-1]):
            sh[p + f"linear_c{j}.proj.weight"] = (decoder_dim, c)
            sh[p + f"linear_c{j}.proj.bias"] = (decoder_dim,)
        sh[p + "linear_fuse.weight"] = (decoder_dim, 4 * decoder_dim, 1, 1)
        for s in ("weight", "bias", "running_mean", "running_var"):
            sh[p + "bn." + s] = (decoder_dim,)
        sh[p + "bn.num_batches_tracked"] = ()
        sh[p + "classifier.weight"] = (out, decoder_dim, 1, 1)
        sh[p + "classifier.bias"] = (out,)
    r = refiner_hidden
    sh["refiner.stem.0.weight"] = (r, 7, 3, 3)
    sh["refiner.stem.0.bias"] = (r,)
    sh["refiner.stem.1.weight"] = (r,)
    sh["refiner.stem.1.bias"] = (r,)
    for b in range(1, 5):
        p = f"refiner.res{b}."
        for c in ("1", "2"):
            sh[p + f"conv{c}.weight"] = (r, r, 3, 3)
            sh[p + f"conv{c}.bias"] = (r,)
            sh[p + f"gn{c}.weight"] = (r,)
            sh[p + f"gn{c}.bias"] = (r,)
    sh["refiner.final.weight"] = (4, r, 1, 1)
    sh["refiner.final.bias"] = (4,)
    return sh


if __name__ == "__main__":
    import time
    t = time.time()
    shapes = full_model_shapes(2048)
    sd = synthetic_state_dict(shapes)
    dt = time.time() - t
    n = sum(v.size for k, v in sd.items() if v.dtype != np.int64)
    print(f"{len(sd)} tensors, {n} float parameters, generated in {dt:.2f} s")
    for k in ("encoder.model.pos_embed", "encoder.model.patch_embed.proj.weight",
              "refiner.final.weight", "alpha_decoder.bn.running_var"):
        v = sd[k].reshape(-1)
        print(k, tuple(sd[k].shape), "sum=%r" % float(v.astype(np.float64).sum()), v[:4].tolist())
    x = synthetic_input(256)
    print("input S=256 sum=%r first=%s" % (float(x.astype(np.float64).sum()), x.reshape(-1)[:8].tolist()))
