"""Maximum information gain (MIG) of the SE kernel on S^d: analytic upper bound, greedy estimate, rates [B09].

gamma_T = max_{x_1..x_T} 1/2 log det(I + K_T / sigma^2) (Srinivas et al. 2010).

Upper bound (Vakili et al. 2021 style, evaluated exactly for a zonal kernel; our implementation):

    gamma_T <= min_{n0} [ 1/2 D(n0) ln(1 + T / (sigma^2 D(n0))) + T / (2 sigma^2) * sum_{n > n0} N(d,n) lambda_n ],

with D(n0) = sum_{n <= n0} N(d, n). The tail sum is the exact sup-norm of the truncated kernel's remainder
(addition theorem: sum over a degree of |Y_nj(x)|^2 = N(d, n)). The paper's rate for this bound is
O((ln T)^{d+1} (ln ln T)^{-d}); the earlier one is O((ln T)^{d+1}).

Lower estimate: greedy maximum-variance selection over a candidate set, which attains at least (1 - 1/e) of
the maximum over that set (the information gain is monotone submodular; Nemhauser et al. 1978).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from icml26.harness import validate

from .spectrum import _check_d, _check_lengthscale, harmonic_multiplicity, se_sphere_eigenvalues

# rates (constants dropped)


def _check_T(T: np.ndarray, minimum: float = math.e) -> np.ndarray:
    T = np.asarray(T, dtype=float)
    if np.any(~np.isfinite(T)) or np.any(T <= minimum):
        raise ValueError(f"T must be finite and > {minimum:.3g} so that ln ln T > 0")
    return T


def mig_rate_new(T: np.ndarray | float, d: int) -> np.ndarray:
    """The paper's MIG rate (ln T)^{d+1} (ln ln T)^{-d}."""
    T, d = _check_T(T), _check_d(d)
    return np.log(T) ** (d + 1) / np.log(np.log(T)) ** d


def mig_rate_old(T: np.ndarray | float, d: int) -> np.ndarray:
    """The earlier MIG rate (ln T)^{d+1} (e.g. Vakili et al. 2021 for the SE kernel)."""
    T, d = _check_T(T), _check_d(d)
    return np.log(T) ** (d + 1)


def regret_lower_rate(T: np.ndarray | float, d: int) -> np.ndarray:
    """The paper's cumulative-regret lower-bound rate sqrt(T (ln T)^d (ln ln T)^{-d})."""
    T, d = _check_T(T), _check_d(d)
    return np.sqrt(T * np.log(T) ** d / np.log(np.log(T)) ** d)


def simple_regret_lower_steps(eps: np.ndarray | float, d: int) -> np.ndarray:
    """The paper's lower-bound rate on the steps to an eps-optimal point, eps^-2 (ln 1/eps)^d (ln ln 1/eps)^-d."""
    d = _check_d(d)
    eps = np.asarray(eps, dtype=float)
    if np.any(~np.isfinite(eps)) or np.any(eps <= 0) or np.any(eps >= math.exp(-math.e)):
        raise ValueError("eps must lie in (0, exp(-e)) so that ln ln (1/eps) > 0")
    inv = 1.0 / eps
    return inv ** 2 * np.log(inv) ** d / np.log(np.log(inv)) ** d


# analytic upper bound


def _spectrum_table(d: int, lengthscale: float, tol: float = 1e-300) -> tuple[np.ndarray, np.ndarray]:
    """Multiplicities and eigenvalues up to the degree where N(d,n) lambda_n underflows."""
    n_max = 64
    while True:
        lam = se_sphere_eigenvalues(d, lengthscale, n_max)
        mult = harmonic_multiplicity(d, np.arange(n_max + 1))
        w = mult * lam
        if (w[-8:] < tol).all() or n_max >= 4096:
            return mult, lam
        n_max *= 2


def mig_upper_bound(T: np.ndarray | float, d: int, lengthscale: float, noise_var: float,
                    return_n0: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """min over the truncation degree n0 of 1/2 D ln(1 + T/(sigma^2 D)) + T/(2 sigma^2) * tail(n0).

    Vectorised over ``T``. ``return_n0`` also returns the minimising degree.
    """
    d, ls = _check_d(d), _check_lengthscale(lengthscale)
    if not (math.isfinite(noise_var) and noise_var > 0):
        raise ValueError(f"noise_var must be > 0, got {noise_var!r}")
    T = np.asarray(T, dtype=float)
    if np.any(~np.isfinite(T)) or np.any(T < 1):
        raise ValueError("T must be finite and >= 1")
    mult, lam = _spectrum_table(d, ls)
    w = mult * lam
    D = np.cumsum(mult)                                  # D(n0), n0 = 0..n_max
    tail = np.cumsum(w[::-1])[::-1]                      # sum_{n >= n0}; summed from the small end (no cancellation)
    tail = np.append(tail[1:], 0.0)                      # sum_{n > n0}
    Tf = T.reshape(-1, 1)
    vals = 0.5 * D * np.log1p(Tf / (noise_var * D)) + Tf / (2 * noise_var) * tail
    i = np.argmin(vals, axis=1)
    best = vals[np.arange(len(Tf)), i].reshape(T.shape)
    return (best, i.reshape(T.shape)) if return_n0 else best


# greedy lower estimate


def information_gain(K: np.ndarray, noise_var: float) -> float:
    """1/2 log det(I + K / sigma^2) from scratch (Cholesky)."""
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square matrix, got shape {K.shape}")
    validate.finite("K", K)  # a NaN kernel matrix gave nan
    noise_var = validate.positive("noise_var", noise_var)  # 0 gave inf
    L = np.linalg.cholesky(np.eye(len(K)) + K / noise_var)
    return float(np.sum(np.log(np.diag(L))))


def greedy_information_gain(X_cand: np.ndarray, kernel: Callable[[np.ndarray, np.ndarray], np.ndarray], T: int,
                            noise_var: float) -> tuple[np.ndarray, np.ndarray]:
    """Greedy maximum-variance selection of T points from ``X_cand``; returns (gamma_1..gamma_T, indices).

    gamma_t = sum_{s <= t} 1/2 ln(1 + sigma_{s-1}^2(x_s) / sigma^2), equal to 1/2 log det(I + K_S/sigma^2) of
    the selected set (chain rule). The posterior variances of all candidates are updated with one new
    pivoted-Cholesky column per step: c_t(x) = (k(x, x_t) - sum_s c_s(x) c_s(x_t)) / sqrt(v(x_t) + sigma^2),
    v(x) -= c_t(x)^2, O(N t) per step.
    """
    X = np.asarray(X_cand, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X_cand must be 2-D (n, D), got shape {X.shape}")
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T must be an int >= 1, got {T!r}")
    if not (math.isfinite(noise_var) and noise_var > 0):
        raise ValueError(f"noise_var must be > 0, got {noise_var!r}")
    n = len(X)
    var = np.array([kernel(X[i:i + 1], X[i:i + 1])[0, 0] for i in range(n)], dtype=float)
    C = np.zeros((T, n))
    gains = np.empty(T)
    idx = np.empty(T, dtype=int)
    for t in range(T):
        j = int(np.argmax(var))
        idx[t] = j
        gains[t] = 0.5 * math.log1p(max(var[j], 0.0) / noise_var)
        col = kernel(X, X[j:j + 1])[:, 0] - C[:t].T @ C[:t, j]
        c = col / math.sqrt(var[j] + noise_var)
        C[t] = c
        var -= c * c                                      # repeats are allowed, as in the definition of gamma_T
    return np.cumsum(gains), idx

