"""Teacher-student regression testbed for [A13] (our choice, following the spec's CPU-scale setup).

Inputs x in R^d with a power-law covariance, x_k ~ N(0, k^-alpha) rescaled so E|x|^2 = d; the teacher is a
random 2-layer tanh network; labels are centred and standardised. Students are 2-layer tanh MLPs

    f(x) = m_N * sum_j a_j tanh(w_j . x + b_j),   w_j ~ N(0, I/d), a_j ~ N(0, 1), b_j = 0

with m_N = 1/N (mean-field / muP: features move O(1) at any width) or 1/sqrt(N) (standard NTK
parametrisation: lazier as N grows). ``LinearisedMLP`` is a student's first-order Taylor model around its
initialisation (the eNTK frozen at init, same parameters and kernel rank: no feature learning).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from icml26.harness import validate as v

__all__ = ["TwoLayerMLP", "LinearisedMLP", "teacher_student_data"]


class TwoLayerMLP(nn.Module):
    """2-layer tanh MLP with an explicit output multiplier (``param="meanfield"``: 1/N, ``"ntk"``: 1/sqrt(N))."""

    def __init__(self, d_in: int, width: int, *, param: str = "meanfield", generator: torch.Generator | None = None
                 ) -> None:
        super().__init__()
        d_in = v.positive_int("d_in", d_in)
        width = v.positive_int("width", width)
        v.one_of("param", param, ("meanfield", "ntk"))
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {v.describe(generator)}")
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


class LinearisedMLP(nn.Module):
    """First-order Taylor model of a :class:`TwoLayerMLP` around its current weights theta_0:

        f_lin(x; theta_0 + delta) = f(x; theta_0) + J_theta0(x) delta

    written out for the 2-layer tanh net (phi = tanh(z), z = W0 x + b0):
    m * [phi . (a0 + da) + (a0 * phi') . (dW x + db)]. Its trainable parameters are the offsets delta (zero at
    the start), so its eNTK is the student's eNTK at theta_0 at every step: the kernel is frozen, feature
    learning removed, parameter count and kernel rank unchanged."""

    def __init__(self, model: TwoLayerMLP) -> None:
        super().__init__()
        if not isinstance(model, TwoLayerMLP):
            raise TypeError(f"model must be a TwoLayerMLP, got {type(model).__name__}")
        self.register_buffer("W0", model.W.detach().clone())
        self.register_buffer("b0", model.b.detach().clone())
        self.register_buffer("a0", model.a.detach().clone())
        self.mult = model.mult
        self.dW = nn.Parameter(torch.zeros_like(self.W0))
        self.db = nn.Parameter(torch.zeros_like(self.b0))
        self.da = nn.Parameter(torch.zeros_like(self.a0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        phi = torch.tanh(x @ self.W0.T + self.b0)
        dphi = 1.0 - phi ** 2
        out = phi @ (self.a0 + self.da) + (dphi * (x @ self.dW.T + self.db)) @ self.a0
        return (out * self.mult).unsqueeze(-1)


def teacher_student_data(n_train: int, n_test: int, *, d: int = 32, alpha: float = 1.2, teacher_width: int = 64,
                         teacher_gain: float = 1.5, seed: int = 0
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(X_train, Y_train, X_test, Y_test); Y of shape (n, 1), centred and scaled to unit variance (train stats)."""
    n_train = v.positive_int("n_train", n_train, minimum=2)
    n_test = v.non_negative_int("n_test", n_test)
    d = v.positive_int("d", d)
    alpha = v.non_negative("alpha", alpha)
    teacher_width = v.positive_int("teacher_width", teacher_width)
    teacher_gain = v.positive("teacher_gain", teacher_gain)
    seed = v.non_negative_int("seed", seed)
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
