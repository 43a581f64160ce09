"""scikit-learn's bundled 8x8 digits as torch tensors, shuffled splits and label noise (no download)."""

from __future__ import annotations

import torch
from sklearn.datasets import load_digits


def digits_tensors() -> tuple[torch.Tensor, torch.Tensor]:
    """``X`` (1797, 64) float32 in [0, 1] and ``y`` (1797,) int64 in 0..9."""
    X, y = load_digits(return_X_y=True)
    return torch.tensor(X / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.long)


def shuffled_indices(n: int, seed: int) -> torch.Tensor:
    """A seeded permutation of ``range(n)`` (split it with slicing or ``tensor_split``)."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


def flip_labels(y: torch.Tensor, fraction: float, n_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric label noise: a ``fraction`` of labels moves to a uniformly chosen *different* class.

    Returns the noisy labels and the boolean mask of flipped samples.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    g = torch.Generator().manual_seed(seed)
    flip = torch.randperm(len(y), generator=g)[: int(round(fraction * len(y)))]
    noisy = y.clone()
    noisy[flip] = (noisy[flip] + torch.randint(1, n_classes, (len(flip),), generator=g)) % n_classes
    mask = torch.zeros(len(y), dtype=torch.bool)
    mask[flip] = True
    return noisy, mask
