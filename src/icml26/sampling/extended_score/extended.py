"""The extended score H_gamma and its computation from a standard score model [B13].

Variance-exploding convention: p_gamma = p * g_gamma with g_gamma = N(0, gamma I), and a score model
s(x, gamma) ~ S(p * g_gamma)(x) = grad log p_gamma(x). The extended score is

    H_gamma p = (1 + gamma) S(p * g_gamma) + gamma d/dgamma S(p * g_gamma),      H_0 p = lim_{gamma -> 0} H_gamma p.

Equivalently, with the Tweedie denoiser D_gamma(x) = x + gamma S(p * g_gamma)(x),

    H_gamma = (D_gamma(x) - x) + d/dgamma D_gamma(x).

Properties: H_0 p = S p for smooth p; H_gamma delta_mu (x) = -(x - mu) for every gamma; for N(0, s^2),
H_gamma = -x (s^2 + gamma s^2 + gamma^2) / (s^2 + gamma)^2 (small variances s^2 << gamma are pulled in at rate
~1, large ones s^2 >> 1 at rate ~(1 + gamma) / s^2).

The d/dgamma term is computed from the score model by forward-mode autodiff in its noise-level input
(``torch.func.jvp``: one extra forward pass) or, as a fallback for models that are not differentiable in gamma,
by a central finite difference with relative step ``rel_step`` (two extra calls).

Noisy data: if the training data carry noise N(0, sigma^2 I), then p_noisy * g_gamma = p_clean * g_{gamma +
sigma^2}, so a model trained on noisy data gives clean-data scores at clean levels >= sigma^2
(``clean_score_fn``).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _check_x(x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (n, D), got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"x must have shape (n, D), got {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("x contains NaN or inf")
    return x


def _gamma_vector(gamma: float | torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    g = torch.as_tensor(gamma, dtype=x.dtype, device=x.device)
    if g.ndim == 0:
        g = g.expand(x.shape[0])
    if g.shape != (x.shape[0],):
        raise ValueError(f"gamma must be a scalar or have shape ({x.shape[0]},), got {tuple(g.shape)}")
    if not torch.isfinite(g).all() or (g < 0).any():
        raise ValueError("gamma (a noise variance) must be finite and >= 0")
    return g.clone()


def call_score(score_fn: ScoreFn, x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """``score_fn(x, gamma)``, checking that it returns a finite tensor of the same shape as ``x``."""
    s = score_fn(x, gamma)
    _check_output(s, x)
    return s


def _check_output(s: object, x: torch.Tensor) -> None:
    if not isinstance(s, torch.Tensor):
        raise TypeError(f"score_fn must return a torch.Tensor, got {type(s).__name__}")
    if s.shape != x.shape:
        raise ValueError(f"score_fn returned shape {tuple(s.shape)} for x of shape {tuple(x.shape)}: a score model "
                         "must return one score vector per input point (same shape as x)")


def score_and_dgamma(score_fn: ScoreFn, x: torch.Tensor, gamma: float | torch.Tensor, method: str = "jvp",
                     rel_step: float = 1e-2) -> tuple[torch.Tensor, torch.Tensor]:
    """S(x, gamma) and dS/dgamma(x, gamma), by forward-mode autodiff (``"jvp"``) or central differences (``"fd"``)."""
    x = _check_x(x)
    g = _gamma_vector(gamma, x)
    if method == "jvp":
        # one forward-mode pass gives the score and its gamma-derivative together (no separate score call)
        try:
            s, ds = torch.func.jvp(lambda gg: score_fn(x, gg), (g,), (torch.ones_like(g),))
        except (RuntimeError, TypeError) as e:
            raise TypeError(
                f"score_fn failed under forward-mode autodiff (method='jvp'): {type(e).__name__}: {e}. It must be a "
                f"torch function of (x, gamma) returning a tensor; x and gamma are {x.dtype}. For a model with other "
                "parameters' dtype, cast inside the score, e.g. lambda x, g: model(x.float(), g.float()).to(x.dtype); "
                "for a score that is not a differentiable torch function (NumPy, a compiled model) use method='fd'"
            ) from e
        _check_output(s, x)
        return s, ds
    if method == "fd":
        if not (rel_step > 0 and math.isfinite(rel_step)):
            raise ValueError(f"rel_step must be > 0, got {rel_step!r}")
        lo = float(getattr(score_fn, "min_gamma", 0.0))          # clean_score_fn: gamma >= sigma^2
        h = rel_step * g.clamp_min(1e-12)
        gm = (g - h).clamp_min(lo)
        s = call_score(score_fn, x, g)
        sp, sm = call_score(score_fn, x, g + h), call_score(score_fn, x, gm)
        return s, (sp - sm) / (g + h - gm)[:, None]
    raise ValueError(f"unknown method {method!r}; use 'jvp' (forward-mode autodiff) or 'fd' (finite difference)")


def extended_score(score_fn: ScoreFn, x: torch.Tensor, gamma: float | torch.Tensor, method: str = "jvp",
                   rel_step: float = 1e-2) -> torch.Tensor:
    """H_gamma(x) = (1 + gamma) S(x, gamma) + gamma dS/dgamma(x, gamma) from a score model ``score_fn(x, gamma)``."""
    s, ds = score_and_dgamma(score_fn, x, gamma, method, rel_step)
    g = _gamma_vector(gamma, x)[:, None]
    return (1.0 + g) * s + g * ds


def tweedie_denoiser(score_fn: ScoreFn, x: torch.Tensor, gamma: float | torch.Tensor) -> torch.Tensor:
    """D_gamma(x) = x + gamma S(x, gamma) = E[x_0 | x_gamma = x] (Tweedie's formula)."""
    x = _check_x(x)
    g = _gamma_vector(gamma, x)
    return x + g[:, None] * call_score(score_fn, x, g)


def clean_score_fn(noisy_score_fn: ScoreFn, noise_var: float) -> ScoreFn:
    """Clean-data score at clean level gamma >= sigma^2 from a model of the noisy data: s(x, gamma - sigma^2).

    The noisy-data model is defined at model levels >= 0 only, so a clean level gamma < sigma^2 raises
    ``ValueError`` (it would query the model at a negative noise variance: meaningless values, or NaN). The
    returned function carries ``min_gamma = sigma^2``, which the finite-difference path respects.
    """
    if not (math.isfinite(noise_var) and noise_var >= 0):
        raise ValueError(f"noise_var must be >= 0, got {noise_var!r}")
    tol = 1e-12 * max(1.0, noise_var)

    def fn(x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
        g = torch.as_tensor(gamma)
        if bool((g < noise_var - tol).any()):
            raise ValueError(
                f"gamma must be >= noise_var = {noise_var:g} for clean_score_fn (clean levels below the data noise "
                f"are not reachable from a model of the noisy data), got min {float(g.min()):g}")
        return noisy_score_fn(x, gamma - noise_var)

    fn.min_gamma = float(noise_var)  # type: ignore[attr-defined]
    return fn
