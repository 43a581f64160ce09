"""Contextual multinomial logit (MNL) choice model and the MNL assortment problem. [A08]

Items i = 1..n with attraction values v_i(x) = exp(theta_i^T x + b_i) (item-specific theta_i, intercept b_i);
option 0 is no purchase with v_0 = 1. Offered an assortment S, a customer with context x picks

    P(i | x, S) = v_i(x) / (1 + sum_{j in S} v_j(x))   for i in S,     P(0 | x, S) = 1 / (1 + sum_{j in S} v_j(x)).

``ContextualMNL`` fits theta by maximum likelihood (convex negative log-likelihood, small L2 penalty,
L-BFGS). ``mnl_assortment`` solves  max_{S, |S| <= K}  sum_{i in S} v_i r_i / (1 + sum_{i in S} v_i)  per context:
revenue-ordered assortments without a capacity, Dinkelbach's parametric search with a capacity.
Choices are coded 0 = no purchase and i = item i (column i - 1 of an assortment mask).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from icml26.harness import validate

# helper functions

def check_matrix(X: object, name: str, ncols: int | None = None) -> np.ndarray:
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a numeric array") from None
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows x columns), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if ncols is not None and X.shape[1] != ncols:
        raise ValueError(f"{name} must have {ncols} columns, got {X.shape[1]}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf; clean or impute it first")
    return X


def check_assortments(S: object, shape: tuple[int, int], name: str = "offered") -> np.ndarray:
    S = np.asarray(S)
    if S.shape != shape:
        raise ValueError(f"{name} must be a boolean mask of shape {shape} (rows x items), got {S.shape}")
    if S.dtype != bool:
        if not np.all(np.isin(S, (0, 1))):
            raise ValueError(f"{name} must be a 0/1 or boolean mask over items")
        S = S.astype(bool)
    return S


def check_revenues(revenues: object, n_items: int | None = None) -> np.ndarray:
    r = np.asarray(revenues, dtype=float)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"revenues must be a non-empty 1-D array (one per item), got shape {r.shape}")
    if n_items is not None and r.size != n_items:
        raise ValueError(f"revenues has {r.size} entries but there are {n_items} items")
    if not np.all(np.isfinite(r)):
        raise ValueError("revenues contain NaN or inf")
    if np.any(r <= 0):
        raise ValueError("revenues must be > 0 (the no-purchase option has revenue 0); drop items with r <= 0")
    return r


def check_capacity(capacity: object) -> int | None:
    if capacity is None:
        return None
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
        raise TypeError(f"capacity must be None or an int >= 1, got {type(capacity).__name__}")
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1 (the largest assortment size), got {capacity}")
    return int(capacity)


def check_attractions(v: object, name: str = "v") -> np.ndarray:
    """Attraction values: a finite array of shape (..., n), n >= 1, every entry > 0 (v = exp(utility))."""
    v = np.asarray(validate.finite(name, v), dtype=float)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError(f"{name} (attraction values) must have shape (..., n_items) with n_items >= 1, "
                         f"got shape {v.shape}")
    if np.any(v <= 0):
        raise ValueError(f"{name} (attraction values) must be > 0 (v = exp(utility)), got a minimum of {v.min():.4g}")
    return v


def _check_mask(S: object, v: np.ndarray, name: str = "S") -> np.ndarray:
    S = np.asarray(S)
    try:
        np.broadcast_shapes(S.shape, v.shape)
    except ValueError:
        raise ValueError(f"{name} (assortment masks) of shape {S.shape} does not broadcast against the attractions "
                         f"of shape {v.shape}") from None
    if S.dtype != bool:
        if not np.all(np.isin(S, (0, 1))):
            raise ValueError(f"{name} must be a 0/1 or boolean mask over items")
        S = S.astype(bool)
    return S


def _check_rewards(r: object, name: str = "r") -> np.ndarray:
    r = np.asarray(validate.finite(name, r), dtype=float)
    if np.any(r < 0):
        raise ValueError(f"{name} (revenues) must be >= 0, got a minimum of {r.min():.4g}")
    return r


def choice_probabilities(v: np.ndarray, S: np.ndarray) -> np.ndarray:
    """MNL choice law (K, n + 1) given attractions ``v`` (K, n) and masks ``S`` (K, n); column 0 = no purchase."""
    v = check_attractions(v)
    return _choice_probabilities(v, _check_mask(S, v))


def _choice_probabilities(v: np.ndarray, S: np.ndarray) -> np.ndarray:
    w = v * S
    den = 1.0 + w.sum(-1, keepdims=True)
    return np.concatenate([1.0 / den, w / den], axis=-1)


def mnl_revenue(v: np.ndarray, r: np.ndarray, S: np.ndarray) -> np.ndarray:
    """Expected revenue  sum_{i in S} v_i r_i / (1 + sum_{i in S} v_i)  per row."""
    v = check_attractions(v)
    r = _check_rewards(r)
    try:
        np.broadcast_shapes(r.shape, v.shape)
    except ValueError:
        raise ValueError(f"r of shape {r.shape} does not broadcast against v of shape {v.shape}") from None
    return _mnl_revenue(v, r, _check_mask(S, v))


def _mnl_revenue(v: np.ndarray, r: np.ndarray, S: np.ndarray) -> np.ndarray:
    w = v * S
    return (w * r).sum(-1) / (1.0 + w.sum(-1))


# main solver

def mnl_assortment(v: np.ndarray, r: np.ndarray, capacity: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Optimal MNL assortment per context: argmax_{|S| <= capacity} sum_S v_i r_i / (1 + sum_S v_i). [A08]

    Args:
        v: attraction values > 0, shape (..., n) (one row per context).
        r: revenues >= 0 broadcastable against ``v`` (e.g. (n,), or (J, 1, n) transformed revenues for J dual
            variables against v of shape (1, K, n)).
        capacity: largest assortment size, ``None`` for no limit.

    Returns:
        masks (..., n) bool and optimal values (...), over the broadcast shape of v and r.

    Without a capacity the optimum is revenue-ordered (the best of the n + 1 sets {top-m items by r}).
    With a capacity C, Dinkelbach's iteration  S_t = top-C of v_i (r_i - z_t)_+,  z_{t+1} = rev(S_t)
    increases z and stops after finitely many steps at the optimum z* (at the fixed point
    max_S sum_S v_i (r_i - z*) = z*, so no set earns more than z*).
    """
    v, r, capacity = check_attractions(v), _check_rewards(r), check_capacity(capacity)
    if r.ndim == 0:
        raise ValueError("r must hold one revenue per item (shape (..., n_items)), got a scalar")
    try:
        np.broadcast_shapes(v.shape, r.shape)
    except ValueError:
        raise ValueError(f"r of shape {r.shape} does not broadcast against v of shape {v.shape}") from None
    return _mnl_assortment(v, r, capacity)


def _mnl_assortment(v: np.ndarray, r: np.ndarray, capacity: int | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mnl_assortment` without the argument checks (the DRAO solver checks once, up front)."""
    if r.ndim < v.ndim:
        r = r.reshape((1,) * (v.ndim - r.ndim) + r.shape)
    shape = np.broadcast_shapes(v.shape, r.shape)
    n = shape[-1]
    if capacity is None or capacity >= n:
        order = np.argsort(-r, axis=-1, kind="stable")  # sorted once per distinct revenue vector
        vs, rs = np.take_along_axis(v, order, -1), np.take_along_axis(r, order, -1)
        cv = np.cumsum(np.broadcast_to(vs, shape), -1)
        vals = np.cumsum(vs * rs, -1) / (1.0 + cv)
        best = np.maximum(vals.max(-1), 0.0)
        m = np.where(best > 0, vals.argmax(-1) + 1, 0)  # number of items offered
        S_sorted = np.arange(n) < m[..., None]
        S = np.zeros(shape, dtype=bool)
        np.put_along_axis(S, np.broadcast_to(order, shape), S_sorted, -1)
        return S, best
    z = np.zeros(shape[:-1])
    S = np.zeros(shape, dtype=bool)
    for _ in range(n + 2):
        score = v * (r - z[..., None])
        top = np.argpartition(-score, capacity - 1, axis=-1)[..., :capacity]
        S_new = np.zeros(shape, dtype=bool)
        np.put_along_axis(S_new, top, np.take_along_axis(score, top, -1) > 0, -1)
        if np.array_equal(S_new, S):
            break
        S, z = S_new, np.maximum(z, _mnl_revenue(v, r, S_new))
    return S, _mnl_revenue(v, r, S)


# main class

class ContextualMNL(BaseEstimator):
    """Contextual MNL with item-specific coefficients, fitted by (L2-penalised) maximum likelihood. [A08]

    log v_i(x) = theta_i^T x + b_i. The negative log-likelihood of logged tuples (x_t, S_t, c_t)

        NLL(theta) = sum_t [ log(1 + sum_{j in S_t} v_j(x_t)) - log v_{c_t}(x_t) ]      (log v_0 = 0)

    is convex in (theta, b); we minimise NLL / T + alpha/2 ||theta||^2 with L-BFGS.

    Args:
        alpha: L2 penalty on theta (not on the intercepts).
        fit_intercept: learn an item intercept b_i.
        max_iter, tol: L-BFGS controls.
        random_state: if given, L-BFGS starts from a tiny random point (N(0, 1e-3)) instead of zero; the NLL is
            convex, so the fit does not depend on it beyond solver tolerance.

    Attributes:
        coef_ (n_items, n_features), intercept_ (n_items,), n_items_, n_features_in_.
    """

    def __init__(self, alpha: float = 1e-4, fit_intercept: bool = True, max_iter: int = 1000, tol: float = 1e-9,
                 random_state: int | None = None):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray, *, offered: np.ndarray) -> "ContextualMNL":
        """Fit on contexts ``X`` (T, d), choices ``y`` (T,) in {0 (no purchase), 1..n}, ``offered`` masks (T, n).

        Every item must have been offered at least once (ValueError otherwise): an item never offered has no
        likelihood term, so its coefficients would be unidentified.
        """
        X = check_matrix(X, "X")
        T, d = X.shape
        offered = np.asarray(offered)
        if offered.ndim != 2 or offered.shape[0] != T:
            raise ValueError(f"offered must be a (T, n_items) mask with T = {T} rows, got shape {offered.shape}")
        S = check_assortments(offered, offered.shape)
        n = S.shape[1]
        y = np.asarray(y)
        if y.shape != (T,):
            raise ValueError(f"y (the choices) must have shape ({T},), got {y.shape}")
        if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise ValueError("y must hold integer choices: 0 = no purchase, i = item i (1..n_items)")
        y = y.astype(int)
        if y.min() < 0 or y.max() > n:
            raise ValueError(f"choices must lie in 0..{n} (0 = no purchase), got range [{y.min()}, {y.max()}]")
        never = np.nonzero(~S.any(axis=0))[0]
        if never.size:
            raise ValueError(f"item(s) {', '.join(str(i + 1) for i in never[:10])}"
                             f"{' ...' if never.size > 10 else ''} (choice codes, 1..{n}) were never offered in "
                             "the logged data, so their attraction cannot be estimated (it would stay at the "
                             "starting value and a policy would offer them blindly); drop those columns from "
                             "offered (and from the revenues) or log offers that include them")
        bought = y > 0
        if not np.all(S[np.nonzero(bought)[0], y[bought] - 1]):
            raise ValueError("some choices pick an item that was not in the offered set")
        validate.non_negative("alpha", self.alpha)
        validate.positive_int("max_iter", self.max_iter)
        validate.non_negative("tol", self.tol)

        Z = np.hstack([X, np.ones((T, 1))]) if self.fit_intercept else X
        p = Z.shape[1]
        Y = np.zeros((T, n + 1))
        Y[np.arange(T), y] = 1.0
        pen = np.ones(p)
        if self.fit_intercept:
            pen[-1] = 0.0
        logmask = np.where(S, 0.0, -np.inf)

        def nll(w: np.ndarray) -> tuple[float, np.ndarray]:
            W = w.reshape(n, p)
            U = np.concatenate([np.zeros((T, 1)), Z @ W.T + logmask], 1)  # utilities, no-purchase first
            lse = logsumexp(U, axis=1)
            P = np.exp(U - lse[:, None])
            f = (lse - U[np.arange(T), y]).sum() / T + 0.5 * self.alpha * (W**2 * pen).sum()
            G = (P - Y)[:, 1:].T @ Z / T + self.alpha * W * pen
            return f, G.ravel()

        w0 = np.zeros(n * p) if self.random_state is None else \
            1e-3 * check_random_state(self.random_state).standard_normal(n * p)
        res = minimize(nll, w0, jac=True, method="L-BFGS-B",
                       options={"maxiter": self.max_iter, "gtol": self.tol, "ftol": 1e-15})
        W = res.x.reshape(n, p)
        self.coef_ = W[:, :d].copy()
        self.intercept_ = W[:, d].copy() if self.fit_intercept else np.zeros(n)
        self.n_items_, self.n_features_in_ = n, d
        self.n_iter_, self.converged_ = int(res.nit), bool(res.success)
        return self

    def attractions(self, X: np.ndarray) -> np.ndarray:
        """v_i(x) = exp(theta_i^T x + b_i), shape (m, n_items)."""
        check_is_fitted(self)
        X = check_matrix(X, "X", self.n_features_in_)
        return np.exp(X @ self.coef_.T + self.intercept_)

    def choice_probs(self, X: np.ndarray, S: np.ndarray) -> np.ndarray:
        """P(c | x, S) for c = 0 (no purchase), 1..n: shape (m, n_items + 1)."""
        v = self.attractions(X)
        return _choice_probabilities(v, check_assortments(S, v.shape, "S"))

    def expected_revenue(self, X: np.ndarray, S: np.ndarray, revenues: np.ndarray) -> np.ndarray:
        """Expected revenue per context of offering S(x): sum_{i in S} v_i r_i / (1 + sum_{i in S} v_i)."""
        v = self.attractions(X)
        return _mnl_revenue(v, check_revenues(revenues, self.n_items_), check_assortments(S, v.shape, "S"))
