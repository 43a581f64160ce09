"""The Rectified Generalized Gaussian (RGG) target of RDMReg [B17].

Coordinates are i.i.d.:

    y_d = ReLU(mu + sigma * xi_d),    xi ~ GN_p,   density f(xi) = exp(-|xi|^p / p) / (2 p^(1/p) Gamma(1 + 1/p))

with the default sigma = sqrt(Gamma(1/p) / Gamma(3/p)) / p^(1/p), which gives Var(sigma * xi) = 1 before
rectification. Rectification puts an atom of mass P(mu + sigma xi <= 0) at zero, so mu controls the expected
l0 norm; the continuous part is the maximum-entropy law under an expected l_p norm and a support constraint.

Closed forms used here (t = |a|^p / p, a = -mu / sigma, Gamma(s, t) the upper incomplete gamma):

    P(y > 0)            = P(xi > a)
    int_a^inf xi^j f    = p^((j+1)/p - 1) Gamma((j+1)/p, a^p/p) / Z                     (a >= 0)
                        = [p^((j+1)/p - 1) Gamma((j+1)/p) + (-1)^j p^((j+1)/p - 1) gamma((j+1)/p, t)] / Z   (a < 0)
    Z                   = 2 p^(1/p) Gamma(1 + 1/p)
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import optimize, special, stats

__all__ = ["default_sigma", "sigma_for_unit_rectified_variance", "sample_rgg", "sample_generalized_normal", "rgg_expected_l0", "rgg_moments", "rgg_expected_l1"]


# helper functions

def _check_p(p: float) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"p must be a real number, got {type(p).__name__}")
    p = float(p)
    if not (math.isfinite(p) and p > 0):
        raise ValueError(f"p must be a finite positive number (p=1 Laplace, p=2 Gaussian), got {p}")
    return p


def _check_mu(mu: float) -> float:
    if isinstance(mu, bool) or not isinstance(mu, (int, float, np.integer, np.floating)):
        raise TypeError(f"mu must be a real number, got {type(mu).__name__}")
    if not math.isfinite(float(mu)):
        raise ValueError(f"mu must be finite, got {mu}")
    return float(mu)


def _resolve_sigma(p: float, sigma: float | None) -> float:
    if sigma is None:
        return default_sigma(p)
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.integer, np.floating)):
        raise TypeError(f"sigma must be a real number or None, got {type(sigma).__name__}")
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite positive number (or None for unit variance), got {sigma}")
    return sigma


def default_sigma(p: float) -> float:
    """sigma = sqrt(Gamma(1/p) / Gamma(3/p)) / p^(1/p): unit variance of sigma * xi before rectification [B17]."""
    p = _check_p(p)
    return math.exp(0.5 * (math.lgamma(1 / p) - math.lgamma(3 / p))) / p ** (1 / p)


def sigma_for_unit_rectified_variance(p: float = 1.0, mu: float = 0.0, target_var: float = 1.0) -> float:
    """The sigma with Var(ReLU(mu + sigma xi)) = target_var, xi ~ GN_p (the official ``mode_of_sigma="sigma_RGN"``)
    [B17]. Var(sigma) comes from ``rgg_moments`` in closed form and increases with sigma; the root is found with
    Brent's method (the official code bisects in mpmath; both agree to the solver tolerance)."""
    p, mu = _check_p(p), _check_mu(mu)
    if not (isinstance(target_var, (int, float)) and math.isfinite(target_var) and target_var > 0):
        raise ValueError(f"target_var must be a finite positive number, got {target_var!r}")

    def excess(sig: float) -> float:
        ey, ey2 = rgg_moments(p, mu, sig)
        return ey2 - ey * ey - target_var

    lo, hi = 1e-8, 1.0
    while excess(hi) < 0:
        hi *= 2
        if hi > 1e12:
            raise ValueError(f"no sigma gives Var(ReLU(mu + sigma xi)) = {target_var} for p={p}, mu={mu}")
    return float(optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-13))


# main functions

def sample_rgg(
    shape: tuple[int, ...] | torch.Size,
    p: float = 1.0,
    mu: float = 0.0,
    sigma: float | None = None,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Draw y = ReLU(mu + sigma * xi), xi ~ GN_p i.i.d. [B17].

    xi = s * (p G)^(1/p) with s = +-1 equally likely and G ~ Gamma(1/p, 1); p = 1 and p = 2 use the
    Laplace / normal fast paths. Draws happen on ``generator``'s device (CPU by default) and are then moved
    to ``device``, so a seeded CPU generator gives the same numbers whatever the target device.
    """
    p, mu = _check_p(p), _check_mu(mu)
    sigma = _resolve_sigma(p, sigma)
    y = torch.relu(mu + sigma * sample_generalized_normal(shape, p, generator=generator, dtype=dtype))
    return y.to(device) if device is not None else y


def sample_generalized_normal(shape: tuple[int, ...] | torch.Size, p: float = 1.0, *,
                              generator: torch.Generator | None = None,
                              dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """xi ~ GN_p with density exp(-|xi|^p / p) / Z, drawn on ``generator``'s device (CPU by default) [B17]."""
    p = _check_p(p)
    if not isinstance(shape, (tuple, list, torch.Size)) or not all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        raise ValueError(f"shape must be a tuple of non-negative ints, got {shape!r}")
    shape = tuple(int(s) for s in shape)
    gdev = generator.device if generator is not None else torch.device("cpu")
    if p == 2.0:
        return torch.randn(shape, generator=generator, device=gdev, dtype=dtype)  # exp(-xi^2/2) is N(0, 1)
    if p == 1.0:
        # inverse-cdf Laplace(0, 1), density exp(-|xi|)/2; u = -1/2 (prob ~2^-24) would give -inf, map it to 0
        u = torch.rand(shape, generator=generator, device=gdev, dtype=dtype) - 0.5
        xi = -torch.sign(u) * torch.log1p(-2 * u.abs())
        return torch.where(torch.isfinite(xi), xi, torch.zeros_like(xi))
    g = _standard_gamma(shape, 1.0 / p, generator, gdev)
    s = torch.randint(0, 2, shape, generator=generator, device=gdev).to(torch.float64) * 2 - 1
    return (s * (p * g) ** (1.0 / p)).to(dtype)


def _standard_gamma(shape: tuple[int, ...], conc: float, generator: torch.Generator | None,
                    device: torch.device) -> torch.Tensor:
    """Gamma(conc, 1) draws in float64 from ``generator`` (torch's sampler; NumPy fallback seeded from it)."""
    try:
        return torch._standard_gamma(torch.full(shape, conc, dtype=torch.float64, device=device),
                                     generator=generator)
    except (TypeError, RuntimeError, AttributeError):  # pragma: no cover - torch without the generator overload
        seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=device))
        g = np.random.default_rng(seed).gamma(conc, 1.0, size=shape)
        return torch.from_numpy(g).to(device)


def rgg_expected_l0(p: float = 1.0, mu: float = 0.0, sigma: float | None = None) -> float:
    """Expected fraction of nonzero coordinates, P(y > 0) = P(mu + sigma xi > 0) [B17].

    Equals ``scipy.stats.gennorm.sf(0, p, loc=mu, scale=sigma * p^(1/p))`` (scipy's gennorm has density
    exp(-|x|^p)). p = 1, mu = -1 gives 0.1216; p = 2, mu = -1 gives Phi(-1) = 0.1587.
    """
    p, mu = _check_p(p), _check_mu(mu)
    sigma = _resolve_sigma(p, sigma)
    return float(stats.gennorm.sf(0.0, p, loc=mu, scale=sigma * p ** (1 / p)))


def _partial_moment(j: int, a: float, p: float) -> float:
    """int_a^inf xi^j f(xi) dxi for the GN_p density f(xi) = exp(-|xi|^p/p) / Z (closed form)."""
    s = (j + 1) / p
    c = p ** (s - 1) * math.gamma(s)  # int_0^inf xi^j exp(-xi^p/p) dxi
    t = abs(a) ** p / p
    z = 2 * p ** (1 / p) * math.gamma(1 + 1 / p)
    if a >= 0:
        return c * special.gammaincc(s, t) / z
    return (c + (-1) ** j * c * special.gammainc(s, t)) / z


def rgg_moments(p: float = 1.0, mu: float = 0.0, sigma: float | None = None) -> tuple[float, float]:
    """(E[y], E[y^2]) for y = ReLU(mu + sigma xi), in closed form via incomplete gamma functions [B17].

    E[y^k] = int_{a}^inf (mu + sigma xi)^k f(xi) dxi with a = -mu / sigma; expand the binomial and use the
    partial moments of GN_p given in the module docstring.
    """
    p, mu = _check_p(p), _check_mu(mu)
    sigma = _resolve_sigma(p, sigma)
    a = -mu / sigma
    m0, m1, m2 = (_partial_moment(j, a, p) for j in range(3))
    ey = mu * m0 + sigma * m1
    ey2 = mu * mu * m0 + 2 * mu * sigma * m1 + sigma * sigma * m2
    return float(ey), float(ey2)


def rgg_expected_l1(p: float = 1.0, mu: float = 0.0, sigma: float | None = None) -> float:
    """Large-D limit of the l1 sparsity metric (1/D)(||y||_1 / ||y||_2)^2 = E[y]^2 / E[y^2] [B17].

    1 means dense and equal-magnitude, values near 0 mean few active coordinates. (For finite D the metric
    concentrates on this value at rate 1/sqrt(D).)
    """
    ey, ey2 = rgg_moments(p, mu, sigma)
    return ey * ey / ey2 if ey2 > 0 else 0.0
