"""GP bandits over a candidate set: GP-UCB, maximum variance reduction, uniform random; RKHS test functions [B09].

Protocol (sklearn-like ask/tell): ``i = policy.suggest()`` picks a candidate index, the environment returns
y = f(x_i) + eps, ``policy.observe(i, y)``; ``policy.recommend()`` is the current guess of the maximiser
(argmax of the posterior mean), used for the simple regret.

- GP-UCB (Srinivas et al. 2010): x_t = argmax mu_{t-1}(x) + beta_t^{1/2} sigma_{t-1}(x), with the standard
  finite-domain schedule beta_t = 2 ln(|D| t^2 pi^2 / (6 delta)).
- Maximum variance reduction (MVR; Vakili et al. 2021): x_t = argmax sigma_{t-1}(x), recommend argmax mu_T.
  Its simple regret is O(sqrt(gamma_T / T)) up to logs, the rate the paper shows optimal up to
  dimension-independent log factors.
- Uniform random: x_t uniform on the candidates (recommendation: argmax of the same GP posterior mean).

Regret: r_t = f(x*) - f(x_t), R_T = sum_t r_t (cumulative); simple regret f(x*) - f(recommend_t).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from icml26.harness import validate

from .gp import IncrementalGP, Kernel
from .spectrum import se_kernel

# beta schedule


def beta_srinivas(t: int, n_candidates: int, delta: float = 0.1) -> float:
    """beta_t = 2 ln(|D| t^2 pi^2 / (6 delta)) (Srinivas et al. 2010, Theorem 1, finite D)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    return 2.0 * math.log(n_candidates * t * t * math.pi ** 2 / (6.0 * delta))


# policies


class _GPPolicy:
    def __init__(self, kernel: Kernel, candidates: np.ndarray, noise_var: float) -> None:
        X = np.asarray(candidates, dtype=float)
        if X.ndim != 2 or len(X) < 1:
            raise ValueError(f"candidates must be a non-empty 2-D array (N, D), got shape {X.shape}")
        self.candidates = X
        self.gp = IncrementalGP(kernel, noise_var, queries=X)

    @property
    def t(self) -> int:
        return self.gp.t

    def observe(self, index: int, y: float) -> None:
        if not 0 <= int(index) < len(self.candidates):
            raise IndexError(f"candidate index {index} out of range [0, {len(self.candidates)})")
        self.gp.add(self.candidates[int(index)], y)

    def recommend(self) -> int:
        return int(np.argmax(self.gp.query_mean))

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at every candidate."""
        return self.gp.query_mean, np.sqrt(np.maximum(self.gp.query_var, 0.0))


class GPUCB(_GPPolicy):
    """GP-UCB over a candidate set; ``beta``: ``"srinivas"`` (default), a constant, or a callable t -> beta_t."""

    def __init__(self, kernel: Kernel, candidates: np.ndarray, noise_var: float,
                 beta: str | float | Callable[[int], float] = "srinivas", delta: float = 0.1) -> None:
        super().__init__(kernel, candidates, noise_var)
        validate.probability("delta", delta, open_=True)
        if beta == "srinivas":
            n = len(self.candidates)
            self.beta = lambda t: beta_srinivas(t, n, delta)
        elif callable(beta):
            self.beta = beta
        elif isinstance(beta, (int, float)) and beta >= 0:
            self.beta = lambda t, b=float(beta): b
        else:
            raise ValueError(f"beta must be 'srinivas', a number >= 0 or a callable t -> beta_t, got {beta!r}")

    def suggest(self) -> int:
        mu, sd = self.posterior()
        return int(np.argmax(mu + math.sqrt(self.beta(self.t + 1)) * sd))


class MaximumVarianceReduction(_GPPolicy):
    """Pick the candidate of largest posterior variance (pure exploration); recommend argmax posterior mean."""

    def suggest(self) -> int:
        return int(np.argmax(self.gp.query_var))


class UniformRandom(_GPPolicy):
    """Uniformly random candidates (baseline); keeps the same GP so that ``recommend`` is comparable."""

    def __init__(self, kernel: Kernel, candidates: np.ndarray, noise_var: float,
                 rng: np.random.Generator | int | None = None) -> None:
        super().__init__(kernel, candidates, noise_var)
        self.rng = np.random.default_rng(rng)

    def suggest(self) -> int:
        return int(self.rng.integers(len(self.candidates)))


# test functions and the loop


@dataclass
class RKHSFunction:
    """f(x) = sum_i alpha_i k(x, z_i), with RKHS norm ||f||_k = sqrt(alpha^T K_Z alpha) (exact)."""

    centers: np.ndarray
    alpha: np.ndarray
    kernel: Kernel

    def __post_init__(self) -> None:
        self.centers = validate.finite("centers", np.asarray(self.centers, dtype=float))
        self.alpha = validate.finite("alpha", np.asarray(self.alpha, dtype=float))
        if self.centers.ndim != 2 or self.alpha.shape != (len(self.centers),):
            raise ValueError(f"need centers (n, d) and alpha (n,), got {self.centers.shape} and {self.alpha.shape}")
        if not callable(self.kernel):
            raise TypeError(f"kernel must be callable k(X, Y) -> matrix, got {type(self.kernel).__name__}")

    @property
    def norm(self) -> float:
        return float(math.sqrt(self.alpha @ self.kernel(self.centers, self.centers) @ self.alpha))

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return self.kernel(np.asarray(X, dtype=float), self.centers) @ self.alpha


def rkhs_test_function(d: int, norm_bound: float, lengthscale: float, rng: np.random.Generator | int | None = None,
                       n_centers: int = 20) -> RKHSFunction:
    """A random SE-RKHS function on S^d with norm exactly ``norm_bound``: centres uniform on S^d, alpha ~ N(0, I)
    rescaled. (The paper's hard functions are packings of spherical-harmonic bumps; these are typical, not
    worst-case, functions of the same norm.)"""
    from .spectrum import sample_sphere

    if not (math.isfinite(norm_bound) and norm_bound > 0):
        raise ValueError(f"norm_bound must be > 0, got {norm_bound!r}")
    rng = np.random.default_rng(rng)
    Z = sample_sphere(n_centers, d, rng)
    k = se_kernel(lengthscale, check=False)
    alpha = rng.standard_normal(n_centers)
    f = RKHSFunction(Z, alpha, k)
    f.alpha = alpha * (norm_bound / f.norm)
    return f


def run_bandit(policy: _GPPolicy, f_values: np.ndarray, T: int, noise: np.ndarray) -> dict[str, np.ndarray]:
    """Run ``policy`` for T steps against f (its values at the candidates) with the given noise sequence.

    Returns ``instant`` r_t, ``cumulative`` R_t, ``simple`` (f* - f(recommend_t)) and the picked ``indices``.
    """
    f_values = np.asarray(f_values, dtype=float)
    noise = np.asarray(noise, dtype=float)
    if f_values.shape != (len(policy.candidates),):
        raise ValueError(f"f_values must hold one value per candidate, shape ({len(policy.candidates)},), "
                         f"got {f_values.shape}")
    if noise.shape[0] < T:
        raise ValueError(f"noise must have at least T={T} entries, got {noise.shape[0]}")
    f_star = float(f_values.max())
    idx = np.empty(T, dtype=int)
    simple = np.empty(T)
    for t in range(T):
        i = policy.suggest()
        idx[t] = i
        policy.observe(i, f_values[i] + noise[t])
        simple[t] = f_star - f_values[policy.recommend()]
    instant = f_star - f_values[idx]
    return {"instant": instant, "cumulative": np.cumsum(instant), "simple": simple, "indices": idx}

