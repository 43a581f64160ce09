"""CAMEL: the capacity-aware mixture law [A18] and the optimal mixture it implies.

For validation domain i, model size N and mixture r on the simplex over J sources (sum_j r_j = 1):

    L_i(N, r) = E_i + A_i (N / N0)^-alpha_i + exp( sum_j T_ij(N) r_j ),   T_ij(N) = t_ij + s_ij log(N / N0)

The s_ij are the capacity-mixture interaction; with s = 0 (``capacity_aware=False``) this is a data mixing law
(Ye et al. 2024, L = c + k exp(t . r)) plus a size term, the capacity-agnostic ablation. (A scale B_i in front of
the exponential is not identifiable on the simplex: B exp(t . r) = exp((t + log B) . r), so it is folded into
t.) The target loss is L = sum_i w_i L_i. Fitting: per domain, Huber loss on log L with scipy ``least_squares``
from several seeded starts (E_i >= 0, alpha_i in (0, 1]); parameter uncertainties from the Gauss-Newton Hessian
(J^T J)^-1 s^2. The optimal mixture minimises L over the simplex (softmax parameterisation, multi-start L-BFGS-B
seeded from a Dirichlet grid).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares, minimize

from icml26.harness import validate as v


def check_mixtures(R: np.ndarray, name: str = "mixtures", tol: float = 1e-6, n_sources: int | None = None
                   ) -> np.ndarray:
    """``R`` as an (M, J) float array on the simplex (a single mixture (J,) becomes one row), else a ValueError /
    TypeError naming ``name`` and saying what is wrong; ``n_sources``: the number of columns it must have."""
    R = np.atleast_2d(np.asarray(v.finite(name, R), dtype=float))
    if R.ndim != 2:
        raise ValueError(f"{name} must be an (M, J) array of mixture proportions, got shape {R.shape}")
    v.non_empty(name, R)
    if n_sources is not None and R.shape[1] != n_sources:
        raise ValueError(f"{name} must have {n_sources} columns (one per source, as fitted), got shape {R.shape}")
    if (R < -tol).any():
        raise ValueError(f"{name} must be non-negative proportions, got a minimum of {R.min():.6g}")
    s = R.sum(1)
    if np.abs(s - 1).max() > tol:
        bad = int(np.argmax(np.abs(s - 1)))
        raise ValueError(f"{name} must sum to 1 over sources; row {bad} sums to {s[bad]:.6g} (normalise with "
                         "R / R.sum(1, keepdims=True))")
    return np.clip(R, 0.0, None)


def check_sizes(N: np.ndarray, n: int | None = None, name: str = "N") -> np.ndarray:
    """Model sizes as a positive finite 1-D float array (``n``: how many there must be)."""
    N = np.asarray(v.finite(name, np.atleast_1d(N) if np.isscalar(N) else N), dtype=float).ravel()
    v.non_empty(name, N)
    if not (N > 0).all():
        raise ValueError(f"model sizes {name} must be positive, got a minimum of {N.min():.6g}")
    if n is not None and N.size != n:
        raise ValueError(f"need one model size per run: got {N.size} sizes in {name} for {n} runs")
    return N


def sizes_for(N: np.ndarray | float, m: int, name: str = "N") -> np.ndarray:
    """``N`` (a scalar or one size per mixture) broadcast to ``m`` sizes."""
    N = check_sizes(N, name=name)
    if N.size not in (1, m):
        raise ValueError(f"{name} must be a scalar or one size per mixture ({m}), got {N.size} sizes")
    return np.broadcast_to(N, (m,)).copy()


def check_losses(L: np.ndarray, n: int, name: str = "L") -> np.ndarray:
    """Validation losses as a positive finite (n, D) array (a 1-D array is one domain)."""
    L = np.asarray(v.finite(name, L), dtype=float)
    L = L[:, None] if L.ndim == 1 else L
    if L.ndim != 2 or L.shape[0] != n or L.shape[1] < 1:
        raise ValueError(f"{name} must be an (n, D) array of losses with n = {n} runs (one row per run), got shape "
                         f"{L.shape}")
    if (L <= 0).any():
        raise ValueError(f"{name} must hold positive losses (the laws model log L), got a minimum of {L.min():.6g}")
    return L


def check_weights(w: np.ndarray | None, D: int, name: str = "domain_weights") -> np.ndarray:
    """Target weights over D validation domains: non-negative, summing to 1 (``None``: uniform)."""
    if w is None:
        return np.full(D, 1.0 / D)
    w = np.asarray(v.probability_vector(name, w), dtype=float)
    if w.shape != (D,):
        raise ValueError(f"{name} must have one weight per validation domain ({D}), got shape {w.shape}")
    return w


def check_fit_inputs(N, R, L, domain_weights) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The checks every law's ``fit`` applies: (N, R, L, weights) validated and converted."""
    R = check_mixtures(R, "R")
    N = check_sizes(N, R.shape[0])
    L = check_losses(L, R.shape[0])
    return N, R, L, check_weights(domain_weights, L.shape[1])


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


class CAMELLaw:
    """Capacity-aware mixture law [A18] (``capacity_aware=False``: the s = 0 data-mixing-law ablation).

    Args:
        capacity_aware: fit the interaction s_ij (True) or fix s = 0.
        n_starts: seeded random starts per domain (plus one default start).
        huber: Huber scale on log-loss residuals.
        random_state: seed of the starts (the fit is deterministic for a fixed seed).

    Attributes after ``fit``: ``params_`` (D, 3 + 2J) rows (E, A, alpha, t_1..t_J, s_1..s_J), ``stderr_`` (same
    shape; NaN where not estimable), ``N0_``, ``weights_``.
    """

    def __init__(self, *, capacity_aware: bool = True, n_starts: int = 3, huber: float = 0.02,
                 random_state: int = 0) -> None:
        if not isinstance(capacity_aware, (bool, np.bool_)):
            raise TypeError(f"capacity_aware must be True or False, got {v.describe(capacity_aware)}")
        self.capacity_aware, self.n_starts = bool(capacity_aware), v.non_negative_int("n_starts", n_starts)
        self.huber, self.random_state = v.positive("huber", huber), v.non_negative_int("random_state", random_state)
        self.params_ = None

    # model

    def _domain_loss(self, p: np.ndarray, logn: np.ndarray, R: np.ndarray) -> np.ndarray:
        J = R.shape[1]
        E, A, alpha, t = p[0], p[1], p[2], p[3:3 + J]
        s = p[3 + J:3 + 2 * J] if self.capacity_aware else np.zeros(J)
        return E + A * np.exp(-alpha * logn) + np.exp(R @ t + logn * (R @ s))

    def fit(self, N: np.ndarray, R: np.ndarray, L: np.ndarray, domain_weights: np.ndarray | None = None,
            N0: float | None = None) -> "CAMELLaw":
        """``N`` (n,) sizes, ``R`` (n, J) mixtures, ``L`` (n, D) validation losses per domain; ``domain_weights``
        (D,) the target's weights (default uniform); ``N0`` the reference size (default the smallest)."""
        N, R, L, w = check_fit_inputs(N, R, L, domain_weights)
        n, J = R.shape
        D = L.shape[1]
        n_par = 3 + (2 * J if self.capacity_aware else J)
        if n <= n_par:
            raise ValueError(f"{n} runs cannot determine {n_par} parameters per domain; add runs or sizes")
        self.N0_ = float(N.min() if N0 is None else v.positive("N0", N0))
        logn = np.log(N / self.N0_)
        rng = np.random.default_rng(self.random_state)
        P, SE = np.full((D, 3 + 2 * J), 0.0), np.full((D, 3 + 2 * J), np.nan)
        for i in range(D):
            y = np.log(L[:, i])
            lo = [0.0, 0.0, 1e-3] + [-20.0] * J + ([-5.0] * J if self.capacity_aware else [])
            hi = [float(L[:, i].min()), 1e3, 1.0] + [5.0] * J + ([5.0] * J if self.capacity_aware else [])

            def res(q: np.ndarray) -> np.ndarray:
                p = np.concatenate([q, np.zeros(2 * J + 3 - q.size)])
                return np.log(self._domain_loss(p, logn, R)) - y

            base = np.concatenate([[0.5 * L[:, i].min(), 0.2 * L[:, i].mean(), 0.3],
                                   np.full(J, math.log(0.3 * L[:, i].mean())),
                                   np.zeros(J) if self.capacity_aware else []])
            starts = [base] + [np.concatenate([[rng.uniform(0, 0.9) * L[:, i].min(), rng.uniform(0.01, 1) * L[:, i].mean(),
                                                rng.uniform(0.05, 0.9)], rng.normal(math.log(0.3 * L[:, i].mean()), 1.0, J),
                                               rng.normal(0, 0.1, J) if self.capacity_aware else []])
                               for _ in range(self.n_starts)]
            best = None
            for q0 in starts:
                q0 = np.clip(q0, np.array(lo) + 1e-9, np.array(hi) - 1e-9)
                r = least_squares(res, q0, bounds=(lo, hi), loss="huber", f_scale=self.huber, method="trf",
                                  max_nfev=200)
                if best is None or r.cost < best.cost - 1e-14:
                    best = r
            m = best.x.size
            P[i, :m] = best.x
            dof = max(n - m, 1)
            s2 = float((best.fun ** 2).sum() / dof)
            cov = np.linalg.pinv(best.jac.T @ best.jac) * s2
            SE[i, :m] = np.sqrt(np.clip(np.diag(cov), 0, None))
        self.params_, self.stderr_, self.weights_, self.n_sources_ = P, SE, w, J
        return self

    def predict(self, N: np.ndarray | float, R: np.ndarray) -> np.ndarray:
        """Per-domain losses (M, D) at sizes ``N`` (scalar or (M,)) and mixtures ``R`` (M, J)."""
        v.require_fitted(self, "params_")
        R = check_mixtures(R, "R", n_sources=self.n_sources_)
        N = sizes_for(N, R.shape[0])
        logn = np.log(N / self.N0_)
        return np.stack([self._domain_loss(p, logn, R) for p in self.params_], axis=1)

    def predict_target(self, N: np.ndarray | float, R: np.ndarray) -> np.ndarray:
        """Target loss sum_i w_i L_i (M,)."""
        return self.predict(N, R) @ self.weights_

    def prediction_variance(self, N: np.ndarray, R: np.ndarray, N_target: float, r_target: np.ndarray,
                            noise: float = 0.01) -> float:
        """Delta-method variance of the fitted target loss at (N_target, r_target) for a design of runs (N, R)
        with log-loss noise sd ``noise``: sum_i w_i^2 g_i^T (J_i^T J_i)^-1 g_i noise^2, with J_i the Jacobian of
        log L_i at the design and g_i the gradient of L_i at the target (finite differences, at ``params_``)."""
        v.require_fitted(self, "params_")
        R = check_mixtures(R, "R", n_sources=self.n_sources_)
        N = check_sizes(N, R.shape[0])
        N_target, noise = v.positive("N_target", N_target), v.positive("noise", noise)
        rt = check_mixtures(r_target, "r_target", n_sources=self.n_sources_)
        if rt.shape[0] != 1:
            raise ValueError(f"r_target must be one mixture ({self.n_sources_},), got shape {np.shape(r_target)}")
        logn, lt = np.log(N / self.N0_), np.log(np.array([N_target / self.N0_]))
        m = 3 + (2 if self.capacity_aware else 1) * self.n_sources_
        total = 0.0
        for i, p in enumerate(self.params_):
            h = 1e-6 * np.maximum(np.abs(p[:m]), 1e-3)
            J = np.empty((len(N), m))
            g = np.empty(m)
            for k in range(m):
                dp = np.zeros_like(p)
                dp[k] = h[k]
                J[:, k] = (np.log(self._domain_loss(p + dp, logn, R)) - np.log(self._domain_loss(p - dp, logn, R))) / (2 * h[k])
                g[k] = (self._domain_loss(p + dp, lt, rt)[0] - self._domain_loss(p - dp, lt, rt)[0]) / (2 * h[k])
            total += self.weights_[i] ** 2 * float(g @ np.linalg.pinv(J.T @ J) @ g) * noise ** 2
        return total

    def optimal_mixture(self, N_target: float, n_grid: int = 2000, n_starts: int = 5) -> np.ndarray:
        """argmin over the simplex of the target loss at ``N_target`` (deterministic)."""
        v.require_fitted(self, "params_")
        N_target = v.positive("N_target", N_target)
        return minimize_on_simplex(lambda R: self.predict_target(N_target, R), self.n_sources_, n_grid, n_starts)


def minimize_on_simplex(f, J: int, n_grid: int = 2000, n_starts: int = 5, seed: int = 0) -> np.ndarray:
    """Minimise a vectorised ``f: (M, J) -> (M,)`` over the simplex: best points of a Dirichlet(1) grid (plus the
    vertices and the centroid) polished with L-BFGS-B on a softmax parameterisation."""
    if not callable(f):
        raise TypeError(f"f must be a callable (M, J) -> (M,), got {v.describe(f)}")
    J, n_grid = v.positive_int("J", J), v.non_negative_int("n_grid", n_grid)
    n_starts, seed = v.non_negative_int("n_starts", n_starts), v.non_negative_int("seed", seed)
    rng = np.random.default_rng(seed)
    grid = np.vstack([np.eye(J), np.full((1, J), 1.0 / J), rng.dirichlet(np.ones(J), n_grid)])
    vals = np.asarray(f(grid), dtype=float)
    if vals.shape != (len(grid),):
        raise ValueError(f"f must map an (M, {J}) array of mixtures to M values, got shape {vals.shape} for M = "
                         f"{len(grid)}")
    best_r, best_v = grid[int(np.argmin(vals))], float(vals.min())
    for k in np.argsort(vals)[:n_starts]:
        z0 = np.log(np.clip(grid[k], 1e-6, None))
        r = minimize(lambda z: float(f(softmax(z)[None])[0]), z0, method="L-BFGS-B")
        cand = softmax(r.x)
        val = float(f(cand[None])[0])
        if val < best_v:
            best_r, best_v = cand, val
    return best_r


__all__ = ["CAMELLaw", "check_mixtures", "check_sizes", "check_losses", "check_weights", "check_fit_inputs", "sizes_for",
           "softmax", "minimize_on_simplex"]
