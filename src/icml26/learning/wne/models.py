"""Denoising backbones for [B16]: DnCNN in three flavours and a tiny denoising transformer.

* ``DnCNN(mode="ordinary")``: conv + bias + ReLU, zero padding; predicts the noise, f(y) = y - body(y).
* ``DnCNN(mode="bias_free")``: the same without biases (Mohan et al. 2020): body(a*y) = a*body(y) for
  a > 0, so f is scale equivariant (SE), not shift equivariant.
* ``DnCNN(mode="norm_equiv")``: ``AffineConv2d`` + ``SortPool`` (Herbreteau et al. 2023); the body is NE,
  and the residual is the convex mix f(y) = alpha*y + (1 - alpha)*body(y), so f is NE by construction.
* ``TinyDenoisingTransformer``: 4x4 patch tokens, pre-LayerNorm blocks with softmax self-attention and an
  MLP. LayerNorm and softmax are not NE-compatible layers; wrapped in ``NormEquivariantWrapper`` the whole
  model is NE all the same.

With ``residual=False`` a model returns its body's output (a noise estimate for ordinary / bias_free, an
image estimate for norm_equiv); that is the form to hand to ``NormEquivariantWrapper(pred_mode="residual")``.
Note ``NormEquivariantWrapper(DnCNN(residual=True), "direct")`` is the same function: sigma*(y~ - g(y~)) + mu
= y - sigma*g(y~).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .blocks import AffineConv2d, AffineResidual, SortPool, check_tensor, input_checked

DnCNNMode = Literal["ordinary", "bias_free", "norm_equiv"]

# helper functions


def _positive_int(v: object, name: str, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
    return v


def _check_nchw(x: object, channels: int) -> Tensor:
    check_tensor(x, "y", min_ndim=4, channels=channels)
    if x.ndim != 4:
        raise ValueError(f"y must be shaped (N, {channels}, H, W), got {tuple(x.shape)}")
    return x


# main classes


class DnCNN(nn.Module):
    """DnCNN without batch norm (depth conv layers, ``width`` features) in one of three modes [B16 baselines].

    Args:
        channels: image channels (1 grey, 3 colour).
        depth: number of conv layers (>= 2); the paper's DnCNN has 17-20, our CPU runs use 6.
        width: hidden features (even for ``norm_equiv``, which pairs channels in SortPool).
        mode: ``"ordinary"`` | ``"bias_free"`` | ``"norm_equiv"``.
        residual: if True return the denoised image; if False return the body's raw output.
    """

    def __init__(self, channels: int = 1, depth: int = 6, width: int = 24, *, mode: DnCNNMode = "ordinary",
                 residual: bool = True) -> None:
        super().__init__()
        self.channels = _positive_int(channels, "channels")
        self.depth = _positive_int(depth, "depth", 2)
        self.width = _positive_int(width, "width")
        if mode not in ("ordinary", "bias_free", "norm_equiv"):
            raise ValueError(f"mode must be 'ordinary', 'bias_free' or 'norm_equiv', got {mode!r}")
        if mode == "norm_equiv" and width % 2:
            raise ValueError(f"norm_equiv mode needs an even width for SortPool, got {width}")
        self.mode, self.residual = mode, bool(residual)

        sizes = [channels] + [width] * (depth - 1) + [channels]
        layers: list[nn.Module] = []
        for i, (c_in, c_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            if mode == "norm_equiv":
                layers.append(AffineConv2d(c_in, c_out, 3))
            else:
                conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=mode == "ordinary")
                nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
                if conv.bias is not None:
                    nn.init.zeros_(conv.bias)
                layers.append(conv)
            if i < depth - 1:
                layers.append(SortPool() if mode == "norm_equiv" else nn.ReLU())
        self.body = nn.Sequential(*layers)
        self.skip = AffineResidual() if mode == "norm_equiv" and residual else None

    def forward(self, y: Tensor) -> Tensor:
        """Denoise ``y`` (N, C, H, W). The input is scanned for NaN/inf once; the weights are not (a model whose
        weights went non-finite returns NaN without an error), and the NE blocks inside do not scan again."""
        _check_nchw(y, self.channels)
        if torch.compiler.is_compiling():
            return self._forward(y)
        with input_checked():
            return self._forward(y)

    def _forward(self, y: Tensor) -> Tensor:
        out = self.body(y)
        if not self.residual:
            return out
        return self.skip(y, out) if self.skip is not None else y - out


def make_dncnn(depth: int = 6, width: int = 24, mode: DnCNNMode = "ordinary", *, channels: int = 1,
               residual: bool = True) -> DnCNN:
    """``DnCNN(channels, depth, width, mode=mode, residual=residual)`` [B16]."""
    return DnCNN(channels, depth, width, mode=mode, residual=residual)


class _Block(nn.Module):
    """Pre-LN transformer block: x + Attn(LN(x)), then x + MLP(LN(x)); softmax attention over all tokens."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v)  # softmax(q k^T / sqrt(d_h)) v
        x = x + self.proj(att.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class TinyDenoisingTransformer(nn.Module):
    """A small ViT-style denoiser over ``patch`` x ``patch`` tokens [B16's "any backbone" case].

    patch embedding (strided conv) -> + depthwise-conv position encoding -> ``depth`` pre-LN blocks with
    softmax attention -> LayerNorm -> linear to patch pixels -> pixel shuffle. With ``residual=True`` it
    predicts the noise and returns y - out. H and W must be multiples of ``patch``.
    """

    def __init__(self, channels: int = 1, *, patch: int = 4, dim: int = 32, depth: int = 2, heads: int = 2,
                 mlp_ratio: int = 2, residual: bool = True) -> None:
        super().__init__()
        self.channels = _positive_int(channels, "channels")
        self.patch = _positive_int(patch, "patch")
        _positive_int(dim, "dim")
        _positive_int(depth, "depth")
        _positive_int(heads, "heads")
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.residual = bool(residual)
        self.embed = nn.Conv2d(channels, dim, patch, stride=patch)
        self.pos = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)  # conditional position encoding
        self.blocks = nn.ModuleList(_Block(dim, heads, _positive_int(mlp_ratio, "mlp_ratio")) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, channels * patch * patch)

    def forward(self, y: Tensor) -> Tensor:
        _check_nchw(y, self.channels)
        h, w = y.shape[-2] // self.patch, y.shape[-1] // self.patch
        if h * self.patch != y.shape[-2] or w * self.patch != y.shape[-1]:
            raise ValueError(f"H and W must be multiples of patch={self.patch}, got {tuple(y.shape[-2:])}; "
                             "crop or pad the image")
        t = self.embed(y)
        t = (t + self.pos(t)).flatten(2).transpose(1, 2)  # (B, h*w, dim)
        for block in self.blocks:
            t = block(t)
        out = self.head(self.norm(t)).transpose(1, 2).reshape(y.shape[0], -1, h, w)
        out = F.pixel_shuffle(out, self.patch)
        return y - out if self.residual else out
