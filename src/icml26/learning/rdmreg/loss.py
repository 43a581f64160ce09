"""RDMReg and the Rectified LpJEPA objective [B17].

Sliced two-sample W2^2 between a batch Z in R^{B x D} and a fresh target batch Y ~ RGG^{B x D}:

    SW(Z, Y) = mean_{b, n} ( sort_b(Z c_n)_b - sort_b(Y c_n)_b )^2,   c_n = g_n / ||g_n||,  g_n ~ N(0, I_D)

Rectified LpJEPA:

    L = lambda_inv * MSE(z1, z2) + lambda_reg * (RDM(z1) + RDM(z2)) / 2

With p = 2 and no rectification (``rectify=False``) the target is N(0, I) and the method is a Gaussian-target
(LeJEPA/SIGReg-style) JEPA with sliced W2 in place of the Epps-Pulley test.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate

from .rgg import (
    _check_mu,
    _check_p,
    _resolve_sigma,
    rgg_expected_l0,
    sample_generalized_normal,
    sigma_for_unit_rectified_variance,
)

__all__ = ["sliced_wasserstein2", "projection_directions", "PROJECTIONS", "RDMReg", "RectifiedLpJEPALoss", "RectifiedProjector", "VICRegLoss",
           "l0_sparsity", "l1_sparsity"]


# helper functions

def _check_batch(name: str, z: torch.Tensor) -> None:
    if not isinstance(z, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(z).__name__}")
    if z.ndim != 2:
        raise ValueError(f"{name} must be 2-D (batch, dim), got shape {tuple(z.shape)}; flatten features first")
    if z.shape[0] == 0 or z.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(z.shape)}); need at least one row and one column")
    if not z.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {z.dtype}")
    validate.finite(name, z)  # a NaN batch would give a NaN loss (and an l0 of 0) without a word


def _check_positive_int(name: str, v: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if v < 1:
        raise ValueError(f"{name} must be >= 1, got {v}")
    return v


def _check_weight(name: str, v: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return float(v)


def random_directions(dim: int, num_projections: int, *, generator: torch.Generator | None = None,
                      dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> torch.Tensor:
    """(dim, num_projections) matrix of unit-norm Gaussian directions c_n (drawn on the generator's device)."""
    dim, num_projections = validate.positive_int("dim", dim), validate.positive_int("num_projections", num_projections)
    gdev = generator.device if generator is not None else torch.device("cpu")
    c = torch.randn(dim, num_projections, generator=generator, device=gdev, dtype=dtype)
    c = c / c.norm(dim=0, keepdim=True).clamp_min(1e-12)
    return c.to(device) if device is not None else c


PROJECTIONS = ("random", "svd_and_random", "svd_bottom_half_and_random")


def _svd_directions(z: torch.Tensor) -> torch.Tensor:
    """Right-singular vectors of the centred batch, as columns (D, min(B, D)), largest first; no gradient."""
    zc = z.detach().float()
    zc = zc - zc.mean(dim=0)
    return torch.linalg.svd(zc, full_matrices=False).Vh.T


def projection_directions(z1: torch.Tensor, z2: torch.Tensor, num_projections: int, kind: str = "random", *,
                          generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Slicing directions (D, N) for the two views, as the official ``Projections.get_projection_vectors`` [B17].

    ``"random"``: N unit Gaussian directions shared by both views. ``"svd_and_random"``: each view's right-singular
    vectors (of its centred, detached batch) followed by N - min(B, D) shared random directions;
    ``"svd_bottom_half_and_random"``: only the bottom half of those singular vectors, filled up the same way.
    """
    _check_batch("z1", z1)
    _check_batch("z2", z2)
    _check_positive_int("num_projections", num_projections)
    if z1.shape[1] != z2.shape[1]:
        raise ValueError(f"z1 and z2 must have the same dim, got {z1.shape[1]} and {z2.shape[1]}")
    if kind not in PROJECTIONS:
        raise ValueError(f"unknown projections {kind!r}; choose one of {', '.join(PROJECTIONS)}")
    dim = z1.shape[1]
    if kind == "random":
        c = random_directions(dim, num_projections, generator=generator, dtype=z1.dtype, device=z1.device)
        return c, c
    v1, v2 = _svd_directions(z1), _svd_directions(z2)
    if kind == "svd_bottom_half_and_random":
        v1, v2 = v1[:, v1.shape[1] // 2:], v2[:, v2.shape[1] // 2:]
    n_random = num_projections - v1.shape[1]
    if n_random < 0:
        raise ValueError(f"num_projections={num_projections} is below the {v1.shape[1]} singular directions of "
                         f"{kind!r}: use at least {v1.shape[1]}")
    r = random_directions(dim, n_random, generator=generator, dtype=torch.float32)
    cat = lambda v: torch.cat([v, r], dim=1).to(dtype=z1.dtype, device=z1.device)  # noqa: E731
    return cat(v1), cat(v2)


def _sort_rows(a: torch.Tensor) -> torch.Tensor:
    """Sort each row, differentiably (gather by the sorting permutation).

    On CPU, NumPy's argsort is several times faster than ``torch.sort`` for these shapes; the values are the
    same and the gradient flows through ``gather`` either way.
    """
    if a.device.type == "cpu":
        idx = torch.from_numpy(np.argsort(a.detach().contiguous().numpy(), axis=1))
        return a.gather(1, idx)
    return torch.sort(a, dim=1).values


# main functions

def sliced_wasserstein2(x: torch.Tensor, y: torch.Tensor, num_projections: int = 1024, *,
                        generator: torch.Generator | None = None,
                        directions: torch.Tensor | None = None) -> torch.Tensor:
    """Two-sample sliced W2^2 = mean_{b,n} (sort(x c_n)_b - sort(y c_n)_b)^2 [B17].

    ``x`` and ``y`` are (B, D) with the same shape (equal batch sizes make the 1-D transport the sorted
    matching). ``directions`` (D, N) overrides the random draw. Differentiable in both arguments.
    """
    _check_batch("x", x)
    _check_batch("y", y)
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same (batch, dim) shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if directions is None:
        _check_positive_int("num_projections", num_projections)
        directions = random_directions(x.shape[1], num_projections, generator=generator, dtype=x.dtype,
                                       device=x.device)
    elif directions.ndim != 2 or directions.shape[0] != x.shape[1]:
        raise ValueError(f"directions must be (dim={x.shape[1]}, N), got {tuple(directions.shape)}")
    px = _sort_rows((x @ directions).T)  # (N, B): one row per direction, contiguous for the sort
    py = _sort_rows((y.to(x.dtype) @ directions).T)
    return (px - py).pow(2).mean()


def l0_sparsity(z: torch.Tensor, eps: float = 0.0) -> float:
    """Fraction of entries with |z| > eps (the l0 'density'; 1 - l0 is the fraction of zeros) [B17]."""
    _check_batch("z", z)
    return float((z.abs() > eps).float().mean())


def l1_sparsity(z: torch.Tensor) -> float:
    """Mean over rows of (1/D) (||z||_1 / ||z||_2)^2, in [1/D, 1]; all-zero rows count as 0 [B17]."""
    _check_batch("z", z)
    l1, l2 = z.abs().sum(1), z.norm(dim=1)
    r = torch.where(l2 > 0, (l1 / l2.clamp_min(1e-30)) ** 2 / z.shape[1], torch.zeros_like(l2))
    return float(r.mean())


# main classes

class RDMReg(nn.Module):
    """Rectified Distribution Matching Regularization [B17]: sliced W2^2 of z to a fresh RGG target batch.

    Args:
        p, mu, sigma: RGG target ReLU(mu + sigma xi), xi ~ GN_p (sigma=None: chosen by ``sigma_mode``).
        num_projections: N random unit directions drawn each call (the official default is 8192; ours 1024,
            see the README for the measured difference).
        rectify: False gives the un-rectified GN_p target (p=2: isotropic Gaussian, the LeJEPA-style case).
        seed: seeds a private CPU generator for targets and directions (None: torch's global RNG).
        sigma_mode: with ``sigma=None``, ``"pre_relu"`` gives sigma * xi unit variance (official "sigma_GN", the
            default) and ``"post_relu"`` makes the rectified target ReLU(mu + sigma xi) unit variance (official
            "sigma_RGN").
    """

    def __init__(self, p: float = 1.0, mu: float = 0.0, sigma: float | None = None, *,
                 num_projections: int = 1024, rectify: bool = True, seed: int | None = None,
                 sigma_mode: str = "pre_relu") -> None:
        super().__init__()
        self.p, self.mu = _check_p(p), _check_mu(mu)
        if sigma_mode not in ("pre_relu", "post_relu"):
            raise ValueError(f"sigma_mode must be 'pre_relu' or 'post_relu', got {sigma_mode!r}")
        self.sigma_mode = sigma_mode
        if sigma is None and sigma_mode == "post_relu":
            sigma = sigma_for_unit_rectified_variance(self.p, self.mu)
        self.sigma = _resolve_sigma(self.p, sigma)
        self.num_projections = _check_positive_int("num_projections", num_projections)
        self.rectify = bool(rectify)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None

    def sample_target(self, shape: tuple[int, int], dtype: torch.dtype = torch.float32,
                      device: torch.device | str | None = None) -> torch.Tensor:
        """Draw Y ~ RGG (or the un-rectified GN_p when ``rectify=False``); carries no gradient."""
        y = self.mu + self.sigma * sample_generalized_normal(shape, self.p, generator=self.generator, dtype=dtype)
        return (torch.relu(y) if self.rectify else y).to(device)

    def forward(self, z: torch.Tensor, directions: torch.Tensor | None = None) -> torch.Tensor:
        """SW(z, Y) with a fresh target batch Y; ``directions`` (D, N) given, or N fresh random ones."""
        _check_batch("z", z)
        y = self.sample_target(tuple(z.shape), dtype=z.dtype, device=z.device)
        if directions is None:
            directions = random_directions(z.shape[1], self.num_projections, generator=self.generator,
                                           dtype=z.dtype, device=z.device)
        return sliced_wasserstein2(z, y, directions=directions)

    def extra_repr(self) -> str:
        return (f"p={self.p}, mu={self.mu}, sigma={self.sigma:.4f}, num_projections={self.num_projections}, "
                f"rectify={self.rectify}")


class RectifiedLpJEPALoss(nn.Module):
    """L = lamb_inv * MSE(z1, z2) + lamb_reg * (RDM(z1) + RDM(z2)) / 2 [B17]; returns (loss, parts).

    ``parts`` holds detached floats: ``inv``, ``reg``, ``l0`` (nonzero fraction of z1) and ``l0_target``.
    Defaults follow the official minimal config (lamb_inv=25, lamb_reg=250, p=1, mu=0), except the slicing:
    by default each view draws its own random directions; ``share_directions=True`` draws one set for both
    views, as the official code does, and ``projections`` selects the official SVD variants (per-view singular
    directions plus shared random ones; see ``projection_directions``).
    """

    def __init__(self, lamb_inv: float = 25.0, lamb_reg: float = 250.0, p: float = 1.0, mu: float = 0.0,
                 sigma: float | None = None, *, num_projections: int = 1024, rectify: bool = True,
                 seed: int | None = None, share_directions: bool = False, projections: str = "random",
                 sigma_mode: str = "pre_relu") -> None:
        super().__init__()
        self.lamb_inv = _check_weight("lamb_inv", lamb_inv)
        self.lamb_reg = _check_weight("lamb_reg", lamb_reg)
        if projections not in PROJECTIONS:
            raise ValueError(f"unknown projections {projections!r}; choose one of {', '.join(PROJECTIONS)}")
        self.share_directions, self.projections = bool(share_directions), projections
        self.rdm = RDMReg(p, mu, sigma, num_projections=num_projections, rectify=rectify, seed=seed,
                          sigma_mode=sigma_mode)

    def _regulariser(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        if not self.share_directions and self.projections == "random":
            return 0.5 * (self.rdm(z1) + self.rdm(z2))
        c1, c2 = projection_directions(z1, z2, self.rdm.num_projections, self.projections,
                                       generator=self.rdm.generator)
        return 0.5 * (self.rdm(z1, c1) + self.rdm(z2, c2))

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        _check_batch("z1", z1)
        _check_batch("z2", z2)
        if z1.shape != z2.shape:
            raise ValueError(f"z1 and z2 must have the same shape, got {tuple(z1.shape)} and {tuple(z2.shape)}")
        inv = F.mse_loss(z1, z2)
        reg = self._regulariser(z1, z2) if self.lamb_reg > 0 else z1.new_zeros(())
        loss = self.lamb_inv * inv + self.lamb_reg * reg
        parts = {"inv": float(inv.detach()), "reg": float(reg.detach()), "l0": l0_sparsity(z1.detach()),
                 "l0_target": rgg_expected_l0(self.rdm.p, self.rdm.mu, self.rdm.sigma) if self.rdm.rectify else 1.0}
        return loss, parts


class VICRegLoss(nn.Module):
    """VICReg (Bardes, Ponce & LeCun, ICLR 2022), the non-sliced baseline of [B17]; returns (loss, parts).

        L = lamb_inv * MSE(z1, z2) + lamb_var * (v(z1) + v(z2)) + lamb_cov * (c(z1) + c(z2))
        v(z) = mean_d ReLU(gamma - sqrt(Var(z_d) + eps)),   c(z) = sum_{d != d'} Cov(z)_{dd'}^2 / D

    Defaults 25 / 25 / 1, gamma = 1, eps = 1e-4 (the VICReg paper's). ``parts``: ``inv``, ``var``, ``cov``.
    """

    def __init__(self, lamb_inv: float = 25.0, lamb_var: float = 25.0, lamb_cov: float = 1.0, *,
                 gamma: float = 1.0, eps: float = 1e-4) -> None:
        super().__init__()
        self.lamb_inv = _check_weight("lamb_inv", lamb_inv)
        self.lamb_var = _check_weight("lamb_var", lamb_var)
        self.lamb_cov = _check_weight("lamb_cov", lamb_cov)
        self.gamma = _check_weight("gamma", gamma)
        if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
            raise ValueError(f"eps must be a finite positive number, got {eps!r}")
        self.eps = float(eps)

    def _var_cov(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = z - z.mean(dim=0)
        var = F.relu(self.gamma - torch.sqrt(z.var(dim=0) + self.eps)).mean()
        cov = z.T @ z / (z.shape[0] - 1)
        off = cov.square().sum() - cov.diagonal().square().sum()
        return var, off / z.shape[1]

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        _check_batch("z1", z1)
        _check_batch("z2", z2)
        if z1.shape != z2.shape:
            raise ValueError(f"z1 and z2 must have the same shape, got {tuple(z1.shape)} and {tuple(z2.shape)}")
        if z1.shape[0] < 2:
            raise ValueError(f"VICReg needs a batch of at least 2 (per-dimension variance), got {z1.shape[0]}")
        inv = F.mse_loss(z1, z2)
        (v1, c1), (v2, c2) = self._var_cov(z1), self._var_cov(z2)
        var, cov = v1 + v2, c1 + c2
        loss = self.lamb_inv * inv + self.lamb_var * var + self.lamb_cov * cov
        return loss, {"inv": float(inv.detach()), "var": float(var.detach()), "cov": float(cov.detach())}


class RectifiedProjector(nn.Sequential):
    """MLP projector ending in a ReLU, z = ReLU(g(h)) >= 0 [B17].

    ``num_layers`` Linear layers: hidden ones are Linear-BN-ReLU; the last Linear is followed by the
    rectifying ReLU (``rectify=False`` drops it, for Gaussian-target or VICReg baselines).
    """

    def __init__(self, in_dim: int, hidden: int = 512, out: int = 128, *, num_layers: int = 3,
                 rectify: bool = True) -> None:
        for name, v in (("in_dim", in_dim), ("hidden", hidden), ("out", out), ("num_layers", num_layers)):
            _check_positive_int(name, v)
        layers: list[nn.Module] = []
        d = in_dim
        for _ in range(num_layers - 1):
            layers += [nn.Linear(d, hidden), nn.BatchNorm1d(hidden), nn.ReLU()]
            d = hidden
        layers.append(nn.Linear(d, out))
        if rectify:
            layers.append(nn.ReLU())
        super().__init__(*layers)
