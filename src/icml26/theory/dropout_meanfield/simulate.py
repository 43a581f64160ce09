"""Direct simulation of deep random networks with dropout, to check the mean-field maps [A06].

``n_nets`` independent random MLPs of width N are run in one batched tensor program (no loop over nets or
samples): layer l draws W of shape (n_nets, N, N) with entries N(0, sw2/N), biases N(0, sb2), independent
Bernoulli(keep) masks per input, and propagates ``n_pairs`` input pairs per net whose layer-0 pre-activations
have variance q0 and correlation c0. The measured c^l is the empirical correlation of the two pre-activation
vectors, averaged over nets and pairs.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from icml26.harness import validate as v

from .meanfield import _arr, _check, get_activation

__all__ = ["simulate_correlations", "fit_depth_scale", "fit_window"]

_TORCH_ACTS = {"relu": torch.relu, "tanh": torch.tanh, "erf": torch.erf}


def simulate_correlations(act: str, sw2: float, sb2: float, keep: float, *, c0: float | tuple[float, ...],
                          q0: float, depth: int, width: int, n_nets: int, n_pairs: int = 4,
                          seed: int = 0) -> np.ndarray:
    """Empirical correlation c^l, l = 0..depth: array (depth + 1, K, n_nets * n_pairs) for K starting
    correlations ``c0`` (a number gives K = 1); every net propagates ``n_pairs`` pairs per starting value."""
    get_activation(act)
    if act not in _TORCH_ACTS:
        raise ValueError(f"simulation supports {sorted(_TORCH_ACTS)}, got {act!r}")
    for name, val in (("depth", depth), ("width", width), ("n_nets", n_nets), ("n_pairs", n_pairs)):
        v.positive_int(name, val)
    v.non_negative_int("seed", seed)
    _check(sw2, sb2, keep)
    v.positive("q0", q0)
    c0a = np.atleast_1d(_arr("c0", c0))
    v.non_empty("c0", c0a)
    if c0a.ndim != 1 or (np.abs(c0a) > 1).any():
        raise ValueError(f"every c0 must be a correlation in [-1, 1], got {c0a.tolist()}")
    c0s = torch.tensor(c0a, dtype=torch.float32)
    K = len(c0s)
    g = torch.Generator().manual_seed(seed)
    phi = _TORCH_ACTS[act]
    B, P, N = n_nets, n_pairs * K, width
    cc = c0s.repeat_interleave(n_pairs)[None, :, None]                                    # (1, P, 1)
    z1 = torch.randn(B, P, N, generator=g)
    z2 = torch.randn(B, P, N, generator=g)
    h = math.sqrt(q0) * torch.stack([z1, cc * z1 + torch.sqrt(1 - cc ** 2) * z2], dim=2)   # (B, P, 2, N)

    def corr(h: torch.Tensor) -> torch.Tensor:
        a, b = h[:, :, 0], h[:, :, 1]
        r = (a * b).mean(-1) / torch.sqrt((a * a).mean(-1) * (b * b).mean(-1))          # (B, P)
        return r.reshape(B, K, n_pairs).permute(1, 0, 2).reshape(K, B * n_pairs)

    out = [corr(h)]
    sw, sb = math.sqrt(sw2 / N), math.sqrt(sb2)
    for _ in range(depth):
        x = phi(h)
        if keep < 1:
            x = x * (torch.rand(x.shape, generator=g) < keep) / keep
        W = torch.randn(B, N, N, generator=g) * sw
        h = torch.matmul(x.reshape(B, 2 * P, N), W.transpose(1, 2)).reshape(B, P, 2, N)
        if sb2 > 0:
            h = h + sb * torch.randn(B, 1, 1, N, generator=g)
        out.append(corr(h))
    return torch.stack(out).double().numpy()


def fit_window(c: np.ndarray, c_star: float, floor: np.ndarray | float) -> np.ndarray:
    """Boolean mask of the leading run of layers l >= 1 with |c^l - c*| > floor (later crossings are noise)."""
    c = _arr("c", c)
    v.ndim("c", c, 1)
    v.finite_number("c_star", c_star)
    fl = _arr("floor", floor)
    if (fl < 0).any():
        raise ValueError(f"floor must be >= 0 (a noise level on |c - c*|), got min {float(fl.min())}")
    if fl.ndim and fl.shape != c.shape:
        raise ValueError(f"floor must be a number or one value per layer {c.shape}, got shape {fl.shape}")
    d = np.abs(c - c_star)
    ok = d > np.broadcast_to(fl, d.shape)
    ok[0] = False
    sel = np.zeros_like(ok)
    for layer in range(1, len(d)):
        if not ok[layer]:
            break
        sel[layer] = True
    return sel


def fit_depth_scale(c: np.ndarray, c_star: float, *, floor: np.ndarray | float = 0.0,
                    window: np.ndarray | None = None) -> float:
    """xi from a least-squares fit of ln|c^l - c*| = a - l / xi over ``window`` (default: ``fit_window``);
    NaN with fewer than 3 layers in the window."""
    c = _arr("c", c)
    v.ndim("c", c, 1)
    c_star = v.finite_number("c_star", c_star)
    d = np.abs(c - c_star)
    if window is None:
        sel = fit_window(c, c_star, floor)
    else:
        sel = np.asarray(window)
        if sel.dtype != bool or sel.shape != c.shape:
            raise ValueError(f"window must be a boolean mask of shape {c.shape} (see fit_window), got "
                             f"{v.describe(window)} of dtype {sel.dtype}")
    if sel.sum() < 3 or (d[sel] <= 0).any():
        return float("nan")
    ls = np.arange(len(d))
    slope = np.polyfit(ls[sel], np.log(d[sel]), 1)[0]
    return float(-1.0 / slope) if slope < 0 else float("inf")
