"""Learning-curve surrogates and the scaling-law fit [A16].

- :class:`PowerLawCurveSurrogate` (parametric, per curve): L(c) = E + A c^-alpha fitted to a curve's observed
  prefix by least squares on log-loss (scipy ``least_squares``; E in [0, min observed L), alpha in [0.05, 1.5]);
  extrapolated to the curve's full compute.
- :class:`GPCurveSurrogate` (non-parametric, pooled over curves): a Gaussian process over
  (configuration features, log c) -> log L (scikit-learn, Matern nu = 2.5 with one length scale per input plus
  a white-noise kernel, standardised inputs and targets); its lower confidence bound mu - kappa sigma at a
  curve's full compute is the optimistic prediction used for ranking.
- :func:`fit_scaling_law`: the frontier law L*(C) = E + A C^-alpha with parameter standard errors from the
  Gauss-Newton Hessian (J^T J)^-1 s^2 of the log-residuals.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from icml26.harness import validate as v

ALPHA_BOUNDS = (0.05, 1.5)


def _positive_compute(name: str, c) -> np.ndarray:
    """Compute values (a number or an array) as a float array; finite and > 0."""
    if isinstance(c, (bool, str, bytes)):
        raise TypeError(f"{name} must be compute in FLOPs (a number or an array), got {v.describe(c)}")
    try:
        arr = np.asarray(c, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be compute in FLOPs (a number or an array), got {v.describe(c)}") from None
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} has NaN or infinite entries; pass finite compute (FLOPs)")
    if (arr <= 0).any():
        raise ValueError(f"{name} must be positive compute (FLOPs), got a value {arr.min()}")
    return arr


def _alpha_bounds(alpha_bounds) -> tuple[float, float]:
    if not isinstance(alpha_bounds, (tuple, list)) or len(alpha_bounds) != 2:
        raise TypeError(f"alpha_bounds must be (lo, hi), got {v.describe(alpha_bounds)}")
    lo, hi = v.positive("alpha_bounds lo", alpha_bounds[0]), v.positive("alpha_bounds hi", alpha_bounds[1])
    if not lo < hi:
        raise ValueError(f"alpha_bounds must satisfy 0 < lo < hi, got {alpha_bounds}")
    return lo, hi


def _check_curve(c: np.ndarray, L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    try:
        c, L = np.asarray(c, dtype=float).ravel(), np.asarray(L, dtype=float).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"compute and loss must be arrays of numbers, got {v.describe(c)} and {v.describe(L)}") from None
    if c.shape != L.shape:
        raise ValueError(f"compute and loss must have equal length, got {c.size} and {L.size}")
    if not (np.isfinite(c).all() and np.isfinite(L).all()):
        raise ValueError("compute and loss must be finite (drop NaN/inf points first)")
    if (c <= 0).any() or (L <= 0).any():
        raise ValueError("compute and loss must be positive (negative compute or a non-positive loss given)")
    return c, L


@dataclass(frozen=True)
class PowerLawFit:
    """L(c) = E + A (c / c0)^-alpha; ``stderr`` of (E, A, alpha) from the Gauss-Newton Hessian (NaN if n <= 3)."""

    E: float
    A: float
    alpha: float
    c0: float
    stderr: tuple[float, float, float]
    cov: np.ndarray
    rmse_log: float

    def __post_init__(self) -> None:
        for name in ("E", "A"):
            v.non_negative(name, getattr(self, name))
        v.positive("alpha", self.alpha)
        v.positive("c0", self.c0)

    def predict(self, c: np.ndarray | float) -> np.ndarray:
        """L at compute ``c`` (a number or an array, > 0)."""
        return self.E + self.A * (_positive_compute("c", c) / self.c0) ** -self.alpha

    def predict_std(self, c: np.ndarray | float) -> np.ndarray:
        """Delta-method standard deviation of the prediction (NaN when the covariance is unavailable)."""
        x = _positive_compute("c", c) / self.c0
        g = np.stack(np.broadcast_arrays(np.ones_like(x), x ** -self.alpha, -self.A * x ** -self.alpha * np.log(x)), -1)
        return np.sqrt(np.einsum("...i,ij,...j->...", g, self.cov, g))


def _grid_fit(x: np.ndarray, L: np.ndarray, alphas: np.ndarray, top: float) -> tuple[float, float, float]:
    """Best (E, A, alpha) on an alpha grid: for each alpha, weighted linear least squares of L on (1, x^-alpha)
    with weights 1/L (first-order log-residuals), E clipped to [0, top] and A re-solved. Vectorised over alphas."""
    w = 1.0 / L
    Z = x[None, :] ** -alphas[:, None]                       # (G, n)
    sw, sz, szz = w.sum() * np.ones(len(alphas)), (w * Z).sum(1), (w * Z * Z).sum(1)
    sy, szy = (w * L).sum() * np.ones(len(alphas)), (w * Z * L).sum(1)
    det = sw * szz - sz ** 2
    E = np.clip(np.where(det > 1e-300, (szz * sy - sz * szy) / np.where(det > 1e-300, det, 1.0), 0.0), 0.0, top)
    A = np.maximum((szy - E * sz) / np.maximum(szz, 1e-300), 1e-12)
    pred = E[:, None] + A[:, None] * Z
    sse = ((np.log(pred) - np.log(L)[None, :]) ** 2).sum(1)
    i = int(np.argmin(sse))
    return float(E[i]), float(A[i]), float(alphas[i])


def fit_power_law(c: np.ndarray, L: np.ndarray, alpha_bounds: tuple[float, float] = ALPHA_BOUNDS,
                  E_max: float | None = None, refine: bool = True) -> PowerLawFit:
    """Least-squares fit of L = E + A (c/c0)^-alpha on log L (deterministic; c0 = first compute).

    A 64-point alpha grid with the linear (E, A) solved per alpha gives the start; ``refine`` polishes it with
    scipy ``least_squares`` over (E, log A, alpha), 0 <= E <= E_max (default: just below the smallest observed
    loss), alpha in ``alpha_bounds``. Needs at least 3 points.
    """
    c, L = _check_curve(c, L)
    if c.size < 3:
        raise ValueError(f"a power law needs at least 3 points, got {c.size}")
    lo, hi = _alpha_bounds(alpha_bounds)
    if E_max is not None:
        E_max = v.non_negative("E_max", E_max)
    if not isinstance(refine, bool):
        raise TypeError(f"refine must be True or False, got {v.describe(refine)}")
    c0 = float(c.min())
    x = c / c0
    top = float(L.min()) * (1 - 1e-6) if E_max is None else float(E_max)
    logL = np.log(L)
    E0, A0, a0 = _grid_fit(x, L, np.geomspace(lo, hi, 64), top)

    def res(p: np.ndarray) -> np.ndarray:
        return np.log(p[0] + np.exp(p[1]) * x ** -p[2]) - logL

    p0 = np.array([min(E0, top * (1 - 1e-9)), math.log(A0), a0])
    if refine:
        r = least_squares(res, p0, method="trf", x_scale="jac",
                          bounds=([0.0, -50.0, lo], [max(top, 1e-12), 50.0, hi]))
        p, cost, jac = r.x, r.cost, r.jac
    else:
        p, cost = p0, 0.5 * float((res(p0) ** 2).sum())
        jac = None
    E, logA, alpha = p
    n, k = c.size, 3
    s2 = 2 * cost / (n - k) if n > k else float("nan")
    if jac is None:
        base = np.exp(logA) * x ** -alpha
        jac = np.column_stack([np.ones(n), base, -base * np.log(x)]) / (E + base)[:, None]
    J = jac * np.array([1.0, 1.0 / math.exp(logA), 1.0])  # d res / d(E, A, alpha)
    cov = np.linalg.pinv(J.T @ J) * s2
    se = tuple(float(math.sqrt(v)) if v >= 0 else float("nan") for v in np.diag(cov))
    return PowerLawFit(float(E), float(math.exp(logA)), float(alpha), c0, se, cov,  # type: ignore[arg-type]
                       float(math.sqrt(2 * cost / n)))


class PowerLawCurveSurrogate:
    """Per-curve parametric extrapolation [A16]: fit L = E + A c^-alpha to the observed prefix, predict at c.

    With fewer than ``min_points`` points the prediction is the last observed loss (std NaN). ``refine=True``
    (default; used inside SH) is the least-squares fit: the alpha-grid start polished by scipy ``least_squares``;
    ``refine=False`` keeps the 64-point grid solution (faster, but on a noise-free 4-point prefix alpha can be off
    by ~7e-2 and L(c_max) by ~1e-2).
    """

    def __init__(self, *, min_points: int = 3, alpha_bounds: tuple[float, float] = ALPHA_BOUNDS,
                 refine: bool = True) -> None:
        min_points = v.positive_int("min_points (>= 3: three parameters)", min_points, minimum=3)
        alpha_bounds = _alpha_bounds(alpha_bounds)
        if not isinstance(refine, bool):
            raise TypeError(f"refine must be True or False, got {v.describe(refine)}")
        self.min_points, self.alpha_bounds, self.refine = min_points, alpha_bounds, refine

    def fit(self, c: np.ndarray, L: np.ndarray) -> "PowerLawCurveSurrogate":
        c, L = _check_curve(c, L)
        if c.size == 0:
            raise ValueError("cannot fit a surrogate to an empty curve")
        self.last_ = float(L[-1])
        self.fit_ = fit_power_law(c, L, self.alpha_bounds, refine=self.refine) if c.size >= self.min_points else None
        return self

    def predict(self, c: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, std)`` of the loss at compute ``c``."""
        v.require_fitted(self, "last_")
        c = _positive_compute("c", c)
        if self.fit_ is None:
            return np.full(c.shape, self.last_), np.full(c.shape, np.nan)
        return self.fit_.predict(c), self.fit_.predict_std(c)


class GPCurveSurrogate:
    """Pooled non-parametric surrogate [A16]: GP over (features, log c) -> log L.

    Kernel: Constant x Matern(nu = 2.5, one length scale per input) + White; inputs standardised, targets
    normalised (``normalize_y``). ``max_points`` caps the training set (evenly thinned along each curve, the last
    point always kept) so a fit stays cheap. Deterministic for a fixed ``random_state``.
    """

    def __init__(self, *, max_points: int = 120, restarts: int = 0, random_state: int = 0) -> None:
        self.max_points = v.positive_int("max_points", max_points, minimum=2)
        self.restarts = v.non_negative_int("restarts", restarts)
        self.random_state = v.non_negative_int("random_state", random_state)

    def fit(self, features: np.ndarray, curves: list[tuple[np.ndarray, np.ndarray]]) -> "GPCurveSurrogate":
        """``features`` (K, F); ``curves[k] = (compute, loss)`` observed for configuration k (may be empty)."""
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        features = np.asarray(v.finite("features", v.ndim("features", features, 2)), dtype=float)
        if not isinstance(curves, (list, tuple)):
            raise TypeError(f"curves must be a list of (compute, loss) pairs, got {v.describe(curves)}")
        if features.ndim != 2 or len(curves) != features.shape[0]:
            raise ValueError(f"features must be (K, F) with one row per curve; got {features.shape} for "
                             f"{len(curves)} curves")
        sizes = np.array([len(np.asarray(c)) for c, _ in curves])
        if sizes.sum() < 2:
            raise ValueError("the GP needs at least 2 observed points")
        per = max(1, int(self.max_points / max(1, (sizes > 0).sum())))
        X, y = [], []
        for k, (c, L) in enumerate(curves):
            if len(c) == 0:
                continue
            c, L = _check_curve(c, L)
            idx = np.unique(np.round(np.linspace(0, c.size - 1, min(per, c.size))).astype(int))
            X.append(np.column_stack([np.repeat(features[k][None], idx.size, 0), np.log(c[idx])]))
            y.append(np.log(L[idx]))
        X, y = np.vstack(X), np.concatenate(y)
        self.mu_, self.sd_ = X.mean(0), X.std(0) + 1e-12
        d = X.shape[1]
        kernel = ConstantKernel(1.0, (1e-2, 1e3)) * Matern(np.ones(d), (1e-2, 1e2), nu=2.5) \
            + WhiteKernel(1e-3, (1e-6, 1e-1))
        self.gp_ = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=self.restarts,
                                            random_state=self.random_state)
        with warnings.catch_warnings():   # hyper-parameters at a bound are expected on short prefixes
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.gp_.fit((X - self.mu_) / self.sd_, y)
        return self

    def predict(self, features: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, std)`` of log L at (features[i], c[i])."""
        v.require_fitted(self, "gp_")
        features = np.asarray(v.finite("features", v.ndim("features", features, 2)), dtype=float)
        if features.shape[1] != len(self.mu_) - 1:
            raise ValueError(f"features must have {len(self.mu_) - 1} columns (as in fit), got {features.shape[1]}")
        c = np.atleast_1d(_positive_compute("c", c))
        v.same_length(features=features, c=c)
        X = np.column_stack([features, np.log(c)])
        m, s = self.gp_.predict((X - self.mu_) / self.sd_, return_std=True)
        return m, s

    def lower_bound(self, features: np.ndarray, c: np.ndarray, kappa: float = 1.0) -> np.ndarray:
        """Optimistic loss exp(mu - kappa sigma) (the ranking score)."""
        kappa = v.non_negative("kappa", kappa)
        m, s = self.predict(features, c)
        return np.exp(m - kappa * s)


# the scaling law of the frontier

@dataclass(frozen=True)
class ScalingLawFit(PowerLawFit):
    """L*(C) = E + A (C / C0)^-alpha fitted to loss-compute frontier points."""


def fit_scaling_law(compute: np.ndarray, loss: np.ndarray) -> ScalingLawFit:
    """Fit the frontier law L*(C) = E + A (C/C0)^-alpha (least squares on log L, multi-start, deterministic),
    with standard errors of (E, A, alpha). ``compute`` and ``loss`` are frontier points (>= 3)."""
    f = fit_power_law(compute, loss)
    return ScalingLawFit(**{k: getattr(f, k) for k in ("E", "A", "alpha", "c0", "stderr", "cov", "rmse_log")})


def loss_compute_frontier(points: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray) -> np.ndarray:
    """F(C) = the lowest loss among all observed points with compute <= C, at each C of ``grid`` (NaN where no
    point has compute <= C). ``points[k] = (compute, loss)`` of curve k."""
    if not isinstance(points, (list, tuple)):
        raise TypeError(f"points must be a list of (compute, loss) pairs, got {v.describe(points)}")
    grid = v.finite("grid", v.ndim("grid", grid, 1))
    for k, p in enumerate(points):
        if not isinstance(p, (tuple, list)) or len(p) != 2:
            raise TypeError(f"points[{k}] must be a (compute, loss) pair, got {v.describe(p)}")
        if len(p[0]):
            _check_curve(*p)
    c = np.concatenate([np.asarray(p[0], dtype=float) for p in points] or [np.zeros(0)])
    L = np.concatenate([np.asarray(p[1], dtype=float) for p in points] or [np.zeros(0)])
    if c.size == 0:
        return np.full(len(grid), np.nan)
    order = np.argsort(c)
    run = np.minimum.accumulate(L[order])
    pos = np.searchsorted(c[order], np.asarray(grid, dtype=float) * (1 + 1e-9), side="right")
    out = np.full(len(grid), np.nan)
    out[pos > 0] = run[pos[pos > 0] - 1]
    return out


__all__ = ["PowerLawFit", "fit_power_law", "PowerLawCurveSurrogate", "GPCurveSurrogate", "ScalingLawFit",
           "fit_scaling_law", "loss_compute_frontier"]
