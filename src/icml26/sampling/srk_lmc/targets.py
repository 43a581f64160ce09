"""Targets with exact answers for checking the samplers [A03].

- :class:`Gaussian`: U(x) = 1/2 (x - mu)^T H (x - mu). The chains are linear-Gaussian, so their law after k
  steps is exact. Both SRK schemes reduce to the same map

      x+ - mu = A (x - mu) + sqrt(2) (dW - H dZ),   A = I - hH + h^2 H^2 / 2,   Q = 2 (hI - h^2 H + h^3 H^2 / 3),

  and ULA to A = I - hH, Q = 2hI. Law recursion: m+ = mu + A (m - mu), S+ = A S A^T + Q. Per eigenvalue lam of H
  (z = lam h) the stationary variance is v = q / (1 - alpha^2), i.e.
  SRK: v = 2h (1 - z + z^2/3) / (1 - (1 - z + z^2/2)^2)  (lam v = 1 - z^2/6 + O(z^3));
  ULA: v = 1 / (lam (1 - z/2)).
- :class:`SymmetricMixture`: U(x) = sum_j x_j^2/2 - log cosh(a x_j), i.e. pi = product of 1-D mixtures
  1/2 N(a, 1) + 1/2 N(-a, 1). Non-log-concave for a > 1 (U'' = 1 - a^2 sech^2(ax) >= 1 - a^2) with a globally
  Lipschitz gradient. Exact cdf F(x) = (Phi(x - a) + Phi(x + a)) / 2 and ppf (bracketed bisection).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from icml26.harness import validate as v

from .samplers import _as_rng, _check_h, _check_method

__all__ = ["Gaussian", "SymmetricMixture"]


def _check_batch(x: np.ndarray, d: int) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"x must have shape (n, {d}), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"x has {int(np.sum(~np.isfinite(x)))} NaN or infinite entries (of {x.size}); a chain "
                         "that diverged needs a smaller step size h")
    return x


# Gaussian target

class Gaussian:
    """N(mean, H^{-1}) as the target of U(x) = 1/2 (x - mean)^T H (x - mean), with exact chain laws [A03].

    Args:
        H: symmetric positive-definite precision matrix ``(d, d)``.
        mean: target mean ``(d,)`` (default 0).
    """

    def __init__(self, H: np.ndarray, mean: "np.ndarray | None" = None) -> None:
        H = np.asarray(H, dtype=float)
        if H.ndim != 2 or H.shape[0] != H.shape[1] or H.shape[0] == 0:
            raise ValueError(f"H must be a square (d, d) matrix, got shape {H.shape}")
        if not np.all(np.isfinite(H)):
            raise ValueError("H contains NaN or inf")
        if not np.allclose(H, H.T, rtol=1e-10, atol=1e-12):
            raise ValueError("H must be symmetric; pass (H + H.T) / 2")
        lam, V = np.linalg.eigh(H)
        if lam[0] <= 0:
            raise ValueError(f"H must be positive definite, smallest eigenvalue is {lam[0]:.3g}")
        self.d = H.shape[0]
        self.H, self.eigvals, self.eigvecs = H, lam, V
        self.mean = np.zeros(self.d) if mean is None else np.asarray(mean, dtype=float)
        if self.mean.shape != (self.d,) or not np.all(np.isfinite(self.mean)):
            raise ValueError(f"mean must be a finite vector of shape ({self.d},), got {self.mean.shape}")
        self.cov = (V / lam) @ V.T

    def U(self, x: np.ndarray) -> np.ndarray:
        r = _check_batch(x, self.d) - self.mean
        return 0.5 * np.einsum("nd,de,ne->n", r, self.H, r)

    def grad_U(self, x: np.ndarray) -> np.ndarray:
        return (_check_batch(x, self.d) - self.mean) @ self.H

    def sample(self, n: int, rng: "np.random.Generator | int | None" = None) -> np.ndarray:
        """``n`` exact draws from the target, shape ``(n, d)``."""
        z = _as_rng(rng).standard_normal((v.positive_int("n", n), self.d))
        return self.mean + (z / np.sqrt(self.eigvals)) @ self.eigvecs.T

    def transition_eig(self, method: str, h: float) -> tuple[np.ndarray, np.ndarray]:
        """Eigenvalues ``(alpha, q)`` of the one-step map ``A`` and noise covariance ``Q`` in H's eigenbasis."""
        _check_method(method)
        h, z = _check_h(h), self.eigvals * _check_h(h)
        if method == "ula":
            return 1.0 - z, np.full(self.d, 2.0 * h)
        return 1.0 - z + z * z / 2.0, 2.0 * h * (1.0 - z + z * z / 3.0)

    def stationary_variance_eig(self, method: str, h: float) -> np.ndarray:
        """Stationary variance v = q / (1 - alpha^2) per eigenvalue of H (raises if the chain is unstable)."""
        alpha, q = self.transition_eig(method, h)
        if np.any(np.abs(alpha) >= 1.0):
            raise ValueError(f"{method} with h={h} is unstable on this target (|alpha(h lam_max)| >= 1); "
                             "use a smaller h")
        return q / (1.0 - alpha ** 2)

    def chain_law(self, method: str, h: float, k: float, m0: "np.ndarray | None" = None,
                  S0: "np.ndarray | None" = None) -> tuple[np.ndarray, np.ndarray]:
        """Exact mean and covariance after ``k`` steps from N(m0, S0) (``k=np.inf``: the stationary law).

        S_k = A^k S0 A^kT + sum_{j<k} A^j Q A^jT, all in H's eigenbasis where A and Q are diagonal.
        """
        if isinstance(k, bool) or not (isinstance(k, (int, np.integer)) and k >= 0 or k == np.inf):
            raise ValueError(f"k must be a non-negative int or np.inf, got {k!r}")
        alpha, q = self.transition_eig(method, h)
        V = self.eigvecs
        m0 = np.zeros(self.d) if m0 is None else np.asarray(m0, dtype=float)
        S0 = np.zeros((self.d, self.d)) if S0 is None else np.asarray(S0, dtype=float)
        if m0.shape != (self.d,) or S0.shape != (self.d, self.d):
            raise ValueError(f"m0 must be ({self.d},) and S0 ({self.d}, {self.d}), got {m0.shape} and {S0.shape}")
        v.finite("m0", m0)
        v.finite("S0", S0)
        if not np.allclose(S0, S0.T) or np.linalg.eigvalsh(0.5 * (S0 + S0.T))[0] < -1e-10:
            raise ValueError("S0 must be a symmetric positive semi-definite covariance matrix")
        if k == np.inf:
            return self.mean.copy(), (V * self.stationary_variance_eig(method, h)) @ V.T
        ak = alpha ** int(k)
        a2 = alpha ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            geo = np.where(np.isclose(a2, 1.0), float(k), (1.0 - ak ** 2) / (1.0 - a2))
        m = self.mean + V @ (ak * (V.T @ (m0 - self.mean)))
        S_eig = np.outer(ak, ak) * (V.T @ S0 @ V) + np.diag(q * geo)
        return m, V @ S_eig @ V.T


# non-log-concave mixture target

class SymmetricMixture:
    """pi(x) = prod_j [N(x_j; a, 1) + N(x_j; -a, 1)] / 2, i.e. U(x) = sum_j x_j^2/2 - log cosh(a x_j) [A03].

    Args:
        a: mode location (> 1 makes U non-convex; a = 2 gives U'' >= -3).
        d: dimension.
    """

    def __init__(self, a: float = 2.0, d: int = 1) -> None:
        if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)) or not (
                math.isfinite(a) and a >= 0):
            raise ValueError(f"a must be a finite non-negative float, got {a!r}")
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise ValueError(f"d must be a positive int, got {d!r}")
        self.a, self.d = float(a), int(d)

    @property
    def variance(self) -> float:
        """Per-coordinate variance 1 + a^2 (mean 0)."""
        return 1.0 + self.a ** 2

    def U(self, x: np.ndarray) -> np.ndarray:
        x = _check_batch(x, self.d)
        ax = self.a * x
        log_cosh = np.logaddexp(ax, -ax) - math.log(2.0)
        return np.sum(0.5 * x ** 2 - log_cosh, axis=-1)

    def grad_U(self, x: np.ndarray) -> np.ndarray:
        x = _check_batch(x, self.d)
        return x - self.a * np.tanh(self.a * x)

    def sample(self, n: int, rng: "np.random.Generator | int | None" = None) -> np.ndarray:
        """``n`` exact draws, shape ``(n, d)``: a random sign times a plus N(0, 1)."""
        gen = _as_rng(rng)
        n = v.positive_int("n", n)
        signs = gen.integers(0, 2, size=(n, self.d)) * 2.0 - 1.0
        return self.a * signs + gen.standard_normal((n, self.d))

    # 1-D marginal (all coordinates are iid)

    def pdf(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if np.any(np.isnan(x)):
            raise ValueError("x contains NaN; the density is defined on the real line (inf is allowed)")
        c = 1.0 / math.sqrt(2.0 * math.pi)
        return 0.5 * c * (np.exp(-0.5 * (x - self.a) ** 2) + np.exp(-0.5 * (x + self.a) ** 2))

    def cdf(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if np.any(np.isnan(x)):
            raise ValueError("x contains NaN; the cdf is defined on the real line (inf is allowed)")
        return 0.5 * (special.ndtr(x - self.a) + special.ndtr(x + self.a))

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Exact quantile function: bisection on [ndtri(u) - a, ndtri(u) + a] (F lies between the two shifted
        normal cdfs), then three Newton steps kept inside the bracket (accurate to ~1e-15)."""
        u = np.asarray(u, dtype=float)
        if np.any(np.isnan(u)) or np.any((u < 0) | (u > 1)):
            raise ValueError("u must lie in [0, 1]")
        z = special.ndtri(np.clip(u, 1e-300, 1 - 1e-16))
        lo, hi = z - self.a, z + self.a
        for _ in range(24):
            mid = 0.5 * (lo + hi)
            below = self.cdf(mid) < u
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        x = 0.5 * (lo + hi)
        for _ in range(3):
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.clip(x - (self.cdf(x) - u) / self.pdf(x), lo, hi)
        return np.where(u == 0, -np.inf, np.where(u == 1, np.inf, x))
