"""torchsde's strong-order-1.5 SRK as a peer of SRK-LMC, driven by our Brownian path [A03].

torchsde (``pip install torchsde``) implements Rößler's (2010) SRA1 for additive noise. On dX = f dt + sqrt(2) dW
its tableau (A0 = 3/4, B0 = 3/2, alpha = (1/3, 2/3), beta1 = (1, 0), beta2 = (-1, 1)) is the SRK-LMC step, so
both give the same iterates on the same path; torchsde evaluates the drift three times per step (it recomputes
f(x) for the second stage) where the scheme needs two. ``PathBrownian`` hands torchsde our increments
(dW, dZ = int (W_s - W_tn) ds, its ``I_k`` and ``I_k0``), so every method sees one Brownian path.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from icml26.harness.peers import peer_available
from icml26.harness.validate import require_package

__all__ = ["torchsde_available", "torchsde_srk"]


def torchsde_available() -> bool:
    """Whether torchsde is installed (a run without it says so in its summary, with the extra that adds it)."""
    return peer_available("torchsde", "peers", "A03's cross-check against torchsde's SRK solver")


def torchsde_srk(grad_U: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, h: float, dW: np.ndarray,
                 dZ: np.ndarray) -> tuple[np.ndarray, int]:
    """Run torchsde's ``method="srk"`` on dX = -grad U(X) dt + sqrt(2) dW over the given increments [A03].

    ``x0`` is ``(n_chains, d)``; ``dW``, ``dZ`` are ``(n_steps, n_chains, d)``. Returns the final states
    (float64) and the number of drift evaluations torchsde made (each over the whole batch).
    """
    import torch

    torchsde = require_package("torchsde", "peers", purpose="torchsde_srk")
    from torchsde._brownian.brownian_base import BaseBrownian

    class PathBrownian(BaseBrownian):
        """A fixed path given by its per-step increments: ``bm(t_n, t_n + h, return_U=True) = (dW_n, dZ_n)``."""

        __slots__ = ("_dW", "_dZ", "_h")

        def __init__(self, dW: torch.Tensor, dZ: torch.Tensor, h: float):
            self._dW, self._dZ, self._h = dW, dZ, h

        def __call__(self, ta, tb=None, return_U=False, return_A=False):
            i = int(round(float(ta) / self._h))
            if tb is None or abs(float(tb) - float(ta) - self._h) > 1e-9 * self._h:
                raise ValueError("PathBrownian answers whole steps [t_n, t_n + h] only (fixed-step solvers)")
            return (self._dW[i], self._dZ[i]) if return_U else self._dW[i]

        def __repr__(self) -> str:
            return f"PathBrownian(steps={len(self._dW)}, h={self._h})"

        dtype = property(lambda self: self._dW.dtype)
        device = property(lambda self: self._dW.device)
        shape = property(lambda self: tuple(self._dW.shape[1:]))
        levy_area_approximation = property(lambda self: "space-time")

    class Langevin(torch.nn.Module):
        noise_type, sde_type = "additive", "ito"

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def f(self, t, y):
            self.calls += 1
            return -torch.from_numpy(grad_U(y.numpy()))

        def g(self, t, y):  # sqrt(2) I, one Brownian coordinate per state coordinate
            n, d = y.shape
            return (2.0 ** 0.5) * torch.eye(d, dtype=y.dtype).expand(n, d, d)

    dW_t, dZ_t = torch.as_tensor(np.asarray(dW, dtype=float)), torch.as_tensor(np.asarray(dZ, dtype=float))
    sde = Langevin()
    ts = torch.tensor([0.0, len(dW_t) * h], dtype=torch.float64)
    with torch.no_grad():
        ys = torchsde.sdeint(sde, torch.as_tensor(np.asarray(x0, dtype=float)), ts, method="srk", dt=h,
                             bm=PathBrownian(dW_t, dZ_t, h))
    return ys[-1].numpy(), sde.calls
