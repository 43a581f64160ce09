"""A small MLP-Mixer (Tolstikhin et al. 2021) with one ``ScheduledDropout`` rate per block [A06].

Image (H x W) -> non-overlapping P x P patches -> tokens of dimension ``dim``. Each block:
    x = x + TokenMLP(LN(x)^T)^T,   x = x + ChannelMLP(LN(x)),   MLP(z) = W2 Drop_p(GELU(W1 z))
with the block's dropout rate p_l in both MLPs. Head: mean over tokens -> Linear.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from icml26.harness import validate as v

from .schedules import ScheduledDropout, _check_rates

__all__ = ["MixerBlock", "make_mixer"]


class _MLP(nn.Sequential):
    def __init__(self, d: int, hidden: int, p: float) -> None:
        super().__init__(nn.Linear(d, hidden), nn.GELU(), ScheduledDropout(p), nn.Linear(hidden, d))


class MixerBlock(nn.Module):
    def __init__(self, n_tokens: int, dim: int, p: float, token_hidden: int, channel_hidden: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token = _MLP(n_tokens, token_hidden, p)
        self.channel = _MLP(dim, channel_hidden, p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:           # x: (B, T, D)
        x = x + self.token(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel(self.ln2(x))


class _Mixer(nn.Module):
    def __init__(self, side: int, patch: int, dim: int, n_classes: int, rates: Sequence[float]) -> None:
        super().__init__()
        self.side, self.patch = side, patch
        n_tokens = (side // patch) ** 2
        self.embed = nn.Linear(patch * patch, dim)
        self.blocks = nn.Sequential(*[MixerBlock(n_tokens, dim, p, 2 * n_tokens, 2 * dim) for p in rates])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:           # x: (B, side * side)
        B, s, P = x.shape[0], self.side, self.patch
        t = x.reshape(B, s // P, P, s // P, P).permute(0, 1, 3, 2, 4).reshape(B, (s // P) ** 2, P * P)
        return self.head(self.ln(self.blocks(self.embed(t))).mean(1))


def make_mixer(dropout_profile: Sequence[float], *, side: int = 8, patch: int = 2, dim: int = 64,
               n_classes: int = 10) -> nn.Module:
    """MLP-Mixer for flattened side x side images, one block per entry of ``dropout_profile``."""
    for name, val in (("side", side), ("patch", patch), ("dim", dim), ("n_classes", n_classes)):
        v.positive_int(name, val)
    if side % patch:
        raise ValueError(f"patch ({patch}) must divide side ({side})")
    rates = _check_rates("dropout_profile", dropout_profile, "block")
    return _Mixer(side, patch, dim, n_classes, rates)
