"""A GP posterior with incremental Cholesky updates: O(t^2) per added observation, any kernel callable [B09].

Observations y_s = f(x_s) + eps_s, eps ~ N(0, sigma^2), prior f ~ GP(0, k). With K_t = k(X_t, X_t) + sigma^2 I
= L L^T and w = L^{-1} y:

    mu_t(x) = k(x, X_t) K_t^{-1} y = v(x)^T w,   sigma_t^2(x) = k(x, x) - |v(x)|^2,   v(x) = L^{-1} k(X_t, x).

Adding x_{t+1}: l = L^{-1} k(X_t, x_{t+1}), l_tt = sqrt(k(x,x) + sigma^2 - |l|^2), w_{t+1} = (y - l.w)/l_tt —
one triangular solve, O(t^2), instead of a new O(t^3) factorisation. A fixed query set (a bandit's candidates)
is tracked in O(N t) per step: v_{t+1}(x) = (k(x_{t+1}, x) - l.v(x)) / l_tt, mu += v_{t+1} w_{t+1},
sigma^2 -= v_{t+1}^2.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.linalg import solve_triangular

from icml26.harness import validate

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]
_BLOCK = 128


def forward_solve(L: np.ndarray, b: np.ndarray, block: int = _BLOCK) -> np.ndarray:
    """Solve L x = b for lower-triangular L given as a (possibly strided) view, without copying L.

    Blocked forward substitution: x_i = L_ii^{-1} (b_i - L_{i,<i} x_{<i}); the off-diagonal products are
    matrix-vector products on views (BLAS reads the strided rows in place) and only the small diagonal blocks
    are copied. It reads the lower triangle once (t^2 / 2 numbers), where ``solve_triangular`` on a view of a
    larger buffer first copies the whole t x t block.
    """
    t = L.shape[0]
    x = np.empty(t)
    for i in range(0, t, block):
        j = min(i + block, t)
        r = b[i:j] - L[i:j, :i] @ x[:i] if i else b[i:j]
        x[i:j] = solve_triangular(L[i:j, i:j], r, lower=True, check_finite=False)
    return x


class IncrementalGP:
    """Zero-mean GP regression with a growing Cholesky factor.

    Args:
        kernel: ``k(X (n, D), Y (m, D)) -> (n, m)``, any positive-definite kernel.
        noise_var: sigma^2 > 0 (also the jitter that keeps K_t well conditioned).
        queries: optional fixed query points ``(N, D)`` whose posterior is updated in O(N t) per observation
            (``query_mean`` / ``query_var``).
    """

    def __init__(self, kernel: Kernel, noise_var: float, queries: np.ndarray | None = None,
                 capacity: int = 256) -> None:
        if not callable(kernel):
            raise TypeError(f"kernel must be callable k(X, Y) -> matrix, got {type(kernel).__name__}")
        if not (isinstance(noise_var, (int, float, np.floating)) and math.isfinite(noise_var) and noise_var > 0):
            raise ValueError(f"noise_var must be a finite number > 0, got {noise_var!r}")
        self.kernel, self.noise_var = kernel, float(noise_var)
        self.t = 0
        self._cap = validate.positive_int("capacity", capacity)
        self._L = np.zeros((self._cap, self._cap))
        self._w = np.zeros(self._cap)
        self._X: np.ndarray | None = None
        self._y = np.zeros(self._cap)
        self.queries = None if queries is None else _as_2d(queries, "queries")
        if self.queries is not None:
            self._V = np.zeros((self._cap, len(self.queries)))
            self.query_mean = np.zeros(len(self.queries))
            self.query_var = np.array([kernel(q[None], q[None])[0, 0] for q in self.queries], dtype=float)

    # helper functions

    def _grow(self) -> None:
        cap = 2 * self._cap
        L = np.zeros((cap, cap))
        L[: self.t, : self.t] = self._L[: self.t, : self.t]
        self._L = L
        self._w = np.resize(self._w, cap)
        self._y = np.resize(self._y, cap)
        if self._X is not None:
            X = np.zeros((cap, self._X.shape[1]))
            X[: self.t] = self._X[: self.t]
            self._X = X
        if self.queries is not None:
            V = np.zeros((cap, len(self.queries)))
            V[: self.t] = self._V[: self.t]
            self._V = V
        self._cap = cap

    # main methods

    @classmethod
    def fit(cls, kernel: Kernel, noise_var: float, X: np.ndarray, y: np.ndarray, queries: np.ndarray | None = None,
            capacity: int | None = None) -> "IncrementalGP":
        """Condition on a whole batch at once (one O(t^3) Cholesky); later ``add`` calls are O(t^2)."""
        X, y = _as_2d(X, "X"), np.asarray(y, dtype=float).reshape(-1)
        if len(X) != len(y) or not np.all(np.isfinite(y)):
            raise ValueError(f"X has {len(X)} rows but y has {len(y)} entries (or y is not finite)")
        t = len(X)
        gp = cls(kernel, noise_var, queries=queries, capacity=max(capacity or 0, 2 * t, 1))
        L = np.linalg.cholesky(kernel(X, X) + gp.noise_var * np.eye(t))
        gp._L[:t, :t] = L
        gp._w[:t] = solve_triangular(L, y, lower=True, check_finite=False)
        gp._X = np.zeros((gp._cap, X.shape[1]))
        gp._X[:t], gp._y[:t] = X, y
        if gp.queries is not None:
            V = solve_triangular(L, kernel(X, gp.queries), lower=True, check_finite=False)
            gp._V[:t] = V
            gp.query_mean = V.T @ gp._w[:t]
            gp.query_var = gp.query_var - np.einsum("tn,tn->n", V, V)
        gp.t = t
        return gp

    @property
    def X(self) -> np.ndarray:
        return np.zeros((0, 0)) if self._X is None else self._X[: self.t]

    @property
    def y(self) -> np.ndarray:
        return self._y[: self.t]

    def add(self, x: np.ndarray, y: float) -> "IncrementalGP":
        """Condition on one observation (x, y): one triangular solve, O(t^2) (+ O(N t) for tracked queries)."""
        x = np.asarray(x, dtype=float).reshape(-1)
        y = float(y)
        if not (np.all(np.isfinite(x)) and math.isfinite(y)):
            raise ValueError("x and y must be finite")
        if self._X is None:
            self._X = np.zeros((self._cap, len(x)))
        elif len(x) != self._X.shape[1]:
            raise ValueError(f"x has {len(x)} coordinates, earlier inputs had {self._X.shape[1]}")
        if self.t == self._cap:
            self._grow()
        t = self.t
        kx = self.kernel(self._X[:t], x[None])[:, 0] if t else np.zeros(0)
        row = forward_solve(self._L[:t, :t], kx) if t else kx
        ltt2 = float(self.kernel(x[None], x[None])[0, 0]) + self.noise_var - float(row @ row)
        ltt = math.sqrt(max(ltt2, 1e-300))
        self._L[t, :t], self._L[t, t] = row, ltt
        self._w[t] = (y - float(row @ self._w[:t])) / ltt
        self._X[t], self._y[t] = x, y
        if self.queries is not None:
            v = (self.kernel(x[None], self.queries)[0] - row @ self._V[:t]) / ltt
            self._V[t] = v
            self.query_mean += v * self._w[t]
            self.query_var -= v * v
        self.t = t + 1
        return self

    def predict(self, Xq: np.ndarray, return_var: bool = True) -> tuple[np.ndarray, np.ndarray] | np.ndarray:
        """Posterior mean (and variance of f, without the noise) at ``Xq`` (n, D): O(n t^2)."""
        Xq = _as_2d(Xq, "Xq")
        prior_var = np.array([self.kernel(q[None], q[None])[0, 0] for q in Xq], dtype=float)
        if self.t == 0:
            return (np.zeros(len(Xq)), prior_var) if return_var else np.zeros(len(Xq))
        V = solve_triangular(self._L[: self.t, : self.t], self.kernel(self.X, Xq), lower=True, check_finite=False)
        mean = V.T @ self._w[: self.t]
        if not return_var:
            return mean
        return mean, prior_var - np.einsum("tn,tn->n", V, V)

    def log_marginal_likelihood(self) -> float:
        """log p(y) = -|w|^2/2 - sum log L_ii - t/2 log(2 pi)."""
        t = self.t
        return float(-0.5 * self._w[:t] @ self._w[:t] - np.log(np.diag(self._L)[:t]).sum() - 0.5 * t * math.log(2 * math.pi))


def refit_posterior(kernel: Kernel, noise_var: float, X: np.ndarray, y: np.ndarray, Xq: np.ndarray,
                    prior_var: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The from-scratch posterior (new Cholesky of the full K_t, O(t^3) + O(N t^2)): the baseline for timing.

    ``prior_var``: k(x, x) at ``Xq`` if already known (e.g. 1 for the SE kernel).
    """
    validate.same_length(X=X, y=y)
    K = kernel(X, X) + noise_var * np.eye(len(X))
    L = np.linalg.cholesky(K)
    w = solve_triangular(L, y, lower=True, check_finite=False)
    V = solve_triangular(L, kernel(X, Xq), lower=True, check_finite=False)
    prior = np.array([kernel(q[None], q[None])[0, 0] for q in Xq]) if prior_var is None else prior_var
    return V.T @ w, prior - np.einsum("tn,tn->n", V, V)


def _as_2d(X: np.ndarray, name: str) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, D), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf")
    return X
