"""KL (Bregman) projections onto dense measures, exact and approximate [B10] (after Barak-Hardt-Kale 2009).

A measure is M in [0,1]^m; its density is mu(M) = mean_i M_i. The set of delta-dense measures is
    Gamma_delta = {M in [0,1]^m : mu(M) >= delta},
and a delta-dense M gives the distribution D = M / |M| that is 1/(delta m)-smooth (max_i D_i <= 1/(delta m)).
The generalised KL divergence is
    KL(M || N) = sum_i [ M_i log(M_i / N_i) - M_i + N_i ].
Its projection onto Gamma_delta has the closed form (KKT; the multiplier of the density constraint is log c)
    Pi(N)_i = min(1, c N_i),   c = 1 if mu(min(1, N)) >= delta, else the unique c > 1 with mu(min(1, c N)) = delta,
found exactly by sorting ("water-filling", O(m log m)), or approximately by a binary search on log c that only
sees density estimates from uniform samples (the step [B10] speeds up with amplitude estimation).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .queries import QueryCounter

_REL_TOL = 1e-12


# helper functions

def _check_delta(delta: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating, np.integer)):
        raise TypeError(f"delta must be a real number in (0, 1], got {type(delta).__name__}")
    delta = float(delta)
    if not (0.0 < delta <= 1.0):
        raise ValueError(f"delta (the target density) must be in (0, 1], got {delta}; "
                         "it is the target error epsilon of the booster, e.g. 0.1")
    return delta


def _check_weights(N: np.ndarray, name: str = "N") -> np.ndarray:
    N = np.asarray(N, dtype=float)
    if N.ndim != 1 or N.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of weights, got shape {N.shape}")
    if not np.all(np.isfinite(N)):
        raise ValueError(f"{name} contains NaN or inf; pass finite non-negative weights")
    if np.any(N < 0):
        raise ValueError(f"{name} has negative entries; measures are non-negative")
    return N


def _waterfill(v: np.ndarray, target: float) -> float:
    """c with sum_i min(1, c v_i) = target, for v sorted descending in (0, 1] and target < len(v).

    With k entries capped, c_k = (target - k) / sum_{j >= k} v_j; the answer is the first k with c_k v_k <= 1.
    """
    tail = np.cumsum(v[::-1])[::-1]
    c = (target - np.arange(v.size)) / tail
    k = int(np.argmax(c * v <= 1.0))  # exists: at k = len(v)-1, c v = target - len(v) + 1 <= 1
    return float(c[k])


def _exact_log_scale(log_w: np.ndarray, delta: float) -> float:
    """log c of the exact projection of N = exp(log_w) (entries -inf are zeros); +inf when c is unbounded."""
    m = log_w.size
    if np.exp(np.minimum(0.0, log_w)).mean() >= delta:
        return 0.0
    pos = log_w[np.isfinite(log_w)]
    target = delta * m
    if pos.size < target * (1 - _REL_TOL):
        raise ValueError(f"no measure min(1, cN) reaches density {delta}: only {pos.size} of {m} weights are "
                         f"positive, need at least delta*m = {target:g}")
    if pos.size <= target * (1 + _REL_TOL):
        return math.inf  # the limit c -> inf: the indicator of N > 0
    top = float(pos.max())
    v = np.sort(np.exp(pos - top))[::-1]
    return math.log(_waterfill(v, target)) - top


def _measure(log_w: np.ndarray, log_c: float) -> np.ndarray:
    """M = min(1, c N) computed in the log domain (N = exp(log_w) may underflow after many rounds)."""
    if math.isinf(log_c):
        return np.isfinite(log_w).astype(float)
    return np.exp(np.minimum(0.0, log_c + log_w))


def _approx_log_scale(log_w: np.ndarray, delta: float, kappa: float, eta: float, rng: np.random.Generator,
                      log_c_hi: float, counter: QueryCounter) -> tuple[float, float, int]:
    """Binary search on log c in [0, log_c_hi] using sampled density estimates [B10].

    Each estimate uses s uniform samples (the counter books s classical queries and the modelled quantum cost),
    with relative accuracy kappa' = kappa/3 and failure eta / (number of estimates). A step is accepted when the
    estimate lies in [delta(1 - kappa'), delta(1 + kappa')]; as d log mu / d log c <= 1 that band is >= 2 kappa'
    wide in log c, so ceil(log2(log_c_hi / 2 kappa')) + 2 halvings suffice. Returns (log c, mu_hat, #estimates).
    On failure it returns the upper end (the denser side).
    """
    kp = kappa / 3.0
    lo_band, hi_band = delta * (1 - kp), delta * (1 + kp)
    log_c_hi = max(float(log_c_hi), 2 * kp)
    n_steps = math.ceil(math.log2(log_c_hi / (2 * kp))) + 2
    eta_each = eta / (n_steps + 2)
    m = log_w.size
    n_est = 0

    def estimate(log_c: float) -> float:
        nonlocal n_est
        n_est += 1
        s = counter.add_estimate(lo_band, kp, eta_each)
        idx = rng.integers(0, m, size=s)
        return float(np.exp(np.minimum(0.0, log_c + log_w[idx])).mean())

    mu_hat = estimate(0.0)
    if mu_hat >= lo_band:  # already (approximately) dense: Pi is the identity
        return 0.0, mu_hat, n_est
    lo, hi = 0.0, log_c_hi
    for _ in range(n_steps):
        mid = 0.5 * (lo + hi)
        mu_hat = estimate(mid)
        if lo_band <= mu_hat <= hi_band:
            return mid, mu_hat, n_est
        lo, hi = (mid, hi) if mu_hat < lo_band else (lo, mid)
    return hi, estimate(hi), n_est


# public functions

def generalized_kl(M: np.ndarray, N: np.ndarray) -> float:
    """KL(M || N) = sum_i [M_i log(M_i / N_i) - M_i + N_i] for non-negative measures (0 log 0 = 0) [B10].

    Returns +inf when some M_i > 0 has N_i = 0.
    """
    M, N = _check_weights(M, "M"), _check_weights(N, "N")
    if M.shape != N.shape:
        raise ValueError(f"M and N must have the same shape, got {M.shape} and {N.shape}")
    pos = M > 0
    if np.any(N[pos] == 0):
        return math.inf
    return float(np.sum(M[pos] * np.log(M[pos] / N[pos])) - M.sum() + N.sum())


def kl_project_dense(N: np.ndarray, delta: float, *, return_scale: bool = False) -> np.ndarray | tuple[np.ndarray, float]:
    """Exact KL projection of a measure N >= 0 onto {M in [0,1]^m : mean(M) >= delta} [B10].

    Pi(N)_i = min(1, c N_i), c = 1 if mean(min(1, N)) >= delta, else the unique c > 1 with mean(min(1, cN)) = delta
    (water-filling over the sorted weights). With ``return_scale=True`` returns ``(M, c)``; c is ``inf`` in the
    limiting case where exactly delta*m weights are positive (then M is the indicator of N > 0).

    >>> kl_project_dense(np.array([0.4, 0.1, 0.05, 0.05]), 0.5)   # c = 5, the first entry is capped
    array([1.  , 0.5 , 0.25, 0.25])
    """
    N = _check_weights(N)
    delta = _check_delta(delta)
    with np.errstate(divide="ignore"):
        log_c = _exact_log_scale(np.log(N), delta)
    if log_c == 0.0:
        M, c = np.minimum(1.0, N), 1.0
    elif math.isinf(log_c):
        M, c = (N > 0).astype(float), math.inf
    else:
        # redo the water-filling in the linear domain so that mean(M) = delta up to one rounding
        v = np.sort(N[N > 0])[::-1]
        c = _waterfill(v / v[0], delta * N.size) / v[0]
        M = np.minimum(1.0, c * N)
    return (M, float(c)) if return_scale else M


class ApproxProjection(NamedTuple):
    """Result of :func:`approx_kl_project_dense`."""

    measure: np.ndarray        # min(1, c N)
    scale: float               # c
    density_estimate: float    # the accepted sampled estimate of mean(measure)
    n_estimates: int           # density estimates made by the binary search
    counter: QueryCounter      # classical and modelled-quantum queries spent


def approx_kl_project_dense(N: np.ndarray, delta: float, *, kappa: float = 0.1, eta: float = 0.05,
                            rng: np.random.Generator | int | None = None, c_max: float | None = None,
                            counter: QueryCounter | None = None) -> ApproxProjection:
    """Approximate KL projection onto delta-dense measures from sampled density estimates [B10].

    Binary search on log c in [0, log c_max]; each step estimates mu(min(1, cN)) from
    s = ceil((2 + kappa') ln(2 / eta') / (kappa'^2 delta (1 - kappa'))) uniform samples (kappa' = kappa / 3)
    and stops once the estimate is in [delta (1 - kappa'), delta (1 + kappa')]. With probability >= 1 - eta the
    returned measure has |mu - delta| <= kappa delta (or is the identity when N is already dense).

    ``c_max`` bounds the scale (in the booster it is known analytically: 1 / (delta (1 - gamma)^t)); by default
    it is 1 / min_{N_i > 0} N_i, which makes every positive entry 1. ``counter`` accumulates queries.
    """
    N = _check_weights(N)
    delta = _check_delta(delta)
    if not 0.0 < kappa < 1.0:
        raise ValueError(f"kappa must be in (0, 1), got {kappa}")
    if not 0.0 < eta < 1.0:
        raise ValueError(f"eta must be in (0, 1), got {eta}")
    if np.count_nonzero(N) < delta * N.size:
        raise ValueError(f"no measure min(1, cN) reaches density {delta}: only {np.count_nonzero(N)} of {N.size} "
                         "weights are positive")
    rng = np.random.default_rng(rng)
    counter = QueryCounter() if counter is None else counter
    with np.errstate(divide="ignore"):
        log_w = np.log(N)
    if c_max is None:
        log_c_hi = -float(log_w[np.isfinite(log_w)].min())
    elif not (c_max >= 1.0 and math.isfinite(c_max)):
        raise ValueError(f"c_max must be a finite number >= 1, got {c_max}")
    else:
        log_c_hi = math.log(c_max)
    log_c, mu_hat, n_est = _approx_log_scale(log_w, delta, kappa, eta, rng, max(log_c_hi, 0.0), counter)
    return ApproxProjection(_measure(log_w, log_c), math.exp(log_c), mu_hat, n_est, counter)
