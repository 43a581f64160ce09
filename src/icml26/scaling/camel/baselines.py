"""Baselines for [A18]: a size-agnostic data mixing law fitted at each size separately, and RegMix-style
regression.

- :class:`DataMixingLaw` (Ye et al. 2024, arXiv 2403.16952): at each model size separately,
  L_i(r) = c_i + exp(t_i . r) (k_i folded into t_i as in CAMEL). A new size is predicted by fitting
  L = E + A N^-alpha across the fitted sizes for each requested mixture (per domain); the mixture it recommends
  for a larger model is the optimum of the largest fitted size's law (the usual transfer).
- :class:`RegMixBaseline` (RegMix, arXiv 2407.01492): a LightGBM regressor per domain (RegMix's hyper-parameters)
  of the loss on the mixture proportions and log N, fitted on all small runs; the recommended mixture is the mean
  of the 128 best of 100,000 Dirichlet candidates under the regression (rank invariance across sizes assumed).
  ``regressor="linear"`` keeps the earlier linear regression.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares

from icml26.harness import validate as v

from .law import check_fit_inputs, check_mixtures, minimize_on_simplex, sizes_for


def _fit_size_law(R: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(c, t_1..t_J) of L = c + exp(t . r) by least squares on log L."""
    J = R.shape[1]

    def res(p):
        return np.log(p[0] + np.exp(R @ p[1:])) - np.log(y)

    r = least_squares(res, np.concatenate([[0.5 * y.min()], np.full(J, np.log(0.5 * y.mean()))]),
                      bounds=([0.0] + [-20.0] * J, [float(y.min())] + [5.0] * J), method="trf")
    return r.x


class DataMixingLaw:
    """Size-agnostic data mixing law, one fit per size (see module docstring). The inputs are checked as
    :meth:`CAMELLaw.fit` checks them (mixtures on the simplex, one positive size per run, positive losses with one
    row per run, domain weights a probability vector)."""

    def __init__(self) -> None:
        self.laws_ = None

    def fit(self, N: np.ndarray, R: np.ndarray, L: np.ndarray, domain_weights: np.ndarray | None = None
            ) -> "DataMixingLaw":
        N, R, L, self.weights_ = check_fit_inputs(N, R, L, domain_weights)
        self.sizes_ = np.unique(N)
        D = L.shape[1]
        laws = {}
        for n in self.sizes_:
            m = N == n
            if m.sum() <= R.shape[1] + 1:
                raise ValueError(f"size {n:g} has {m.sum()} runs; a per-size law needs more than {R.shape[1] + 1}")
            laws[float(n)] = np.stack([_fit_size_law(R[m], L[m, i]) for i in range(D)])
        self.laws_, self.n_sources_ = laws, R.shape[1]
        return self

    def _at_size(self, n: float, R: np.ndarray) -> np.ndarray:
        P = self.laws_[n]
        return P[:, 0][None, :] + np.exp(R @ P[:, 1:].T)

    def predict(self, N: float | np.ndarray, R: np.ndarray) -> np.ndarray:
        """Per-domain losses (M, D) at sizes ``N`` (a scalar or one per mixture, as :meth:`CAMELLaw.predict`): at a
        fitted size its law; elsewhere, per mixture and domain, E + A N^-alpha through the fitted sizes."""
        v.require_fitted(self, "laws_")
        R = check_mixtures(R, "R", n_sources=self.n_sources_)
        N = sizes_for(N, R.shape[0])
        out = np.empty((R.shape[0], len(self.weights_)))
        for n in np.unique(N):
            rows = N == n
            out[rows] = self._predict_one(float(n), R[rows])
        return out

    def _predict_one(self, N: float, R: np.ndarray) -> np.ndarray:
        if N in self.laws_:
            return self._at_size(N, R)
        per = np.stack([self._at_size(n, R) for n in self.sizes_])           # (S, M, D)
        x = np.log(self.sizes_ / self.sizes_[0])
        out = np.empty(per.shape[1:])
        for m in range(per.shape[1]):
            for d in range(per.shape[2]):
                out[m, d] = _extrapolate(x, per[:, m, d], float(np.log(N / self.sizes_[0])))
        return out

    def predict_target(self, N: float | np.ndarray, R: np.ndarray) -> np.ndarray:
        """Target loss sum_i w_i L_i (M,)."""
        return self.predict(N, R) @ self.weights_

    def optimal_mixture(self, N_target: float, n_grid: int = 2000, n_starts: int = 5) -> np.ndarray:
        """The optimum of the largest fitted size's law (the usual transfer; ``N_target`` is checked, not used)."""
        v.require_fitted(self, "laws_")
        v.positive("N_target", N_target)
        n = float(self.sizes_[-1])
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
    """RegMix (Liu et al., arXiv 2407.01492): regress each domain's loss on the mixture, then pick the mixture.

    Regressor (``regressor="lightgbm"``, the default and RegMix's own): one LightGBM gradient-boosted tree regressor per
    validation domain with RegMix's hyper-parameters (``regression_fitting/regression.ipynb``: gbdt, L2
    objective, 1,000 iterations, learning rate 1e-2, seed 42) and early stopping (3 rounds) on a held-out
    ``valid_frac`` of the runs (RegMix stops on a separate set of proxy runs). Differences, for our tens of runs
    instead of RegMix's 512: ``min_data_in_leaf`` is LightGBM's default 20 (RegMix's, for 512 runs) scaled to the number of runs
    (at least 2), and log N is a feature next to the proportions so that runs of every fitted size are used (RegMix
    fits at one proxy size; trees cannot extrapolate in N, so the target size is predicted as the largest fitted
    one: RegMix's rank-invariance assumption). ``regressor="linear"``: ordinary least squares on (r, log N).

    Recommended mixture (RegMix's simulation): ``n_candidates`` draws from Dirichlet(``prior``) (RegMix: 100,000
    draws around the token distribution; here uniform tokens, alpha = 1/J each), predicted by the regressor; the
    mean of the ``top_k`` (128) best is the mixture.
    """

    def __init__(self, regressor: str = "lightgbm", n_candidates: int = 100_000, top_k: int = 128,
                 prior: np.ndarray | None = None, valid_frac: float = 0.2, random_state: int = 0) -> None:
        v.one_of("regressor", regressor, ("lightgbm", "linear"))
        n_candidates, top_k = v.positive_int("n_candidates", n_candidates), v.positive_int("top_k", top_k)
        if top_k > n_candidates:
            raise ValueError(f"need 1 <= top_k <= n_candidates, got top_k = {top_k} > n_candidates = {n_candidates}")
        valid_frac = v.in_range("valid_frac", valid_frac, 0.0, 0.5, high_open=True)
        if prior is not None:
            prior = np.asarray(v.finite("prior", prior), dtype=float)
            if prior.ndim != 1 or not (prior > 0).all():
                raise ValueError(f"prior must be a 1-D array of positive Dirichlet parameters, got {v.describe(prior)}")
        self.regressor, self.n_candidates, self.top_k = regressor, n_candidates, top_k
        self.prior, self.valid_frac = prior, valid_frac
        self.random_state = v.non_negative_int("random_state", random_state)
        self.models_ = None

    def fit(self, N: np.ndarray, R: np.ndarray, L: np.ndarray, domain_weights: np.ndarray | None = None
            ) -> "RegMixBaseline":
        N, R, L, self.weights_ = check_fit_inputs(N, R, L, domain_weights)
        if self.prior is not None and self.prior.shape != (R.shape[1],):
            raise ValueError(f"prior must have one Dirichlet parameter per source ({R.shape[1]}), got shape "
                             f"{self.prior.shape}")
        if self.regressor == "lightgbm":
            v.require_package("lightgbm", "test", purpose="RegMixBaseline(regressor='lightgbm'); or pass "
                              "regressor='linear'")
        X = np.column_stack([R, np.log(N)])
        models: list = []
        for i in range(L.shape[1]):
            if self.weights_[i] == 0:
                models.append(None)          # a domain that does not enter the target is not fitted
                continue
            models.append(self._fit_one(X, L[:, i]))
        self.models_, self.n_sources_ = models, R.shape[1]
        return self

    def _fit_one(self, X: np.ndarray, y: np.ndarray):
        if self.regressor == "linear":
            from sklearn.linear_model import LinearRegression

            return LinearRegression().fit(X, y)
        import lightgbm as lgb
        n = len(y)
        params = {"boosting_type": "gbdt", "objective": "regression", "learning_rate": 1e-2, "seed": 42,
                  "verbosity": -1, "min_data_in_leaf": max(2, int(round(20 * n / 512))), "min_data_in_bin": 1,
                  "deterministic": True, "force_col_wise": True, "num_threads": 1}
        n_val = int(round(self.valid_frac * n))
        if n_val >= 2 and n - n_val >= 4:
            idx = np.random.default_rng(self.random_state).permutation(n)
            va, tr = idx[:n_val], idx[n_val:]
            train = lgb.Dataset(X[tr], y[tr], params={"min_data_in_bin": 1, "verbosity": -1})
            valid = lgb.Dataset(X[va], y[va], reference=train)
            return lgb.train(params, train, num_boost_round=1000, valid_sets=[valid],
                             callbacks=[lgb.early_stopping(stopping_rounds=3, verbose=False)])
        return lgb.train(params, lgb.Dataset(X, y, params={"min_data_in_bin": 1, "verbosity": -1}),
                         num_boost_round=1000)

    def predict(self, N: float | np.ndarray, R: np.ndarray) -> np.ndarray:
        """Per-domain losses (M, D) at sizes ``N`` (a scalar or one per mixture); domains with weight 0 (not fitted)
        are NaN."""
        v.require_fitted(self, "models_")
        R = check_mixtures(R, "R", n_sources=self.n_sources_)
        logn = np.log(sizes_for(N, R.shape[0]))
        X = np.column_stack([R, logn])
        return np.column_stack([np.full(len(X), np.nan) if m is None else m.predict(X) for m in self.models_])

    def predict_target(self, N: float | np.ndarray, R: np.ndarray) -> np.ndarray:
        """Target loss over the domains with weight > 0 (M,)."""
        P = self.predict(N, R)
        on = self.weights_ > 0
        return P[:, on] @ self.weights_[on]

    def optimal_mixture(self, N_target: float) -> np.ndarray:
        """RegMix's simulation: the mean of the ``top_k`` best of ``n_candidates`` Dirichlet draws at ``N_target``."""
        v.require_fitted(self, "models_")
        N_target = v.positive("N_target", N_target)
        J = self.n_sources_
        prior = np.full(J, 1.0 / J) if self.prior is None else self.prior
        cand = np.random.default_rng(self.random_state).dirichlet(prior, self.n_candidates)
        pred = self.predict_target(N_target, cand)
        top = cand[np.argsort(pred, kind="stable")[: self.top_k]].mean(0)
        return top / top.sum()


__all__ = ["DataMixingLaw", "RegMixBaseline"]
