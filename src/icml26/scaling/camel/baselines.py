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
        if regressor not in ("lightgbm", "linear"):
            raise ValueError(f"regressor must be 'lightgbm' or 'linear', got {regressor!r}")
        if n_candidates < 1 or not 1 <= top_k <= n_candidates:
            raise ValueError(f"need n_candidates >= 1 and 1 <= top_k <= n_candidates, got {n_candidates}, {top_k}")
        if not 0.0 <= valid_frac < 0.5:
            raise ValueError(f"valid_frac must be in [0, 0.5), got {valid_frac}")
        self.regressor, self.n_candidates, self.top_k = regressor, n_candidates, top_k
        self.prior, self.valid_frac, self.random_state = prior, valid_frac, random_state

    def fit(self, N: np.ndarray, R: np.ndarray, L: np.ndarray, domain_weights: np.ndarray | None = None
            ) -> "RegMixBaseline":
        R = check_mixtures(R)
        L = np.asarray(L, dtype=float)
        L = L[:, None] if L.ndim == 1 else L
        N = check_sizes(N, R.shape[0])
        if L.shape[0] != R.shape[0] or not np.isfinite(L).all():
            raise ValueError(f"L must be (n, D) finite losses with n = {R.shape[0]} runs, got {L.shape}")
        D = L.shape[1]
        self.weights_ = np.full(D, 1.0 / D) if domain_weights is None else np.asarray(domain_weights, dtype=float)
        if self.weights_.shape != (D,):
            raise ValueError(f"domain_weights must have {D} entries, got {self.weights_.shape}")
        X = np.column_stack([R, np.log(N)])
        self.n_sources_ = R.shape[1]
        self.models_: list = []
        for i in range(D):
            if self.weights_[i] == 0:
                self.models_.append(None)          # a domain that does not enter the target is not fitted
                continue
            self.models_.append(self._fit_one(X, L[:, i]))
        return self

    def _fit_one(self, X: np.ndarray, y: np.ndarray):
        if self.regressor == "linear":
            from sklearn.linear_model import LinearRegression

            return LinearRegression().fit(X, y)
        try:
            import lightgbm as lgb
        except ImportError as e:  # pragma: no cover - lightgbm is in the test extra
            raise ImportError("RegMixBaseline(regressor='lightgbm') needs lightgbm: pip install lightgbm "
                              "(or pass regressor='linear')") from e
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
        """Per-domain losses (M, D); domains with weight 0 (not fitted) are NaN."""
        R = check_mixtures(R)
        logn = np.broadcast_to(np.log(np.atleast_1d(np.asarray(N, dtype=float))), (R.shape[0],))
        X = np.column_stack([R, logn])
        return np.column_stack([np.full(len(X), np.nan) if m is None else m.predict(X) for m in self.models_])

    def predict_target(self, N: float, R: np.ndarray) -> np.ndarray:
        P = self.predict(N, R)
        on = self.weights_ > 0
        return P[:, on] @ self.weights_[on]

    def optimal_mixture(self, N_target: float) -> np.ndarray:
        J = self.n_sources_
        prior = np.full(J, 1.0 / J) if self.prior is None else np.asarray(self.prior, dtype=float)
        if prior.shape != (J,) or not (prior > 0).all():
            raise ValueError(f"prior must be {J} positive Dirichlet parameters, got {self.prior!r}")
        cand = np.random.default_rng(self.random_state).dirichlet(prior, self.n_candidates)
        pred = self.predict_target(N_target, cand)
        top = cand[np.argsort(pred, kind="stable")[: self.top_k]].mean(0)
        return top / top.sum()


__all__ = ["DataMixingLaw", "RegMixBaseline"]
