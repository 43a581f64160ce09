"""SE kernel on the hypersphere S^d: Mercer eigenvalues, multiplicities, sampling [B09].

S^d = {x in R^{d+1} : |x| = 1} (d is the sphere's own dimension: S^1 is the circle, S^2 the usual sphere).
On S^d the squared-exponential kernel is zonal,

    k(x, y) = exp(-|x - y|^2 / (2 l^2)) = exp(-a) exp(a x.y),   a = 1 / l^2,

so by Funk-Hecke its eigenfunctions are the spherical harmonics of degree n, with multiplicity

    N(d, n) = (2n + d - 1) / (n + d - 1) * C(n + d - 1, n)        (N(d, 0) = 1),

and eigenvalue (w.r.t. the uniform probability measure on S^d; Minh, Niyogi & Yao 2006)

    lambda_n = exp(-a) I_{n + (d-1)/2}(a) Gamma((d+1)/2) (2/a)^{(d-1)/2}.

By the addition theorem, sum_n N(d, n) lambda_n = k(x, x) = 1 (the trace identity). The decay is
super-exponential, lambda_n ~ (a / 2n)^n, which is where the paper's (ln ln T)^{-d} factors come from.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import special

from icml26.harness import validate

# helper functions


def _check_d(d: int) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise TypeError(f"d (the sphere dimension, S^d in R^(d+1)) must be an int, got {type(d).__name__}")
    if d < 1:
        raise ValueError(f"d must be >= 1 (S^1 is the circle in R^2), got {d}")
    return int(d)


def _check_lengthscale(lengthscale: float) -> float:
    ls = float(lengthscale)
    if not math.isfinite(ls) or ls <= 0:
        raise ValueError(f"lengthscale must be a finite number > 0, got {lengthscale!r}")
    return ls


def check_on_sphere(X: np.ndarray, name: str = "X", tol: float = 1e-8) -> np.ndarray:
    """Return ``X`` as a float 2-D array after checking that every row has unit norm (within ``tol``)."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2 or X.shape[1] < 2:
        raise ValueError(f"{name} must have shape (n, d+1) with d+1 >= 2 (points of S^d in R^(d+1)), got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf")
    norms = np.linalg.norm(X, axis=1)
    bad = np.abs(norms - 1.0) > tol
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}] has norm {norms[i]:.6g}, not 1: points must lie on the unit sphere "
                         "(normalise with X / np.linalg.norm(X, axis=1, keepdims=True))")
    return X


# main functions


def harmonic_multiplicity(d: int, n: int | np.ndarray) -> np.ndarray:
    """N(d, n): dimension of the degree-n spherical harmonics on S^d, (2n+d-1)/(n+d-1) C(n+d-1, n); N(d,0)=1."""
    d = _check_d(d)
    n = np.asarray(n)
    if np.any(n < 0):
        raise ValueError("harmonic degree n must be >= 0")
    nf = n.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (2 * nf + d - 1) / (nf + d - 1) * special.comb(nf + d - 1, nf, exact=False)
    out = np.where(n == 0, 1.0, out)
    return np.rint(out) if np.all(out < 2 ** 52) else out


def se_sphere_eigenvalues(d: int, lengthscale: float, n_max: int) -> np.ndarray:
    """Eigenvalues lambda_0..lambda_{n_max} of the SE kernel on S^d (closed form, uniform probability measure).

    lambda_n = exp(-a) I_{n+(d-1)/2}(a) Gamma((d+1)/2) (2/a)^{(d-1)/2}, a = 1/lengthscale^2. Each has
    multiplicity ``harmonic_multiplicity(d, n)``. ``ive`` (= I_v(a) exp(-a)) keeps it finite for small l.
    """
    d, ls = _check_d(d), _check_lengthscale(lengthscale)
    if isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer)) or n_max < 0:
        raise ValueError(f"n_max must be an int >= 0, got {n_max!r}")
    a = 1.0 / ls ** 2
    n = np.arange(int(n_max) + 1, dtype=float)
    log_c = special.gammaln((d + 1) / 2) + (d - 1) / 2 * math.log(2 / a)
    return special.ive(n + (d - 1) / 2, a) * math.exp(log_c)


def funk_hecke_eigenvalues(d: int, lengthscale: float, n_max: int, n_nodes: int = 200) -> np.ndarray:
    """The same eigenvalues by numerical quadrature of the Funk-Hecke formula (an independent check).

    lambda_n = (omega_{d-1}/omega_d) int_{-1}^{1} phi(t) P_n(t) (1-t^2)^{(d-2)/2} dt, with phi(t) = exp(a(t-1)),
    omega_{d-1}/omega_d = Gamma((d+1)/2) / (sqrt(pi) Gamma(d/2)), and P_n the Gegenbauer polynomial
    C_n^{(d-1)/2} normalised to P_n(1) = 1 (Chebyshev T_n for d = 1). Gauss-Jacobi quadrature with weight
    (1-t^2)^{(d-2)/2}; the integrand is entire, so ``n_nodes`` = 200 is exact to rounding. Absolute accuracy
    ~1e-16 (the integral of an O(1) integrand), so tiny high-degree eigenvalues lose relative accuracy.
    """
    validate.positive_int("n_nodes", n_nodes)
    d, ls = _check_d(d), _check_lengthscale(lengthscale)
    a = 1.0 / ls ** 2
    const = math.exp(special.gammaln((d + 1) / 2) - special.gammaln(d / 2)) / math.sqrt(math.pi)
    t, w = special.roots_jacobi(int(n_nodes), (d - 2) / 2, (d - 2) / 2)
    n = np.arange(int(n_max) + 1)[:, None]
    if d == 1:
        P = special.eval_chebyt(n, t[None, :])
    else:
        alpha = (d - 1) / 2
        P = special.eval_gegenbauer(n, alpha, t[None, :]) / special.eval_gegenbauer(n, alpha, 1.0)
    return const * (P * np.exp(a * (t - 1.0))[None, :]) @ w


def se_kernel(lengthscale: float, check: bool = True) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """k(X, Y) = exp(-|x - y|^2 / (2 l^2)) as a callable ``(n, D), (m, D) -> (n, m)``.

    With ``check=True`` inputs must lie on the unit sphere (``ValueError`` otherwise); on S^d the kernel is
    exp(a (x.y - 1)), computed that way (one matrix product).
    """
    ls = _check_lengthscale(lengthscale)
    a = 1.0 / ls ** 2

    def k(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        if check:
            X, Y = check_on_sphere(X, "X"), check_on_sphere(Y, "Y")
        G = np.minimum(np.asarray(X) @ np.asarray(Y).T, 1.0)
        return np.exp(a * (G - 1.0))

    k.lengthscale = ls  # type: ignore[attr-defined]
    return k


def sample_sphere(n: int, d: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """n points uniform on S^d, shape (n, d+1) (normalised Gaussians)."""
    d = _check_d(d)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    rng = np.random.default_rng(rng)
    X = rng.standard_normal((int(n), d + 1))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def poisson_kernel(r: float, d: int, check: bool = True) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The normalised Poisson kernel on S^d: a zonal kernel with *exponential* eigen-decay (a control for [B09]).

        k_r(x, y) = (1 - r^2) (1 - r)^d / ((1 + r) (1 - 2 r x.y + r^2)^{(d+1)/2}),      0 < r < 1:

    the Poisson kernel of the ball, P_r(t) = (1 - r^2) / (1 - 2 r t + r^2)^{(d+1)/2} = sum_n N(d, n) r^n P_n(t),
    scaled by (1 - r)^d / (1 + r) so that k_r(x, x) = 1. Its eigenvalues (uniform probability measure) are

        mu_n = r^n (1 - r)^d / (1 + r)       (multiplicity N(d, n); see :func:`poisson_sphere_eigenvalues`).

    Exponential decay mu_n ~ r^n gives a maximum information gain of order (ln T)^{d+1}: the *old* rate, without
    the (ln ln T)^{-d} factor that the SE kernel's super-exponential decay buys. The reproduction uses it as the
    control arm of the "tracks the new rate" claims.
    """
    r, d = _check_r(r), _check_d(d)
    scale = (1.0 - r) ** d / (1.0 + r) * (1.0 - r * r)

    def k(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        if check:
            X, Y = check_on_sphere(X, "X"), check_on_sphere(Y, "Y")
        G = np.clip(np.asarray(X) @ np.asarray(Y).T, -1.0, 1.0)
        return scale / (1.0 - 2.0 * r * G + r * r) ** ((d + 1) / 2)

    k.r = r  # type: ignore[attr-defined]
    return k


def poisson_sphere_eigenvalues(r: float, d: int, n_max: int) -> np.ndarray:
    """Eigenvalues mu_0..mu_{n_max} of :func:`poisson_kernel` on S^d: mu_n = r^n (1 - r)^d / (1 + r)."""
    r, d = _check_r(r), _check_d(d)
    if isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer)) or n_max < 0:
        raise ValueError(f"n_max must be an int >= 0, got {n_max!r}")
    return r ** np.arange(int(n_max) + 1, dtype=float) * (1.0 - r) ** d / (1.0 + r)


def _check_r(r: float) -> float:
    if isinstance(r, bool) or not isinstance(r, (int, float, np.floating)) or not (0.0 < float(r) < 1.0):
        raise ValueError(f"r must be a number in (0, 1), got {r!r}")
    return float(r)
