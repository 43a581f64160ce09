"""Spectral position of the empirical NTK [A13].

Nikolaou, Scheunemann, Krippendorf, Tovey, Holm, "Spectral Reach: Understanding Neural Scaling as Progress
into the Spectral Tail" (arXiv 2605.31244). The paper's exact definition was not available; this is our
formalisation (README, "Reconstructed").

Under gradient flow on L = |r|^2 / (2n) with r = f(X) - Y, the loss falls at

    -dL/dt = n^-2 r^T K r,        K = J J^T (the eNTK, size nC x nC)

In K's eigenbasis (lambda_i, u_i) the residual mass is p_i = (u_i^T r)^2 / |r|^2 and the share of the loss
reduction is pi_i = lambda_i p_i / sum_j lambda_j p_j. The spectral position is the residual-weighted mean
eigenvalue, normalised:

    SP = (r^T K r / |r|^2) / (Tr K / nC)   = E_p[lambda] / mean(lambda)       (normalize="trace")
    SP = (r^T K r / |r|^2) / lambda_max                                        (normalize="lmax")

A low SP means the residual lives in the spectral tail. It is scalable: r^T K r = |J^T r|^2 = n^2 |grad L|^2
from one backward pass, and Tr K = sum_i |grad f(x_i)|^2 from per-sample gradients (or Hutchinson probes);
K itself is never formed. For cross-entropy r is dl/df = softmax(f) - onehot(y).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import nn

from icml26.harness import validate as v
from icml26.testbeds.ntk import NTKOperator, empirical_ntk, ntk_trace, topk_eigh, trainable_parameters

__all__ = ["residual", "spectral_position", "spectral_decomposition", "SpectralDecomposition",
           "SpectralPositionTracker"]

Loss = Literal["mse", "ce"]
Normalize = Literal["trace", "lmax"] | None


# helper functions

_STOCHASTIC = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)


def _check(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, loss: str) -> None:
    """Arguments of every entry point: a deterministic model with trainable parameters, finite tensors X (n, ...)
    and Y with n rows; mse targets with one value per model output, ce targets integer labels in [0, C)."""
    trainable_parameters(model)
    v.one_of("loss", loss, ("mse", "ce"))
    for name, t in (("X", X), ("Y", Y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {v.describe(t)}")
        if t.ndim == 0:
            raise ValueError(f"{name} must have a leading batch dimension, got a 0-d tensor")
        v.non_empty(name, t)
        v.finite(name, t)
    v.same_length(X=X, Y=Y)
    busy = [type(m).__name__ for m in model.modules() if isinstance(m, _STOCHASTIC) and m.training]
    if busy:
        raise ValueError(f"model has {', '.join(sorted(set(busy)))} in training mode, so its outputs (and eNTK) are "
                         "random or batch-dependent; call model.eval() before measuring the spectral position")
    p = next(iter(trainable_parameters(model).values()))
    with torch.no_grad():
        out = model(X[:1].to(p.dtype))
    n, c = X.shape[0], out[0].numel()
    if loss == "mse":
        if Y.numel() != n * c:
            raise ValueError(f"Y must hold one target per model output for loss='mse': n x C = {n} x {c} = {n * c} "
                             f"values, got {v.describe(Y)} ({Y.numel()} values); for integer class labels use "
                             "loss='ce'")
    else:
        if out.ndim != 2 or Y.ndim != 1:
            raise ValueError(f"loss='ce' needs logits of shape (n, C) and labels of shape (n,), got model output "
                             f"{tuple(out.shape[1:])} per input and {v.describe(Y)}")
        v.indices("Y", Y, c)


def residual(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, loss: Loss = "mse") -> tuple[torch.Tensor, float]:
    """The loss gradient in function space r = dl/df (flattened, sample-major) and the mean loss.

    mse: r = f - Y, L = |r|^2 / (2n). ce: r = softmax(f) - onehot(Y) with integer labels Y, L = mean CE.
    """
    _check(model, X, Y, loss)
    return _residual(model, X, Y, loss)


def _residual(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, loss: str) -> tuple[torch.Tensor, float]:
    p = next(iter(trainable_parameters(model).values()))
    with torch.no_grad():
        out = model(X.to(p.dtype))
    n = X.shape[0]
    if loss == "mse":
        r = out - Y.to(out.dtype).reshape(out.shape)
        return r.reshape(-1), float((r ** 2).sum() / (2 * n))
    r = torch.softmax(out, dim=1) - torch.nn.functional.one_hot(Y.long(), out.shape[1]).to(out.dtype)
    return r.reshape(-1), float(torch.nn.functional.cross_entropy(out, Y.long()))


# main API

@dataclass
class SpectralDecomposition:
    """Exact spectral split of the loss reduction (eigenvalues descending)."""

    eigvals: np.ndarray        # lambda_i of K (nC x nC)
    residual_mass: np.ndarray  # p_i = (u_i^T r)^2 / |r|^2
    loss_share: np.ndarray     # pi_i = lambda_i p_i / sum lambda p
    position: float            # E_p[lambda] / mean(lambda)  (normalize="trace")
    log_position: float        # E_pi[log lambda] - mean(log lambda over lambda > 0)
    quantile: float            # sum_i pi_i rank_i / N: 0 = top eigenmode, 1 = bottom

    def __post_init__(self) -> None:
        n = len(v.ndim("eigvals", v.finite("eigvals", self.eigvals), 1))
        for name in ("residual_mass", "loss_share"):
            v.shape(name, getattr(self, name), (n,))
        for name in ("position", "log_position", "quantile"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a real number, got {v.describe(value)}")

    @property
    def rank(self) -> int:
        """Numerical rank of K: eigenvalues above 1e-10 x the largest."""
        return int((self.eigvals > self.eigvals[0] * 1e-10).sum()) if len(self.eigvals) else 0

    @property
    def null_mass(self) -> float:
        """Share of the residual in K's numerical null space (eigenvalues <= 1e-10 x the largest): the part
        gradient descent cannot reduce."""
        return float(self.residual_mass[self.rank:].sum())


def spectral_decomposition(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, *, loss: Loss = "mse"
                           ) -> SpectralDecomposition:
    """Exact decomposition from the dense eNTK (memory nC x P: small models)."""
    r, _ = residual(model, X, Y, loss)
    K = empirical_ntk(model, X, trace_outputs=False).double()
    lam, U = torch.linalg.eigh(K)
    lam, U = lam.flip(0).clamp_min(0.0).numpy(), U.flip(1).numpy()
    rr = r.double().numpy()
    p = (U.T @ rr) ** 2 / max(float(rr @ rr), 1e-300)
    w = lam * p
    pi = w / w.sum() if w.sum() > 0 else np.full_like(w, np.nan)
    pos = float(w.sum() / lam.mean()) if lam.mean() > 0 else float("nan")
    tiny = lam > lam[0] * 1e-12
    logpos = float((pi[tiny] * np.log(lam[tiny])).sum() - np.log(lam[tiny]).mean())
    quant = float((pi * np.arange(len(lam))).sum() / max(len(lam) - 1, 1))
    return SpectralDecomposition(lam, p, pi, pos, logpos, quant)


def spectral_position(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, *, loss: Loss = "mse",
                      method: Literal["exact", "scalable"] = "scalable", normalize: Normalize = "trace",
                      trace: Literal["exact", "hutchinson"] = "exact", n_probes: int = 32, seed: int = 0) -> float:
    """Spectral position SP = (r^T K r / |r|^2) / scale, scale = Tr K / nC ("trace"), lambda_max ("lmax")
    or 1 (None). ``method="scalable"`` never forms K: one VJP for r^T K r, per-sample gradients (``trace=
    "exact"``) or Hutchinson probes for Tr K, Lanczos for lambda_max. ``"exact"`` uses the dense eNTK."""
    v.one_of("method", method, ("exact", "scalable"))
    v.one_of("normalize", normalize, ("trace", "lmax", None))
    v.one_of("trace", trace, ("exact", "hutchinson"))
    v.positive_int("n_probes", n_probes)
    v.non_negative_int("seed", seed)
    r, _ = residual(model, X, Y, loss)
    rr = float(r.double() @ r.double())
    if rr == 0.0:
        return float("nan")   # zero residual: no loss reduction to locate
    if method == "exact":
        K = empirical_ntk(model, X, trace_outputs=False).double()
        quad = float(r.double() @ K @ r.double())
        scale = {"trace": float(K.trace()) / K.shape[0], "lmax": float(torch.linalg.eigvalsh(K)[-1]), None: 1.0}
        return quad / rr / scale[normalize]
    op = NTKOperator(model, X)
    quad = op.quad(r)
    if normalize == "trace":
        scale = ntk_trace(model, X, method=trace, n_probes=n_probes, seed=seed) / op.shape[0]
    elif normalize == "lmax":
        scale = float(topk_eigh(op, 1, tol=1e-8, seed=seed)[0][0])
    else:
        scale = 1.0
    return quad / rr / scale


@dataclass
class SpectralPositionTracker:
    """Callback recording spectral position, loss and gradient size during a user's training loop.

    Call ``tracker(step)`` after each optimiser step (it acts every ``every`` steps, and at step 0):

        tracker = SpectralPositionTracker(model, X, Y, every=50)
        for step in range(T): ...; opt.step(); tracker(step)
        tracker.reach()     # spectral reach = min SP over the run

    Each record: step, sp, loss, grad_sq = |grad_theta L|^2 = |J^T r|^2 / n^2, amplification = grad_sq / L.
    """

    model: nn.Module
    X: torch.Tensor
    Y: torch.Tensor
    every: int = 50
    loss: Loss = "mse"
    normalize: Normalize = "trace"
    history: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.every = v.positive_int("every", self.every)
        v.one_of("normalize", self.normalize, ("trace", "lmax", None))
        _check(self.model, self.X, self.Y, self.loss)
        if not isinstance(self.history, list):
            raise TypeError(f"history must be a list of records, got {v.describe(self.history)}")

    def record(self, step: int) -> dict[str, float]:
        """Measure now and append the record (whatever ``every`` says)."""
        step = v.non_negative_int("step", step)
        r, L = residual(self.model, self.X, self.Y, self.loss)
        op = NTKOperator(self.model, self.X)
        quad = op.quad(r)
        rr = float(r.double() @ r.double())
        scale = {"trace": lambda: ntk_trace(self.model, self.X) / op.shape[0],
                 "lmax": lambda: float(topk_eigh(op, 1, tol=1e-8)[0][0]), None: lambda: 1.0}[self.normalize]()
        n = self.X.shape[0]
        rec = {"step": float(step), "sp": quad / rr / scale if rr > 0 else float("nan"), "loss": L,
               "grad_sq": quad / n ** 2, "amplification": quad / n ** 2 / L if L > 0 else float("nan")}
        self.history.append(rec)
        return rec

    def __call__(self, step: int) -> dict[str, float] | None:
        step = v.non_negative_int("step", step)
        return self.record(step) if step % self.every == 0 else None

    def column(self, name: str) -> np.ndarray:
        """One field over the records: ``step``, ``sp``, ``loss``, ``grad_sq`` or ``amplification``."""
        v.one_of("name", name, ("step", "sp", "loss", "grad_sq", "amplification"))
        return np.array([h[name] for h in self.history])

    def reach(self) -> float:
        """Spectral reach: the lowest spectral position seen in the run."""
        if not self.history:
            raise ValueError("no records yet: call the tracker during training first")
        return float(np.nanmin(self.column("sp")))
