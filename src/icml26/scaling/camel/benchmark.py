"""Loss-to-benchmark law [A18]: Acc(L) = a + (b - a) sigmoid(-k (L - L0)).

``a`` is the chance level when known (fixed; our choice, following the OLMo "model ladder" task-scaling
practice), otherwise fitted; b, k > 0 and L0 are fitted by least squares (scipy ``least_squares``) from
small-model (loss, accuracy) pairs, with standard errors from the Gauss-Newton Hessian. The law is monotone
decreasing in L and bounded in [a, b].
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares
from scipy.special import expit

from icml26.harness import validate as v


class LossToBenchmark:
    """Sigmoidal map from validation loss to benchmark accuracy.

    Args:
        chance: the lower asymptote a (``None``: fitted in [0, 1]).
    """

    def __init__(self, *, chance: float | None = 0.0) -> None:
        self.chance = None if chance is None else v.in_range("chance", chance, 0.0, 1.0, high_open=True)
        self.params_ = None

    def _f(self, p: np.ndarray, L: np.ndarray) -> np.ndarray:
        a = self.chance if self.chance is not None else p[3]
        b, k, L0 = p[0], p[1], p[2]
        return a + (b - a) * expit(-k * (L - L0))

    def fit(self, L: np.ndarray, acc: np.ndarray) -> "LossToBenchmark":
        """Fit (b, k, L0) (and a when ``chance=None``) on small-model pairs: ``L`` losses, ``acc`` accuracies in
        [0, 1], at least 4 pairs."""
        L = np.asarray(v.finite("L", L), dtype=float).ravel()
        acc = np.asarray(v.finite("acc", acc), dtype=float).ravel()
        if L.shape != acc.shape or L.size < 4:
            raise ValueError(f"need >= 4 (loss, accuracy) pairs of equal length, got {L.size} and {acc.size}")
        if (acc < 0).any() or (acc > 1).any():
            raise ValueError(f"acc must hold accuracies in [0, 1], got values from {acc.min():.6g} to {acc.max():.6g}")
        lo_a = 0.0 if self.chance is None else self.chance
        p0 = [min(1.0, max(acc.max() * 1.2, lo_a + 1e-3)), 2.0 / max(L.std(), 1e-3), float(np.median(L))]
        lo, hi = [lo_a, 1e-3, L.min() - 10 * L.std() - 1], [1.0, 1e3, L.max() + 10 * L.std() + 1]
        if self.chance is None:
            p0, lo, hi = p0 + [max(0.0, acc.min() * 0.5)], lo + [0.0], hi + [1.0]
        best = None
        for scale in (0.5, 1.0, 2.0):
            q0 = np.clip(np.array(p0) * np.array([1, scale, 1] + ([1] if self.chance is None else [])),
                         np.array(lo) + 1e-9, np.array(hi) - 1e-9)
            r = least_squares(lambda p: self._f(p, L) - acc, q0, bounds=(lo, hi), method="trf")
            if best is None or r.cost < best.cost:
                best = r
        self.params_ = best.x
        dof = max(L.size - best.x.size, 1)
        cov = np.linalg.pinv(best.jac.T @ best.jac) * float((best.fun ** 2).sum() / dof)
        self.stderr_ = np.sqrt(np.clip(np.diag(cov), 0, None))
        return self

    def predict(self, L: np.ndarray | float) -> np.ndarray:
        """Predicted accuracy at losses ``L`` (same shape)."""
        v.require_fitted(self, "params_")
        L = v.finite_number("L", L) if np.ndim(L) == 0 and not hasattr(L, "shape") else v.finite("L", L)
        return self._f(self.params_, np.asarray(L, dtype=float))


__all__ = ["LossToBenchmark"]
