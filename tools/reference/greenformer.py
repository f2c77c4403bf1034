"""Reference GreenFormer in PyTorch (independent implementation for ckey's tests).

State-dict keys match the official CorridorKey checkpoint:
    encoder.model.*            timm Hiera (features_only), patch_embed patched to 4 input channels
    alpha_decoder.* / fg_decoder.*
                               linear_c1..c4.proj.{weight,bias}, linear_fuse.weight,
                               bn.{weight,bias,running_mean,running_var,num_batches_tracked},
                               classifier.{weight,bias}
    refiner.*                  stem.0 (conv3x3), stem.1 (GroupNorm), res1..res4.{conv1,gn1,conv2,gn2},
                               final (1x1 conv)

The network (see /work/shared/SPEC.md):
    feats = Hiera(x)                                  c1..c4, NCHW, strides 4/8/16/32
    logits_a, logits_f = decoders(feats)              at S/4
    up = bilinear(logits, S); coarse = sigmoid(up)    [alpha, fg] -> 4 channels
    deltas = refiner(cat(x[:, :3], coarse)) * 10 * strength
    alpha = sigmoid(up_a + deltas[0]); fg = sigmoid(up_f + deltas[1:4])

Usage:
    model = GreenFormer(GreenFormerConfig(img_size=256))
    load_checkpoint(model, "CorridorKey_v1.0.pth")      # or load_state_dict_into(model, sd)
    out = model(x, capture=True)                         # dict incl. c1..c4, logits, coarse, deltas
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

import timm


@dataclasses.dataclass
class GreenFormerConfig:
    img_size: int = 2048
    embed_dim: int = 112
    num_heads: int = 2
    stages: Sequence[int] = (2, 3, 16, 3)
    decoder_dim: int = 256
    refiner_hidden: int = 64
    refiner_groups: int = 8
    in_chans: int = 4

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    @staticmethod
    def tiny(img_size: int = 128) -> "GreenFormerConfig":
        return GreenFormerConfig(img_size=img_size, embed_dim=16, num_heads=1, stages=(1, 1, 2, 1),
                                 decoder_dim=32, refiner_hidden=16, refiner_groups=8)


# --------------------------------------------------------------------------- decoder head

class _Proj(nn.Module):
    """Per-pixel channel projection; parameter stored as `proj` (an nn.Linear [out, in])."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.proj = nn.Linear(cin, cout)

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        # f: [N, C, H, W] -> [N, cout, H, W]; same arithmetic as a Linear on NHWC tokens
        y = F.linear(f.permute(0, 2, 3, 1), self.proj.weight, self.proj.bias)
        return y.permute(0, 3, 1, 2)


class SegHead(nn.Module):
    """Multi-scale fusion head: project each scale, upsample to the finest, fuse, classify."""

    def __init__(self, channels: Sequence[int], dim: int, n_out: int):
        super().__init__()
        # registration order mirrors the official module (c4 first) so state_dict order matches
        self.linear_c4 = _Proj(channels[3], dim)
        self.linear_c3 = _Proj(channels[2], dim)
        self.linear_c2 = _Proj(channels[1], dim)
        self.linear_c1 = _Proj(channels[0], dim)
        self.linear_fuse = nn.Conv2d(4 * dim, dim, 1, bias=False)
        self.bn = nn.BatchNorm2d(dim)
        self.classifier = nn.Conv2d(dim, n_out, 1)

    def forward(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        c1, c2, c3, c4 = feats
        size = c1.shape[-2:]
        parts = []
        for f, lin in ((c4, self.linear_c4), (c3, self.linear_c3), (c2, self.linear_c2)):
            parts.append(F.interpolate(lin(f), size=size, mode="bilinear", align_corners=False))
        parts.append(self.linear_c1(c1))
        y = F.relu(self.bn(self.linear_fuse(torch.cat(parts, dim=1))))
        return self.classifier(y)


# --------------------------------------------------------------------------- refiner

class _DilatedResidual(nn.Module):
    def __init__(self, ch: int, dilation: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=dilation, dilation=dilation)
        self.gn1 = nn.GroupNorm(groups, ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=dilation, dilation=dilation)
        self.gn2 = nn.GroupNorm(groups, ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.gn1(self.conv1(x)))
        y = self.gn2(self.conv2(y))
        return F.relu(x + y)


class Refiner(nn.Module):
    def __init__(self, hidden: int = 64, groups: int = 8, cin: int = 7, cout: int = 4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(cin, hidden, 3, padding=1), nn.GroupNorm(groups, hidden),
                                  nn.ReLU())
        self.res1 = _DilatedResidual(hidden, 1, groups)
        self.res2 = _DilatedResidual(hidden, 2, groups)
        self.res3 = _DilatedResidual(hidden, 4, groups)
        self.res4 = _DilatedResidual(hidden, 8, groups)
        self.final = nn.Conv2d(hidden, cout, 1)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        h = self.stem(inp)
        for blk in (self.res1, self.res2, self.res3, self.res4):
            h = blk(h)
        return self.final(h)  # raw; caller applies x10 and strength


# --------------------------------------------------------------------------- full model

class GreenFormer(nn.Module):
    def __init__(self, cfg: Optional[GreenFormerConfig] = None, refiner_strength: float = 1.0):
        super().__init__()
        cfg = cfg or GreenFormerConfig()
        self.cfg = cfg
        self.refiner_strength = refiner_strength
        self.encoder = timm.create_model(
            "hiera_base_plus_224", pretrained=False, features_only=True, img_size=cfg.img_size,
            embed_dim=cfg.embed_dim, num_heads=cfg.num_heads, stages=tuple(cfg.stages))
        old = self.encoder.model.patch_embed.proj
        conv = nn.Conv2d(cfg.in_chans, old.out_channels, old.kernel_size, stride=old.stride,
                         padding=old.padding, bias=old.bias is not None)
        with torch.no_grad():  # same init convention as the official patch: extra channels zero
            conv.weight.zero_()
            conv.weight[:, :old.in_channels] = old.weight
            if old.bias is not None:
                conv.bias.copy_(old.bias)
        self.encoder.model.patch_embed.proj = conv
        chans = list(self.encoder.feature_info.channels())
        self.alpha_decoder = SegHead(chans, cfg.decoder_dim, 1)
        self.fg_decoder = SegHead(chans, cfg.decoder_dim, 3)
        self.refiner = Refiner(cfg.refiner_hidden, cfg.refiner_groups)

    @property
    def feature_channels(self):
        return list(self.encoder.feature_info.channels())

    def forward(self, x: torch.Tensor, capture: bool = False,
                refiner_strength: Optional[float] = None) -> Dict[str, torch.Tensor]:
        strength = self.refiner_strength if refiner_strength is None else refiner_strength
        size = x.shape[-2:]
        feats = self.encoder(x)
        a_log = self.alpha_decoder(feats)
        f_log = self.fg_decoder(feats)
        logits_up = F.interpolate(torch.cat([a_log, f_log], dim=1), size=size, mode="bilinear",
                                  align_corners=False)
        coarse = torch.sigmoid(logits_up)
        deltas = self.refiner(torch.cat([x[:, :3], coarse], dim=1)) * 10.0 * strength
        final = torch.sigmoid(logits_up + deltas)
        out = {"alpha": final[:, 0:1], "fg": final[:, 1:4]}
        if capture:
            out.update({"c1": feats[0], "c2": feats[1], "c3": feats[2], "c4": feats[3],
                        "alpha_logits": a_log, "fg_logits": f_log, "coarse": coarse,
                        "deltas": deltas})
        return out


# --------------------------------------------------------------------------- checkpoint loading

def resize_pos_embed(pe: torch.Tensor, grid_dst: int) -> torch.Tensor:
    """[1, g*g, C] -> [1, grid_dst^2, C] via bicubic (align_corners=False) on the square grid."""
    _, n, c = pe.shape
    g = math.isqrt(n)
    if g * g != n:
        raise ValueError(f"pos_embed with {n} tokens is not a square grid")
    img = pe.transpose(1, 2).reshape(1, c, g, g)
    img = F.interpolate(img, size=(grid_dst, grid_dst), mode="bicubic", align_corners=False)
    return img.reshape(1, c, grid_dst * grid_dst).transpose(1, 2).contiguous()


def normalize_state_dict(obj, target_shapes: Optional[Dict[str, torch.Size]] = None,
                         upcast: bool = True, log=print) -> Dict[str, torch.Tensor]:
    """Unwrap {'state_dict': ...}, strip '_orig_mod.', upcast floats to fp32 (when `upcast`),
    and resize any pos_embed whose token count differs from target_shapes."""
    sd = obj["state_dict"] if isinstance(obj, dict) and "state_dict" in obj else obj
    out = {}
    for k, v in sd.items():
        if k.startswith("_orig_mod."):
            k = k[len("_orig_mod."):]
        if upcast and torch.is_floating_point(v) and v.dtype != torch.float32:
            v = v.float()
        if target_shapes is not None and "pos_embed" in k and k in target_shapes:
            want = target_shapes[k]
            if tuple(v.shape) != tuple(want):
                g = math.isqrt(int(want[1]))
                if log:
                    log(f"resizing {k} {tuple(v.shape)} -> {tuple(want)}")
                v = resize_pos_embed(v, g)
        out[k] = v
    return out


def load_state_dict_into(model: GreenFormer, obj, strict: bool = True, upcast: bool = True, log=print):
    target = {k: v.shape for k, v in model.state_dict().items()}
    sd = normalize_state_dict(obj, target, upcast=upcast, log=log)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if strict and (missing or unexpected):
        raise RuntimeError(f"missing keys {missing}, unexpected keys {unexpected}")
    return sd


def load_checkpoint(model: GreenFormer, path: str, strict: bool = True, log=print):
    obj = torch.load(path, map_location="cpu", weights_only=True)
    return load_state_dict_into(model, obj, strict=strict, log=log)


def config_for_full(img_size: int) -> GreenFormerConfig:
    return GreenFormerConfig(img_size=img_size)
