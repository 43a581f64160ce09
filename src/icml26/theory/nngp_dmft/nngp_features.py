"""A real NNGP spectrum: eigen-features of the infinite-width ReLU network kernel on scikit-learn's digits [A02].

On the n = 1797 digits (uniform population), K_ij = NNGP kernel (``testbeds.ntk.nngp_kernel``), K / n = U diag(e) U^T.
The eigen-features psi_k(x_i) = sqrt(n) U_ik sqrt(e_k) satisfy E_i[psi_k psi_l] = e_k delta_kl, and any target
y(x_i) = sum_k w_k psi_k(x_i) with w = U^T y / (sqrt(n) sqrt(e)). Rescaled to unit trace, (lam, features, w) plug
into the DMFT (lam, w^2) and into ``simulate_run`` (rows of ``features`` at sampled digits are the data), with test
error over the whole population. Unlike the Gaussian proxy, the features here are the real, non-Gaussian ones.
"""

from __future__ import annotations

import numpy as np

from icml26.testbeds.digits import digits_tensors
from icml26.testbeds.ntk import nngp_kernel

__all__ = ["digits_nngp_features"]


def digits_nngp_features(depth: int = 2, activation: str = "relu", target: str = "parity"
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lam (N,), features (n, N), w (N,), y (n,)) for the depth-``depth`` NNGP kernel on digits.

    ``target``: "parity" (+1 for even digits, -1 for odd) or "zero" (+1 for digit 0, -1 otherwise).
    Eigenvalues below 1e-12 of the largest are dropped (their modes carry no signal of the kernel).
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    if target not in ("parity", "zero"):
        raise ValueError(f"unknown target {target!r}; use 'parity' or 'zero'")
    X, labels = digits_tensors()
    X, labels = X.numpy().astype(float), labels.numpy()
    n = len(X)
    K = nngp_kernel(X, depth=depth, activation=activation, sigma_w2=2.0, sigma_b2=0.0)
    ev, U = np.linalg.eigh(K / n)
    ev, U = ev[::-1], U[:, ::-1]
    keep = ev > 1e-12 * ev[0]
    ev, U = ev[keep], U[:, keep]
    y = np.where(labels % 2 == 0, 1.0, -1.0) if target == "parity" else np.where(labels == 0, 1.0, -1.0)
    scale = ev.sum()
    lam = ev / scale
    feats = np.sqrt(n) * U * np.sqrt(lam)
    w = (U.T @ y) / (np.sqrt(n) * np.sqrt(lam))
    return lam, feats, w, y
