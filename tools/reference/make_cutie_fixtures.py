#!/usr/bin/env python3
"""Write ckey's Cutie fixtures (see tests/fixtures/cutie/README.md) with the reference in cutie.py.

    python3 tools/reference/make_cutie_fixtures.py [--out tests/fixtures/cutie] [--threads N]

Outputs (float32 unless noted, batch dim dropped):
    <out>/cutie_tiny.pth          reduced-width Cutie, synthetic weights, official checkpoint layout
    <out>/cutie_tiny.json         sidecar: what the state dict does not say (num_heads, pe scale)
    <out>/clip.safetensors        30-frame 113x49 clip, first-frame mask, per-frame goldens
    <out>/taps.safetensors        stage-by-stage tensors of frames 0, 1 and 3 of clip
    <out>/resize.safetensors      5-frame 107x81 clip with max_internal_size 80
    <out>/longterm.safetensors    the clip's frames with long-term memory: per-frame reads and logits
    <out>/maskat.safetensors      the clip's first 12 frames with later masks at frames 4 and 8
    <out>/newobj.safetensors      the same frames, object 1 first and object 2 added at frame 4
    <out>/newobj_lt.safetensors   newobj's masks over 24 frames with long-term memory

--only maskat / newobj / newobj_lt writes that file alone (the other fixtures untouched).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections import OrderedDict

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cutie import Cutie, CutieConfig, InferenceParams, InferenceRunner  # noqa: E402
from fixture_io import write_safetensors  # noqa: E402

WEIGHT_SEED = 20261202
CLIP_SEED = 7
RESIZE_SEED = 11

TINY = CutieConfig(
    pixel_block="bottleneck", pixel_layers=(3, 4, 6), pixel_stem=8, pixel_planes=(4, 8, 16),
    mask_block="basic", mask_layers=(2, 2, 2), mask_stem=8, mask_planes=(8, 12, 16),
    pixel_dim=20, key_dim=12, value_dim=16, sensory_dim=12, embed_dim=24, ff_dim=40,
    num_heads=2, num_blocks=3, num_queries=8, up_dims=(24, 16, 8),
    pixel_pe_scale=32.0, pixel_pe_temperature=128.0)

# Gains on the key projections keep the memory similarities in a trained model's range
# (shrinkage ~1..3, top-k similarities ~-1..-20) instead of near-one-hot affinities.
WEIGHT_GAIN = {"key_proj.key_proj.weight": 0.5, "key_proj.d_proj.weight": 0.15}

CLIP_PARAMS = InferenceParams(mem_every=3, max_mem_frames=3, top_k=30, stagger_updates=2,
                              max_internal_size=-1)
# Long-term memory, scaled down so that consolidation (every second memory frame from frame 8)
# and the removal of obsolete long-term entries (from frame 16) both happen within the clip.
LONGTERM_PARAMS = InferenceParams(mem_every=2, max_mem_frames=3, top_k=30, stagger_updates=2,
                                  use_long_term=True, lt_max_mem_frames=5, lt_min_mem_frames=3,
                                  num_prototypes=16, max_num_tokens=48, buffer_tokens=8,
                                  count_usage=True)
RESIZE_PARAMS = InferenceParams(mem_every=3, max_mem_frames=3, top_k=30, stagger_updates=2,
                                max_internal_size=80)


# --------------------------------------------------------------------------- weights

def synthetic_state_dict(cfg: CutieConfig, seed: int) -> "OrderedDict[str, torch.Tensor]":
    """Every float tensor re-drawn from one generator, in state-dict order:
    conv / linear / in_proj weights U(-a, a) with variance 1/fan_in; biases N(0, 0.1^2);
    BatchNorm / LayerNorm scales 1 + N(0, 0.2^2), shifts N(0, 0.1^2); BatchNorm running_mean
    N(0, 0.3^2), running_var U[0.5, 1.5); embeddings N(0, 1); the positional-encoding inv_freq
    buffers keep their computed values; num_batches_tracked stays 0. WEIGHT_GAIN scales a few
    weight ranges."""
    torch.manual_seed(seed)
    net = Cutie(cfg)
    g = torch.Generator().manual_seed(seed + 1)
    sd = net.state_dict()
    out = OrderedDict()
    for k, v in sd.items():
        if not v.is_floating_point() or k.endswith("inv_freq"):
            out[k] = v.clone()
            continue
        leaf = k.rsplit(".", 1)[-1]
        bn = k.rsplit(".", 1)[0]
        is_norm = (bn + ".running_mean") in sd or ".norm." in k
        if leaf == "running_mean":
            t = torch.randn(v.shape, generator=g) * 0.3
        elif leaf == "running_var":
            t = torch.rand(v.shape, generator=g) + 0.5
        elif is_norm and leaf == "weight":
            t = 1 + torch.randn(v.shape, generator=g) * 0.2
        elif leaf in ("bias", "in_proj_bias"):
            t = torch.randn(v.shape, generator=g) * 0.1
        elif "query_init" in k or "query_emb" in k:
            t = torch.randn(v.shape, generator=g)
        else:
            fan_in = v[0].numel()
            a = (3.0 / fan_in) ** 0.5 * WEIGHT_GAIN.get(k, 1.0)
            t = (torch.rand(v.shape, generator=g) * 2 - 1) * a
        out[k] = t.to(torch.float32).contiguous()
    return out


# --------------------------------------------------------------------------- synthetic clip

def _texture(rng, h, w, ch=3, waves=6, noise=0.08):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((ch, h, w))
    for c in range(ch):
        for _ in range(waves):
            fx, fy = rng.uniform(-0.35, 0.35, 2)
            ph = rng.uniform(0, 2 * np.pi)
            img[c] += rng.uniform(0.1, 0.3) * np.sin(fx * xx + fy * yy + ph)
        img[c] += rng.uniform(0.3, 0.7)
    img += rng.normal(0, noise, img.shape)
    return img


def synthetic_clip(seed: int, T: int, H: int, W: int):
    """A textured background drifting slowly, a textured ellipse (label 1) moving right and a
    textured rectangle (label 2) moving left-down, each with its own colour cast; every frame
    adds fresh noise. Returns frames uint8 [T, 3, H, W] and the frame-0 label image uint8 [H, W]."""
    rng = np.random.RandomState(seed)
    bg = _texture(rng, H + 40, W + 40, noise=0.0)
    tex1 = _texture(rng, H, W, noise=0.0) * 0.6 + np.array([0.35, 0.05, -0.1])[:, None, None]
    tex2 = _texture(rng, H, W, noise=0.0) * 0.6 + np.array([-0.1, 0.1, 0.4])[:, None, None]
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float64)
    frames = np.zeros((T, 3, H, W), np.uint8)
    mask0 = None
    for t in range(T):
        oy, ox = int(round(20 + 6 * np.sin(t / 7))), int(round(20 + t * 0.5 - 7))
        img = bg[:, oy:oy + H, ox:ox + W].copy()
        # object 1: ellipse, centre moves right, slight wobble in y
        cx1, cy1 = 0.22 * W + t * 0.9, 0.45 * H + 3 * np.sin(t / 4)
        m1 = ((xx - cx1) / (0.17 * W)) ** 2 + ((yy - cy1) / (0.26 * H)) ** 2 <= 1
        # object 2: rectangle moving left and down
        x0, y0 = 0.62 * W - t * 0.6, 0.12 * H + t * 0.45
        m2 = (xx >= x0) & (xx < x0 + 0.2 * W) & (yy >= y0) & (yy < y0 + 0.3 * H)
        img = np.where(m1[None], np.roll(tex1, t, axis=2), img)
        img = np.where(m2[None], np.roll(tex2, -t, axis=1), img)
        img = img + rng.normal(0, 0.02, img.shape)
        frames[t] = np.clip(np.round(img * 255), 0, 255).astype(np.uint8)
        if t == 0:
            mask0 = np.zeros((H, W), np.uint8)
            mask0[m1] = 1
            mask0[m2] = 2
    return frames, mask0


# --------------------------------------------------------------------------- running

def to_np(t) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def run_clip(net: Cutie, params: InferenceParams, frames: np.ndarray, mask0: np.ndarray,
             objects, return_runner=False, later=None):
    """Runs the clip; returns per-frame dicts of taps (batch dim dropped) and the probs.
    later: {frame: (label image, objects)} masks given on later frames."""
    runner = InferenceRunner(net, params)
    probs, taps_all = [], []
    later = later or {}
    with torch.no_grad():
        for t in range(frames.shape[0]):
            img = torch.from_numpy(frames[t]).float() / 255
            taps = {}
            if t == 0:
                prob = runner.step(img, torch.from_numpy(mask0.astype(np.int64)), objects, taps=taps)
            elif t in later:
                lab, objs = later[t]
                prob = runner.step(img, torch.from_numpy(lab.astype(np.int64)), objs, taps=taps)
            else:
                prob = runner.step(img, taps=taps)
            probs.append(to_np(prob))
            taps_all.append(taps)
    if return_runner:
        return np.stack(probs), taps_all, runner
    return np.stack(probs), taps_all


def topk_swap_weight(sim, k, tie=1e-4):
    """Largest softmax weight that the k-th entry has at a pixel whose k-th and (k+1)-th
    similarities are within `tie`: how much a float-rounding swap there could move the read."""
    if sim.shape[0] <= k:
        return 0.0
    v, _ = torch.topk(sim, k + 1, dim=0)
    w = torch.softmax(v[:k], 0)[k - 1]
    near = (v[k - 1] - v[k]) < tie
    return float(w[near].max()) if near.any() else 0.0


def _sq(t):
    a = to_np(t)
    return a[0] if a.ndim >= 3 and a.shape[0] == 1 else a


def stats(name, a):
    a = np.asarray(a)
    print(f"  {name:22s} {str(list(a.shape)):22s} min {a.min():+.4f} max {a.max():+.4f} "
          f"mean|v| {np.abs(a).mean():.4f}")


def versions():
    return {"torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def per_frame(taps_all, key, T):
    """Stack a per-frame tap over the frames that have it (frames 1..T-1 for reads)."""
    return np.stack([_sq(taps_all[t][key]) for t in range(1, T)])


def make_clip_case(net, cfg, params, frames, mask0, objects, tap_frames, out_path, taps_path, meta):
    probs, taps = run_clip(net, params, frames, mask0, objects)
    T = frames.shape[0]
    tensors = OrderedDict()
    tensors["frames"] = frames
    tensors["mask0"] = mask0
    tensors["prob"] = probs.astype(np.float32)
    tensors["readout_visual"] = per_frame(taps, "visual_readout", T)
    tensors["sensory"] = np.stack([_sq(taps[t]["sensory_out"]) for t in range(T)])
    tensors["is_mem_frame"] = np.array([int(taps[t]["is_mem_frame"]) for t in range(T)], np.int32)
    tensors["update_sensory"] = np.array([0] + [int(taps[t]["update_sensory"]) for t in range(1, T)],
                                         np.int32)
    tensors["mem_tokens"] = np.array([int(taps[t]["mem_tokens"]) for t in range(T)], np.int32)
    gaps = [float(taps[t]["topk_min_gap"]) for t in range(1, T)]
    kth = [float(taps[t]["topk_min_value"]) for t in range(1, T)]
    risk = max(topk_swap_weight(taps[t]["similarity"][0], params.top_k) for t in range(1, T))
    m = dict(meta)
    m.update({"frames": str(T), "height": str(frames.shape[2]), "width": str(frames.shape[3]),
              "objects": json.dumps(objects), "params": json.dumps(params.as_dict()),
              "padded_size": json.dumps(list(taps[0]["image"].shape[-2:])),
              "topk_min_gap": json.dumps(min(gaps)), "topk_min_kth_similarity": json.dumps(min(kth)),
              "topk_near_tie_weight": json.dumps(risk)})
    write_safetensors(out_path, tensors, m)
    print(f"[cutie] wrote {out_path} ({os.path.getsize(out_path)} bytes); top-k min gap {min(gaps):.3g}, "
          f"lowest k-th similarity {min(kth):.3g}, near-tie weight {risk:.3g}")
    for k, v in tensors.items():
        stats(k, v)

    if taps_path:
        tt = OrderedDict()
        names0 = ["f16", "f8", "f4", "pix_feat", "key", "shrinkage", "selection",
                  "mask_feat", "enc_value", "enc_sensory", "enc_summaries"]
        names1 = ["f16", "f8", "f4", "pix_feat", "key", "shrinkage", "selection",
                  "similarity", "affinity", "visual_readout", "fused_readout", "ot_query_in",
                  "ot_query_pe", "ot_pixel_pe", "ot_aux_logits_0"]
        for i in range(cfg.num_blocks):
            names1 += [f"ot_query_{i}", f"ot_pixel_{i}", f"ot_aux_logits_{i + 1}"]
        names1 += ["readout", "sensory_in", "dec_p8", "dec_p4", "dec_logits", "sensory_out"]
        names3 = ["sensory_in", "dec_logits", "enc_sensory_in", "mask_feat", "enc_value",
                  "enc_sensory", "enc_summaries", "sensory_out"]
        for t, names in zip(tap_frames, (names0, names1, names3)):
            for n in names:
                tt[f"f{t}.{n}"] = _sq(taps[t][n])
        tt["obj_mem_after_f3"] = _sq(taps[3]["obj_mem"])
        write_safetensors(taps_path, tt, m)
        print(f"[cutie] wrote {taps_path} ({os.path.getsize(taps_path)} bytes)")
        for k, v in tt.items():
            stats(k, v)
    return probs


def make_longterm_case(net, params, frames, mask0, objects, out_path, meta):
    """Long-term memory on the clip's frames (not stored again). The decoder logits of every
    frame determine its probabilities; only the last frame's probabilities are stored."""
    probs, taps, runner = run_clip(net, params, frames, mask0, objects, return_runner=True)
    T = frames.shape[0]
    tensors = OrderedDict()
    tensors["readout_visual"] = per_frame(taps, "visual_readout", T)
    tensors["dec_logits"] = per_frame(taps, "dec_logits", T)
    tensors["prob_last"] = probs[-1].astype(np.float32)
    tensors["sensory"] = np.stack([_sq(taps[t]["sensory_out"]) for t in range(T)])
    tensors["is_mem_frame"] = np.array([int(taps[t]["is_mem_frame"]) for t in range(T)], np.int32)
    tensors["mem_tokens"] = np.array([int(taps[t]["mem_tokens"]) for t in range(T)], np.int32)
    tensors["lt_tokens"] = np.array([int(taps[t]["lt_tokens"]) for t in range(T)], np.int32)
    gaps = [float(taps[t]["topk_min_gap"]) for t in range(1, T)]
    risk = max(topk_swap_weight(taps[t]["similarity"][0], params.top_k) for t in range(1, T))
    m = dict(meta)
    m.update({"frames": str(T), "height": str(frames.shape[2]), "width": str(frames.shape[3]),
              "objects": json.dumps(objects), "params": json.dumps(params.as_dict()),
              "padded_size": json.dumps(list(taps[0]["image"].shape[-2:])),
              "topk_min_gap": json.dumps(min(gaps)), "topk_near_tie_weight": json.dumps(risk),
              "usage_selection_min_gap": json.dumps(runner.lt_min_gap)})
    write_safetensors(out_path, tensors, m)
    print(f"[cutie] wrote {out_path} ({os.path.getsize(out_path)} bytes); top-k min gap {min(gaps):.3g}, "
          f"near-tie weight {risk:.3g}, usage selection min gap {runner.lt_min_gap:.3g}")
    for k, v in tensors.items():
        stats(k, v)


MASKAT_FRAMES = 12


def later_masks(mask0: np.ndarray):
    """Frame 4: both objects, the first mask moved 3 px right; frame 8: object 1 alone."""
    full = np.zeros_like(mask0)
    full[:, 3:] = mask0[:, :-3]
    one = (mask0 == 1).astype(mask0.dtype)
    return {4: (full, [1, 2]), 8: (one, [1])}


def make_maskat_case(net, params, frames, mask0, objects, out_path, meta):
    """Masks on later frames (`ckey track --mask-at`): per-frame probabilities and memory sizes."""
    later = later_masks(mask0)
    probs, taps = run_clip(net, params, frames, mask0, objects, later=later)
    T = frames.shape[0]
    tensors = OrderedDict()
    tensors["prob"] = probs.astype(np.float32)
    tensors["mask4"] = later[4][0]
    tensors["mask8"] = later[8][0]
    tensors["is_mem_frame"] = np.array([int(taps[t]["is_mem_frame"]) for t in range(T)], np.int32)
    tensors["mem_tokens"] = np.array([int(taps[t]["mem_tokens"]) for t in range(T)], np.int32)
    m = dict(meta)
    m.update({"frames": str(T), "height": str(frames.shape[2]), "width": str(frames.shape[3]),
              "objects": json.dumps(objects), "params": json.dumps(params.as_dict()),
              "later": json.dumps({str(k): v[1] for k, v in later.items()})})
    write_safetensors(out_path, tensors, m)
    print(f"[cutie] wrote {out_path} ({os.path.getsize(out_path)} bytes)")
    for k, v in tensors.items():
        stats(k, v)


NEWOBJ_FRAMES = 12


def newobj_masks(mask0):
    """The new-object clips' masks: object 1 of mask0 alone (frames 0 and 8), object 2 of mask4 alone
    (frame 4, new); and the later frames' (labels, objects)."""
    full = later_masks(mask0)[4][0]
    first = (mask0 == 1).astype(mask0.dtype)
    two = np.where(full == 2, 2, 0).astype(mask0.dtype)
    return first, two, {4: (two, [2]), 8: (first, [1])}


def newobj_step(runner, frames, t, first, later, taps):
    """Frame t of a new-object clip through the runner, with its mask where it has one."""
    img = torch.from_numpy(frames[t]).float() / 255
    if t == 0:
        return runner.step(img, torch.from_numpy(first.astype(np.int64)), [1], taps=taps)
    if t in later:
        lab, objs = later[t]
        return runner.step(img, torch.from_numpy(lab.astype(np.int64)), objs, taps=taps)
    return runner.step(img, taps=taps)


def make_newobj_case(net, params, frames, mask0, out_path, meta):
    """Objects added later: frame 0 with object 1 of mask0 alone, frame 4 with a mask of object 2
    alone (mask4's object 2: new, its own bucket), frame 8 with object 1 alone (mask0's). Per-frame
    probabilities [T, 3, H, W], object 2's plane 0 before it is added; memory sizes."""
    first, two, later = newobj_masks(mask0)
    runner = InferenceRunner(net, params)
    T = frames.shape[0]
    probs = np.zeros((T, 3) + frames.shape[2:], np.float32)
    mem = np.zeros(T, np.int32)
    with torch.no_grad():
        for t in range(T):
            taps = {}
            prob = newobj_step(runner, frames, t, first, later, taps)
            p = to_np(prob)
            probs[t, :p.shape[0]] = p
            mem[t] = int(taps["mem_tokens"])
    tensors = OrderedDict(prob=probs, mask0=first, mask4=two, mask8=first, mem_tokens=mem)
    m = dict(meta)
    m.update({"frames": str(T), "height": str(frames.shape[2]), "width": str(frames.shape[3]),
              "objects": json.dumps([1]), "params": json.dumps(params.as_dict()),
              "later": json.dumps({str(k): v[1] for k, v in later.items()})})
    write_safetensors(out_path, tensors, m)
    print(f"[cutie] wrote {out_path} ({os.path.getsize(out_path)} bytes)")
    for k, v in tensors.items():
        stats(k, v)


NEWOBJ_LT_FRAMES = 24


def make_newobj_lt_case(net, params, frames, mask0, out_path, meta):
    """newobj's masks (object 1 at frame 0, object 2 new at frame 4, object 1 alone at frame 8)
    with long-term memory: object 2's bucket consolidates into a long-term store of its own (from
    frame 12) and prunes it (frame 20). Per-frame decoder logits [T, 2, Hp/4, Wp/4] of the
    segmented frames (0 on the others and for object 2 before frame 4), the probabilities of
    frames 4 (the merge), 8 and T-1, working and long-term memory sizes (all buckets)."""
    first, two, later = newobj_masks(mask0)
    runner = InferenceRunner(net, params)
    T = frames.shape[0]
    prob_at = (4, 8, T - 1)
    probs = np.zeros((len(prob_at), 3) + frames.shape[2:], np.float32)
    logits, segmented = None, np.zeros(T, np.int32)
    mem, lt = np.zeros(T, np.int32), np.zeros(T, np.int32)
    with torch.no_grad():
        for t in range(T):
            taps = {}
            prob = newobj_step(runner, frames, t, first, later, taps)
            if "dec_logits" in taps:
                lg = _sq(taps["dec_logits"])
                if logits is None:
                    logits = np.zeros((T, 2) + lg.shape[-2:], np.float32)
                logits[t, :lg.shape[0]] = lg
                segmented[t] = 1
            if t in prob_at:
                p = to_np(prob)
                probs[prob_at.index(t), :p.shape[0]] = p
            mem[t], lt[t] = int(taps["mem_tokens"]), int(taps["lt_tokens"])
    tensors = OrderedDict(dec_logits=logits, segmented=segmented, prob=probs,
                          prob_frames=np.array(prob_at, np.int32), mask0=first, mask4=two, mask8=first,
                          mem_tokens=mem, lt_tokens=lt)
    m = dict(meta)
    m.update({"frames": str(T), "height": str(frames.shape[2]), "width": str(frames.shape[3]),
              "objects": json.dumps([1]), "params": json.dumps(params.as_dict()),
              "later": json.dumps({str(k): v[1] for k, v in later.items()}),
              "usage_selection_min_gap": json.dumps(runner.lt_min_gap)})
    write_safetensors(out_path, tensors, m)
    print(f"[cutie] wrote {out_path} ({os.path.getsize(out_path)} bytes); usage selection min gap "
          f"{runner.lt_min_gap:.3g}")
    for k, v in tensors.items():
        stats(k, v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/cutie")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--only", choices=["maskat", "newobj", "newobj_lt"], default=None)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True, warn_only=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    if args.only == "newobj_lt":
        pth = os.path.join(args.out, "cutie_tiny.pth")
        net = Cutie.from_state_dict(torch.load(pth, weights_only=True), num_heads=TINY.num_heads)
        meta = versions() | {"weight_seed": str(WEIGHT_SEED), "num_heads": str(net.cfg.num_heads),
                             "checkpoint": "cutie_tiny.pth"}
        frames, mask0 = synthetic_clip(CLIP_SEED, 30, 49, 113)
        make_newobj_lt_case(net, LONGTERM_PARAMS, frames[:NEWOBJ_LT_FRAMES], mask0,
                            os.path.join(args.out, "newobj_lt.safetensors"),
                            meta | {"clip_seed": str(CLIP_SEED), "case": "newobj_lt",
                                    "frames_from": "clip.safetensors"})
        return

    if args.only == "newobj":
        pth = os.path.join(args.out, "cutie_tiny.pth")
        net = Cutie.from_state_dict(torch.load(pth, weights_only=True), num_heads=TINY.num_heads)
        meta = versions() | {"weight_seed": str(WEIGHT_SEED), "num_heads": str(net.cfg.num_heads),
                             "checkpoint": "cutie_tiny.pth"}
        frames, mask0 = synthetic_clip(CLIP_SEED, 30, 49, 113)
        make_newobj_case(net, CLIP_PARAMS, frames[:NEWOBJ_FRAMES], mask0,
                         os.path.join(args.out, "newobj.safetensors"),
                         meta | {"clip_seed": str(CLIP_SEED), "case": "newobj", "frames_from": "clip.safetensors"})
        return

    if args.only == "maskat":
        pth = os.path.join(args.out, "cutie_tiny.pth")
        net = Cutie.from_state_dict(torch.load(pth, weights_only=True), num_heads=TINY.num_heads)
        meta = versions() | {"weight_seed": str(WEIGHT_SEED), "num_heads": str(net.cfg.num_heads),
                             "checkpoint": "cutie_tiny.pth"}
        frames, mask0 = synthetic_clip(CLIP_SEED, 30, 49, 113)
        make_maskat_case(net, CLIP_PARAMS, frames[:MASKAT_FRAMES], mask0, [1, 2],
                         os.path.join(args.out, "maskat.safetensors"),
                         meta | {"clip_seed": str(CLIP_SEED), "case": "maskat",
                                 "frames_from": "clip.safetensors"})
        return

    sd = synthetic_state_dict(TINY, WEIGHT_SEED)
    pth = os.path.join(args.out, "cutie_tiny.pth")
    holder = Cutie(TINY)
    holder.load_state_dict(sd, strict=True)
    torch.save(holder.state_dict(), pth)      # as the official trainer saves: module.state_dict()
    with open(os.path.join(args.out, "cutie_tiny.json"), "w") as f:
        json.dump({"num_heads": TINY.num_heads, "pixel_pe_scale": TINY.pixel_pe_scale}, f)
        f.write("\n")
    nparam = sum(v.numel() for v in sd.values() if v.is_floating_point())
    print(f"[cutie] wrote {pth} ({os.path.getsize(pth)} bytes, {len(sd)} tensors, {nparam} floats)")

    net = Cutie.from_state_dict(torch.load(pth, weights_only=True), num_heads=TINY.num_heads)
    cfg = net.cfg
    meta = versions() | {"weight_seed": str(WEIGHT_SEED), "num_heads": str(cfg.num_heads),
                         "checkpoint": "cutie_tiny.pth"}

    frames, mask0 = synthetic_clip(CLIP_SEED, 30, 49, 113)
    make_clip_case(net, cfg, CLIP_PARAMS, frames, mask0, [1, 2], (0, 1, 3),
                   os.path.join(args.out, "clip.safetensors"), os.path.join(args.out, "taps.safetensors"),
                   meta | {"clip_seed": str(CLIP_SEED), "case": "clip"})
    make_longterm_case(net, LONGTERM_PARAMS, frames, mask0, [1, 2],
                       os.path.join(args.out, "longterm.safetensors"),
                       meta | {"clip_seed": str(CLIP_SEED), "case": "longterm",
                               "frames_from": "clip.safetensors"})
    make_maskat_case(net, CLIP_PARAMS, frames[:MASKAT_FRAMES], mask0, [1, 2],
                     os.path.join(args.out, "maskat.safetensors"),
                     meta | {"clip_seed": str(CLIP_SEED), "case": "maskat", "frames_from": "clip.safetensors"})
    make_newobj_case(net, CLIP_PARAMS, frames[:NEWOBJ_FRAMES], mask0,
                     os.path.join(args.out, "newobj.safetensors"),
                     meta | {"clip_seed": str(CLIP_SEED), "case": "newobj", "frames_from": "clip.safetensors"})
    make_newobj_lt_case(net, LONGTERM_PARAMS, frames[:NEWOBJ_LT_FRAMES], mask0,
                        os.path.join(args.out, "newobj_lt.safetensors"),
                        meta | {"clip_seed": str(CLIP_SEED), "case": "newobj_lt", "frames_from": "clip.safetensors"})
    frames, mask0 = synthetic_clip(RESIZE_SEED, 5, 81, 107)
    make_clip_case(net, cfg, RESIZE_PARAMS, frames, mask0, [1, 2], (),
                   os.path.join(args.out, "resize.safetensors"), None,
                   meta | {"clip_seed": str(RESIZE_SEED), "case": "resize",
                           "internal_size": json.dumps([80, 105])})


if __name__ == "__main__":
    main()
