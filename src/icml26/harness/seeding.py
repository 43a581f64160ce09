"""Seeds everywhere: one call makes a run deterministic."""

from __future__ import annotations

import random

import numpy as np


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch (if installed); return a fresh NumPy ``Generator`` for ``seed``."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(int(seed))
    np.random.seed(int(seed) % 2**32)
    try:
        import torch

        torch.manual_seed(int(seed))
    except ImportError:  # pragma: no cover
        pass
    return np.random.default_rng(int(seed))
