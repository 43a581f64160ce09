"""Preference steering by supervised fine-tuning on chosen conflict cases [B03].

Boundary cases sit near the balance point, |dU - b*| <= eps: there the two modalities are evenly matched and
the model's choice is uncertain. Easy cases lie far on one side, e.g. vision-dominant cases with the largest
dU - b* (the text much less certain than the image), where the model already follows the image. The paper's
finding: at an equal number of examples, SFT toward "follow vision" on boundary cases generalises (moves b*,
raises held-out vision following, suppresses oscillation), SFT on easy cases does not.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .following import _vector, select_boundary_cases


def nearest_boundary_cases(delta_u: Any, b: float, n: int) -> np.ndarray:
    """The ``n`` cases closest to the balance point: :func:`select_boundary_cases` with eps = the n-th smallest
    |dU - b|, ordered by distance (ties beyond ``n`` dropped in index order)."""
    du = _vector(delta_u, "delta_u")
    if not isinstance(n, int) or not 1 <= n <= len(du):
        raise ValueError(f"n must be an integer in 1..{len(du)}, got {n!r}")
    dist = np.abs(du - b)
    eps = float(np.sort(dist)[n - 1])
    idx = select_boundary_cases(du, b, eps)
    return idx[np.argsort(dist[idx], kind="stable")][:n]


def easy_cases(delta_u: Any, b: float, n: int, dominant: str = "b") -> np.ndarray:
    """The ``n`` cases farthest from the balance point on one side: ``dominant="b"`` takes the largest dU - b
    (modality a much less certain, so b dominates), ``"a"`` the smallest."""
    du = _vector(delta_u, "delta_u")
    if not isinstance(n, int) or not 1 <= n <= len(du):
        raise ValueError(f"n must be an integer in 1..{len(du)}, got {n!r}")
    if dominant not in ("a", "b"):
        raise ValueError(f"dominant must be 'a' or 'b', got {dominant!r}")
    order = np.argsort(du - b, kind="stable")
    return order[::-1][:n] if dominant == "b" else order[:n]


def sft_steer(model: nn.Module, inputs: tuple[torch.Tensor, ...], targets: torch.Tensor, steps: int = 40,
              lr: float = 1e-3, batch: int = 32, seed: int = 0) -> nn.Module:
    """A fine-tuned copy of ``model``: ``steps`` AdamW steps of cross-entropy(model(*inputs[i]), targets[i]) on
    mini-batches of the given examples; the original model is not modified."""
    n = len(targets)
    if any(len(x) != n for x in inputs):
        raise ValueError(f"every input needs one row per target ({n}), got {[len(x) for x in inputs]}")
    if not isinstance(steps, int) or steps < 1 or lr <= 0 or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"need integer steps >= 1, batch >= 1 and lr > 0, got steps={steps}, batch={batch}, lr={lr}")
    tuned = copy.deepcopy(model)
    tuned.train()
    opt = torch.optim.AdamW(tuned.parameters(), lr=lr, weight_decay=0.0, foreach=True)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(n, (min(batch, n),), generator=gen)
        loss = F.cross_entropy(tuned(*(x[idx] for x in inputs)), targets[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return tuned.eval()


__all__ = ["nearest_boundary_cases", "easy_cases", "sft_steer"]
