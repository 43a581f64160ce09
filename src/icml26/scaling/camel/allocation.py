"""Compute allocation across model sizes for fitting the mixture law [A18].

Sizes N_s cost c_s per run (proportional to N_s x tokens); run counts n_s must satisfy sum_s n_s c_s <= C.

- ``"greedy_variance"`` (ours): start from the cheapest affordable pilot (one run per size in the order of the
  mixture design), then repeatedly add the run whose reduction of the delta-method variance of the target
  prediction L_hat(N*, r*) per unit cost is largest. The variance is g^T (J^T J)^-1 g with J the Jacobian of
  the fitted law's log-residuals at the design and g the gradient of log L(N*, r*) (Gauss-Newton Hessian; our
  choice for the spec's "parametric-bootstrap" reduction, which it approximates to first order).
- ``"smallest"``: every run at the smallest size; ``"uniform_count"``: equal counts per size;
  ``"uniform_compute"``: equal compute per size.
"""

from __future__ import annotations

import numpy as np

from icml26.harness import validate as v

STRATEGIES = ("greedy_variance", "smallest", "uniform_count", "uniform_compute")


def _counts_fixed(costs: np.ndarray, budget: float, strategy: str) -> np.ndarray:
    S = len(costs)
    n = np.zeros(S, dtype=int)
    if strategy == "smallest":
        n[int(np.argmin(costs))] = int(budget // costs.min())
    elif strategy == "uniform_compute":
        n = np.floor(budget / S / costs).astype(int)
    elif strategy == "uniform_count":
        n[:] = int(budget // costs.sum())
    return n


def allocate_compute(sizes: np.ndarray, costs: np.ndarray, budget: float, *, strategy: str = "greedy_variance",
                     variance=None, pilot: np.ndarray | None = None) -> np.ndarray:
    """Run counts per size (int array) with ``sum(n * costs) <= budget``.

    For ``"greedy_variance"``, ``variance(counts) -> float`` is the predicted variance of the target prediction
    for a design with those counts per size (e.g. :meth:`CAMELLaw.prediction_variance`); ``pilot`` the starting
    counts (default one run per size), which the greedy steps extend.
    """
    sizes = np.asarray(v.ndim("sizes", v.finite("sizes", sizes), 1), dtype=float)
    costs = np.asarray(v.ndim("costs", v.finite("costs", costs), 1), dtype=float)
    v.non_empty("sizes", sizes)
    if sizes.shape != costs.shape:
        raise ValueError(f"sizes and costs must be 1-D arrays of equal length, got {sizes.shape} and {costs.shape}")
    if not (sizes > 0).all():
        raise ValueError(f"sizes must be positive model sizes, got a minimum of {sizes.min():.6g}")
    if not (costs > 0).all():
        raise ValueError(f"costs must be positive, got a minimum of {costs.min():.6g}")
    budget = v.non_negative("budget", budget)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; use one of {STRATEGIES}")
    if strategy != "greedy_variance":
        return _counts_fixed(costs, budget, strategy)
    if variance is None or not callable(variance):
        raise TypeError(f"greedy_variance needs variance(counts) -> float, a callable; got {v.describe(variance)}")
    if pilot is None:
        n = np.ones(len(sizes), dtype=int)
    else:
        pilot = np.asarray(v.finite("pilot", pilot))
        if pilot.shape != sizes.shape or (pilot < 0).any() or (pilot != np.round(pilot)).any():
            raise ValueError(f"pilot must be one non-negative integer count per size ({len(sizes)}), got "
                             f"{v.describe(pilot)}")
        n = pilot.astype(int).copy()
    if (n * costs).sum() > budget:
        return _counts_fixed(costs, budget, "smallest")
    left = budget - (n * costs).sum()

    var = variance
    current = var(n)
    while True:
        best, best_gain = None, 0.0
        for s in range(len(sizes)):
            if costs[s] > left:
                continue
            trial = n.copy()
            trial[s] += 1
            gain = (current - var(trial)) / costs[s]
            if gain > best_gain:
                best, best_gain = s, gain
        if best is None:
            break
        n[best] += 1
        left -= costs[best]
        current = var(n)
    return n


__all__ = ["allocate_compute", "STRATEGIES"]
