"""A small JEPA-style trainer: two augmented views, shared encoder + projector, a two-view loss [B17].

    h_i = f(view_i(x)),  z_i = g(h_i),  loss = criterion(z1, z2)

``criterion`` is any callable returning a scalar tensor or ``(tensor, parts)`` (e.g. ``RectifiedLpJEPALoss``).
Everything random (batch order, views) flows from one seed, so the same seed gives the same weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

__all__ = ["JEPAConfig", "train_jepa", "embed"]

Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class JEPAConfig:
    epochs: int = 60
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite positive number, got {self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be finite and >= 0, got {self.weight_decay}")


def train_jepa(encoder: nn.Module, projector: nn.Module, x: torch.Tensor, augment: Augment,
               criterion: Callable[[torch.Tensor, torch.Tensor], object], config: JEPAConfig = JEPAConfig(),
               ) -> list[dict[str, float]]:
    """Train ``encoder`` and ``projector`` in place with Adam on two views per image; returns per-epoch logs.

    ``augment(batch, generator) -> view`` must be a function of its generator only (no global RNG).
    Incomplete last batches are dropped (BatchNorm and the sliced loss want full batches).
    """
    if not isinstance(x, torch.Tensor) or x.ndim < 2 or x.shape[0] == 0:
        raise ValueError(f"x must be a non-empty tensor of shape (n, ...), got {getattr(x, 'shape', type(x))}")
    n = x.shape[0]
    bs = min(config.batch_size, n)
    if bs < 2:
        raise ValueError(f"need at least 2 samples per batch for BatchNorm, got n={n}")
    gen = torch.Generator().manual_seed(config.seed)
    params = list(encoder.parameters()) + list(projector.parameters())
    opt = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    encoder.train()
    projector.train()
    logs = []
    for epoch in range(config.epochs):
        perm = torch.randperm(n, generator=gen)
        tot: dict[str, float] = {}
        steps = n // bs
        for i in range(steps):
            xb = x[perm[i * bs:(i + 1) * bs]]
            z1 = projector(encoder(augment(xb, gen)))
            z2 = projector(encoder(augment(xb, gen)))
            out = criterion(z1, z2)
            loss, parts = out if isinstance(out, tuple) else (out, {})
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            for k, v in {"loss": float(loss.detach()), **parts}.items():
                tot[k] = tot.get(k, 0.0) + v / steps
        logs.append({"epoch": epoch, **tot})
    return logs


@torch.no_grad()
def embed(encoder: nn.Module, projector: nn.Module, x: torch.Tensor, batch_size: int = 1024,
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, z) for ``x`` in eval mode (BatchNorm running statistics)."""
    encoder.eval()
    projector.eval()
    hs, zs = [], []
    for i in range(0, x.shape[0], batch_size):
        h = encoder(x[i:i + batch_size])
        hs.append(h)
        zs.append(projector(h))
    return torch.cat(hs), torch.cat(zs)
