"""A small noise-conditional score MLP trained by denoising score matching on noisy samples [B13].

s_theta(x, gamma) = net([x / c, e(gamma)]) / sqrt(gamma + sigma0^2) ("noise" parametrization) or
(c net([x / c, e(gamma)]) - x) / (gamma + sigma0^2) ("denoiser": the net predicts the Tweedie denoiser
E[x_clean | x], which is smooth across a thin noisy manifold where the score is steep), with sigma0^2 the known data-noise
variance and e(gamma) Fourier features of log(gamma + sigma0^2), the log of the *clean* level (p_noisy * g_gamma
= p_clean * g_{gamma + sigma0^2}). Embedding the clean level keeps d/dgamma bounded by ~1/sigma0^2 as gamma -> 0;
an embedding of log gamma would multiply the network's log-level sensitivity by 1/gamma there, which makes the
extended score's d/dgamma term explode at the small levels where the attraction stage runs.

DSM (Vincent 2011): x~ = x + sqrt(gamma) eps, loss E || sqrt(gamma) s_theta(x~, gamma) + eps ||^2 over
log-uniform gamma in [gamma_min, gamma_max]; its minimiser is the score of p_data * g_gamma.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from icml26.harness import validate


class ScoreMLP(nn.Module):
    """MLP score model s(x, gamma) for x of shape (n, dim) and gamma of shape (n,) (noise variances)."""

    def __init__(self, dim: int, hidden: int = 128, depth: int = 3, n_freq: int = 4, data_scale: float = 1.0,
                 noise_var: float = 0.0, parametrization: str = "noise") -> None:
        super().__init__()
        if dim < 1 or hidden < 1 or depth < 1:
            raise ValueError("dim, hidden and depth must be >= 1")
        if parametrization not in ("noise", "denoiser"):
            raise ValueError(f"parametrization must be 'noise' or 'denoiser', got {parametrization!r}")
        self.parametrization = parametrization
        self.dim, self.data_scale, self.noise_var = dim, float(data_scale), float(noise_var)
        # low frequencies in the log level: the network can fit the level dependence but not oscillate in it,
        # which keeps the forward-mode d/dgamma (the extended score's second term) faithful
        self.register_buffer("freqs", torch.arange(1, n_freq + 1, dtype=torch.float32) * 0.1)
        layers: list[nn.Module] = []
        width = dim + 2 * n_freq
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.SiLU()]
            width = hidden
        layers.append(nn.Linear(width, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (n, {self.dim}), got {tuple(x.shape)}")
        gamma = gamma.expand(x.shape[0]) if gamma.ndim == 0 else gamma
        lg = torch.log(gamma.to(x.dtype) + max(self.noise_var, 1e-12))[:, None] * self.freqs.to(x.dtype)[None]
        h = torch.cat([x / self.data_scale, torch.sin(lg), torch.cos(lg)], dim=1)
        c = gamma.to(x.dtype)[:, None] + self.noise_var
        if self.parametrization == "denoiser":          # s = (D(x) - x) / (gamma + sigma0^2), D = E[x_clean | x]
            return (self.data_scale * self.net(h) - x) / c
        return self.net(h) / torch.sqrt(c)


def train_dsm(model: ScoreMLP, data: torch.Tensor, gamma_min: float, gamma_max: float, steps: int = 2000,
              batch_size: int = 512, lr: float = 2e-3, seed: int = 0) -> list[float]:
    """Denoising score matching on ``data`` (the noisy samples); returns the loss per step. Adam + cosine decay."""
    if not (0 < gamma_min < gamma_max):
        raise ValueError(f"need 0 < gamma_min < gamma_max, got {gamma_min}, {gamma_max}")
    if data.ndim != 2 or data.shape[1] != model.dim:
        raise ValueError(f"data must have shape (n, {model.dim}), got {tuple(data.shape)}")
    validate.finite("data", data)  # NaN data trained to a NaN loss without a word
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    lo, hi = math.log(gamma_min), math.log(gamma_max)
    data = data.to(torch.float32)
    losses = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(len(data), (batch_size,), generator=g)
        x0 = data[idx]
        gam = torch.exp(lo + (hi - lo) * torch.rand(batch_size, generator=g))
        eps = torch.randn(x0.shape, generator=g)
        s = model(x0 + gam.sqrt()[:, None] * eps, gam)
        loss = ((gam.sqrt()[:, None] * s + eps) ** 2).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
