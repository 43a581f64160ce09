"""Architectural normalization-equivariant blocks (Herbreteau et al., NeurIPS 2023), the baseline of [B16].

Every layer of the network is itself NE, so the whole network is NE by composition:

* ``AffineConv2d``: bias-free convolution whose kernel sums to 1 per output channel, with reflect
  padding. Then conv(a*x + b) = a*conv(x) + b*sum(w) = a*conv(x) + b.
  Unconstrained parameter w, effective kernel  w' = roll(w) - w + 1/n  on the kernel flattened per output
  channel (n = C_in * k * k): roll(w) - w sums to 0, so w' sums to exactly 1.
* ``SortPool``: replaces ReLU; sorts channel pairs, (u, v) -> (min(u, v), max(u, v)). For a > 0 the order
  of a*u + b and a*v + b is the order of u and v, so it commutes with x -> a*x + b.
* ``AffineResidual``: a residual connection as a convex mix alpha*x + (1 - alpha)*y; the weights sum to 1,
  so NE inputs give an NE output (x + y would double the shift b).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from icml26.harness import validate as v

# helper functions

# set while a whole model runs on an input it has already scanned: its NE blocks then skip their own NaN/inf scans
# (intermediate activations of a finite input through finite weights are finite; weights are never scanned, so a
# model with non-finite weights gives NaN outputs without an error; 14 scans per forward of the
# architectural NE DnCNN against the ordinary one's 1 were part of its measured slowdown)
_INPUT_CHECKED: contextvars.ContextVar[bool] = contextvars.ContextVar("wne_input_checked", default=False)


@contextlib.contextmanager
def input_checked() -> Iterator[None]:
    """Inside this block, NE blocks do not re-scan their inputs for NaN/inf (the caller has scanned the model's
    input once); type, shape and emptiness are still checked."""
    token = _INPUT_CHECKED.set(True)
    try:
        yield
    finally:
        _INPUT_CHECKED.reset(token)


def check_tensor(x: object, name: str, *, min_ndim: int = 2, channels: int | None = None) -> Tensor:
    """A non-empty floating-point tensor with a batch axis (``channels`` on axis 1 when given) and no NaN/inf.

    The finite scan is skipped while ``torch.compile`` traces the module (it would be a graph break), so a
    compiled model keeps one graph; eager calls, the ones a user makes with their own data, are scanned.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {v.describe(x)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}; call .float() first")
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions (N, C, ...), got shape {tuple(x.shape)}")
    if channels is not None and x.shape[1] != channels:
        raise ValueError(f"{name} must have {channels} channels on axis 1, i.e. shape (N, {channels}, H, W), "
                         f"got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)})")
    if not torch.compiler.is_compiling() and not _INPUT_CHECKED.get():
        v.finite(name, x)
    return x


class AffineConv2d(nn.Module):
    """Bias-free 2-D convolution with kernels that sum to 1 per output channel (stride 1, 'same' size).

    Args:
        in_channels, out_channels, kernel_size: as ``nn.Conv2d`` (odd square kernel).
        padding_mode: ``"reflect"`` (default; keeps constants constant at the border) or ``"replicate"``,
            ``"circular"``. Zero padding would break shift equivariance and is refused.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, *,
                 padding_mode: str = "reflect") -> None:
        super().__init__()
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels),
                            ("kernel_size", kernel_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd for 'same' padding, got {kernel_size}")
        if padding_mode not in ("reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be 'reflect', 'replicate' or 'circular' (zero padding breaks "
                             f"shift equivariance), got {padding_mode!r}")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.padding_mode = padding_mode
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        # roll(w) - w doubles the variance of w; SortPool keeps the norm (gain 1), so aim at Var(w') = 1/n.
        nn.init.normal_(self.weight, std=(2.0 * in_channels * kernel_size**2) ** -0.5)

    @property
    def kernel(self) -> Tensor:
        """Effective kernel w' = roll(w) - w + 1/n, summing to 1 over (C_in, k, k) for each output channel."""
        w = self.weight.flatten(1)
        return (w.roll(1, dims=1) - w + 1.0 / w.shape[1]).view_as(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        check_tensor(x, "x", min_ndim=4, channels=self.in_channels)
        if x.ndim != 4:
            raise ValueError(f"x must be shaped (N, {self.in_channels}, H, W), got {tuple(x.shape)}")
        p = self.kernel_size // 2
        if self.padding_mode == "reflect" and min(x.shape[-2:]) <= p:
            raise ValueError(f"reflect padding of {p} needs H and W > {p}, got {tuple(x.shape[-2:])}; "
                             "use a larger image or padding_mode='replicate'")
        return F.conv2d(F.pad(x, (p, p, p, p), mode=self.padding_mode), self.kernel)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"padding_mode={self.padding_mode!r}")


class SortPool(nn.Module):
    """NE activation: (x_{2i}, x_{2i+1}) -> (min, max) over channel pairs; needs an even channel count."""

    def forward(self, x: Tensor) -> Tensor:
        check_tensor(x, "x")
        if x.shape[1] % 2:
            raise ValueError(f"SortPool needs an even number of channels on axis 1, got shape {tuple(x.shape)}")
        u, v = x.unflatten(1, (x.shape[1] // 2, 2)).unbind(2)
        # min(u, v) = u - relu(u - v), max(u, v) = v + relu(u - v): one ReLU, ~4x faster backward than
        # torch.minimum/maximum on CPU.
        d = F.relu(u - v)
        return torch.stack((u - d, v + d), dim=2).flatten(1, 2)


class AffineResidual(nn.Module):
    """NE residual connection: alpha*x + (1 - alpha)*y with a learnable scalar alpha (init 0.5)."""

    def __init__(self, alpha: float = 0.5) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(v.finite_number("alpha", alpha)))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        check_tensor(x, "x", min_ndim=1)
        check_tensor(y, "y", min_ndim=1)
        if x.shape != y.shape:
            raise ValueError(f"AffineResidual needs equal shapes, got {tuple(x.shape)} and {tuple(y.shape)}")
        return self.alpha * x + (1 - self.alpha) * y
