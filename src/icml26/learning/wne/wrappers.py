"""Wrapped Normalization Equivariance: a parameter-free wrapper around any backbone [B16].

A function f is *normalization equivariant* (NE) iff

    f(a*y + b*1) = a*f(y) + b*1        for all a > 0, b in R.

WNE factorizes every NE function through a normalization of its input:

    mu(y) = mean(y),  sigma(y) = std(y)          (per sample, over C, H, W)
    y~    = (y - mu) / sigma
    direct:   f(y) = sigma * g(y~) + mu          (g predicts the normalized clean image)
    residual: f(y) = y - sigma * g(y~)           (g predicts the normalized noise)

Since (a*y + b - mu(a*y + b)) / sigma(a*y + b) = y~, both forms are NE for *any* backbone g. Conversely,
taking a = sigma(y), b = mu(y) in the NE identity gives f(y) = sigma*f(y~) + mu, so the wrapper with
g = f restricted to normalized inputs covers exactly the NE class (the paper's theorem).
"""

from __future__ import annotations

import math
from typing import Callable, Literal, Mapping, Sequence

import torch
from torch import Tensor, nn

from icml26.harness import interleaved_times
from icml26.harness import validate as v

PredMode = Literal["direct", "residual"]

# helper functions


def _check_image(x: object, name: str = "x", *, finite: bool = True) -> Tensor:
    """Type, dtype and shape checks (free: no device sync); ``finite=True`` also scans the values, which
    synchronises the device and is a graph break under ``torch.compile``, so the wrappers make it opt-in."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}; call .float() first")
    if x.ndim < 2:
        raise ValueError(f"{name} must have a batch axis and at least one more axis (e.g. N,C,H,W), got shape "
                         f"{tuple(x.shape)}")
    if x.shape[0] == 0 or x.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)})")
    if finite and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or inf; clean the input before calling the model")
    return x


def _check_backbone(backbone: object) -> None:
    if not isinstance(backbone, nn.Module):
        raise TypeError(f"backbone must be a torch.nn.Module, got {type(backbone).__name__}")


def _check_model(model: object) -> None:
    if not callable(model):
        raise TypeError(f"model must be a callable (an nn.Module or a function of a tensor), got {v.describe(model)}")


def _check_pred_mode(pred_mode: object) -> None:
    if pred_mode not in ("direct", "residual"):
        raise ValueError(f"pred_mode must be 'direct' or 'residual', got {pred_mode!r}")


def _check_min(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return float(value)


def _check_reduce_dims(reduce_dims: object) -> tuple[int, ...] | None:
    if reduce_dims is None:
        return None
    if (not isinstance(reduce_dims, Sequence) or not reduce_dims
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in reduce_dims)):
        raise TypeError(f"reduce_dims must be None or a non-empty sequence of ints, got {reduce_dims!r}")
    if 0 in reduce_dims:
        raise ValueError("reduce_dims must not contain the batch axis 0: statistics are per sample")
    return tuple(reduce_dims)


def _n_reduced(x: Tensor, dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:  # a plain loop: torch.compile traces it (math.prod over a generator is a graph break)
        n *= x.shape[d]
    return n


def _reduce_dims(x: Tensor, reduce_dims: Sequence[int] | None) -> tuple[int, ...]:
    if reduce_dims is None:
        return tuple(range(1, x.ndim))
    bad = [d for d in reduce_dims if not -x.ndim <= d < x.ndim]
    if bad:
        raise ValueError(f"reduce_dims {tuple(reduce_dims)} has axes {bad} outside the input's {x.ndim} "
                         f"dimensions (shape {tuple(x.shape)})")
    dims = tuple(d % x.ndim for d in reduce_dims)
    if 0 in dims:
        raise ValueError("reduce_dims must not contain the batch axis 0: statistics are per sample")
    return dims


# main classes


class NormEquivariantWrapper(nn.Module):
    """Make any image-to-image backbone normalization equivariant [B16].

    direct:   f(y) = sigma(y) * g((y - mu(y)) / sigma(y)) + mu(y)
    residual: f(y) = y - sigma(y) * g((y - mu(y)) / sigma(y))

    Args:
        backbone: any ``nn.Module`` mapping a tensor to a tensor of the same shape (CNN, transformer with
            LayerNorm and softmax attention, ...). It only ever sees inputs with mean 0 and std 1.
        pred_mode: ``"direct"`` (backbone predicts the normalized clean image) or ``"residual"``
            (backbone predicts the normalized noise).
        reduce_dims: axes over which mu and sigma are taken; default all but the batch axis.
        min_std: samples with sigma <= min_std (constant images) are returned unchanged, which is the NE
            corollary f(c*1) = c*1. With the default 0 only exactly constant samples are affected, and the
            wrapper is exactly NE; a positive value trades exactness near the threshold for stability.
            A sample of fewer than 2 elements over ``reduce_dims`` (e.g. a 1-pixel grey image) has no std;
            it counts as constant and is returned unchanged.
        check_finite: scan every input for NaN/inf and raise a ``ValueError`` (off by default: the scan
            synchronises the device and breaks ``torch.compile(fullgraph=True)``).

    The wrapper has no parameters of its own; ``sigma`` is the unbiased std (torch's default), so the
    backbone's input has ``std() == 1`` exactly.
    """

    def __init__(self, backbone: nn.Module, pred_mode: PredMode = "direct", *,
                 reduce_dims: Sequence[int] | None = None, min_std: float = 0.0, check_finite: bool = False) -> None:
        super().__init__()
        _check_backbone(backbone)
        _check_pred_mode(pred_mode)
        self.backbone = backbone
        self.pred_mode = pred_mode
        self.reduce_dims = _check_reduce_dims(reduce_dims)
        self.min_std = _check_min(min_std, "min_std")
        self.check_finite = bool(check_finite)

    def normalize(self, y: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Return (y~, mu, sigma, constant_mask); sigma is replaced by 1 where the sample is constant."""
        _check_image(y, "y", finite=self.check_finite)
        dims = _reduce_dims(y, self.reduce_dims)
        if _n_reduced(y, dims) < 2:  # no std from one element: every sample is "constant" (shapes are static)
            mu = y.mean(dim=dims, keepdim=True)
            return torch.zeros_like(y), mu, torch.ones_like(mu), torch.ones_like(mu, dtype=torch.bool)
        sigma, mu = torch.std_mean(y, dim=dims, keepdim=True)
        const = sigma <= self.min_std
        sigma = torch.where(const, torch.ones_like(sigma), sigma)
        return (y - mu) / sigma, mu, sigma, const

    def forward(self, y: Tensor) -> Tensor:
        _check_image(y, "y", finite=self.check_finite)
        y_norm, mu, sigma, const = self.normalize(y)
        g = _backbone(self.backbone, y_norm, y)
        if g.shape != y.shape:
            raise ValueError(f"backbone must return a tensor shaped like its input {tuple(y.shape)}, got "
                             f"{tuple(g.shape)}")
        out = sigma * g + mu if self.pred_mode == "direct" else y - sigma * g
        return torch.where(const, y, out)  # f(c*1) = c*1

    def extra_repr(self) -> str:
        return (f"pred_mode={self.pred_mode!r}, reduce_dims={self.reduce_dims}, min_std={self.min_std}, "
                f"check_finite={self.check_finite}")


class ScaleEquivariantWrapper(nn.Module):
    """Scale-equivariant (SE) counterpart: f(a*y) = a*f(y) for a > 0, no shift equivariance [B16 baseline].

    s(y) = sqrt(mean(y^2));  direct: f(y) = s * g(y / s);  residual: f(y) = y - s * g(y / s).
    Samples with s <= min_scale (all zeros) are returned unchanged. ``reduce_dims`` and ``check_finite`` are
    validated and behave as in ``NormEquivariantWrapper``.
    """

    def __init__(self, backbone: nn.Module, pred_mode: PredMode = "direct", *,
                 reduce_dims: Sequence[int] | None = None, min_scale: float = 0.0,
                 check_finite: bool = False) -> None:
        super().__init__()
        _check_backbone(backbone)
        _check_pred_mode(pred_mode)
        self.backbone = backbone
        self.pred_mode = pred_mode
        self.reduce_dims = _check_reduce_dims(reduce_dims)
        self.min_scale = _check_min(min_scale, "min_scale")
        self.check_finite = bool(check_finite)

    def forward(self, y: Tensor) -> Tensor:
        _check_image(y, "y", finite=self.check_finite)
        s = y.pow(2).mean(dim=_reduce_dims(y, self.reduce_dims), keepdim=True).sqrt()
        zero = s <= self.min_scale
        s = torch.where(zero, torch.ones_like(s), s)
        g = _backbone(self.backbone, y / s, y)
        if g.shape != y.shape:
            raise ValueError(f"backbone must return a tensor shaped like its input {tuple(y.shape)}, got "
                             f"{tuple(g.shape)}")
        out = s * g if self.pred_mode == "direct" else y - s * g
        return torch.where(zero, y, out)


def _backbone(backbone: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """``backbone(x)`` on the normalised input ``x``; a backbone's own NaN/inf refusal is re-raised naming the
    user's input ``y`` (one NaN pixel spreads to its whole sample through the mean and std, so the backbone's
    message would count the normalised tensor's entries). Costs nothing unless the backbone raises."""
    try:
        return backbone(x)
    except ValueError as e:
        if "nan" not in str(e).lower() or bool(torch.isfinite(y).all()):
            raise
        bad = int((~torch.isfinite(y)).sum())
        raise ValueError(f"y has {bad} NaN or infinite entries (of {y.numel()}); the backbone refused the normalised "
                         "input they spread to. Clean the input, or pass check_finite=True to refuse it before "
                         "normalising") from e


# inference helpers


def _tile_starts(size: int, tile: int, stride: int) -> list[int]:
    starts = list(range(0, size - tile + 1, stride))
    return starts if starts[-1] == size - tile else starts + [size - tile]


@torch.no_grad()
def tiled_forward(model: Callable[[Tensor], Tensor], y: Tensor, tile: int = 32, overlap: int = 0) -> Tensor:
    """Run ``model`` on ``tile`` x ``tile`` crops of ``y`` (N, C, H, W) and stitch the outputs [B16].

    With ``NormEquivariantWrapper`` each tile is normalised by its own mean and std, so a network trained on
    ``tile``-sized patches sees test inputs with its training statistics. Tiles step by ``tile - overlap``; the
    last row/column of tiles is aligned to the image edge, and overlapping outputs are averaged. All tiles go
    through the model as one batch. Tiling an NE model keeps it NE (each tile's output is NE in that tile).
    """
    _check_model(model)
    _check_image(y, "y")
    if y.ndim != 4:
        raise ValueError(f"y must be shaped (N, C, H, W), got {tuple(y.shape)}")
    for name, value in (("tile", tile), ("overlap", overlap)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    h, w = y.shape[-2:]
    if not 1 <= tile <= min(h, w):
        raise ValueError(f"tile must be between 1 and min(H, W) = {min(h, w)}, got {tile}")
    if not 0 <= overlap < tile:
        raise ValueError(f"overlap must be in [0, tile) = [0, {tile}), got {overlap}")
    rows, cols = _tile_starts(h, tile, tile - overlap), _tile_starts(w, tile, tile - overlap)
    crops = torch.stack([y[..., r:r + tile, c:c + tile] for r in rows for c in cols], dim=1)  # (N, T, C, t, t)
    out_tiles = model(crops.flatten(0, 1))
    if not isinstance(out_tiles, Tensor) or out_tiles.shape != crops.flatten(0, 1).shape:
        raise ValueError(f"model must map a batch of tiles to a tensor of the same shape "
                         f"{tuple(crops.flatten(0, 1).shape)}, got {v.describe(out_tiles)}")
    out_tiles = out_tiles.view_as(crops)
    out, count = torch.zeros_like(y), torch.zeros_like(y[:1, :1])
    for k, (r, c) in enumerate((r, c) for r in rows for c in cols):
        out[..., r:r + tile, c:c + tile] += out_tiles[:, k]
        count[..., r:r + tile, c:c + tile] += 1
    return out / count


# diagnostics


@torch.no_grad()
def ne_defect(model: Callable[[Tensor], Tensor], x: Tensor, a: float, b: float) -> float:
    """Relative NE defect [B16]:  ||f(a x + b) - (a f(x) + b)||_inf / (a ||f(x)||_inf + |b|).

    0 for an NE model (up to rounding: ~1e-7 in float32, ~1e-15 in float64); O(1) for an ordinary one.
    Runs the model in eval mode and restores its training flag.
    """
    _check_model(model)
    _check_image(x, "x")
    for name, value in (("a", a), ("b", b)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if a <= 0:
        raise ValueError(f"a must be > 0 (NE covers positive rescalings only), got {a}")
    was_training = getattr(model, "training", None)
    if isinstance(model, nn.Module):
        model.eval()
    try:
        fx = model(x)
        fy = model(a * x + b)
    finally:
        if isinstance(model, nn.Module) and was_training:
            model.train()
    for name, out in (("f(x)", fx), ("f(a*x + b)", fy)):
        if not isinstance(out, Tensor) or out.ndim == 0 or out.shape[0] != x.shape[0] or out.shape != fx.shape:
            raise ValueError(f"model must map x {tuple(x.shape)} to a tensor with the same batch size (one output "
                             f"per sample, equal shapes for x and a*x + b); {name} is {v.describe(out)}")
        v.finite(f"the model's output {name}", out)
    num = (fy - (a * fx + b)).abs().max()
    den = a * fx.abs().max() + abs(b)
    return float(num / den) if float(den) > 0 else float(num)


def time_forward(model: nn.Module | Mapping[str, nn.Module], x: Tensor, n_iter: int = 50,
                 warmup: int = 10) -> dict[str, list[float]]:
    """Wall times (s) of ``model(x)`` under ``no_grad``; several models are timed interleaved (ABAB).

    Interleaving makes machine drift hit every model alike, so ``median(t_A) / median(t_B)`` is a fair
    ratio (``icml26.harness.median_ratio``). On CUDA each call is synchronized before the clock stops.
    """
    models = {"model": model} if isinstance(model, nn.Module) else dict(model)
    if not models or not all(isinstance(m, nn.Module) for m in models.values()):
        raise TypeError("model must be an nn.Module or a non-empty mapping name -> nn.Module")
    _check_image(x, "x")
    n_iter = v.positive_int("n_iter", n_iter)
    warmup = v.non_negative_int("warmup", warmup)
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)

    def call(m: nn.Module) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                m(x)
            sync()
        return run

    for m in models.values():
        m.eval()
    return interleaved_times({k: call(m) for k, m in models.items()}, n_iter=n_iter, warmup=warmup)
