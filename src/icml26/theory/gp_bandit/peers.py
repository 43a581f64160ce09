"""Peers run side by side with our implementation [B09]: scikit-learn's GP posterior and BoTorch's UCB.

Both are optional imports. ``sklearn_posterior`` fixes the kernel (``optimizer=None``) so that it is the same
model as ours; ``botorch_ucb_run`` refits a BoTorch ``SingleTaskGP`` with the same fixed SE kernel (lengthscale,
unit outputscale, zero mean, fixed noise sigma^2) at every step and maximises its ``UpperConfidenceBound``
(mu + beta^{1/2} sigma) over the same candidates, with the same beta_t schedule and noise sequence.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def sklearn_posterior(X: np.ndarray, y: np.ndarray, Xq: np.ndarray, lengthscale: float,
                      noise_var: float) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance of f from ``GaussianProcessRegressor(RBF(l), alpha=sigma^2, optimizer=None)``."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    gpr = GaussianProcessRegressor(RBF(lengthscale, length_scale_bounds="fixed"), alpha=noise_var,
                                   optimizer=None, normalize_y=False).fit(X, y)
    mean, sd = gpr.predict(Xq, return_std=True)
    return mean, sd ** 2


def botorch_available() -> bool:
    try:
        import botorch  # noqa: F401
    except ImportError:
        return False
    return True


def botorch_ucb_run(candidates: np.ndarray, f_values: np.ndarray, T: int, noise: np.ndarray, lengthscale: float,
                    noise_var: float, beta: Callable[[int], float], first: int = 0) -> dict[str, np.ndarray]:
    """GP-UCB with BoTorch's model and acquisition (refit from scratch each step; O(t^3) per step).

    ``first``: the first pick. Under the prior every candidate has the same UCB, so the first index is an
    arbitrary tie-break; pass ours to make the two runs comparable step by step.
    """
    import torch
    from botorch.acquisition import UpperConfidenceBound
    from botorch.models import SingleTaskGP
    from gpytorch.kernels import RBFKernel
    from gpytorch.means import ZeroMean

    Xc = torch.as_tensor(candidates, dtype=torch.float64)
    f_values = np.asarray(f_values, dtype=float)
    f_star = float(f_values.max())
    idx, simple = np.empty(T, dtype=int), np.empty(T)
    ys = []
    for t in range(T):
        if t == 0:
            i = int(first)
        else:
            model = _model(Xc[idx[:t]], torch.tensor(ys, dtype=torch.float64)[:, None], lengthscale, noise_var,
                           SingleTaskGP, RBFKernel, ZeroMean)
            with torch.no_grad():
                acq = UpperConfidenceBound(model, beta=beta(t + 1))(Xc[:, None, :])
            i = int(torch.argmax(acq))
        idx[t] = i
        ys.append(float(f_values[i] + noise[t]))
        model = _model(Xc[idx[: t + 1]], torch.tensor(ys, dtype=torch.float64)[:, None], lengthscale, noise_var,
                       SingleTaskGP, RBFKernel, ZeroMean)
        with torch.no_grad():
            mean = model.posterior(Xc).mean[:, 0]
        simple[t] = f_star - f_values[int(torch.argmax(mean))]
    instant = f_star - f_values[idx]
    return {"instant": instant, "cumulative": np.cumsum(instant), "simple": simple, "indices": idx}


def _model(X, Y, lengthscale, noise_var, SingleTaskGP, RBFKernel, ZeroMean):
    import torch

    kern = RBFKernel()
    kern.lengthscale = torch.tensor(float(lengthscale), dtype=torch.float64)
    model = SingleTaskGP(X, Y, train_Yvar=torch.full_like(Y, noise_var), covar_module=kern, mean_module=ZeroMean(),
                         outcome_transform=None, input_transform=None).to(torch.float64)
    model.eval()
    return model
