"""Sampling with the extended score: MAD (manifold attracted diffusion) and its baselines [B13].

Our reconstruction of the inference procedure (provisional; the paper's exact algorithm was not available):

1. **Plain reverse diffusion** of the noisy-data model (variance-exploding, Euler-Maruyama): levels
   gamma_0 = gamma_max > ... > gamma_N = gamma_min (geometric), x_0 ~ N(0, gamma_max I),
       x_{i+1} = x_i + (gamma_i - gamma_{i+1}) s(x_i, gamma_i) + sqrt(gamma_i - gamma_{i+1}) z_i,
   without noise in the last step. Its output follows p_noisy (* g_gamma_min): the noise sigma^2 is reproduced.
2. **Attraction stage** (MAD): K explicit Euler steps of the extended-score flow of the *clean* distribution,
       x <- x + eta H_{gamma_k}(x),  H_gamma = (1 + gamma) S_clean(x, gamma) + gamma dS_clean/dgamma,
   where S_clean(x, gamma) = s(x, gamma - sigma^2) (clean levels gamma >= sigma^2 come from the noisy model) and
   the model level gamma_k - sigma^2 is annealed geometrically from ``attract_gamma0`` down to gamma_min.
   Off the manifold (variance 0 under the clean law) H = -(x - projection): distances shrink by
   (1 - eta)^K ~ exp(-tau), tau = K eta; along directions of variance s^2 >> 1, H ~ -(1+gamma) x / s^2 barely moves.
3. **Baselines from the same plain samples**: (i) plain; (ii) plain + one Tweedie step with the noisy model at its
   last level, x + (sigma^2 + gamma_min) s(x, gamma_min) = E[x_clean | x]; (iii) the annealed (iterated) Tweedie
   relaxation at equal network evaluations (``tweedie_relax``): the attraction stage with H replaced by the
   Tweedie displacement D_gamma(x) - x = gamma S_clean(x, gamma), i.e. H = (D - x) + dD/dgamma without its
   dD/dgamma term, over the same levels and total time tau, with as many steps as MAD makes network evaluations
   (2 per step with the jvp: the score and its forward-mode tangent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .extended import ScoreFn, call_score, clean_score_fn, extended_score


@dataclass
class ManifoldAttractedSampler:
    """Plain VE reverse diffusion with a noisy-data score model, then the extended-score attraction stage.

    Args:
        score_fn: ``s(x (n, D), gamma (n,)) -> (n, D)``, the score of p_noisy * g_gamma (trained on noisy data).
        noise_var: sigma^2, the variance of the noise in the training data (known or estimated).
        dim: data dimension D.
        n_steps: reverse-diffusion steps; ``gamma_max`` / ``gamma_min``: first and last model levels.
        attract_steps: K (0 disables the attraction stage: the output is then the plain sampler's, bit for bit).
        attract_time: tau = K eta, the total time of the extended-score flow (default 2, as in the README and
            the reproduction).
        attract_gamma0: first model level of the attraction stage (annealed down to ``gamma_min``).
        method: ``"jvp"`` or ``"fd"`` for d/dgamma of the score.
    """

    score_fn: ScoreFn
    noise_var: float
    dim: int
    n_steps: int = 100
    gamma_max: float = 25.0
    gamma_min: float = 1e-3
    attract_steps: int = 40
    attract_time: float = 2.0
    attract_gamma0: float | None = None
    method: str = "jvp"

    def __post_init__(self) -> None:
        if not callable(self.score_fn):
            raise TypeError("score_fn must be callable s(x, gamma) -> tensor of x's shape")
        if not (math.isfinite(self.noise_var) and self.noise_var >= 0):
            raise ValueError(f"noise_var must be >= 0, got {self.noise_var!r}")
        if not (0 < self.gamma_min < self.gamma_max):
            raise ValueError(f"need 0 < gamma_min < gamma_max, got {self.gamma_min}, {self.gamma_max}")
        if self.n_steps < 1 or self.attract_steps < 0 or self.dim < 1:
            raise ValueError("n_steps and dim must be >= 1 and attract_steps >= 0")
        if not self.attract_time > 0:
            raise ValueError(f"attract_time must be > 0, got {self.attract_time!r}")
        if self.method not in ("jvp", "fd"):
            raise ValueError(f"unknown method {self.method!r}; use 'jvp' or 'fd'")

    # helper functions

    def levels(self) -> torch.Tensor:
        return torch.exp(torch.linspace(math.log(self.gamma_max), math.log(self.gamma_min), self.n_steps + 1,
                                        dtype=torch.float64))

    def attract_levels(self) -> torch.Tensor:
        g0 = self.noise_var if self.attract_gamma0 is None else self.attract_gamma0
        g0 = max(g0, self.gamma_min)
        return torch.exp(torch.linspace(math.log(g0), math.log(self.gamma_min), max(self.attract_steps, 1),
                                        dtype=torch.float64))

    # main methods

    @torch.no_grad()
    def plain(self, n: int, generator: torch.Generator, x_init: torch.Tensor | None = None) -> torch.Tensor:
        """Plain reverse diffusion (Euler-Maruyama) from gamma_max down to gamma_min."""
        gam = self.levels()
        x = math.sqrt(self.gamma_max) * torch.randn(n, self.dim, dtype=torch.float64, generator=generator)
        if x_init is not None:
            x = x + x_init
        for i in range(self.n_steps):
            dg = gam[i] - gam[i + 1]
            x = x + dg * call_score(self.score_fn, x, gam[i].expand(n))
            if i < self.n_steps - 1:
                x = x + dg.sqrt() * torch.randn(x.shape, dtype=x.dtype, generator=generator)
        return x

    def tweedie(self, x: torch.Tensor) -> torch.Tensor:
        """One Tweedie step with the noisy model at its last level: E[x_clean | x]."""
        with torch.no_grad():
            g = torch.full((len(x),), self.gamma_min, dtype=x.dtype)
            return x + (self.noise_var + self.gamma_min) * call_score(self.score_fn, x, g)

    def attract(self, x: torch.Tensor) -> torch.Tensor:
        """K Euler steps x <- x + eta H_gamma(x) of the clean distribution's extended score (eta = tau / K)."""
        if self.attract_steps == 0:
            return x
        clean = clean_score_fn(self.score_fn, self.noise_var)
        eta = self.attract_time / self.attract_steps
        for g_model in self.attract_levels():
            g_clean = torch.full((len(x),), float(g_model) + self.noise_var, dtype=x.dtype)
            with torch.no_grad():
                H = extended_score(clean, x, g_clean, method=self.method)
            x = x + eta * H
        return x

    def evaluations_per_attract_step(self) -> int:
        """Network evaluations per attraction step: 2 (the score and its gamma-tangent, jvp) or 3 (fd)."""
        return 2 if self.method == "jvp" else 3

    def tweedie_relax(self, x: torch.Tensor, steps: int | None = None) -> torch.Tensor:
        """Annealed Tweedie relaxation x <- x + eta (D_gamma(x) - x), D_gamma(x) = x + gamma S_clean(x, gamma), over
        the attraction stage's clean levels and total time tau (eta = tau / steps). ``steps`` defaults to the
        attraction stage's network evaluations (K x ``evaluations_per_attract_step``): the equal-compute baseline."""
        steps = self.attract_steps * self.evaluations_per_attract_step() if steps is None else int(steps)
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps!r}")
        if steps == 0:
            return x
        g0 = self.noise_var if self.attract_gamma0 is None else self.attract_gamma0
        g0 = max(g0, self.gamma_min)
        levels = torch.exp(torch.linspace(math.log(g0), math.log(self.gamma_min), steps, dtype=torch.float64))
        eta = self.attract_time / steps
        with torch.no_grad():
            for g_model in levels:
                g = torch.full((len(x),), float(g_model), dtype=x.dtype)
                x = x + eta * (float(g_model) + self.noise_var) * call_score(self.score_fn, x, g)
        return x

    def sample(self, n: int, generator: torch.Generator | int = 0) -> dict[str, torch.Tensor]:
        """``{"plain", "tweedie", "tweedie-relax", "mad"}``: the plain samples and three post-processings of the
        same samples (one Tweedie step, the annealed Tweedie relaxation at MAD's network evaluations, MAD)."""
        if isinstance(generator, int):
            generator = torch.Generator().manual_seed(generator)
        x = self.plain(n, generator)
        return {"plain": x, "tweedie": self.tweedie(x), "tweedie-relax": self.tweedie_relax(x),
                "mad": self.attract(x)}
