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

from icml26.harness import validate as check

from .following import _vector, select_boundary_cases


def _count(n: Any, size: int) -> int:
    n = check.positive_int("n", n)
    if n > size:
        raise ValueError(f"n must be at most the number of cases ({size}), got {n}")
    return n


def nearest_boundary_cases(delta_u: Any, b: float, n: int) -> np.ndarray:
    """The ``n`` cases closest to the balance point: :func:`select_boundary_cases` with eps = the n-th smallest
    |dU - b|, ordered by distance (ties beyond ``n`` dropped in index order)."""
    b = check.finite_number("b", b)
    du = _vector(delta_u, "delta_u")
    n = _count(n, len(du))
    dist = np.abs(du - b)
    eps = float(np.sort(dist)[n - 1])
    idx = select_boundary_cases(du, b, eps)
    return idx[np.argsort(dist[idx], kind="stable")][:n]


def easy_cases(delta_u: Any, b: float, n: int, dominant: str = "b") -> np.ndarray:
    """The ``n`` cases farthest from the balance point on one side: ``dominant="b"`` takes the largest dU - b
    (modality a much less certain, so b dominates), ``"a"`` the smallest."""
    b = check.finite_number("b", b)
    check.one_of("dominant", dominant, ("a", "b"))
    du = _vector(delta_u, "delta_u")
    n = _count(n, len(du))
    order = np.argsort(du - b, kind="stable")
    return order[::-1][:n] if dominant == "b" else order[:n]


def sft_steer(model: nn.Module, inputs: tuple[torch.Tensor, ...], targets: torch.Tensor, steps: int = 40,
              lr: float = 1e-3, batch: int = 32, seed: int = 0) -> nn.Module:
    """A fine-tuned copy of ``model``: ``steps`` AdamW steps of cross-entropy(model(*inputs[i]), targets[i]) on
    mini-batches of the given examples; the original model is not modified."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    steps, batch = check.positive_int("steps", steps), check.positive_int("batch", batch)
    lr, seed = check.positive("lr", lr), check.non_negative_int("seed", seed)
    if not isinstance(inputs, (tuple, list)) or not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TypeError(f"inputs must be a non-empty tuple of tensors (the model's positional inputs), got "
                        f"{check.describe(inputs)}")
    if not isinstance(targets, torch.Tensor) or targets.dim() != 1 or targets.is_floating_point():
        raise TypeError(f"targets must be a 1-D integer tensor of class labels, got {check.describe(targets)}"
                        + (f" of dtype {targets.dtype}" if isinstance(targets, torch.Tensor) else ""))
    n = len(check.non_empty("targets", targets))
    if int(targets.min()) < 0:
        raise ValueError(f"targets must be class labels >= 0, got {int(targets.min())}")
    if any(len(x) != n for x in inputs):
        raise ValueError(f"every input needs one row per target ({n}), got {[len(x) for x in inputs]}")
    for i, x in enumerate(inputs):
        check.finite(f"inputs[{i}]", x)
    tuned = copy.deepcopy(model)
    with torch.no_grad():
        n_classes = tuned.eval()(*(x[:1] for x in inputs)).shape[-1]
    check.indices("targets", targets, n_classes)
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
