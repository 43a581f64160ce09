"""2-Wasserstein distances used to score the samplers [A03].

- Gaussians (Bures): W2^2 = |m1 - m2|^2 + tr(S1 + S2 - 2 (S1^{1/2} S2 S1^{1/2})^{1/2}).
- 1-D samples vs an exact law: W2^2 = int_0^1 (F_n^{-1}(u) - F^{-1}(u))^2 du, estimated with the sorted samples
  x_(i) against the exact quantiles F^{-1}((i + 1/2) / n) (midpoint rule).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["w2_gaussian", "w2_1d"]


def _psd_sqrt(S: np.ndarray) -> np.ndarray:
    lam, V = np.linalg.eigh(0.5 * (S + S.T))
    return (V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T


def _check_cov(name: str, S: np.ndarray, d: int) -> np.ndarray:
    S = np.asarray(S, dtype=float)
    if S.shape != (d, d):
        raise ValueError(f"{name} must have shape ({d}, {d}) to match the mean, got {S.shape}")
    if not np.all(np.isfinite(S)):
        raise ValueError(f"{name} contains NaN or inf")
    scale = max(1.0, float(np.abs(S).max()))
    if not np.allclose(S, S.T, atol=1e-8 * scale):
        raise ValueError(f"{name} must be symmetric")
    if np.linalg.eigvalsh(0.5 * (S + S.T))[0] < -1e-8 * scale:
        raise ValueError(f"{name} must be positive semi-definite")
    return S


def w2_gaussian(m1: np.ndarray, S1: np.ndarray, m2: np.ndarray, S2: np.ndarray) -> float:
    """Closed-form W2 between N(m1, S1) and N(m2, S2) (Bures-Wasserstein)."""
    m1, m2 = np.atleast_1d(np.asarray(m1, dtype=float)), np.atleast_1d(np.asarray(m2, dtype=float))
    if m1.ndim != 1 or m1.shape != m2.shape:
        raise ValueError(f"means must be vectors of the same shape, got {m1.shape} and {m2.shape}")
    if not (np.all(np.isfinite(m1)) and np.all(np.isfinite(m2))):
        raise ValueError("means contain NaN or inf")
    d = m1.shape[0]
    S1, S2 = _check_cov("S1", np.atleast_2d(S1), d), _check_cov("S2", np.atleast_2d(S2), d)
    r1 = _psd_sqrt(S1)
    cross = np.sqrt(np.clip(np.linalg.eigvalsh(r1 @ S2 @ r1), 0.0, None)).sum()
    w2sq = float(np.sum((m1 - m2) ** 2) + np.trace(S1) + np.trace(S2) - 2.0 * cross)
    return float(np.sqrt(max(w2sq, 0.0)))


def w2_1d(samples: np.ndarray, ppf: Callable[[np.ndarray], np.ndarray]) -> float:
    """W2 between the empirical law of 1-D ``samples`` and the law with quantile function ``ppf``.

    Monte Carlo noise: even exact samples give W2 ~ n^{-1/2} (up to logs); compare with that floor.
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"samples must be a non-empty 1-D array, got shape {x.shape}; pool coordinates with .ravel()")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples contain NaN or inf (a chain diverged?); use a smaller step size")
    if not callable(ppf):
        raise TypeError(f"ppf must be callable u -> quantiles, got {type(ppf).__name__}")
    n = x.size
    q = np.asarray(ppf((np.arange(n) + 0.5) / n), dtype=float)
    if q.shape != (n,) or not np.all(np.isfinite(q)):
        raise ValueError(f"ppf must map the {n} midpoints (i + 1/2)/n to {n} finite quantiles, got "
                         f"shape {q.shape}{'' if q.shape != (n,) else ' with NaN or inf'}")
    return float(np.sqrt(np.mean((np.sort(x) - q) ** 2)))
