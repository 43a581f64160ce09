"""Clean distributions with exact smoothed scores S(p * g_gamma), d/dgamma S and extended scores [B13].

- ``GaussianMixture(means, covs, weights)``: p * g_gamma = sum_k w_k N(mu_k, C_k + gamma I); covariances may be
  singular (a mixture on a low-dimensional subspace), gamma > 0 then keeps everything finite.
- ``CircleProduct(radii, basis)``: the uniform measure on a product of circles of radii R_j lying in orthogonal
  planes spanned by the columns of ``basis`` (D x 2J, orthonormal), zero in the orthogonal complement. One
  circle in R^2 is the circle testbed; two circles in R^10 a flat torus, a curved 2-D manifold. Per plane
  (r = |y|, z = r R / gamma, A = I_1(z) / I_0(z)):

      S(y) = (R A(z) y / r - y) / gamma,       and S(x_perp) = -x_perp / gamma off the planes,

  with d/dgamma in closed form (A'(z) = 1 - A/z - A^2, dz/dgamma = -z/gamma).
All are torch functions of (x, gamma), so ``extended_score(p.score, x, gamma)`` works on them too.
"""

from __future__ import annotations

import math

import torch

from .extended import _check_x, _gamma_vector

# Gaussian mixtures


class GaussianMixture:
    """sum_k w_k N(mu_k, C_k) in R^D; ``score(x, gamma)`` is the score of its convolution with N(0, gamma I)."""

    def __init__(self, means: torch.Tensor, covs: torch.Tensor, weights: torch.Tensor | None = None) -> None:
        means = torch.as_tensor(means, dtype=torch.float64)
        covs = torch.as_tensor(covs, dtype=torch.float64)
        if means.ndim != 2 or covs.shape != (means.shape[0], means.shape[1], means.shape[1]):
            raise ValueError(f"means must be (K, D) and covs (K, D, D); got {tuple(means.shape)} and {tuple(covs.shape)}")
        if not torch.allclose(covs, covs.transpose(1, 2)) or (torch.linalg.eigvalsh(covs) < -1e-10).any():
            raise ValueError("covs must be symmetric positive semi-definite")
        K = means.shape[0]
        w = torch.full((K,), 1.0 / K, dtype=torch.float64) if weights is None else torch.as_tensor(weights, dtype=torch.float64)
        if w.shape != (K,) or (w < 0).any() or abs(float(w.sum()) - 1) > 1e-8:
            raise ValueError("weights must be K non-negative numbers summing to 1")
        self.means, self.covs, self.weights = means, covs, w

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def score(self, x: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        """sum_k r_k(x) (C_k + gamma I)^{-1} (mu_k - x), r_k the posterior component probabilities."""
        g = _gamma_vector(gamma, x) if not isinstance(gamma, torch.Tensor) or gamma.ndim == 0 else gamma
        eye = torch.eye(self.dim, dtype=x.dtype)
        Sig = self.covs[None].to(x.dtype) + g[:, None, None, None] * eye        # (n, K, D, D)
        diff = self.means[None].to(x.dtype) - x[:, None, :]                      # (n, K, D)
        L = torch.linalg.cholesky(Sig)
        sol = torch.cholesky_solve(diff[..., None], L)[..., 0]                  # Sigma^-1 (mu - x)
        logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        logp = torch.log(self.weights.to(x.dtype))[None] - 0.5 * (diff * sol).sum(-1) - 0.5 * logdet
        r = torch.softmax(logp, dim=1)
        return (r[..., None] * sol).sum(1)

    def dscore_dgamma(self, x: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        """d/dgamma of ``score`` by forward-mode autodiff of the closed form (exact to rounding)."""
        g = _gamma_vector(gamma, x)
        return torch.func.jvp(lambda gg: self.score(x, gg), (g,), (torch.ones_like(g),))[1]

    def extended_score(self, x: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        g = _gamma_vector(gamma, x)[:, None]
        return (1 + g) * self.score(x, g[:, 0]) + g * self.dscore_dgamma(x, g[:, 0])

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        k = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        evals, evecs = torch.linalg.eigh(self.covs)
        root = evecs * evals.clamp_min(0).sqrt()[:, None, :]                  # C = root root^T
        z = torch.randn(n, self.dim, dtype=torch.float64, generator=generator)
        return self.means[k] + torch.einsum("nij,nj->ni", root[k], z)


# products of circles


def _bessel_ratio(z: torch.Tensor) -> torch.Tensor:
    """A(z) = I_1(z) / I_0(z), stable for large z (exponentially scaled Bessel functions)."""
    return torch.special.i1e(z) / torch.special.i0e(z)


class CircleProduct:
    """Uniform measure on a product of circles of radii ``radii`` in the planes spanned by pairs of ``basis``
    columns (orthonormal, D x 2J); the circle in R^2 is ``CircleProduct([R])``."""

    def __init__(self, radii: list[float], basis: torch.Tensor | None = None) -> None:
        self.radii = torch.as_tensor(radii, dtype=torch.float64).reshape(-1)
        if (self.radii <= 0).any():
            raise ValueError("radii must be > 0")
        J = len(self.radii)
        basis = torch.eye(2 * J, dtype=torch.float64) if basis is None else torch.as_tensor(basis, dtype=torch.float64)
        if basis.ndim != 2 or basis.shape[1] != 2 * J or basis.shape[0] < 2 * J:
            raise ValueError(f"basis must be (D, {2 * J}) with D >= {2 * J}, got {tuple(basis.shape)}")
        if not torch.allclose(basis.T @ basis, torch.eye(2 * J, dtype=torch.float64), atol=1e-10):
            raise ValueError("basis columns must be orthonormal")
        self.basis = basis

    @property
    def dim(self) -> int:
        return self.basis.shape[0]

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        Q = self.basis.to(x.dtype)
        y = x @ Q                                                               # (n, 2J) plane coordinates
        return y.reshape(len(x), -1, 2), x - y @ Q.T                            # (n, J, 2), orthogonal part

    def _score_parts(self, x: torch.Tensor, g: torch.Tensor) -> tuple:
        y, perp = self._split(x)
        R = self.radii.to(x.dtype)[None, :, None]
        r = y.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        gg = g[:, None, None]
        z = r * R / gg
        A = _bessel_ratio(z)
        u = y / r
        return y, perp, R, r, gg, z, A, u

    def score(self, x: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        x = _check_x(x)
        g = _gamma_vector(gamma, x)
        y, perp, R, r, gg, z, A, u = self._score_parts(x, g)
        s_plane = (R * A * u - y) / gg
        return s_plane.reshape(len(x), -1) @ self.basis.T.to(x.dtype) - perp / g[:, None]

    def dscore_dgamma(self, x: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        x = _check_x(x)
        g = _gamma_vector(gamma, x)
        y, perp, R, r, gg, z, A, u = self._score_parts(x, g)
        dA = 1 - A / z - A * A
        d_plane = -(R * A * u - y) / gg ** 2 + R * dA * (-z / gg) * u / gg
        return d_plane.reshape(len(x), -1) @ self.basis.T.to(x.dtype) + perp / (g ** 2)[:, None]

    def extended_score(self, x: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        g = _gamma_vector(gamma, x)[:, None]
        return (1 + g) * self.score(x, g[:, 0]) + g * self.dscore_dgamma(x, g[:, 0])

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        th = 2 * math.pi * torch.rand(n, len(self.radii), dtype=torch.float64, generator=generator)
        y = torch.stack([torch.cos(th), torch.sin(th)], -1) * self.radii[None, :, None]
        return y.reshape(n, -1) @ self.basis.T

    def angles(self, x: torch.Tensor) -> torch.Tensor:
        """On-manifold coordinates: the angle in each plane, in [0, 2 pi), shape (n, J)."""
        y, _ = self._split(x)
        return torch.atan2(y[..., 1], y[..., 0]) % (2 * math.pi)

    def distance(self, x: torch.Tensor) -> torch.Tensor:
        """Euclidean distance to the manifold: sqrt(|x_perp|^2 + sum_j (|y_j| - R_j)^2)."""
        y, perp = self._split(x)
        rad = y.norm(dim=-1) - self.radii.to(x.dtype)[None]
        return torch.sqrt((perp ** 2).sum(-1) + (rad ** 2).sum(-1))
