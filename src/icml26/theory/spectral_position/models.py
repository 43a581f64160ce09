"""Teacher-student regression testbed for [A13] (our choice, following the spec's CPU-scale setup).

Inputs x in R^d with a power-law covariance, x_k ~ N(0, k^-alpha) rescaled so E|x|^2 = d; the teacher is a
random 2-layer tanh network; labels are centred and standardised. Students are 2-layer tanh MLPs

    f(x) = m_N * sum_j a_j tanh(w_j . x + b_j),   w_j ~ N(0, I/d), a_j ~ N(0, 1), b_j = 0

with m_N = 1/N (mean-field / muP: features move O(1) at any width) or 1/sqrt(N) (standard NTK
parametrisation: lazier as N grows).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["TwoLayerMLP", "teacher_student_data"]


class TwoLayerMLP(nn.Module):
    """2-layer tanh MLP with an explicit output multiplier (``param="meanfield"``: 1/N, ``"ntk"``: 1/sqrt(N))."""

    def __init__(self, d_in: int, width: int, *, param: str = "meanfield", generator: torch.Generator | None = None
                 ) -> None:
        super().__init__()
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive integer, got {width!r}")
        if not isinstance(d_in, int) or d_in < 1:
            raise ValueError(f"d_in must be a positive integer, got {d_in!r}")
        if param not in ("meanfield", "ntk"):
            raise ValueError(f"unknown param {param!r}; use 'meanfield' or 'ntk'")
        self.W = nn.Parameter(torch.randn(width, d_in, generator=generator) / math.sqrt(d_in))
        self.b = nn.Parameter(torch.zeros(width))
        self.a = nn.Parameter(torch.randn(width, generator=generator))
        self.mult = 1.0 / width if param == "meanfield" else 1.0 / math.sqrt(width)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.W.T + self.b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.features(x) @ self.a * self.mult).unsqueeze(-1)

    def freeze_features(self) -> "TwoLayerMLP":
        """Train the read-out a only (random features, no feature learning)."""
        self.W.requires_grad_(False)
        self.b.requires_grad_(False)
        return self


def teacher_student_data(n_train: int, n_test: int, *, d: int = 32, alpha: float = 1.2, teacher_width: int = 64,
                         teacher_gain: float = 1.5, seed: int = 0
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(X_train, Y_train, X_test, Y_test); Y of shape (n, 1), centred and scaled to unit variance (train stats)."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.arange(1, d + 1, dtype=torch.float32) ** (-alpha / 2)
    scale = scale / scale.pow(2).mean().sqrt()
    X = torch.randn(n_train + n_test, d, generator=g) * scale
    W = torch.randn(teacher_width, d, generator=g) * teacher_gain / math.sqrt(d)
    a = torch.randn(teacher_width, generator=g) / math.sqrt(teacher_width)
    Y = (torch.tanh(X @ W.T) @ a).unsqueeze(-1)
    mu, sd = Y[:n_train].mean(), Y[:n_train].std()
    Y = (Y - mu) / sd
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]
