#!/usr/bin/env python3
"""Independent PyTorch implementation of Cutie inference (hkchengrex/Cutie), for ckey's goldens.

Written from a reading of the official model and inference code; no upstream code is imported.
The module tree reproduces the official `CUTIE` state-dict key names and shapes, so an official
checkpoint (`cutie-base-mega.pth`, a plain `state_dict()` saved with torch.save) loads unchanged. Every width, block count and kernel size is read from the
state dict (`CutieConfig.from_state_dict`); only the attention head count (8 in the official
models) and the positional-encoding scale (32) are not in it.

    net = Cutie.from_state_dict(sd, num_heads=8)        # or Cutie(CutieConfig(...))
    proc = InferenceRunner(net, InferenceParams())       # one per video
    prob = proc.step(image, mask=idx_mask, objects=[1, 2])   # frame 0: [3, H, W] in [0, 1]
    prob = proc.step(image)                              # later frames -> [1 + K, H, W]

Tensor conventions follow the official code: per-object tensors are [B, K, C, H, W] with B = 1
(K objects batched along dim 1 and folded into the batch for convolutions), images [B, 3, H, W].
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, asdict
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------- configuration

@dataclass
class CutieConfig:
    """Network hyper-parameters. Defaults are the official `cutie-base` model."""
    pixel_block: str = "bottleneck"          # 'bottleneck' (ResNet-50, base) or 'basic' (ResNet-18, small)
    pixel_layers: tuple = (3, 4, 6)          # blocks in res2 / layer2 / layer3
    pixel_stem: int = 64                     # conv1 output channels
    pixel_planes: tuple = (64, 128, 256)     # block widths (bottleneck output = 4 x planes)
    mask_block: str = "basic"
    mask_layers: tuple = (2, 2, 2)
    mask_stem: int = 64
    mask_planes: tuple = (64, 128, 256)
    pixel_dim: int = 256
    key_dim: int = 64
    value_dim: int = 256
    sensory_dim: int = 256
    embed_dim: int = 256
    ff_dim: int = 2048
    num_heads: int = 8
    num_blocks: int = 3
    num_queries: int = 16
    up_dims: tuple = (256, 128, 128)
    pixel_pe_scale: float = 32.0
    pixel_pe_temperature: float = 128.0
    ca_kernels: Dict[str, int] = field(default_factory=dict)  # CAResBlock conv1d kernel by module path

    @property
    def ms_dims(self) -> tuple:
        e = 4 if self.pixel_block == "bottleneck" else 1
        return tuple(p * e for p in reversed(self.pixel_planes))   # (f16, f8, f4) channels

    @property
    def mask_final_dim(self) -> int:
        return self.mask_planes[2] * (4 if self.mask_block == "bottleneck" else 1)

    @staticmethod
    def small() -> "CutieConfig":
        return CutieConfig(pixel_block="basic", pixel_layers=(2, 2, 2))

    @staticmethod
    def from_state_dict(sd: Dict[str, torch.Tensor], num_heads: int = 8,
                        pixel_pe_scale: float = 32.0) -> "CutieConfig":
        def nblocks(prefix):
            ids = {int(k[len(prefix):].split(".")[0]) for k in sd if k.startswith(prefix)}
            return max(ids) + 1

        def resnet(prefix, l1):
            block = "bottleneck" if f"{prefix}{l1}.0.conv3.weight" in sd else "basic"
            layers = (nblocks(f"{prefix}{l1}."), nblocks(f"{prefix}layer2."), nblocks(f"{prefix}layer3."))
            planes = tuple(sd[f"{prefix}{n}.0.conv1.weight"].shape[0] for n in (l1, "layer2", "layer3"))
            return block, layers, sd[f"{prefix}conv1.weight"].shape[0], planes

        pb, pl, ps, pp = resnet("pixel_encoder.", "res2")
        mb, ml, msm, mp = resnet("mask_encoder.", "layer1")
        ca = {k[:-len(".conv.weight")]: sd[k].shape[-1] for k in sd
              if k.endswith(".conv.weight") and sd[k].dim() == 3}
        ot = "object_transformer."
        return CutieConfig(
            pixel_block=pb, pixel_layers=pl, pixel_stem=ps, pixel_planes=pp,
            mask_block=mb, mask_layers=ml, mask_stem=msm, mask_planes=mp,
            pixel_dim=sd["pix_feat_proj.weight"].shape[0],
            key_dim=sd["key_proj.key_proj.weight"].shape[0],
            value_dim=sd["mask_encoder.fuser.distributor.x_transform.weight"].shape[0],
            sensory_dim=sd["mask_encoder.sensory_update.transform.weight"].shape[0] // 3,
            embed_dim=sd[ot + "query_init.weight"].shape[1],
            ff_dim=sd[ot + "blocks.0.ffn.linear1.weight"].shape[0],
            num_heads=num_heads,
            num_blocks=nblocks(ot + "blocks."),
            num_queries=sd[ot + "query_init.weight"].shape[0],
            up_dims=(sd["mask_decoder.up_16_8.out_conv.conv1.weight"].shape[1],
                     sd["mask_decoder.up_8_4.out_conv.conv1.weight"].shape[1],
                     sd["mask_decoder.pred.weight"].shape[1]),
            pixel_pe_scale=pixel_pe_scale,
            pixel_pe_temperature=_temperature_from_inv_freq(sd[ot + "spatial_pe.inv_freq"]),
            ca_kernels=ca)


def _temperature_from_inv_freq(inv_freq: torch.Tensor) -> float:
    # inv_freq[i] = T^(-2i/d) with d = 2 * len(inv_freq): recover T from inv_freq[1]
    n = inv_freq.numel()
    if n < 2:
        return 128.0
    return float(round(float(inv_freq[1].double() ** (-n)), 6))


def _ca_kernel(c: int) -> int:
    # ECA kernel size rule: odd number near (|log2 C| + 1) / 2
    t = int((abs(math.log2(c)) + 1) // 2)
    return t if t % 2 else t + 1


# --------------------------------------------------------------------------- ResNet trunk

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))
        else:
            self.downsample = None

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        r = x if self.downsample is None else self.downsample(x)
        return F.relu(y + r)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)   # stride on the 3x3
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        if stride != 1 or cin != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes * 4, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes * 4))
        else:
            self.downsample = None

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        r = x if self.downsample is None else self.downsample(x)
        return F.relu(y + r)


def _make_layer(block: str, cin: int, planes: int, n: int, stride: int):
    B = Bottleneck if block == "bottleneck" else BasicBlock
    layers = [B(cin, planes, stride)]
    for _ in range(1, n):
        layers.append(B(planes * B.expansion, planes, 1))
    return nn.Sequential(*layers), planes * B.expansion


class PixelEncoder(nn.Module):
    """ResNet stem + first three stages: f4 (res2), f8 (layer2), f16 (layer3)."""

    def __init__(self, cfg: CutieConfig):
        super().__init__()
        self.conv1 = nn.Conv2d(3, cfg.pixel_stem, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(cfg.pixel_stem)
        c = cfg.pixel_stem
        self.res2, c = _make_layer(cfg.pixel_block, c, cfg.pixel_planes[0], cfg.pixel_layers[0], 1)
        self.layer2, c = _make_layer(cfg.pixel_block, c, cfg.pixel_planes[1], cfg.pixel_layers[1], 2)
        self.layer3, c = _make_layer(cfg.pixel_block, c, cfg.pixel_planes[2], cfg.pixel_layers[2], 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        f4 = self.res2(x)
        f8 = self.layer2(f4)
        f16 = self.layer3(f8)
        return f16, f8, f4


class KeyProjection(nn.Module):
    def __init__(self, cfg: CutieConfig):
        super().__init__()
        self.pix_feat_proj = nn.Conv2d(cfg.ms_dims[0], cfg.pixel_dim, 1)
        self.key_proj = nn.Conv2d(cfg.pixel_dim, cfg.key_dim, 3, padding=1)
        self.d_proj = nn.Conv2d(cfg.pixel_dim, 1, 3, padding=1)
        self.e_proj = nn.Conv2d(cfg.pixel_dim, cfg.key_dim, 3, padding=1)

    def forward(self, f16):
        x = self.pix_feat_proj(f16)
        shrinkage = self.d_proj(x) ** 2 + 1
        selection = torch.sigmoid(self.e_proj(x))
        return self.key_proj(x), shrinkage, selection


# --------------------------------------------------------------------------- per-object blocks

def _fold(g):      # [B, K, C, H, W] -> [B*K, C, H, W]
    return g.flatten(0, 1)


def _unfold(x, B):  # [B*K, C, H, W] -> [B, K, C, H, W]
    return x.view(B, x.shape[0] // B, *x.shape[1:])


class GConv2d(nn.Conv2d):
    """Conv2d applied to every object of a [B, K, C, H, W] tensor."""

    def forward(self, g):
        return _unfold(super().forward(_fold(g)), g.shape[0])


class CAResBlock(nn.Module):
    """Residual block with efficient channel attention: conv3x3(relu) x2, then a sigmoid gate
    from a 1-D conv over the channel-wise spatial means."""

    def __init__(self, cin: int, cout: int, k: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.conv = nn.Conv1d(1, 1, k, padding=(k - 1) // 2, bias=False)
        self.downsample = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        r = x
        x = self.conv2(F.relu(self.conv1(F.relu(x))))
        b, c = x.shape[:2]
        w = x.mean(dim=(2, 3)).view(b, 1, c)
        w = torch.sigmoid(self.conv(w)).view(b, c, 1, 1)
        return x * w + self.downsample(r)


class _Distributor(nn.Module):
    """Holds the two 1x1 projections of a fusion block (module name kept for the key names)."""

    def __init__(self, x_in: int, g_in: int, out: int):
        super().__init__()
        self.x_transform = nn.Conv2d(x_in, out, 1)
        self.g_transform = GConv2d(g_in, out, 1)


class GroupFeatureFusionBlock(nn.Module):
    """g' = CA(CA(conv1x1(x) broadcast over objects + gconv1x1(g)))."""

    def __init__(self, x_in: int, g_in: int, out: int, kernels: Dict[str, int], path: str):
        super().__init__()
        self.distributor = _Distributor(x_in, g_in, out)
        self.block1 = CAResBlock(out, out, kernels.get(path + ".block1", _ca_kernel(out)))
        self.block2 = CAResBlock(out, out, kernels.get(path + ".block2", _ca_kernel(out)))

    def forward(self, x, g):
        B = g.shape[0]
        g = self.distributor.x_transform(x).unsqueeze(1) + self.distributor.g_transform(g)
        return _unfold(self.block2(self.block1(_fold(g))), B)


def _gru(h, values):
    # values [B, K, 3C, H, W]: forget, update, candidate
    c = values.shape[2] // 3
    forget = torch.sigmoid(values[:, :, :c])
    update = torch.sigmoid(values[:, :, c:2 * c])
    new = torch.tanh(values[:, :, 2 * c:])
    return forget * h * (1 - update) + update * new


class SensoryDeepUpdater(nn.Module):
    def __init__(self, f_dim: int, sensory_dim: int):
        super().__init__()
        self.transform = GConv2d(f_dim + sensory_dim, sensory_dim * 3, 3, padding=1)

    def forward(self, g, h):
        return _gru(h, self.transform(torch.cat([g, h], 2)))


def _area_down(g, r: int):
    # F.interpolate(mode='area') by an integer factor: the mean of each r x r block
    B = g.shape[0]
    x = _fold(g)
    return _unfold(F.adaptive_avg_pool2d(x, (x.shape[-2] // r, x.shape[-1] // r)), B)


class SensoryUpdater(nn.Module):
    def __init__(self, g_dims, mid_dim: int, sensory_dim: int):
        super().__init__()
        self.g16_conv = GConv2d(g_dims[0], mid_dim, 1)
        self.g8_conv = GConv2d(g_dims[1], mid_dim, 1)
        self.g4_conv = GConv2d(g_dims[2], mid_dim, 1)
        self.transform = GConv2d(mid_dim + sensory_dim, sensory_dim * 3, 3, padding=1)

    def forward(self, g16, g8, g4, h):
        g = self.g16_conv(g16) + self.g8_conv(_area_down(g8, 2)) + self.g4_conv(_area_down(g4, 4))
        return _gru(h, self.transform(torch.cat([g, h], 2)))


class MaskEncoder(nn.Module):
    """ResNet over [image, mask, others] per object, fused with the pixel features."""

    def __init__(self, cfg: CutieConfig):
        super().__init__()
        self.conv1 = nn.Conv2d(5, cfg.mask_stem, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(cfg.mask_stem)
        c = cfg.mask_stem
        self.layer1, c = _make_layer(cfg.mask_block, c, cfg.mask_planes[0], cfg.mask_layers[0], 1)
        self.layer2, c = _make_layer(cfg.mask_block, c, cfg.mask_planes[1], cfg.mask_layers[1], 2)
        self.layer3, c = _make_layer(cfg.mask_block, c, cfg.mask_planes[2], cfg.mask_layers[2], 2)
        self.fuser = GroupFeatureFusionBlock(cfg.pixel_dim, cfg.mask_final_dim, cfg.value_dim,
                                             cfg.ca_kernels, "mask_encoder.fuser")
        self.sensory_update = SensoryDeepUpdater(cfg.value_dim, cfg.sensory_dim)

    def forward(self, image, pix_feat, sensory, masks, others, deep_update=True, taps=None):
        B, K = masks.shape[:2]
        # per object: [normalized image (3), mask, others] -> 5 channels
        g = torch.cat([image.unsqueeze(1).expand(-1, K, -1, -1, -1),
                       torch.stack([masks, others], 2)], 2)
        x = _fold(g)
        x = F.relu(F.max_pool2d(self.bn1(self.conv1(x)), 3, 2, 1))
        x = _unfold(self.layer3(self.layer2(self.layer1(x))), B)
        if taps is not None:
            taps["mask_feat"] = x
        g = self.fuser(pix_feat, x)
        new_sensory = self.sensory_update(g, sensory) if deep_update else sensory
        return g, new_sensory


class PixelFeatureFuser(nn.Module):
    def __init__(self, cfg: CutieConfig):
        super().__init__()
        self.fuser = GroupFeatureFusionBlock(cfg.pixel_dim, cfg.value_dim, cfg.embed_dim,
                                             cfg.ca_kernels, "pixel_fuser.fuser")
        self.sensory_compress = GConv2d(cfg.sensory_dim + 2, cfg.value_dim, 1)

    def forward(self, pix_feat, pixel_memory, sensory, last_mask, last_others):
        s = self.sensory_compress(torch.cat([sensory, torch.stack([last_mask, last_others], 2)], 2))
        return self.fuser(pix_feat, pixel_memory + s)


class _ResBlockG(nn.Module):
    """Per-object residual block: conv3x3(relu) x2 + (1x1 projection when widths differ)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv1 = GConv2d(cin, cout, 3, padding=1)
        self.conv2 = GConv2d(cout, cout, 3, padding=1)
        self.downsample = nn.Identity() if cin == cout else GConv2d(cin, cout, 1)

    def forward(self, g):
        return self.conv2(F.relu(self.conv1(F.relu(g)))) + self.downsample(g)


class MaskUpsampleBlock(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.out_conv = _ResBlockG(cin, cout)

    def forward(self, g, skip):
        B = g.shape[0]
        g = _unfold(F.interpolate(_fold(g), scale_factor=2, mode="bilinear", align_corners=False), B)
        return self.out_conv(skip.unsqueeze(1) + g)


class DecoderFeatureProcessor(nn.Module):
    def __init__(self, in_dims, out_dims):
        super().__init__()
        self.transforms = nn.ModuleList(nn.Conv2d(i, o, 1) for i, o in zip(in_dims, out_dims))


class MaskDecoder(nn.Module):
    def __init__(self, cfg: CutieConfig):
        super().__init__()
        u = cfg.up_dims
        self.sensory_update = SensoryUpdater([u[0], u[1], u[2] + 1], cfg.sensory_dim, cfg.sensory_dim)
        self.decoder_feat_proc = DecoderFeatureProcessor(cfg.ms_dims[1:], u[:-1])
        self.up_16_8 = MaskUpsampleBlock(u[0], u[1])
        self.up_8_4 = MaskUpsampleBlock(u[1], u[2])
        self.pred = nn.Conv2d(u[2], 1, 3, padding=1)

    def forward(self, f8, f4, p16, sensory, update_sensory=True, taps=None):
        B, K = p16.shape[:2]
        s8 = self.decoder_feat_proc.transforms[0](f8)
        s4 = self.decoder_feat_proc.transforms[1](f4)
        p8 = self.up_16_8(p16, s8)
        p4 = self.up_8_4(p8, s4)
        logits = self.pred(F.relu(_fold(p4))).view(B, K, *p4.shape[-2:])
        if taps is not None:
            taps.update(dec_p8=p8, dec_p4=p4)
        if update_sensory:
            p4 = torch.cat([p4, logits.unsqueeze(2)], 2)
            sensory = self.sensory_update(p16, p8, p4, sensory)
        return sensory, logits


# --------------------------------------------------------------------------- object transformer

class PositionalEncoding(nn.Module):
    """2-D sine encoding: channels [sin x0, cos x0, sin x1, cos x1, ..., then the same for y],
    positions normalized to [0, scale] by (i / (n - 1 + 1e-6)) * scale."""

    def __init__(self, dim: int, scale: float, temperature: float):
        super().__init__()
        d = int(np.ceil(dim / 4) * 2)
        self.register_buffer("inv_freq", 1.0 / (temperature ** (torch.arange(0, d, 2).float() / d)))
        self.scale = scale

    def forward(self, h: int, w: int, dtype=torch.float32):
        """-> [h, w, 2 * d]"""
        f = self.inv_freq
        pos_y = torch.arange(h, device=f.device, dtype=f.dtype)
        pos_x = torch.arange(w, device=f.device, dtype=f.dtype)
        pos_y = pos_y / (pos_y[-1] + 1e-6) * self.scale
        pos_x = pos_x / (pos_x[-1] + 1e-6) * self.scale
        ey = torch.stack([torch.outer(pos_y, f).sin(), torch.outer(pos_y, f).cos()], -1).flatten(-2)
        ex = torch.stack([torch.outer(pos_x, f).sin(), torch.outer(pos_x, f).cos()], -1).flatten(-2)
        d = f.numel() * 2
        emb = torch.zeros((h, w, 2 * d), device=f.device, dtype=dtype)
        emb[:, :, :d] = ex.unsqueeze(0)
        emb[:, :, d:] = ey.unsqueeze(1)
        return emb


class MultiheadAttention(nn.Module):
    """Batch-first multi-head attention with torch.nn.MultiheadAttention's parameter layout:
    in_proj_weight [3E, E] = rows of W_q, W_k, W_v; heads take contiguous channel slices;
    scale 1/sqrt(E/heads); a boolean mask entry True blocks that (query, key) pair."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * dim))
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, q, k, v, attn_mask=None):
        # q [N, L, E], k/v [N, S, E], attn_mask [N*heads, L, S] (bool) or None
        N, L, E = q.shape
        S = k.shape[1]
        h, d = self.heads, E // self.heads
        W, b = self.in_proj_weight, self.in_proj_bias
        q = F.linear(q, W[:E], b[:E]).view(N, L, h, d).transpose(1, 2)
        k = F.linear(k, W[E:2 * E], b[E:2 * E]).view(N, S, h, d).transpose(1, 2)
        v = F.linear(v, W[2 * E:], b[2 * E:]).view(N, S, h, d).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        if attn_mask is not None:
            s = s.masked_fill(attn_mask.view(N, h, L, S), float("-inf"))
        a = torch.softmax(s, -1)
        o = (a @ v).transpose(1, 2).reshape(N, L, E)
        return self.out_proj(o)


class CrossAttention(nn.Module):
    """x' = n + MHA(q = n + x_pe, k = mem + mem_pe, v = mem), n = LayerNorm(x) (or x if no norm)."""

    def __init__(self, dim: int, heads: int, norm: bool = True):
        super().__init__()
        self.cross_attn = MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim) if norm else nn.Identity()

    def forward(self, x, mem, x_pe, mem_pe, attn_mask=None):
        x = self.norm(x)
        return x + self.cross_attn(x + x_pe, mem + mem_pe, mem, attn_mask)


class SelfAttention(nn.Module):
    """x' = n + MHA(q = k = n + pe, v = n), n = LayerNorm(x)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.self_attn = MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, pe):
        x = self.norm(x)
        return x + self.self_attn(x + pe, x + pe, x)


class FFN(nn.Module):
    """x' = x + linear2(relu(linear1(LayerNorm(x))))."""

    def __init__(self, dim: int, ff: int):
        super().__init__()
        self.linear1 = nn.Linear(dim, ff)
        self.linear2 = nn.Linear(ff, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return x + self.linear2(F.relu(self.linear1(self.norm(x))))


class PixelFFN(nn.Module):
    def __init__(self, dim: int, k: int):
        super().__init__()
        self.conv = CAResBlock(dim, dim, k)


class QueryTransformerBlock(nn.Module):
    def __init__(self, cfg: CutieConfig, i: int):
        super().__init__()
        E, H = cfg.embed_dim, cfg.num_heads
        self.read_from_pixel = CrossAttention(E, H, norm=True)
        self.self_attn = SelfAttention(E, H)
        self.ffn = FFN(E, cfg.ff_dim)
        self.read_from_query = CrossAttention(E, H, norm=False)
        p = f"object_transformer.blocks.{i}.pixel_ffn.conv"
        self.pixel_ffn = PixelFFN(E, cfg.ca_kernels.get(p, _ca_kernel(E)))

    def forward(self, q, pixel, q_pe, pixel_pe, attn_mask):
        # q [BK, Q, E]; pixel [B, K, E, h, w]; pixel_pe [BK, hw, E]
        B, K, E, h, w = pixel.shape
        pix = pixel.flatten(3).flatten(0, 1).transpose(1, 2)          # [BK, hw, E]
        q = self.read_from_pixel(q, pix, q_pe, pixel_pe, attn_mask)
        q = self.self_attn(q, q_pe)
        q = self.ffn(q)
        pix = self.read_from_query(pix, q, pixel_pe, q_pe)
        pix = pix.reshape(B * K, h, w, E).permute(0, 3, 1, 2)
        pixel = self.pixel_ffn.conv(pix).view(B, K, E, h, w)
        return q, pixel


def aggregate(prob, dim):
    """Soft aggregation: prepend background prod(1 - p), clamp to [1e-7, 1 - 1e-7], logit."""
    p = torch.cat([torch.prod(1 - prob, dim=dim, keepdim=True), prob], dim).clamp(1e-7, 1 - 1e-7)
    return torch.log(p / (1 - p))


class QueryTransformer(nn.Module):
    def __init__(self, cfg: CutieConfig):
        super().__init__()
        E, Q = cfg.embed_dim, cfg.num_queries
        self.num_heads, self.num_queries = cfg.num_heads, Q
        self.query_init = nn.Embedding(Q, E)
        self.query_emb = nn.Embedding(Q, E)
        self.summary_to_query_init = nn.Linear(E, E)
        self.summary_to_query_emb = nn.Linear(E, E)
        self.pixel_init_proj = GConv2d(E, E, 1)
        self.pixel_emb_proj = GConv2d(E, E, 1)
        self.spatial_pe = PositionalEncoding(E, cfg.pixel_pe_scale, cfg.pixel_pe_temperature)
        self.blocks = nn.ModuleList(QueryTransformerBlock(cfg, i) for i in range(cfg.num_blocks))
        self.mask_pred = nn.ModuleList(nn.Sequential(nn.ReLU(), GConv2d(E, 1, 1))
                                       for _ in range(cfg.num_blocks + 1))

    def attn_mask(self, logits):
        """logits [B, K, h, w] -> bool [B*K*heads, Q, hw]: the first Q/2 queries of an object may
        read only the pixels where that object wins the soft aggregation (ties count as wins),
        the last Q/2 only the others; a query row with every pixel blocked is unblocked."""
        agg = aggregate(torch.sigmoid(logits), 1)
        fg = (agg[:, 1:] >= agg.max(dim=1, keepdim=True)[0]).flatten(2)      # [B, K, hw]
        B, K, n = fg.shape
        H, Q = self.num_heads, self.num_queries
        m = torch.cat([(~fg)[:, :, None, None, :].expand(B, K, H, Q // 2, n),
                       fg[:, :, None, None, :].expand(B, K, H, Q // 2, n)], 3)
        m = m.reshape(B * K * H, Q, n).clone()
        m[m.all(-1)] = False
        return m

    def forward(self, pixel, obj_summaries, taps=None):
        # pixel [B, K, E, h, w]; obj_summaries [B, K, Q, E + 1] (running sums + area)
        B, K, E, h, w = pixel.shape
        s = obj_summaries.reshape(B * K, self.num_queries, E + 1)
        obj_values = s[:, :, :-1] / (s[:, :, -1:] + 1e-4)
        q = self.query_init.weight.unsqueeze(0) + self.summary_to_query_init(obj_values)
        q_pe = self.query_emb.weight.unsqueeze(0) + self.summary_to_query_emb(obj_values)

        pixel_pe = self.spatial_pe(h, w, pixel.dtype).flatten(0, 1).unsqueeze(0) + \
            self.pixel_emb_proj(pixel).flatten(3).flatten(0, 1).transpose(1, 2)    # [BK, hw, E]
        pixel = self.pixel_init_proj(pixel)
        aux = self.mask_pred[0](pixel).squeeze(2)
        mask = self.attn_mask(aux)
        if taps is not None:
            taps.update(ot_query_in=q, ot_query_pe=q_pe, ot_pixel_pe=pixel_pe, ot_aux_logits_0=aux)
        for i, blk in enumerate(self.blocks):
            q, pixel = blk(q, pixel, q_pe, pixel_pe, mask)
            aux = self.mask_pred[i + 1](pixel).squeeze(2)
            mask = self.attn_mask(aux)
            if taps is not None:
                taps[f"ot_query_{i}"] = q
                taps[f"ot_pixel_{i}"] = pixel
                taps[f"ot_aux_logits_{i + 1}"] = aux
        return pixel


class ObjectSummarizer(nn.Module):
    def __init__(self, cfg: CutieConfig):
        super().__init__()
        E, Q = cfg.embed_dim, cfg.num_queries
        self.num_summaries = Q
        self.pos_enc = PositionalEncoding(E, cfg.pixel_pe_scale, cfg.pixel_pe_temperature)
        self.input_proj = nn.Linear(cfg.value_dim, E)
        self.feature_pred = nn.Sequential(nn.Linear(E, E), nn.ReLU(), nn.Linear(E, E))
        self.weights_pred = nn.Sequential(nn.Linear(E, E), nn.ReLU(), nn.Linear(E, Q))

    def forward(self, masks, value):
        """masks [B, K, H, W] (padded full size), value [B, K, C, h, w] -> [B, K, Q, E + 1]:
        per query, the sigmoid-weighted sum of features over the object's area (first Q/2 queries)
        or its complement (last Q/2), and the summed weight."""
        h, w = value.shape[-2:]
        m = F.adaptive_avg_pool2d(masks, (h, w)).unsqueeze(-1)               # area resize
        Q2 = self.num_summaries // 2
        m = torch.cat([m.expand(-1, -1, -1, -1, Q2), (1 - m).expand(-1, -1, -1, -1, Q2)], -1)
        v = self.input_proj(value.permute(0, 1, 3, 4, 2))
        v = v + self.pos_enc(h, w, v.dtype)
        feature = self.feature_pred(v)
        weights = torch.sigmoid(self.weights_pred(v)) * m                    # [B, K, h, w, Q]
        sums = torch.einsum("bkhwq,bkhwc->bkqc", weights, feature)
        area = weights.flatten(2, 3).sum(2).unsqueeze(-1)
        return torch.cat([sums, area], -1)


class _SensoryAux(nn.Module):
    def __init__(self, sensory_dim: int, embed_dim: int):
        super().__init__()
        self.projection = GConv2d(sensory_dim, embed_dim + 1, 1)


class _AuxComputer(nn.Module):
    """Training-only head, kept so that official checkpoints load with strict=True."""

    def __init__(self, cfg: CutieConfig):
        super().__init__()
        self.sensory_aux = _SensoryAux(cfg.sensory_dim, cfg.embed_dim)


# --------------------------------------------------------------------------- the network

class Cutie(nn.Module):
    def __init__(self, cfg: CutieConfig):
        super().__init__()
        self.cfg = cfg
        self.pixel_encoder = PixelEncoder(cfg)
        self.pix_feat_proj = nn.Conv2d(cfg.ms_dims[0], cfg.pixel_dim, 1)
        self.key_proj = KeyProjection(cfg)
        self.mask_encoder = MaskEncoder(cfg)
        self.mask_decoder = MaskDecoder(cfg)
        self.pixel_fuser = PixelFeatureFuser(cfg)
        self.object_transformer = QueryTransformer(cfg)
        self.object_summarizer = ObjectSummarizer(cfg)
        self.aux_computer = _AuxComputer(cfg)
        self.register_buffer("pixel_mean", torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1), False)
        self.register_buffer("pixel_std", torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1), False)

    @staticmethod
    def from_state_dict(sd, num_heads: int = 8, pixel_pe_scale: float = 32.0) -> "Cutie":
        """Builds the network that `sd` describes and loads it. Every key must match, except that
        the training-only `aux_computer.*` and the computable `*.inv_freq` may be absent (the
        official loader loads with strict=False)."""
        sd = unwrap_checkpoint(sd)
        net = Cutie(CutieConfig.from_state_dict(sd, num_heads, pixel_pe_scale))
        missing, unexpected = net.load_state_dict(sd, strict=False)
        missing = [k for k in missing if not (k.startswith("aux_computer.") or k.endswith("inv_freq"))]
        if missing or unexpected:
            raise KeyError(f"checkpoint does not match Cutie: missing {missing}, unexpected {unexpected}")
        return net.eval()

    def normalize(self, image):
        return (image - self.pixel_mean) / self.pixel_std

    def encode_image(self, image):
        """image [B, 3, H, W] in [0, 1] (padded) -> (f16, f8, f4), pix_feat, key, shrinkage, selection"""
        ms = self.pixel_encoder(self.normalize(image))
        key, shrinkage, selection = self.key_proj(ms[0])
        return ms, self.pix_feat_proj(ms[0]), key, shrinkage, selection

    @staticmethod
    def others(masks):
        return (masks.sum(dim=1, keepdim=True) - masks).clamp(0, 1)

    def encode_mask(self, image, pix_feat, sensory, masks, deep_update=True, taps=None):
        """masks [B, K, H, W] -> value [B, K, CV, h, w], sensory, summaries [B, K, Q, E + 1]"""
        value, sensory = self.mask_encoder(self.normalize(image), pix_feat, sensory, masks,
                                           self.others(masks), deep_update, taps)
        return value, sensory, self.object_summarizer(masks, value)

    def pixel_fusion(self, pix_feat, visual_readout, sensory, last_mask):
        last_mask = F.adaptive_avg_pool2d(last_mask, sensory.shape[-2:])    # area resize to /16
        return self.pixel_fuser(pix_feat, visual_readout, sensory, last_mask, self.others(last_mask))

    def segment(self, ms, readout, sensory, update_sensory=True, taps=None):
        """-> new sensory, decoder logits [B, K, H/4, W/4], prob [B, 1 + K, H, W]"""
        sensory, logits = self.mask_decoder(ms[1], ms[2], readout, sensory, update_sensory, taps)
        agg = aggregate(torch.sigmoid(logits), 1)
        agg = F.interpolate(agg, scale_factor=4, mode="bilinear", align_corners=False)
        return sensory, logits, torch.softmax(agg, 1)


def unwrap_checkpoint(obj) -> Dict[str, torch.Tensor]:
    """The official release files are a plain state dict; the trainer's resumable checkpoints
    hold it under 'weights'. A DataParallel 'module.' prefix is stripped. fp16/bf16 -> fp32."""
    if isinstance(obj, dict) and "weights" in obj and isinstance(obj["weights"], dict):
        obj = obj["weights"]
    out = {}
    for k, v in obj.items():
        k = k[len("module."):] if k.startswith("module.") else k
        out[k] = v.float() if v.is_floating_point() else v
    return out


# --------------------------------------------------------------------------- memory read

def similarity(mk, ms, qk, qe):
    """Anisotropic L2 (XMem): mk [B, CK, N], ms [B, 1, N], qk/qe [B, CK, HW] -> [B, N, HW] =
    -(sum_c qe_c (mk_c - qk_c)^2) * ms / sqrt(CK), expanded as -a^2 + 2ab - b^2."""
    CK = mk.shape[1]
    mkt = mk.transpose(1, 2)
    a_sq = mkt.pow(2) @ qe
    two_ab = 2 * (mkt @ (qk * qe))
    b_sq = (qe * qk.pow(2)).sum(1, keepdim=True)
    return (-a_sq + two_ab - b_sq) * ms.transpose(1, 2) / math.sqrt(CK)


def topk_softmax(sim, top_k: int):
    """Keep the top_k memory entries per query pixel (dim 1), softmax over them (exp of the raw
    values, no max subtraction), zero elsewhere."""
    values, idx = torch.topk(sim, k=top_k, dim=1)
    e = values.exp()
    e = e / e.sum(dim=1, keepdim=True)
    return torch.zeros_like(sim).scatter_(1, idx, e)


# --------------------------------------------------------------------------- inference

@dataclass
class InferenceParams:
    """Official defaults (cutie/config/eval_config.yaml, non-long-term datasets)."""
    mem_every: int = 5
    max_mem_frames: int = 5          # working memory frames incl. the permanent first frame
    top_k: int = 30
    stagger_updates: int = 5
    max_internal_size: int = -1      # shorter side limit; -1 = no resize
    use_long_term: bool = False      # XMem-style long-term memory instead of FIFO eviction
    # long-term settings (eval_config.yaml `long_term`); frames again include the permanent one
    lt_max_mem_frames: int = 10
    lt_min_mem_frames: int = 5
    num_prototypes: int = 128
    max_num_tokens: int = 10000
    buffer_tokens: int = 2000
    count_usage: bool = True

    def as_dict(self):
        return asdict(self)


def _lt_len(b: dict) -> int:
    return 0 if b["lt_key"] is None else b["lt_key"].shape[-1]


def pad_divide_by(x, d: int = 16):
    """Zero-pad the last two dims up to multiples of d, split (floor half before, rest after).
    Returns the padded tensor and (left, right, top, bottom)."""
    h, w = x.shape[-2:]
    nh = h + (d - h % d) % d
    nw = w + (d - w % d) % d
    lh, lw = (nh - h) // 2, (nw - w) // 2
    pad = (lw, nw - w - lw, lh, nh - h - lh)
    return F.pad(x, pad), pad


def unpad(x, pad):
    l, r, t, b = pad
    return x[..., t:x.shape[-2] - b, l:x.shape[-1] - r]


class InferenceRunner:
    """Per-video state: the working memory (a bucket of the first mask's objects, and one more
    bucket for the new objects of each later mask that brings some, as the official
    KeyValueMemoryStore keeps them: keys of its own, its first frame permanent, FIFO), the
    long-term memory when enabled (per bucket: each bucket's working memory counts its own usage,
    consolidates into its own long-term store and prunes it on its own schedule), the sensory
    memory and the object summaries; the rules of the official InferenceCore.step /
    MemoryManager with one batch element, no flip augmentation, and `end` always False."""

    def __init__(self, net: Cutie, params: InferenceParams):
        self.net, self.p = net, params
        self.curr_ti = -1
        self.last_mem_ti = 0
        if params.stagger_updates >= params.mem_every:
            self.stagger_ti = set(range(1, params.mem_every + 1))
        else:
            self.stagger_ti = set(np.round(np.linspace(1, params.mem_every,
                                                       params.stagger_updates)).astype(int).tolist())
        self.objects: List[int] = []
        self.mem_key = self.mem_shrink = self.mem_value = None   # [1, CK, N], [1, 1, N], [1, K, CV, N]
        self.perm_end = 0                                          # tokens of the permanent frame
        self.sensory = None                                        # [1, K, CS, h, w]
        self.obj_mem = None                                        # [1, K, Q, E + 1]
        self.last_mask = None                                      # [1, K, Hp, Wp]
        self.max_work_tokens = None
        # long-term mode: selection and usage of the non-permanent working entries [1, CK, Nt],
        # [1, Nt]; the long-term store (no permanent part) with its own usage
        self.mem_sel = self.mem_use = self.mem_life = None
        self.lt_key = self.lt_shrink = self.lt_value = self.lt_use = self.lt_life = None
        self.min_work_tokens = None
        self.lt_min_gap = float("inf")
        # buckets after the first: {"objs": object indices, "key", "shrink", "value", "perm_end"},
        # in long-term mode also "sel", "use", "life" and the long-term store "lt_key", "lt_shrink",
        # "lt_value", "lt_use", "lt_life" (the first bucket's are the attributes above)
        self.buckets = []

    @property
    def lt_size(self) -> int:
        """Long-term tokens, all the buckets' together."""
        return sum(_lt_len(b) for b in [self._first()] + self.buckets)

    # the first bucket's state as a bucket dict (the long-term helpers take buckets)
    _FIRST = dict(key="mem_key", shrink="mem_shrink", value="mem_value", perm_end="perm_end", sel="mem_sel",
                  use="mem_use", life="mem_life", lt_key="lt_key", lt_shrink="lt_shrink", lt_value="lt_value",
                  lt_use="lt_use", lt_life="lt_life")

    def _first(self) -> dict:
        return {k: getattr(self, a) for k, a in self._FIRST.items()}

    def _set_first(self, b: dict):
        for k, a in self._FIRST.items():
            setattr(self, a, b[k])

    # -- memory
    def _add_memory(self, image, pix_feat, key, shrinkage, selection, taps=None):
        K = len(self.objects)
        h, w = key.shape[-2:]
        if self.sensory is None:
            self.sensory = torch.zeros((1, K, self.net.cfg.sensory_dim, h, w), dtype=key.dtype)
        elif self.sensory.shape[1] < K:   # objects new to the memory start with a zero sensory
            self.sensory = torch.cat([self.sensory, torch.zeros(
                (1, K - self.sensory.shape[1], self.net.cfg.sensory_dim, h, w), dtype=key.dtype)], 1)
        if taps is not None:
            taps["enc_sensory_in"] = self.sensory
        value, sensory, summaries = self.net.encode_mask(image, pix_feat, self.sensory, self.last_mask,
                                                         taps=taps)
        if taps is not None:
            taps.update(enc_value=value, enc_sensory=sensory, enc_summaries=summaries)
        k, s, v = key.flatten(2), shrinkage.flatten(2), value.flatten(3)
        if self.obj_mem is None:
            self.obj_mem = summaries
        else:
            n = self.obj_mem.shape[1]                   # running sums and running area; new objects start
            self.obj_mem = torch.cat([self.obj_mem + summaries[:, :n], summaries[:, n:]], 1)
        lt = self.p.use_long_term
        for b in self.buckets:
            vb = v[:, b["objs"]]
            if b["key"] is None:                        # the bucket's first frame is permanent
                b["key"], b["shrink"], b["value"], b["perm_end"] = k, s, vb, k.shape[-1]
            else:
                b["key"] = torch.cat([b["key"], k], -1)
                b["shrink"] = torch.cat([b["shrink"], s], -1)
                b["value"] = torch.cat([b["value"], vb], -1)
                n_temp = b["key"].shape[-1] - b["perm_end"]
                if lt:
                    # as the first bucket: selection, usage 0 and life 1e-7 for the new entries,
                    # then consolidation into the bucket's own long-term store when full
                    n, e = k.shape[-1], selection.flatten(2)
                    u, l = torch.zeros((1, n)), torch.zeros((1, n)) + 1e-7
                    b["sel"] = e if b["sel"] is None else torch.cat([b["sel"], e], -1)
                    b["use"] = u if b["use"] is None else torch.cat([b["use"], u], -1)
                    b["life"] = l if b["life"] is None else torch.cat([b["life"], l], -1)
                    if n_temp >= self.max_work_tokens:
                        self._lt_consolidate(b)
                elif n_temp > self.max_work_tokens:
                    cut = b["perm_end"] + n_temp - self.max_work_tokens
                    for name in ("key", "shrink", "value"):
                        t = b[name]
                        b[name] = torch.cat([t[..., :b["perm_end"]], t[..., cut:]], -1)
        n0 = self.mem_value.shape[1] if self.mem_value is not None else K
        v = v[:, :n0]                                   # the first bucket's objects
        if self.mem_key is None:
            # the first memory frame is permanent
            self.mem_key, self.mem_shrink, self.mem_value = k, s, v
            self.perm_end = k.shape[-1]
            frames = self.p.lt_max_mem_frames if lt else self.p.max_mem_frames
            self.max_work_tokens = (frames - 1) * h * w
            self.min_work_tokens = (self.p.lt_min_mem_frames - 1) * h * w
        else:
            self.mem_key = torch.cat([self.mem_key, k], -1)
            self.mem_shrink = torch.cat([self.mem_shrink, s], -1)
            self.mem_value = torch.cat([self.mem_value, v], -1)
            if lt:
                n = k.shape[-1]
                e = selection.flatten(2)
                self.mem_sel = e if self.mem_sel is None else torch.cat([self.mem_sel, e], -1)
                u, l = torch.zeros((1, n)), torch.zeros((1, n)) + 1e-7
                self.mem_use = u if self.mem_use is None else torch.cat([self.mem_use, u], -1)
                self.mem_life = l if self.mem_life is None else torch.cat([self.mem_life, l], -1)
        n_temp = self.mem_key.shape[-1] - self.perm_end
        if not lt:
            # FIFO: keep the permanent part and the newest max_work_tokens of the rest
            if n_temp > self.max_work_tokens:
                cut = self.perm_end + n_temp - self.max_work_tokens
                keep = lambda t: torch.cat([t[..., :self.perm_end], t[..., cut:]], -1)  # noqa: E731
                self.mem_key, self.mem_shrink, self.mem_value = map(
                    keep, (self.mem_key, self.mem_shrink, self.mem_value))
        elif n_temp >= self.max_work_tokens:
            b = self._first()
            self._lt_consolidate(b)
            self._set_first(b)
        self.last_mem_ti = self.curr_ti
        self.sensory = sensory
        if taps is not None:
            taps["obj_mem"] = self.obj_mem

    def _lt_consolidate(self, b: dict):
        """MemoryManager.add_memory's long-term step for a bucket whose working memory is full:
        its long-term store, if it holds max_num_tokens - num_prototypes or more, keeps its
        most used entries; then the bucket's older working entries become prototypes."""
        if _lt_len(b) >= self.p.max_num_tokens - self.p.num_prototypes:
            self._lt_remove_obsolete(b, self.p.max_num_tokens - self.p.num_prototypes - self.p.buffer_tokens)
        self._lt_compress(b)

    def _lt_compress(self, b: dict):
        """Consolidation of bucket b: the non-permanent working entries except the newest
        min_work_tokens become num_prototypes long-term entries. Prototypes = the candidates of
        highest usage (use_cnt / life_cnt, descending); their value and shrinkage = a full softmax
        (over the candidates) of similarity(candidate keys+shrinkage, prototype keys+selections)
        applied to the candidates' values and shrinkages."""
        p0, end = b["perm_end"], b["key"].shape[-1] - self.min_work_tokens
        ck, cs, cv = b["key"][..., p0:end], b["shrink"][..., p0:end], b["value"][..., p0:end]
        ce = b["sel"][..., :end - p0]
        usage = (b["use"] / b["life"])[:, :end - p0]
        idx = torch.topk(usage[0], k=self.p.num_prototypes, dim=-1, sorted=True)[1]
        self._note_selection_gap(usage[0], self.p.num_prototypes)
        pk, pe = ck[:, :, idx], ce[:, :, idx]
        aff = torch.softmax(similarity(ck, cs, pk, pe), dim=1)               # [1, Ncand, P]
        K, CV = cv.shape[1], cv.shape[2]
        pv = (cv.reshape(1, K * CV, -1) @ aff).view(1, K, CV, -1)
        ps = cs @ aff
        # drop the consolidated entries (only when more than min_work_tokens are non-permanent)
        if b["key"].shape[-1] - p0 > self.min_work_tokens:
            for name in ("key", "shrink", "value"):
                b[name] = torch.cat([b[name][..., :p0], b[name][..., end:]], -1)
            for name in ("sel", "use", "life"):
                b[name] = b[name][..., end - p0:]
        n = pk.shape[-1]
        if b["lt_key"] is None:
            b["lt_key"], b["lt_shrink"], b["lt_value"] = pk, ps, pv
            b["lt_use"], b["lt_life"] = torch.zeros((1, n)), torch.zeros((1, n)) + 1e-7
        else:
            b["lt_key"] = torch.cat([b["lt_key"], pk], -1)
            b["lt_shrink"] = torch.cat([b["lt_shrink"], ps], -1)
            b["lt_value"] = torch.cat([b["lt_value"], pv], -1)
            b["lt_use"] = torch.cat([b["lt_use"], torch.zeros((1, n))], -1)
            b["lt_life"] = torch.cat([b["lt_life"], torch.zeros((1, n)) + 1e-7], -1)

    def _note_selection_gap(self, usage, k: int):
        # usage gap between the k-th and (k+1)-th entry: how far float rounding is from changing
        # which entries are kept (their order only changes the summation order of later reads)
        if usage.numel() > k:
            v = torch.topk(usage, k + 1)[0]
            self.lt_min_gap = min(self.lt_min_gap, float(v[k - 1] - v[k]))

    def _lt_remove_obsolete(self, b: dict, max_size: int):
        """Keep bucket b's max_size long-term entries of highest usage, in descending usage order."""
        usage = (b["lt_use"] / b["lt_life"])[0]
        idx = torch.topk(usage, k=max_size)[1]
        self._note_selection_gap(usage, max_size)
        for name in ("lt_key", "lt_shrink", "lt_value"):
            b[name] = b[name][..., idx]
        b["lt_use"], b["lt_life"] = b["lt_use"][:, idx], b["lt_life"][:, idx]

    def _lt_read(self, b: dict, key, selection):
        """Bucket b's affinity over [its long-term store, its working memory] (the official order),
        counting usage in long-term mode; returns (similarity, affinity, values)."""
        L = _lt_len(b)
        mk, ms, mv = b["key"], b["shrink"], b["value"]
        if L:
            mk = torch.cat([b["lt_key"], mk], -1)
            ms = torch.cat([b["lt_shrink"], ms], -1)
            mv = torch.cat([b["lt_value"], mv], -1)
        sim = similarity(mk, ms, key.flatten(2), selection.flatten(2))
        aff = topk_softmax(sim, self.p.top_k)                                  # [1, N, hw]
        if self.p.use_long_term:
            # usage: each entry's summed affinity over the frame's pixels; life: reads seen
            usage = aff.sum(dim=2)
            u = usage[:, L + b["perm_end"]:]
            if u.shape[-1] > 0:
                b["use"] = b["use"] + u
                b["life"] = b["life"] + 1
            if L and self.p.count_usage:
                b["lt_use"] = b["lt_use"] + usage[:, :L]
                b["lt_life"] = b["lt_life"] + 1
        return sim, aff, mv

    def _read(self, pix_feat, key, selection, taps=None):
        h, w = key.shape[-2:]
        K = len(self.objects)
        b0 = self._first()
        sim, aff, mv = self._lt_read(b0, key, selection)
        self._set_first(b0)
        CV = mv.shape[2]
        if self.buckets:
            # each bucket reads its own memory; pixel fusion's "others" are the bucket's objects
            K0 = mv.shape[1]
            readouts = [self._read_bucket(pix_feat, aff, mv, list(range(K0)), h, w)]
            for b in self.buckets:
                _, ab, vb = self._lt_read(b, key, selection)
                readouts.append(self._read_bucket(pix_feat, ab, vb, b["objs"], h, w))
            return torch.cat(readouts, 1)
        visual = (mv.reshape(1, K * CV, -1) @ aff).view(1, K, CV, h, w)
        fused = self.net.pixel_fusion(pix_feat, visual, self.sensory, self.last_mask)
        readout = self.net.object_transformer(fused, self.obj_mem, taps)
        if taps is not None:
            v, _ = torch.topk(sim, k=min(self.p.top_k + 1, sim.shape[1]), dim=1)
            gap = (v[:, self.p.top_k - 1] - v[:, self.p.top_k]).min() if v.shape[1] > self.p.top_k \
                else torch.tensor(float("inf"))
            taps.update(similarity=sim, affinity=aff, visual_readout=visual, fused_readout=fused,
                        readout=readout, topk_min_gap=gap, topk_min_value=v[:, self.p.top_k - 1].min())
        return readout

    def _read_bucket(self, pix_feat, aff, mv, objs, h, w):
        K, CV = mv.shape[1], mv.shape[2]
        visual = (mv.reshape(1, K * CV, -1) @ aff).view(1, K, CV, h, w)
        fused = self.net.pixel_fusion(pix_feat, visual, self.sensory[:, objs], self.last_mask[:, objs])
        return self.net.object_transformer(fused, self.obj_mem[:, objs], None)

    # -- one frame
    def step(self, image, mask=None, objects=None, taps: Optional[dict] = None):
        """image [3, H, W] float in [0, 1]; mask [H, W] int64 label image (the first frame, or a
        later frame: known objects correct the frame, new ones join) or None -> prob [1 + K, H, W]
        (background first, objects in the order they were given)."""
        net = self.net
        h0, w0 = image.shape[-2:]
        resize = False
        mis = self.p.max_internal_size
        if mis > 0 and min(h0, w0) > mis:
            resize = True
            nh, nw = int(h0 / min(h0, w0) * mis), int(w0 / min(h0, w0) * mis)
            image = F.interpolate(image[None], size=(nh, nw), mode="bilinear", align_corners=False)[0]
            if mask is not None:
                mask = F.interpolate(mask[None, None].float(), size=(nh, nw),
                                     mode="nearest-exact")[0, 0].round().long()
        self.curr_ti += 1
        image, pad = pad_divide_by(image, 16)
        image = image[None]
        new = [o for o in objects if o not in self.objects] if mask is not None and self.objects else []
        is_mem_frame = (self.curr_ti - self.last_mem_ti >= self.p.mem_every) or mask is not None
        update_sensory = (self.curr_ti - self.last_mem_ti) in self.stagger_ti

        ms, pix_feat, key, shrinkage, selection = net.encode_image(image)
        if taps is not None:
            taps.update(image=image, f16=ms[0], f8=ms[1], f4=ms[2], pix_feat=pix_feat, key=key,
                        shrinkage=shrinkage, selection=selection)
        if mask is None or new:   # need_segment
            readout = self._read(pix_feat, key, selection, taps)
            if taps is not None:
                taps["sensory_in"] = self.sensory
            sensory, logits, prob = net.segment(ms, readout, self.sensory, update_sensory, taps)
            if taps is not None:
                taps.update(dec_logits=logits)
            if update_sensory:
                self.sensory = sensory
            prob = prob[0]
        if mask is not None and new:
            # InferenceCore.step's merge: the known objects' predictions are 0 on the mask, the
            # listed ones are their mask; the new objects (in the order listed) join after them,
            # a bucket of their own
            mask, _ = pad_divide_by(mask, 16)
            pred = prob[1:].clone()
            pred[:, mask > 0] = 0
            for i, o in enumerate(self.objects):
                if o in objects:
                    pred[i] = (mask == o).float()
            K0 = len(self.objects)
            self.objects = self.objects + new
            self.buckets.append({"objs": list(range(K0, K0 + len(new))), "key": None, "shrink": None,
                                 "value": None, "perm_end": 0, "sel": None, "use": None, "life": None,
                                 "lt_key": None, "lt_shrink": None, "lt_value": None, "lt_use": None,
                                 "lt_life": None})
            pred = torch.cat([pred] + [(mask == o).float()[None] for o in new], 0)
            prob = torch.softmax(aggregate(pred, 0), 0)
        elif mask is not None:
            # a later mask without new objects is the frame's result, as the official step takes
            # it (need_segment is False); an object it does not list is absent (the official code
            # expects every object listed)
            listed = set(objects)
            if not self.objects:
                self.objects = list(objects)
            mask, _ = pad_divide_by(mask, 16)
            onehot = torch.stack([(mask == o) & (o in listed) for o in self.objects], 0).float()
            prob = torch.softmax(aggregate(onehot, 0), 0)
        self.last_mask = prob[1:][None]
        if is_mem_frame:
            self._add_memory(image, pix_feat, key, shrinkage, selection, taps)
        if taps is not None:
            taps.update(prob_padded=prob, is_mem_frame=is_mem_frame, update_sensory=update_sensory,
                        sensory_out=self.sensory,
                        mem_tokens=self.mem_key.shape[-1] + sum(b["key"].shape[-1] for b in self.buckets
                                                                if b["key"] is not None),
                        lt_tokens=self.lt_size)
        out = unpad(prob, pad)
        if resize:
            out = F.interpolate(out[None], size=(h0, w0), mode="bilinear", align_corners=False)[0]
        return out
