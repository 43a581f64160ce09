"""Distributionally robust assortment optimization (DRAO) under a contextual MNL model. [A08]

Nominal law P = (contexts x_k with weights w_k) x MNL choice given S(x_k); R = revenue of the realised choice
(r_0 = 0 for no purchase). A policy pi maps contexts to assortments; its robust value is

    V(pi) = inf { E_Q[R] : D(Q || P_pi) <= rho },        D in {TV, KL, chi2},

with the ambiguity set on the joint (context, choice) law. Each strong dual (see ``duals.py``) has the form
V(pi) = sup_theta phi_theta(E_{P_pi}[g_theta(R)]) with phi_theta increasing and g_theta nondecreasing, so

    max_pi V(pi) = sup_theta phi_theta( sum_k w_k max_S (g(0) + sum_{i in S} v_ik g(r_i)) / (1 + sum_{i in S} v_ik) ).

For a fixed dual variable theta the inner max is a standard MNL assortment problem per context with
*transformed revenues*  r~_i = g_theta(r_i) - g_theta(0):

    TV   (theta = eta):  r~_i = min(r_i, eta)
    KL   (theta = lam):  r~_i = 1 - exp(-r_i / lam)
    chi2 (theta = eta):  r~_i = eta^2 - (eta - r_i)_+^2

all increasing in r_i, hence revenue-ordered without a capacity (and a parametric top-K search with one).
The outer sup over theta is one-dimensional but not concave (a max over policies), so we scan a grid and then
run a branch and bound on it (the inner optimum is monotone in theta, which bounds h on an interval); for TV
the dual is exact at eta in {0, r_1, ..., r_n}.
Cost O(G * K * n log n): polynomial in the number of items n and contexts K.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from icml26.harness import validate

from .duals import check_divergence, check_rho, chi2_dual, kl_dual, robust_value_batch, tv_dual
from .mnl import (
    ContextualMNL,
    _choice_probabilities,
    _mnl_assortment,
    check_assortments,
    check_capacity,
    check_matrix,
    check_revenues,
)


@dataclass
class DRAOResult:
    """Output of :func:`solve_drao`.

    assortments (K, n) bool; robust_value V(pi*); dual_var: the theta whose transformed revenues generate pi*
    (``inf`` when rho = 0); nominal_value E_P[R] under pi*; revenue_law: the law of R over (0, r_1..r_n);
    grid / profile: the scanned dual variables and h(theta) = max_pi of the dual objective at theta.
    """

    assortments: np.ndarray
    robust_value: float
    dual_var: float
    nominal_value: float
    revenue_law: np.ndarray
    grid: np.ndarray = field(repr=False)
    profile: np.ndarray = field(repr=False)


# helper functions

def transformed_revenues(revenues: np.ndarray, divergence: str, dual_var: np.ndarray | float) -> np.ndarray:
    """r~_i = g_theta(r_i) - g_theta(0) for each dual variable theta (shape theta.shape + (n,)). [A08]"""
    divergence, r = check_divergence(divergence), check_revenues(revenues)
    t = np.asarray(dual_var, dtype=float)[..., None]
    if np.any(np.isnan(t)) or np.any(t < 0) or (divergence == "kl" and np.any(t == 0)):
        raise ValueError(f"dual_var must be {'> 0' if divergence == 'kl' else '>= 0'} (np.inf for rho = 0, the "
                         f"nominal problem), got {validate.describe(dual_var)}")
    if not np.all(np.isfinite(t)):  # rho = 0: the nominal problem
        return np.broadcast_to(r, t.shape[:-1] + r.shape).copy()
    if divergence == "tv":
        return np.minimum(r, t)
    if divergence == "kl":
        return -np.expm1(-r / t)
    return t**2 - np.maximum(t - r, 0.0) ** 2


def _dual_objective(law: np.ndarray, R: np.ndarray, rho: float, divergence: str, theta: np.ndarray) -> np.ndarray:
    fn = {"tv": tv_dual, "kl": kl_dual, "chi2": chi2_dual}[divergence]
    return fn(law, R, rho, theta)


def _policy_laws(v: np.ndarray, w: np.ndarray, S: np.ndarray) -> np.ndarray:
    """Law of R over (0, r_1..r_n) for policies S (B, K, n): sum_k w_k P(. | x_k, S_k)."""
    return np.einsum("k,bkc->bc", w, _choice_probabilities(v[None], S))


def _best_response(v, w, r, R, rho, divergence, capacity, thetas, chunk_elems=4_000_000):
    """For each theta: per-context optimal assortments under r~(theta) (J, K, n), their law of R (J, n + 1)
    and h(theta) = max_pi (dual objective at theta) (J,)."""
    thetas = np.atleast_1d(np.asarray(thetas, dtype=float))
    K, n = v.shape
    step = max(1, chunk_elems // (K * n))
    policies, laws = [], []
    for s in range(0, thetas.size, step):
        rt = transformed_revenues(r, divergence, thetas[s:s + step])        # (J, n)
        S, _ = _mnl_assortment(v[None], rt[:, None, :], capacity)             # (J, K, n)
        policies.append(S)
        laws.append(_policy_laws(v, w, S))
    laws = np.concatenate(laws)
    return np.concatenate(policies), laws, _dual_objective(laws, R, rho, divergence, thetas)


def _upper_bound(div, rho, lo, hi, law_lo, law_hi, R):
    """Bound on h over [lo, hi] from the monotonicity of the inner optimum in the dual variable.

    KL:   M(lam) = min_pi E exp(-R/lam) increases with lam, so h <= -hi log M(lo) - lo rho.
    chi2: Q(eta) = min_pi E (eta - R)_+^2 satisfies eta^2 - Q(eta) nondecreasing, so on [lo, hi]
          eta^2 - Q(eta) <= hi^2 - Q(hi) and h <= hi - sqrt(1 + rho) sqrt((lo^2 - hi^2 + Q(hi))_+).
    """
    if div == "kl":
        M = (law_lo * np.exp(-R / lo[:, None])).sum(-1)
        return -hi * np.log(M) - lo * rho
    Q = (law_hi * np.maximum(hi[:, None] - R, 0.0) ** 2).sum(-1)
    return hi - math.sqrt(1.0 + rho) * np.sqrt(np.maximum(lo**2 - hi**2 + Q, 0.0))


def _dual_grid(r: np.ndarray, rho: float, divergence: str, grid: int) -> np.ndarray:
    r_max = float(r.max())
    if divergence == "tv":  # exact: the sup is attained at eta in {0} U {r_i}
        return np.unique(np.concatenate([[0.0], r]))
    top = r_max * (2.0 + 2.0 / math.sqrt(rho))
    if divergence == "kl":
        return np.geomspace(1e-3 * r_max, top, grid)
    half = grid // 2
    return np.unique(np.concatenate([np.linspace(0.0, r_max, half + 1)[1:], np.geomspace(r_max, top, grid - half)]))


def _check_v_w(v: object, weights: object) -> tuple[np.ndarray, np.ndarray]:
    v = check_matrix(v, "v (attraction values)")
    if np.any(v <= 0):
        raise ValueError("attraction values v must be > 0 (v = exp(utility))")
    K = v.shape[0]
    if weights is None:
        return v, np.full(K, 1.0 / K)
    w = np.asarray(weights, dtype=float)
    if w.shape != (K,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be {K} finite nonnegative numbers with a positive sum")
    return v, w / w.sum()


# main solver

def solve_drao(v: np.ndarray, revenues: np.ndarray, *, divergence: str = "kl", rho: float = 0.1,
               capacity: int | None = None, weights: np.ndarray | None = None, grid: int = 200,
               max_rounds: int = 40, max_active: int = 16, tol: float = 1e-10) -> DRAOResult:
    """Robust assortment policy  argmax_pi inf_{D(Q||P_pi) <= rho} E_Q[R]  over K contexts. [A08]

    Args:
        v: attraction values v_ik > 0, shape (K, n) (e.g. ``ContextualMNL.attractions(X)``).
        revenues: r_i > 0, shape (n,).
        divergence: ``"tv"``, ``"kl"`` or ``"chi2"``.
        rho: radius of the ambiguity set (>= 0; 0 gives the nominal, revenue-maximising policy).
        capacity: largest assortment size (``None``: no limit).
        weights: context weights (default uniform: the empirical context law).
        grid: number of dual-variable grid points (KL, chi2); TV uses its exact n + 1 breakpoints.
        max_rounds, max_active, tol: refinement of the dual variable (KL, chi2): each round halves the (at most
            ``max_active``) grid intervals whose ends give different policies and whose upper bound on h exceeds
            the best robust value found by more than ``tol`` (relative).
    """
    div, rho, cap = check_divergence(divergence), check_rho(rho), check_capacity(capacity)
    v, w = _check_v_w(v, weights)
    r = check_revenues(revenues, v.shape[1])
    if not isinstance(grid, (int, np.integer)) or grid < 3:
        raise ValueError(f"grid must be an int >= 3, got {grid!r}")
    validate.non_negative_int("max_rounds", max_rounds)
    validate.positive_int("max_active", max_active)
    validate.non_negative("tol", tol)
    R = np.concatenate([[0.0], r])
    if rho == 0.0:
        S, _ = _mnl_assortment(v, r, cap)
        law = _policy_laws(v, w, S[None])[0]
        val = float(law @ R)
        return DRAOResult(S, val, math.inf, val, law, np.array([math.inf]), np.array([val]))

    thetas = _dual_grid(r, rho, div, grid)
    policies, laws, h = _best_response(v, w, r, R, rho, div, cap, thetas)
    vals, duals = robust_value_batch(laws, R, rho, div)  # V(pi_theta) >= h(theta) for each grid policy
    cand_S, cand_theta = [policies], [thetas]
    if div != "tv":
        # branch and bound on the dual variable: h is a max of concave functions (it can have narrow peaks
        # between grid points), so split every interval whose two ends give different policies and whose upper
        # bound on h beats the best robust value found so far; intervals with one policy at both ends are kept
        lo, hi, law_lo, law_hi = thetas[:-1], thetas[1:], laws[:-1], laws[1:]
        S_lo, S_hi = policies[:-1], policies[1:]
        best = vals.max()
        for _ in range(max_rounds):
            ub = _upper_bound(div, rho, lo, hi, law_lo, law_hi, R)
            differ = (S_lo != S_hi).reshape(len(lo), -1).any(1)
            keep = np.nonzero(differ & (ub > best + tol * max(1.0, abs(best))))[0]
            if keep.size == 0:
                break
            keep = keep[np.argsort(-ub[keep])][:max_active]
            lo, hi, law_lo, law_hi, S_lo, S_hi = (a[keep] for a in (lo, hi, law_lo, law_hi, S_lo, S_hi))
            mid = np.sqrt(lo * hi) if div == "kl" else 0.5 * (lo + hi)
            S_mid, law_mid, _ = _best_response(v, w, r, R, rho, div, cap, mid)
            v_mid, _ = robust_value_batch(law_mid, R, rho, div)
            cand_S.append(S_mid)
            cand_theta.append(mid)
            vals = np.concatenate([vals, v_mid])
            best = vals.max()
            lo, hi = np.concatenate([lo, mid]), np.concatenate([mid, hi])
            law_lo, law_hi = np.concatenate([law_lo, law_mid]), np.concatenate([law_mid, law_hi])
            S_lo, S_hi = np.concatenate([S_lo, S_mid]), np.concatenate([S_mid, S_hi])
    cand_S, cand_theta = np.concatenate(cand_S), np.concatenate(cand_theta)
    j = int(vals.argmax())
    law = _policy_laws(v, w, cand_S[j][None])[0]
    return DRAOResult(cand_S[j], float(vals[j]), float(cand_theta[j]), float(law @ R), law, thetas, h)


def policy_robust_value(v: np.ndarray, revenues: np.ndarray, assortments: np.ndarray, *, divergence: str,
                        rho: float, weights: np.ndarray | None = None) -> float:
    """V(pi) = inf_{D(Q||P_pi) <= rho} E_Q[R] of a given policy (assortments (K, n)) under attractions v. [A08]"""
    div, rho = check_divergence(divergence), check_rho(rho)
    v, w = _check_v_w(v, weights)
    r = check_revenues(revenues, v.shape[1])
    S = check_assortments(assortments, v.shape, "assortments")
    law = _policy_laws(v, w, S[None])
    return float(robust_value_batch(law, np.concatenate([[0.0], r]), rho, div)[0][0])


def brute_force_robust(v: np.ndarray, revenues: np.ndarray, *, divergence: str = "kl", rho: float = 0.1,
                       capacity: int | None = None, weights: np.ndarray | None = None,
                       max_policies: int = 300_000) -> tuple[float, np.ndarray]:
    """Exhaustive DRAO: enumerate every joint policy (one assortment per context), keep the best. [A08]

    For checking :func:`solve_drao` on small instances; no dual-commutation argument is used, each joint
    policy's robust value is computed from its own strong dual. Returns (value, assortments (K, n)).
    """
    div, rho, cap = check_divergence(divergence), check_rho(rho), check_capacity(capacity)
    v, w = _check_v_w(v, weights)
    K, n = v.shape
    r = check_revenues(revenues, n)
    validate.positive_int("max_policies", max_policies)
    subsets = np.array([s for s in itertools.product((False, True), repeat=n) if cap is None or sum(s) <= cap])
    total = len(subsets) ** K
    if total > max_policies:
        raise ValueError(f"{total} joint policies exceed max_policies={max_policies}; use a smaller instance")
    # per-context choice laws for every subset: (K, n_sub, n + 1); joint law = sum_k w_k law_k[s_k]
    per = np.stack([_choice_probabilities(np.broadcast_to(v[k], subsets.shape), subsets) for k in range(K)])
    law = np.zeros((1, n + 1))
    for k in range(K):
        law = (law[:, None, :] + w[k] * per[k][None]).reshape(-1, n + 1)
    vals, _ = robust_value_batch(law, np.concatenate([[0.0], r]), rho, div)
    j = int(vals.argmax())
    idx = np.unravel_index(j, (len(subsets),) * K)
    return float(vals[j]), subsets[list(idx)]


# main class

class DRAssortment(BaseEstimator):
    """Distributionally robust assortment policy learned from logged choices (scikit-learn style). [A08]

    ``fit`` estimates a contextual MNL by maximum likelihood on logged (context, offered set, choice) tuples,
    then solves  max_pi inf_{D(Q || P_pi) <= rho} E_Q[revenue]  with P = (empirical contexts) x MNL(theta_hat)
    by the dual search of :func:`solve_drao`. ``predict(X)`` applies the same transformed revenues
    r~(theta*) to new contexts, returning per-context optimal assortments as boolean masks.

    Args:
        divergence: ``"tv"``, ``"kl"`` or ``"chi2"``.
        rho: radius of the ambiguity set (>= 0; 0 = nominal revenue maximisation).
        capacity: largest assortment size, or ``None``.
        grid: dual-variable grid size.
        alpha: L2 penalty of the MNL maximum-likelihood fit.
        random_state: seeds the (tiny) random starting point of the MLE (``None``: start at zero); the NLL
            is convex, so the fit does not depend on it beyond solver tolerance.

    Attributes:
        model_ (fitted ``ContextualMNL``), revenues_, dual_var_, transformed_revenues_, robust_value_,
        nominal_value_, assortments_ (on the fitting contexts), n_items_, n_features_in_.
    """

    def __init__(self, divergence: str = "kl", rho: float = 0.1, capacity: int | None = None, grid: int = 200,
                 alpha: float = 1e-4, random_state: int | None = None):
        self.divergence = divergence
        self.rho = rho
        self.capacity = capacity
        self.grid = grid
        self.alpha = alpha
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray, *, offered: np.ndarray, revenues: np.ndarray,
            contexts: np.ndarray | None = None) -> "DRAssortment":
        """Fit on logged contexts X (T, d), choices y (T,) in {0 = no purchase, 1..n}, offered masks (T, n).

        ``contexts`` (default: X) are the contexts whose empirical law the ambiguity set is centred on.
        """
        div, rho, cap = check_divergence(self.divergence), check_rho(self.rho), check_capacity(self.capacity)
        if not isinstance(self.grid, (int, np.integer)) or self.grid < 3:
            raise ValueError(f"grid must be an int >= 3, got {self.grid!r}")
        validate.non_negative("alpha", self.alpha)
        X = check_matrix(X, "X")
        n = np.shape(offered)[1] if np.ndim(offered) == 2 else None
        r = check_revenues(revenues, n)
        self.model_ = ContextualMNL(alpha=self.alpha, random_state=self.random_state).fit(X, y, offered=offered)
        C = X if contexts is None else check_matrix(contexts, "contexts", X.shape[1])
        res = solve_drao(self.model_.attractions(C), r, divergence=div, rho=rho, capacity=cap, grid=self.grid)
        self.revenues_ = r
        self.dual_var_ = res.dual_var
        self.transformed_revenues_ = transformed_revenues(r, div, res.dual_var)
        self.robust_value_ = res.robust_value
        self.nominal_value_ = res.nominal_value
        self.assortments_ = res.assortments
        self.n_items_, self.n_features_in_ = self.model_.n_items_, X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Robust assortments for contexts X (m, d): boolean masks (m, n_items)."""
        check_is_fitted(self)
        v = self.model_.attractions(X)
        S, _ = _mnl_assortment(v, self.transformed_revenues_, check_capacity(self.capacity))
        return S

    def robust_value(self, X: np.ndarray) -> float:
        """Robust value of ``predict(X)`` under the fitted MNL with the empirical law of X."""
        check_is_fitted(self)
        return policy_robust_value(self.model_.attractions(X), self.revenues_, self.predict(X),
                                   divergence=self.divergence, rho=self.rho)
