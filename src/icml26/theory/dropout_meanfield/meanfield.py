"""Mean-field signal propagation with (inverted) dropout [A06].

A fully connected layer with keep probability rho = 1 - p on its input activations,

    h^{l+1}_i = sum_j W_ij (m_j / rho) phi(h^l_j) + b_i,   W_ij ~ N(0, sw2 / N),  b_i ~ N(0, sb2),  m_j ~ Bern(rho),

has, at infinite width, the variance map and (independent masks per input) the covariance map

    q+    = (sw2 / rho) E_z[phi(sqrt(q) z)^2] + sb2
    q12+  = sw2 E[phi(u1) phi(u2)] + sb2,       (u1, u2) ~ N(0, [[q, q12], [q12, q]])

and the correlation map at the variance fixed point q*: c+ = (sw2 E[phi phi](q*, c) + sb2) / q*.
Its slope is chi_c(c) = sw2 E[phi'(u1) phi'(u2)] (Price's theorem); chi_1 = chi_c(1) is the usual
order-to-chaos parameter. Dropout makes c+(1) < 1, so c = 1 is no longer a fixed point: the stable fixed point
c* < 1 and the depth scale xi = -1 / ln chi_c(c*) is finite even at criticality (chi_1 = 1).

Universality classes (near c = 1, p -> 0):

- smooth phi (tanh, erf): c+ is Taylor-analytic at c = 1, so 1 - c* ~ p^(1/2) and xi ~ p^(-1/2);
- kinked phi (ReLU, sw2 = 2 rho, sb2 = 0): c+ = rho kappa1(c), kappa1(c) = (sqrt(1-c^2) + (pi - arccos c) c) / pi
  ~ c + A (1-c)^(3/2), A = 2 sqrt(2) / (3 pi): a branch point, so 1 - c* ~ (p/A)^(2/3) and xi ~ p^(-1/3).
- two-parameter collapse (smooth class, detuning eps = chi_1 - 1): xi = p^(-nu) F(eps / p^phi), nu = phi = 1/2.

Gaussian integrals come from the shared ``icml26.testbeds.ntk`` (closed forms for ReLU and erf, Gauss-Hermite
quadrature otherwise). Everything broadcasts over arrays of c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import brentq

from icml26.harness import validate as v
from icml26.testbeds.ntk import erf_expectation, gaussian_expectation, relu_expectation

__all__ = ["Activation", "ACTIVATIONS", "get_activation", "q_map", "q_fixed_point", "c_map", "chi_c",
           "c_fixed_point", "depth_scale", "critical_sigma_w", "c_trajectory", "fit_exponents", "RELU_A",
           "scaling_collapse"]

RELU_A = 2 * math.sqrt(2) / (3 * math.pi)    # kappa1(c) = c + A (1 - c)^(3/2) + O((1 - c)^(5/2))
N_QUAD = 96


@dataclass(frozen=True)
class Activation:
    """phi, phi', and (optionally) closed forms of E[phi phi] and E[phi' phi'] as functions of (q1, q2, c)."""

    name: str
    phi: Callable[[np.ndarray], np.ndarray]
    dphi: Callable[[np.ndarray], np.ndarray]
    kernel: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    dkernel: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    smooth: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Activation name must be a non-empty string, got {v.describe(self.name)}")
        for field_name in ("phi", "dphi"):
            if not callable(getattr(self, field_name)):
                raise TypeError(f"Activation {field_name} must be callable (array -> array), got "
                                f"{v.describe(getattr(self, field_name))}")
        for field_name in ("kernel", "dkernel"):
            f = getattr(self, field_name)
            if f is not None and not callable(f):
                raise TypeError(f"Activation {field_name} must be callable (q1, q2, c) -> array or None, got "
                                f"{v.describe(f)}")

    def ephiphi(self, q: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
        if self.kernel is not None:
            return self.kernel(q, q, c)
        if np.ndim(c) == 0 and float(c) == 1.0:
            return _diag_expectation(self.phi, q)
        return gaussian_expectation(self.phi, q, q, c, n_quad=N_QUAD)

    def edphidphi(self, q: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
        if self.dkernel is not None:
            return self.dkernel(q, q, c)
        if np.ndim(c) == 0 and float(c) == 1.0:
            return _diag_expectation(self.dphi, q)
        return gaussian_expectation(self.dphi, q, q, c, n_quad=N_QUAD)


_Z1, _W1 = np.polynomial.hermite_e.hermegauss(2 * N_QUAD)
_W1 = _W1 / _W1.sum()


def _diag_expectation(f: Callable[[np.ndarray], np.ndarray], q: np.ndarray | float) -> np.ndarray:
    """E_z[f(sqrt(q) z)^2] by 1-D Gauss-Hermite quadrature (the c = 1 case, without the 2-D product grid)."""
    q = np.asarray(q, dtype=float)
    return (f(np.sqrt(q)[..., None] * _Z1) ** 2 * _W1).sum(-1)


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf
    return erf(x)


def _relu_dkernel(q1, q2, c):
    c = np.clip(np.asarray(c, dtype=float), -1.0, 1.0)
    return (np.pi - np.arccos(c)) / (2 * np.pi) + 0 * np.asarray(q1, dtype=float)


def _erf_dkernel(q1, q2, c):
    # E[erf'(u) erf'(v)], erf'(x) = 2/sqrt(pi) exp(-x^2): (4/pi) / sqrt((1 + 2 q1)(1 + 2 q2) - 4 q12^2)
    q1, q2, c = (np.asarray(a, dtype=float) for a in (q1, q2, c))
    q12 = c * np.sqrt(q1 * q2)
    return 4 / np.pi / np.sqrt((1 + 2 * q1) * (1 + 2 * q2) - 4 * q12 ** 2)


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation("relu", lambda x: np.maximum(x, 0.0), lambda x: (x > 0).astype(float), relu_expectation,
                       _relu_dkernel, smooth=False),
    "tanh": Activation("tanh", np.tanh, lambda x: 1.0 / np.cosh(x) ** 2),
    "erf": Activation("erf", _erf, lambda x: 2 / math.sqrt(math.pi) * np.exp(-x ** 2), erf_expectation,
                      _erf_dkernel),
}


def get_activation(act: str | Activation) -> Activation:
    """An ``Activation`` by name ("relu", "tanh", "erf") or passed through."""
    if isinstance(act, Activation):
        return act
    if not isinstance(act, str):
        raise TypeError(f"act must be a name or an Activation, got {type(act).__name__}")
    if act.lower() not in ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; choose one of {sorted(ACTIVATIONS)} or pass an Activation")
    return ACTIVATIONS[act.lower()]


def _check(sw2: float, sb2: float, keep: float) -> None:
    v.positive("sw2 (weight variance)", sw2)
    v.non_negative("sb2 (bias variance)", sb2)
    v.in_range("keep = 1 - p (dropout rate p in [0, 1))", keep, 0.0, 1.0, low_open=True)


def _arr(name: str, x) -> np.ndarray:
    """A finite float array (scalars included)."""
    if isinstance(x, (str, bytes, bool)) or x is None:
        raise TypeError(f"{name} must be a number or an array of numbers, got {v.describe(x)}")
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number or an array of numbers, got {v.describe(x)}") from None
    return np.asarray(v.finite(name, a), dtype=float)


def _check_q(name: str, q) -> np.ndarray:
    q = _arr(name, q)
    if (q < 0).any():
        raise ValueError(f"{name} (pre-activation variance) must be non-negative, got min {float(q.min())}")
    return q


def _check_c(name: str, c) -> np.ndarray:
    c = _arr(name, c)
    if (np.abs(c) > 1 + 1e-12).any():
        raise ValueError(f"correlation {name} must lie in [-1, 1], got values up to {float(np.abs(c).max())}")
    return c


def q_map(q: np.ndarray | float, act: str | Activation, sw2: float, sb2: float, keep: float = 1.0) -> np.ndarray:
    """q+ = (sw2 / keep) E[phi(sqrt(q) z)^2] + sb2 [A06, variance map with inverted dropout]."""
    a = get_activation(act)
    _check(sw2, sb2, keep)
    q = _check_q("q", q)
    return sw2 / keep * a.ephiphi(q, 1.0) + sb2


def q_fixed_point(act: str | Activation, sw2: float, sb2: float, keep: float = 1.0, *, q_scale: float = 1.0) -> float:
    """The stable fixed point q* of ``q_map``.

    ReLU with sb2 = 0 and sw2 = 2 keep preserves every q (scale invariance): then ``q_scale`` is returned.
    ReLU with sw2 >= 2 keep and sb2 > 0 has no finite fixed point (ValueError).
    """
    a = get_activation(act)
    _check(sw2, sb2, keep)
    v.positive("q_scale", q_scale)
    if a.name == "relu":
        slope = sw2 / (2 * keep)
        if sb2 == 0.0 and abs(slope - 1) < 1e-12:
            return float(q_scale)
        if slope >= 1:
            raise ValueError(f"ReLU with sw2/(2 keep) = {slope:.4g} >= 1 has no finite variance fixed point; "
                             "use sw2 < 2 keep (or sw2 = 2 keep with sb2 = 0)")
        return sb2 / (1 - slope) if sb2 > 0 else float(q_scale)
    f = lambda q: float(q_map(q, a, sw2, sb2, keep)) - q   # noqa: E731
    lo, hi = max(sb2, 1e-12), max(1.0, 2 * sb2)
    while f(hi) > 0:
        hi *= 2
        if hi > 1e8:
            raise ValueError("variance map has no fixed point below 1e8")
    if f(lo) <= 0:
        return lo
    return float(brentq(f, lo, hi, xtol=1e-15, rtol=1e-15))


def c_map(c: np.ndarray | float, q: float, act: str | Activation, sw2: float, sb2: float,
          keep: float = 1.0) -> np.ndarray:
    """c+ = (sw2 E[phi(u1) phi(u2)] + sb2) / q+(q): correlation after one layer (independent dropout masks)."""
    a = get_activation(act)
    _check(sw2, sb2, keep)
    c = _check_c("c", c)
    v.positive("q", q)
    return (sw2 * a.ephiphi(q, np.clip(c, -1, 1)) + sb2) / q_map(q, a, sw2, sb2, keep)


def chi_c(c: np.ndarray | float, q: float, act: str | Activation, sw2: float, sb2: float,
          keep: float = 1.0) -> np.ndarray:
    """Slope of the correlation map at the variance fixed point: d c+/dc = sw2 E[phi'(u1) phi'(u2)] q / q+."""
    a = get_activation(act)
    _check(sw2, sb2, keep)
    _check_c("c", c)
    v.positive("q", q)
    c = np.clip(np.asarray(c, dtype=float), -1, 1)
    return sw2 * a.edphidphi(q, c) * q / q_map(q, a, sw2, sb2, keep)


def c_fixed_point(act: str | Activation, sw2: float, sb2: float, keep: float = 1.0, *, q: float | None = None,
                  grid: int = 400) -> float:
    """The stable correlation fixed point c* (the largest root of c+(c) = c with c+ crossing from above).

    Root finding (a sign scan on a grid, then Brent), not iteration: near p -> 0 the depth scale is 10^3-10^4
    layers and iteration would not converge. Returns 1.0 when c = 1 is the fixed point (no dropout, chi_1 <= 1).
    """
    a = get_activation(act)
    _check(sw2, sb2, keep)
    v.positive_int("grid", grid, minimum=4)
    q = q_fixed_point(a, sw2, sb2, keep) if q is None else v.positive("q", q)
    g = lambda c: c_map(c, q, a, sw2, sb2, keep) - c   # noqa: E731
    if float(g(1.0)) >= -1e-15:
        if float(chi_c(1.0, q, a, sw2, sb2, keep)) <= 1.0 + 1e-12:
            return 1.0
    # geometric grid towards c = 1 (c* approaches 1 as p -> 0), plus a uniform part
    u = np.unique(np.concatenate([1 - np.logspace(-9, 0, grid // 2), np.linspace(0.0, 1.0, grid // 2)]))
    gv = g(u)
    idx = np.nonzero((gv[:-1] > 0) & (gv[1:] <= 0))[0]
    if len(idx) == 0:
        return 0.0 if abs(float(g(0.0))) < 1e-12 else float("nan")
    i = idx[-1]
    if gv[i + 1] == 0:
        return float(u[i + 1])
    return float(brentq(lambda c: float(g(c)), u[i], u[i + 1], xtol=1e-15, rtol=1e-15))


def depth_scale(act: str | Activation, sw2: float, sb2: float, keep: float = 1.0) -> float:
    """xi = -1 / ln chi_c(c*): the number of layers over which |c^l - c*| shrinks by e (inf when chi_c = 1)."""
    a = get_activation(act)
    _check(sw2, sb2, keep)
    q = q_fixed_point(a, sw2, sb2, keep)
    cs = c_fixed_point(a, sw2, sb2, keep, q=q)
    chi = float(chi_c(cs, q, a, sw2, sb2, keep))
    return math.inf if chi >= 1.0 else -1.0 / math.log(chi)


def critical_sigma_w(act: str | Activation, sb2: float = 0.0, keep: float = 1.0, *, detuning: float = 0.0) -> float:
    """sw2 with chi_1 = sw2 E[phi'(sqrt(q*) z)^2] = 1 + detuning, q* the dropout variance fixed point.

    ReLU with sb2 = 0: sw2 = 2 keep (preserves q exactly; its correlation map rho kappa1 does not depend on sw2).
    """
    a = get_activation(act)
    _check(1.0, sb2, keep)
    detuning = v.finite_number("detuning", detuning)
    if detuning <= -1.0:
        raise ValueError(f"detuning = chi_1 - 1 must be > -1 (chi_1 > 0), got {detuning}")
    if a.name == "relu" and sb2 == 0.0:
        if detuning != 0.0:
            raise ValueError("ReLU with sb2 = 0 cannot be detuned through sw2 (scale invariance); use sb2 > 0")
        return 2.0 * keep

    def chi1(sw2: float) -> float:
        q = q_fixed_point(a, sw2, sb2, keep)
        return float(sw2 * a.edphidphi(q, 1.0)) - 1.0 - detuning
    lo, hi = 0.05, 2.0
    while chi1(hi) < 0:
        hi *= 1.5
        if hi > 1e3:
            raise ValueError("no critical sw2 below 1e3 for these settings")
    if a.name == "relu":
        hi = min(hi, 2 * keep * (1 - 1e-12))
    return float(brentq(chi1, lo, hi, xtol=1e-14, rtol=1e-15))


def c_trajectory(c0: float, depth: int, act: str | Activation, sw2: float, sb2: float, keep: float = 1.0,
                 *, q0: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean-field c^l and q^l for l = 0..depth, starting at (q0, c0) (q0 defaults to q*)."""
    a = get_activation(act)
    v.positive_int("depth", depth)
    _check(sw2, sb2, keep)
    c0 = float(_check_c("c0", v.finite_number("c0", c0)))
    q = q_fixed_point(a, sw2, sb2, keep) if q0 is None else v.positive("q0", q0)
    cs, qs = [float(c0)], [q]
    c = float(c0)
    for _ in range(depth):
        q_next = float(q_map(q, a, sw2, sb2, keep))
        c = float((sw2 * a.ephiphi(q, c) + sb2) / q_next)
        q = q_next
        cs.append(c)
        qs.append(q)
    return np.array(cs), np.array(qs)


def fit_exponents(act: str | Activation, ps: Sequence[float], sb2: float = 0.0) -> dict[str, float | np.ndarray]:
    """At criticality for each p: 1 - c* and xi; log-log slopes beta (1 - c* ~ p^beta) and -nu (xi ~ p^-nu)."""
    a = get_activation(act)
    ps = _arr("ps", ps)
    if ps.ndim != 1 or len(ps) < 2 or (ps <= 0).any() or (ps >= 1).any():
        raise ValueError(f"ps must hold at least two dropout rates in (0, 1), got {v.describe(ps)}")
    v.non_negative("sb2", sb2)
    gap, xi = np.zeros(len(ps)), np.zeros(len(ps))
    for i, p in enumerate(ps):
        keep = 1 - p
        sw2 = critical_sigma_w(a, sb2, keep)
        q = q_fixed_point(a, sw2, sb2, keep)
        cs = c_fixed_point(a, sw2, sb2, keep, q=q)
        gap[i] = 1 - cs
        xi[i] = -1 / math.log(float(chi_c(cs, q, a, sw2, sb2, keep)))
    lp = np.log(ps)
    return {"p": ps, "gap": gap, "xi": xi, "beta": float(np.polyfit(lp, np.log(gap), 1)[0]),
            "nu": float(-np.polyfit(lp, np.log(xi), 1)[0])}


def scaling_collapse(act: str | Activation, ps: Sequence[float], xs: Sequence[float], sb2: float,
                     nu: float = 0.5, phi: float = 0.5) -> dict[str, np.ndarray | float]:
    """xi on the grid eps = x p^phi (detuning chi_1 - 1) for each p, and the collapse p^nu xi vs x.

    Returns ``scaled`` (len(ps), len(xs)) = p^nu xi and ``spread``: the largest, over x, relative spread
    (max - min) / mean of p^nu xi across p. A perfect collapse has spread 0.
    """
    a = get_activation(act)
    ps = v.non_empty("ps", _arr("ps", ps))
    xs = v.non_empty("xs", _arr("xs", xs))
    v.ndim("ps", ps, 1)
    v.ndim("xs", xs, 1)
    if (ps <= 0).any() or (ps >= 1).any():
        raise ValueError(f"ps must hold dropout rates in (0, 1), got {ps.tolist()}")
    v.non_negative("sb2", sb2)
    v.positive("nu", nu)
    v.positive("phi", phi)
    xi = np.zeros((len(ps), len(xs)))
    for i, p in enumerate(ps):
        for j, x in enumerate(xs):
            sw2 = critical_sigma_w(a, sb2, 1 - p, detuning=float(x * p ** phi))
            xi[i, j] = depth_scale(a, sw2, sb2, 1 - p)
    scaled = xi * ps[:, None] ** nu
    spread = float(np.max((scaled.max(0) - scaled.min(0)) / scaled.mean(0)))
    return {"xi": xi, "scaled": scaled, "spread": spread}
