"""Strong duals of divergence-ball robust expectations, and their worst-case laws. [A08]

For a discrete nominal law p over outcomes with rewards R, the robust value is

    V = inf { E_Q[R] : D(Q || P) <= rho }

and each divergence has a one-dimensional concave dual (R_min = min R over the outcome space):

    TV   (D = sup_A |Q(A) - P(A)| = 0.5 sum |q - p|):
         V = sup_eta  E_P[min(R, eta)] - rho (eta - R_min)          (eta can be taken among the values of R)
    KL   (D = sum q log(q / p)):
         V = sup_{lam > 0}  -lam log E_P[exp(-R / lam)] - lam rho
    chi2 (D = sum (q - p)^2 / p = E_P[(dQ/dP - 1)^2]):
         V = sup_eta  eta - sqrt(1 + rho) sqrt(E_P[(eta - R)_+^2])   (Duchi & Namkoong)

All three are translation-equivariant and positively homogeneous in R, so internally R is mapped to [0, 1]
and the answer mapped back. The worst-case laws follow from the dual optimum:
    KL   q ∝ p exp(-R / lam*)
    chi2 q ∝ p (eta* - R)_+
    TV   move rho of mass from the highest-reward outcomes onto the lowest-reward outcome.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from icml26.harness import validate

DIVERGENCES = ("tv", "kl", "chi2")
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


# helper functions

def check_divergence(divergence: object) -> str:
    if not isinstance(divergence, str) or divergence.lower() not in DIVERGENCES:
        raise ValueError(f"unknown divergence {divergence!r}; choose one of {DIVERGENCES}")
    return divergence.lower()


def check_rho(rho: object) -> float:
    if isinstance(rho, bool) or not isinstance(rho, (int, float, np.integer, np.floating)):
        raise TypeError(f"rho must be a real number, got {type(rho).__name__}")
    rho = float(rho)
    if not math.isfinite(rho) or rho < 0:
        raise ValueError(f"rho (the radius of the ambiguity set) must be finite and >= 0, got {rho}")
    return rho


def _check_law(p: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p, dtype=float)
    R = np.broadcast_to(np.asarray(R, dtype=float), p.shape)
    if p.size == 0:
        raise ValueError("p is empty; pass a probability vector over at least one outcome")
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(R))):
        raise ValueError("p and R must be finite (found NaN or inf)")
    if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-8:
        raise ValueError(f"p must be a probability vector: nonnegative entries summing to 1 (sum is {p.sum():.6g})")
    return p.ravel(), R.ravel()


def golden_max(f, lo: np.ndarray, hi: np.ndarray, iters: int = 100) -> np.ndarray:
    """Vectorised golden-section search for the maximiser of a unimodal ``f`` on ``[lo, hi]`` (per entry)."""
    a, b = np.array(lo, dtype=float), np.array(hi, dtype=float)
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        left = fc >= fd  # the maximiser lies in [a, d]: drop (d, b]; otherwise drop [a, c)
        a, b = np.where(left, a, c), np.where(left, d, b)
        x = np.where(left, b - _GOLDEN * (b - a), a + _GOLDEN * (b - a))
        fx = f(x)
        c, d, fc, fd = (np.where(left, x, d), np.where(left, c, x),
                        np.where(left, fx, fd), np.where(left, fc, fx))
    return 0.5 * (a + b)


# dual objectives over a batch of laws p (B, M) with rewards R (B, M) in [0, 1], min R = 0

def tv_dual(p: np.ndarray, R: np.ndarray, rho: float, eta: np.ndarray) -> np.ndarray:
    return (p * np.minimum(R, eta[..., None])).sum(-1) - rho * eta


def kl_dual(p: np.ndarray, R: np.ndarray, rho: float, lam: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        lse = logsumexp(np.log(p) - R / lam[..., None], axis=-1)
    return -lam * lse - lam * rho


def chi2_dual(p: np.ndarray, R: np.ndarray, rho: float, eta: np.ndarray) -> np.ndarray:
    m2 = (p * np.maximum(eta[..., None] - R, 0.0) ** 2).sum(-1)
    return eta - math.sqrt(1.0 + rho) * np.sqrt(m2)


def _solve_unit(p: np.ndarray, R: np.ndarray, rho: float, div: str) -> tuple[np.ndarray, np.ndarray]:
    """Robust values and dual optima for laws p (B, M), rewards R (B, M) in [0, 1] with min 0."""
    B = p.shape[0]
    if rho == 0.0:
        return (p * R).sum(-1), np.full(B, np.inf)
    if div == "tv":
        # the dual is piecewise linear with kinks at the values of R: evaluate it there (exact)
        vals = _tv_sorted(p, R, rho)
        j = vals.argmax(-1)
        return vals[np.arange(B), j], R[np.arange(B), j]
    if div == "kl":
        lo = np.full(B, math.log(1e-7))
        hi = np.full(B, math.log(2.0 + 2.0 / math.sqrt(rho)))
        t = golden_max(lambda t: kl_dual(p, R, rho, np.exp(t)), lo, hi)
        lam = np.exp(t)
        return np.maximum(kl_dual(p, R, rho, lam), 0.0), lam
    lo, hi = np.zeros(B), np.full(B, 2.0 + 2.0 / math.sqrt(rho))
    eta = golden_max(lambda e: chi2_dual(p, R, rho, e), lo, hi)
    return np.maximum(chi2_dual(p, R, rho, eta), 0.0), eta


def _tv_sorted(p: np.ndarray, R: np.ndarray, rho: float) -> np.ndarray:
    """TV dual at every eta = R_j via sorting: E min(R, R_j) = sum_{R_i < R_j} p_i R_i + R_j P(R >= R_j)."""
    order = np.argsort(R, axis=-1)
    Rs, ps = np.take_along_axis(R, order, -1), np.take_along_axis(p, order, -1)
    below = np.cumsum(ps * Rs, -1) - ps * Rs
    tail = ps[:, ::-1].cumsum(-1)[:, ::-1]
    vals_sorted = below + Rs * tail - rho * Rs
    vals = np.empty_like(vals_sorted)
    np.put_along_axis(vals, order, vals_sorted, -1)
    return vals


def robust_value_batch(p: np.ndarray, R: np.ndarray, rho: float, divergence: str) -> tuple[np.ndarray, np.ndarray]:
    """Robust values and dual optima for a batch of laws ``p`` (B, M) with rewards ``R`` (M,) or (B, M).

    No validation (internal fast path). The dual variable is returned on the scale of R
    (``eta`` for TV and chi2, ``lam`` for KL; ``inf`` when rho = 0).
    """
    p = np.atleast_2d(np.asarray(p, dtype=float))
    R = np.broadcast_to(np.asarray(R, dtype=float), p.shape)
    r_min = R.min(-1, keepdims=True)
    scale = np.maximum(R.max(-1, keepdims=True) - r_min, 1e-300)
    val, dual = _solve_unit(p, (R - r_min) / scale, rho, divergence)
    s, m = scale[:, 0], r_min[:, 0]
    dual = dual * s if divergence == "kl" else dual * s + m
    return m + s * val, dual


# public functions

def robust_value(p: np.ndarray, R: np.ndarray, rho: float, divergence: str, *, return_dual: bool = False):
    """inf { E_Q[R] : D(Q || P) <= rho } via the strong dual of the chosen divergence. [A08]

    Args:
        p: nominal probabilities (any shape; e.g. a joint (context, choice) law of shape (K, n + 1)).
        R: rewards of the outcomes, broadcastable to ``p``.
        rho: radius of the ambiguity set (>= 0).
        divergence: ``"tv"``, ``"kl"`` or ``"chi2"``.
        return_dual: also return the optimal dual variable (``eta`` for TV/chi2, ``lam`` for KL).
    """
    div, rho = check_divergence(divergence), check_rho(rho)
    p, R = _check_law(p, R)
    val, dual = robust_value_batch(p[None], R[None], rho, div)
    return (float(val[0]), float(dual[0])) if return_dual else float(val[0])


def tv_robust_value(p: np.ndarray, R: np.ndarray, rho: float) -> float:
    """TV-ball robust value: sup_eta E_P[min(R, eta)] - rho (eta - min R). [A08]"""
    return robust_value(p, R, rho, "tv")


def kl_robust_value(p: np.ndarray, R: np.ndarray, rho: float) -> float:
    """KL-ball robust value: sup_{lam>0} -lam log E_P exp(-R/lam) - lam rho. [A08]"""
    return robust_value(p, R, rho, "kl")


def chi2_robust_value(p: np.ndarray, R: np.ndarray, rho: float) -> float:
    """chi2-ball robust value: sup_eta eta - sqrt(1+rho) sqrt(E_P (eta - R)_+^2). [A08]"""
    return robust_value(p, R, rho, "chi2")


def worst_case_distribution(p: np.ndarray, R: np.ndarray, rho: float, divergence: str) -> np.ndarray:
    """The minimising Q of ``inf {E_Q R : D(Q||P) <= rho}``, same shape as ``p``. [A08]

    KL: q ∝ p exp(-R/lam*); chi2: q ∝ p (eta* - R)_+; TV: move rho of mass from the highest rewards to
    the lowest-reward outcome(s) (split in proportion to p among the minimisers, uniformly if they have none).
    """
    div, rho = check_divergence(divergence), check_rho(rho)
    shape = np.shape(p)
    p, R = _check_law(p, R)
    if rho == 0.0:
        return p.reshape(shape).copy()
    _, dual = robust_value_batch(p[None], R[None], rho, div)
    dual = float(dual[0])
    r_min = R.min()
    is_min = R <= r_min
    if div == "tv":
        q = p.copy()
        order = np.argsort(-R, kind="stable")
        order = order[~is_min[order]]
        before = np.concatenate([[0.0], np.cumsum(p[order])[:-1]])
        take = np.clip(rho - before, 0.0, p[order])
        q[order] -= take
        w = p * is_min
        w = w / w.sum() if w.sum() > 0 else is_min / is_min.sum()
        q += take.sum() * w
        return q.reshape(shape)
    if div == "kl":
        with np.errstate(divide="ignore"):
            logq = np.log(p) - (R - r_min) / max(dual, 1e-300)
        q = np.exp(logq - logsumexp(logq))
        return q.reshape(shape)
    w = p * np.maximum(dual - R, 0.0)
    if w.sum() <= 0:  # eta* at the minimum: all mass on the minimisers
        w = p * is_min if (p * is_min).sum() > 0 else is_min.astype(float)
    return (w / w.sum()).reshape(shape)


def divergence_value(q: np.ndarray, p: np.ndarray, divergence: str) -> float:
    """D(Q || P) for the three divergences (inf when Q is not absolutely continuous w.r.t. P for KL/chi2)."""
    div = check_divergence(divergence)
    q, p = np.asarray(q, float), np.asarray(p, float)
    if q.shape != p.shape:
        raise ValueError(f"q and p must have the same shape, got {q.shape} and {p.shape}")
    q = np.asarray(validate.probability_vector("q", q.ravel()), float)
    p = np.asarray(validate.probability_vector("p", p.ravel()), float)
    if div == "tv":
        return float(0.5 * np.abs(q - p).sum())
    if np.any((p <= 0) & (q > 0)):
        return float("inf")
    pos = q > 0
    if div == "kl":
        return float((q[pos] * np.log(q[pos] / p[pos])).sum())
    live = p > 0
    return float(((q[live] - p[live]) ** 2 / p[live]).sum())


def primal_robust_value(p: np.ndarray, R: np.ndarray, rho: float, divergence: str) -> float:
    """inf { E_Q[R] : D(Q || P) <= rho } solved as the primal convex program with cvxpy (Clarabel). [A08]

    An evaluator independent of the duals above: it optimises over Q directly, on the full outcome space of
    ``p`` (any shape, e.g. the joint (context, choice) law), with no reduction to the law of R. KL and chi2 put
    Q on the support of P (Q << P); TV may move mass anywhere. Needs the optional ``cvxpy`` package
    (``pip install 'icml26[peers]'``). Accurate to the solver's tolerance (about 1e-7 relative).
    """
    div, rho = check_divergence(divergence), check_rho(rho)
    p, R = _check_law(p, R)
    cp = validate.require_package("cvxpy", "peers", purpose="primal_robust_value")
    if div != "tv":
        keep = p > 0
        p, R = p[keep], R[keep]
    q = cp.Variable(p.size, nonneg=True)
    if div == "tv":
        con = 0.5 * cp.norm1(q - p) <= rho
    elif div == "kl":
        con = cp.sum(cp.rel_entr(q, p)) <= rho
    else:
        con = cp.sum(cp.multiply(1.0 / p, cp.square(q - p))) <= rho
    prob = cp.Problem(cp.Minimize(R @ q), [cp.sum(q) == 1, con])
    prob.solve(solver="CLARABEL")
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"the primal program did not solve (status {prob.status!r})")
    return float(prob.value)

