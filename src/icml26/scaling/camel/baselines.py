"""Baselines for [A18]: a size-agnostic data mixing law fitted at each size separately, and RegMix-style
regression.

- :class:`DataMixingLaw` (Ye et al. 2024, arXiv 2403.16952): at each model size separately,
  L_i(r) = c_i + exp(t_i . r) (k_i folded into t_i as in CAMEL). A new size is predicted by fitting
  L = E + A N^-alpha across the fitted sizes for each requested mixture (per domain); the mixture it recommends
  for a larger model is the optimum of the largest fitted size's law (the usual transfer).
- :class:`RegMixBaseline` (RegMix, arXiv 2407.01492): linear regression of each domain's loss on the mixture
  proportions and log N, fitted on all small runs; the recommended mixture is the best of 10,000 Dirichlet
  candidates under the regression (rank invariance across sizes assumed).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares

from .law import check_mixtures, check_sizes, minimize_on_simplex


def _fit_size_law(R: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(c, t_1..t_J) of L = c + exp(t . r) by least squares on log L."""
    J = R.shape[1]

    def res(p):
        return np.log(p[0] + np.exp(R @ p[1:])) - np.log(y)

    r = least_squares(res, np.concatenate([[0.5 * y.min()], np.full(J, np.log(0.5 * y.mean()))]),
                      bounds=([0.0] + [-20.0] * J, [float(y.min())] + [5.0] * J), method="trf")
    return r.x


class DataMixingLaw:
    """Size-agnostic data mixing law, one fit per size (see module docstring)."""

    def fit(self, N: np.ndarray, R: np.ndarray, L: np.ndarray, domain_weights: np.ndarray | None = None
            ) -> "DataMixingLaw":
        R = check_mixtures(R)
        L = np.asarray(L, dtype=float)
        L = L[:, None] if L.ndim == 1 else L
        N = check_sizes(N, R.shape[0])
        self.sizes_ = np.unique(N)
        D = L.shape[1]
        self.weights_ = np.full(D, 1.0 / D) if domain_weights is None else np.asarray(domain_weights, dtype=float)
        self.laws_ = {}
        for n in self.sizes_:
            m = N == n
            if m.sum() <= R.shape[1] + 1:
                raise ValueError(f"size {n:g} has {m.sum()} runs; a per-size law needs more than {R.shape[1] + 1}")
            self.laws_[n] = np.stack([_fit_size_law(R[m], L[m, i]) for i in range(D)])
        self.n_sources_ = R.shape[1]
        return self

    def _at_size(self, n: float, R: np.ndarray) -> np.ndarray:
        P = self.laws_[n]
        return P[:, 0][None, :] + np.exp(R @ P[:, 1:].T)

    def predict(self, N: float, R: np.ndarray) -> np.ndarray:
        """Per-domain losses (M, D) at one size N: per mixture and domain, E + A N^-alpha through the sizes."""
        R = check_mixtures(R)
        per = np.stack([self._at_size(n, R) for n in self.sizes_])           # (S, M, D)
        if float(N) in self.laws_:
            return self._at_size(float(N), R)
        x = np.log(self.sizes_ / self.sizes_[0])
        out = np.empty(per.shape[1:])
        for m in range(per.shape[1]):
            for d in range(per.shape[2]):
                out[m, d] = _extrapolate(x, per[:, m, d], float(np.log(N / self.sizes_[0])))
        return out

    def predict_target(self, N: float, R: np.ndarray) -> np.ndarray:
        return self.predict(N, R) @ self.weights_

    def optimal_mixture(self, N_target: float, n_grid: int = 2000, n_starts: int = 5) -> np.ndarray:
        n = self.sizes_[-1]
        return minimize_on_simplex(lambda R: self._at_size(n, R) @ self.weights_, self.n_sources_, n_grid, n_starts)


def _extrapolate(x: np.ndarray, y: np.ndarray, x_new: float) -> float:
    """y = E + A exp(-alpha x) through the points (alpha on a grid, (E, A) by least squares, E >= 0)."""
    best, best_sse = float(y[-1]), np.inf
    for alpha in np.geomspace(0.02, 2.0, 60):
        z = np.exp(-alpha * x)
        Z = np.column_stack([np.ones_like(z), z])
        (E, A), *_ = np.linalg.lstsq(Z, y, rcond=None)
        if E < 0:
            E, A = 0.0, float(z @ y / (z @ z))
        sse = float(((E + A * z - y) ** 2).sum())
        if sse < best_sse:
            best, best_sse = float(E + A * np.exp(-alpha * x_new)), sse
    return best


class RegMixBaseline:
    """RegMix-style linear regression of each domain's loss on (r_1..r_J, log N)."""

    def __init__(self, n_candidates: int = 10_000, random_state: int = 0) -> None:
        self.n_candidates, self.random_state = n_candidates, random_state

    def fit(self, N: np.ndarray, R: np.ndarray, L: np.ndarray, domain_weights: np.ndarray | None = None
            ) -> "RegMixBaseline":
        from sklearn.linear_model import LinearRegression

        R = check_mixtures(R)
        L = np.asarray(L, dtype=float)
        L = L[:, None] if L.ndim == 1 else L
        N = check_sizes(N, R.shape[0])
        D = L.shape[1]
        self.weights_ = np.full(D, 1.0 / D) if domain_weights is None else np.asarray(domain_weights, dtype=float)
        X = np.column_stack([R, np.log(N)])
        self.reg_ = LinearRegression().fit(X, L)
        self.n_sources_ = R.shape[1]
        return self

    def predict(self, N: float | np.ndarray, R: np.ndarray) -> np.ndarray:
        R = check_mixtures(R)
        logn = np.broadcast_to(np.log(np.atleast_1d(np.asarray(N, dtype=float))), (R.shape[0],))
        return self.reg_.predict(np.column_stack([R, logn])).reshape(R.shape[0], -1)

    def predict_target(self, N: float, R: np.ndarray) -> np.ndarray:
        return self.predict(N, R) @ self.weights_

    def optimal_mixture(self, N_target: float) -> np.ndarray:
        cand = np.random.default_rng(self.random_state).dirichlet(np.ones(self.n_sources_), self.n_candidates)
        return cand[int(np.argmin(self.predict_target(N_target, cand)))]


__all__ = ["DataMixingLaw", "RegMixBaseline"]
