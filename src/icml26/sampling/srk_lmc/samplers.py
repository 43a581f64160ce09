"""SRK-LMC, SRK-LD and ULA as pure NumPy step functions over arrays [A03].

Target pi(x) ∝ exp(-U(x)); overdamped Langevin SDE

    dX = -grad U(X) dt + sqrt(2) dW.

One step of size h uses two Brownian quantities per coordinate (xi, eta ~ N(0, 1) independent):

    dW = sqrt(h) xi                                   Var dW = h
    dZ = int_{t_n}^{t_n+h} (W_s - W_{t_n}) ds
       = h^{3/2} (xi / 2 + eta / (2 sqrt 3))          Cov(dW, dZ) = h^2 / 2,  Var dZ = h^3 / 3

Every scheme here is one explicit stochastic Runge-Kutta tableau (f = -grad U):

    Y_0 = x
    Y_i = x + a_i h f(x) + sqrt(2) (c_i dW + d_i dZ / h),            i = 1..s
    x+  = x + h sum_{i=0..s} b_i f(Y_i) + sqrt(2) dW

It costs 1 + s gradient evaluations per step. Strong order 1.5 for additive noise needs (stage 0 has
a = c = d = 0):

    sum b = 1,  sum b c = 0,  sum b d = 1,  sum b a = 1/2,  sum b (c^2 + c d + d^2 / 3) = 1/2.

- ULA (1 gradient):      x+ = x - h grad U(x) + sqrt(2) dW.
- SRK-LMC (2 gradients, the paper's scheme):
      y  = x - (3/4) h grad U(x) + (3 sqrt 2 / (2 h)) dZ
      x+ = x - (h/3) grad U(x) - (2h/3) grad U(y) + sqrt(2) dW.
- SRK-LD (3 gradients, Li et al. 2019):
      H1 = x + sqrt(2h) [(1/2 + 1/sqrt 6) xi + eta / sqrt 12]
      H2 = x - h grad U(x) + sqrt(2h) [(1/2 - 1/sqrt 6) xi + eta / sqrt 12]
      x+ = x - (h/2) (grad U(H1) + grad U(H2)) + sqrt(2h) xi.

A sampler is a pure function ``step(x, grad_U, h, dW, dZ) -> x_new`` over a batch of chains ``x`` of shape
``(n_chains, d)``; ``grad_U`` maps ``(n, d) -> (n, d)``. :func:`sample` drives it and counts gradient calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from icml26.harness import validate as v

__all__ = [
    "Tableau", "ULA", "SRK_LMC", "SRK_LD", "TABLEAUS", "METHODS", "brownian_increments", "aggregate_increments",
    "rk_step", "ula_step", "srk_lmc_step", "srk_ld_step", "step_fn", "sample", "GradCounter",
]

SQRT2 = math.sqrt(2.0)
GradU = Callable[[np.ndarray], np.ndarray]


# tableaux

@dataclass(frozen=True)
class Tableau:
    """Coefficients of an explicit additive-noise SRK step (see the module docstring) [A03].

    ``a, c, d`` hold stages 1..s; ``b`` holds the weights of f(Y_0 = x), f(Y_1), ..., f(Y_s).
    """

    name: str
    a: tuple[float, ...]
    c: tuple[float, ...]
    d: tuple[float, ...]
    b: tuple[float, ...]

    def __post_init__(self) -> None:
        for field in ("a", "c", "d", "b"):
            value = getattr(self, field)
            if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
                raise TypeError(f"tableau {self.name!r}: {field} must be a tuple of numbers, got {v.describe(value)}")
            object.__setattr__(self, field, tuple(v.finite_number(f"{field}[{i}]", e) for i, e in enumerate(value)))
        s = len(self.a)
        if len(self.c) != s or len(self.d) != s or len(self.b) != s + 1:
            raise ValueError(f"tableau {self.name!r}: a, c, d need s entries and b needs s + 1")

    @property
    def n_grad(self) -> int:
        """Gradient evaluations per step: grad U(x) plus one per extra stage."""
        return 1 + len(self.a)

    def order_residuals(self) -> dict[str, float]:
        """Residuals of the five strong-order-1.5 conditions (all 0 for an order-1.5 scheme)."""
        a, c, d = (np.array((0.0,) + v) for v in (self.a, self.c, self.d))
        b = np.array(self.b)
        return {
            "sum b - 1": float(b.sum() - 1.0),
            "sum b c": float(b @ c),
            "sum b d - 1": float(b @ d - 1.0),
            "sum b a - 1/2": float(b @ a - 0.5),
            "sum b (c^2 + c d + d^2/3) - 1/2": float(b @ (c * c + c * d + d * d / 3.0) - 0.5),
        }


ULA = Tableau("ula", a=(), c=(), d=(), b=(1.0,))
# y = x - 3/4 h grad U(x) + sqrt 2 * (3/2) dZ / h
SRK_LMC = Tableau("srk_lmc", a=(0.75,), c=(0.0,), d=(1.5,), b=(1 / 3, 2 / 3))
# H1, H2 of Li et al. (2019) rewritten with dW = sqrt(h) xi and dZ / h = sqrt(h) (xi/2 + eta/(2 sqrt 3))
SRK_LD = Tableau("srk_ld", a=(0.0, 1.0), c=(1 / math.sqrt(6), -1 / math.sqrt(6)), d=(1.0, 1.0), b=(0.0, 0.5, 0.5))
TABLEAUS: dict[str, Tableau] = {t.name: t for t in (ULA, SRK_LMC, SRK_LD)}
METHODS = tuple(TABLEAUS)


# helper functions

def _check_h(h: float, name: str = "h") -> float:
    if isinstance(h, bool) or not isinstance(h, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a positive float, got {type(h).__name__}")
    h = float(h)
    if not (math.isfinite(h) and h > 0):
        raise ValueError(f"{name} must be a positive finite step size, got {h}")
    return h


def _check_method(method: str) -> Tableau:
    if method not in TABLEAUS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return TABLEAUS[method]


def _as_rng(rng: "np.random.Generator | int | None") -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy Generator, an int seed or None, got {type(rng).__name__}")


def _check_noise(x: np.ndarray, dW: np.ndarray, dZ: "np.ndarray | None") -> None:
    v.finite("dW", dW)
    if dZ is not None:
        v.finite("dZ", dZ)
    if np.shape(dW) != x.shape:
        raise ValueError(f"dW has shape {np.shape(dW)} but x has shape {x.shape}; draw one increment per entry")
    if dZ is not None and np.shape(dZ) != x.shape:
        raise ValueError(f"dZ has shape {np.shape(dZ)} but x has shape {x.shape}; draw one increment per entry")


# Brownian increments

def brownian_increments(rng: "np.random.Generator | int | None", n_steps: int, shape: tuple[int, ...],
                        h: float) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``(dW, dZ)`` of shape ``(n_steps, *shape)`` for steps of size ``h`` [A03].

    dW = sqrt(h) xi,  dZ = int (W_s - W_tn) ds = h^{3/2} (xi/2 + eta/(2 sqrt 3)),  xi, eta ~ N(0, I) iid.
    """
    h = _check_h(h)
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int, got {n_steps!r}")
    shape = tuple(v.positive_int(f"shape[{i}]", s) for i, s in enumerate(np.atleast_1d(shape).tolist()))
    xi, eta = _as_rng(rng).standard_normal((2, int(n_steps)) + shape)
    return math.sqrt(h) * xi, h ** 1.5 * (0.5 * xi + eta / (2 * math.sqrt(3.0)))


def aggregate_increments(dW: np.ndarray, dZ: np.ndarray, h_fine: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact coarse increments over blocks of ``k`` fine steps (axis 0) [A03].

    dW_coarse = sum_j dW_j;  dZ_coarse = sum_j [dZ_j + h_fine (W_j - W_start)], with W_j - W_start the Brownian
    displacement at the start of fine step j. This keeps one Brownian path across step sizes (strong error).
    """
    h_fine = _check_h(h_fine, "h_fine")
    dW, dZ = np.asarray(dW, dtype=float), np.asarray(dZ, dtype=float)
    if dW.shape != dZ.shape or dW.ndim < 1:
        raise ValueError(f"dW and dZ need the same shape (n_fine, ...), got {dW.shape} and {dZ.shape}")
    v.finite("dW", dW)
    v.finite("dZ", dZ)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 or dW.shape[0] % k:
        raise ValueError(f"k must be a positive int dividing the number of fine steps {dW.shape[0]}, got {k!r}")
    blocks = (dW.shape[0] // k, k) + dW.shape[1:]
    dWb, dZb = dW.reshape(blocks), dZ.reshape(blocks)
    W_start = np.cumsum(dWb, axis=1) - dWb          # W at the start of each fine step, relative to the block
    return dWb.sum(axis=1), dZb.sum(axis=1) + h_fine * W_start.sum(axis=1)


# step functions

def rk_step(x: np.ndarray, grad_U: GradU, h: float, dW: np.ndarray, dZ: "np.ndarray | None",
            tableau: Tableau) -> np.ndarray:
    """One explicit SRK step ``x -> x+`` for any :class:`Tableau` (pure; ``tableau.n_grad`` gradient calls)."""
    if not isinstance(tableau, Tableau):
        raise TypeError(f"tableau must be a Tableau (e.g. SRK_LMC or TABLEAUS['srk_lmc']), got {v.describe(tableau)}")
    h = _check_h(h)
    x = np.asarray(v.finite("x", x), dtype=float)
    _check_noise(x, dW, dZ)
    if tableau.a and dZ is None:
        raise ValueError(f"{tableau.name} needs dZ (the time integral of W); draw it with brownian_increments")
    return _rk(x, grad_U if isinstance(grad_U, GradCounter) else GradCounter(grad_U), h, dW, dZ, tableau)


def _rk(x: np.ndarray, grad_U: GradU, h: float, dW: np.ndarray, dZ: "np.ndarray | None",
        tableau: Tableau) -> np.ndarray:
    """The step of :func:`rk_step` without the argument checks (the driver checks once, up front)."""
    g0 = grad_U(x)
    drift = tableau.b[0] * g0
    for a, c, d, b in zip(tableau.a, tableau.c, tableau.d, tableau.b[1:]):
        y = x - (a * h) * g0 + SQRT2 * (c * dW + (d / h) * dZ)
        drift = drift + b * grad_U(y)
    return x - h * drift + SQRT2 * dW


def ula_step(x: np.ndarray, grad_U: GradU, h: float, dW: np.ndarray, dZ: "np.ndarray | None" = None) -> np.ndarray:
    """ULA / Euler-Maruyama: x+ = x - h grad U(x) + sqrt(2) dW (1 gradient; ``dZ`` unused)."""
    return rk_step(x, grad_U, h, dW, dZ, ULA)


def srk_lmc_step(x: np.ndarray, grad_U: GradU, h: float, dW: np.ndarray, dZ: np.ndarray) -> np.ndarray:
    """SRK-LMC [A03] (2 gradients):

    y = x - (3/4) h grad U(x) + (3 sqrt 2 / (2h)) dZ;   x+ = x - (h/3) grad U(x) - (2h/3) grad U(y) + sqrt(2) dW.
    """
    return rk_step(x, grad_U, h, dW, dZ, SRK_LMC)


def srk_ld_step(x: np.ndarray, grad_U: GradU, h: float, dW: np.ndarray, dZ: np.ndarray) -> np.ndarray:
    """SRK-LD of Li et al. (2019) (3 gradients), in (dW, dZ) form:

    H1 = x + sqrt 2 (dW / sqrt 6 + dZ / h);  H2 = x - h grad U(x) + sqrt 2 (-dW / sqrt 6 + dZ / h);
    x+ = x - (h/2) (grad U(H1) + grad U(H2)) + sqrt(2) dW.
    """
    return rk_step(x, grad_U, h, dW, dZ, SRK_LD)


_STEPS = {"ula": ula_step, "srk_lmc": srk_lmc_step, "srk_ld": srk_ld_step}


def step_fn(method: str) -> Callable[..., np.ndarray]:
    """The pure step function ``step(x, grad_U, h, dW, dZ) -> x_new`` of ``method``."""
    _check_method(method)
    return _STEPS[method]


# driver

class GradCounter:
    """Wraps ``grad_U``, counts its calls and checks the shape and finiteness of what it returns.

    ``step`` is the index of the step being taken (set by :func:`sample`), so that an error can name it.
    """

    def __init__(self, grad_U: GradU) -> None:
        if not callable(grad_U):
            raise TypeError(f"grad_U must be callable (n, d) -> (n, d), got {type(grad_U).__name__}")
        self.grad_U, self.calls, self.step = grad_U, 0, None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        g = np.asarray(self.grad_U(x), dtype=float)
        if self.calls == 0 and g.shape != np.shape(x):
            raise ValueError(f"grad_U returned shape {g.shape} for input of shape {x.shape}; "
                             "it must map (n, d) -> (n, d)")
        self.calls += 1
        if not np.all(np.isfinite(g)):
            where = "" if self.step is None else f" at step {self.step}"
            bad = int(np.sum(~np.all(np.isfinite(g), axis=-1))) if g.ndim == 2 else "some"
            raise ValueError(f"grad_U returned NaN or inf{where} (gradient call {self.calls}, {bad} chain(s)); "
                             "the chains left the region where U is smooth: use a smaller step size h or check "
                             "grad_U")
        return g


def sample(grad_U: GradU, x0: np.ndarray, h: float, n_steps: int, method: str = "srk_lmc",
           rng: "np.random.Generator | int | None" = None, thin: int = 1,
           noise: "tuple[np.ndarray, np.ndarray] | None" = None) -> tuple[np.ndarray, int]:
    """Run ``n_steps`` steps of ``method`` from ``x0`` (shape ``(n_chains, d)``) [A03].

    Args:
        grad_U: gradient of the potential, ``(n, d) -> (n, d)``; called once per stage on the whole batch.
        x0: initial states, ``(n_chains, d)``, finite.
        h: step size > 0.
        n_steps: number of steps.
        method: ``"srk_lmc"`` (2 gradients/step), ``"srk_ld"`` (3) or ``"ula"`` (1).
        rng: Generator or int seed for the increments (ignored when ``noise`` is given).
        thin: keep every ``thin``-th state (``1 <= thin <= n_steps``).
        noise: optional pre-drawn ``(dW, dZ)`` of shape ``(n_steps, n_chains, d)`` (e.g. from
            :func:`brownian_increments` or :func:`aggregate_increments`).

    Returns:
        ``(samples, n_grad_evals)``: states after steps ``thin, 2 thin, ...`` with shape
        ``(n_steps // thin, n_chains, d)``, and the number of ``grad_U`` calls (each on the whole batch, so it is
        also the number of gradient evaluations per chain).

    Raises:
        ValueError: on bad arguments (before any work), and as soon as ``grad_U`` returns NaN/inf or an iterate
            becomes NaN/inf, naming the step (the chain diverged: reduce ``h``).
    """
    tableau = _check_method(method)
    h = _check_h(h)
    for name, value in (("n_steps", n_steps), ("thin", thin)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if thin > n_steps:
        raise ValueError(f"thin={thin} is larger than n_steps={n_steps}, so no state would be kept; "
                         f"use thin <= n_steps (thin=n_steps keeps only the last state)")
    x = np.array(x0, dtype=float)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"x0 must have shape (n_chains, d), got {x.shape}; use x0[None, :] for one chain")
    if not np.all(np.isfinite(x)):
        raise ValueError("x0 contains NaN or inf; start the chains from finite points")
    if noise is not None:
        if not isinstance(noise, (tuple, list)) or len(noise) != 2:
            raise TypeError(f"noise must be a pair (dW, dZ) from brownian_increments, got {v.describe(noise)}")
        dWs, dZs = (np.asarray(e, dtype=float) for e in noise)
        if dWs.shape != (n_steps,) + x.shape or dZs.shape != dWs.shape:
            raise ValueError(f"noise must be (dW, dZ) of shape {(n_steps,) + x.shape}, got {dWs.shape} and {dZs.shape}")
        if not (np.all(np.isfinite(dWs)) and np.all(np.isfinite(dZs))):
            raise ValueError("noise (dW, dZ) contains NaN or inf; draw it with brownian_increments")
    else:
        gen = _as_rng(rng)
    grad = GradCounter(grad_U)
    out = np.empty((n_steps // thin,) + x.shape)
    for n in range(n_steps):
        if noise is not None:
            dW, dZ = dWs[n], dZs[n]
        else:
            dW, dZ = (e[0] for e in brownian_increments(gen, 1, x.shape, h))
        grad.step = n + 1
        x = _rk(x, grad, h, dW, dZ, tableau)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{method} diverged at step {n + 1} of {n_steps} (h={h:g}): "
                             f"{int(np.sum(~np.all(np.isfinite(x), axis=1)))} chain(s) hold NaN or inf; "
                             "use a smaller step size h")
        if (n + 1) % thin == 0:
            out[(n + 1) // thin - 1] = x
    return out, grad.calls
