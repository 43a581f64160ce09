"""Stored soft labels with few crops per image, and local semantic drift [A10].

FKD-style storage: for each distilled image x_i and each of n pre-sampled crops c_ij (RandomResizedCrop
parameters), store the teacher's tempered soft label

    p_ij = softmax(f_T(c_ij(x_i)) / T)        (optionally only its top-k entries, renormalised)

Storage is linear in n |D| k:

    bytes = n |D| k (value_bytes + [k < C] index_bytes) + n |D| 4 param_bytes

Local semantic drift (LVSD): a crop of an image of class y whose soft label points elsewhere,
argmax p_T(c(x)) != y. With n crops per image the empirical soft label (1/n) sum_j p_ij concentrates on the
image-level label only at a 1/n rate, so sparse soft supervision stays biased.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate

__all__ = ["RandomResizedCrop", "apply_crops", "StoredSoftLabels", "SoftLabelPool", "lvsd_rate"]


# helper functions

def _check_images(images: torch.Tensor) -> None:
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    if images.shape[0] == 0:
        raise ValueError("images is empty; need at least one image")
    if not images.is_floating_point():
        raise TypeError(f"images must be floating point, got {images.dtype}")
    validate.finite("images", images)


def _check_labels(labels: torch.Tensor, n: int, num_classes: int | None = None) -> None:
    if not isinstance(labels, torch.Tensor) or labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError("labels must be an integer torch.Tensor of class indices")
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) to match the images, got {tuple(labels.shape)}")
    if num_classes is not None and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}), got range [{int(labels.min())}, {int(labels.max())}]")


def apply_crops(images: torch.Tensor, params: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """Crop-and-resize each image by its (y0, x0, h, w) box (fractions of the side), bilinear, vectorised.

    ``images`` (B, C, H, W) and ``params`` (B, 4) pair up row by row; the output is (B, C, size, size).
    """
    _check_images(images)
    if params.shape != (images.shape[0], 4):
        raise ValueError(f"params must be ({images.shape[0]}, 4) boxes (y0, x0, h, w), got {tuple(params.shape)}")
    size = size or images.shape[-1]
    y0, x0, h, w = params.to(images.dtype).unbind(1)
    # affine_grid maps output [-1, 1] to input coords: centre c and half-extent s of the box, in [-1, 1] units
    theta = torch.zeros(images.shape[0], 2, 3, dtype=images.dtype, device=images.device)
    theta[:, 0, 0], theta[:, 0, 2] = w, 2 * x0 + w - 1
    theta[:, 1, 1], theta[:, 1, 2] = h, 2 * y0 + h - 1
    grid = F.affine_grid(theta, [images.shape[0], images.shape[1], size, size], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)


@dataclass(frozen=True)
class RandomResizedCrop:
    """RandomResizedCrop box sampler: area fraction ~ U(scale), log aspect ~ U(log ratio); boxes in [0, 1].

    ``sample(n, generator) -> (n, 4)`` boxes (y0, x0, h, w); ``__call__(images, generator)`` crops a batch and,
    with ``hflip=True``, mirrors each crop left-right with probability 1/2 (the official hard phase's
    RandomResizedCrop + RandomHorizontalFlip). Flips are not part of the stored boxes: ``StoredSoftLabels``
    refuses a flipping sampler. Unlike torchvision there is no rejection loop: sides are clipped to 1
    (vectorised, our choice).
    """

    size: int
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    hflip: bool = False

    def __post_init__(self) -> None:
        if not (0 < self.scale[0] <= self.scale[1] <= 1):
            raise ValueError(f"scale must satisfy 0 < lo <= hi <= 1, got {self.scale}")
        if not (0 < self.ratio[0] <= self.ratio[1]):
            raise ValueError(f"ratio must satisfy 0 < lo <= hi, got {self.ratio}")
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        u = torch.rand(n, 4, generator=generator)
        area = self.scale[0] + (self.scale[1] - self.scale[0]) * u[:, 0]
        logr = math.log(self.ratio[0]) + (math.log(self.ratio[1]) - math.log(self.ratio[0])) * u[:, 1]
        w = (area * logr.exp()).sqrt().clamp(max=1.0)
        h = (area / logr.exp()).sqrt().clamp(max=1.0)
        return torch.stack([(1 - h) * u[:, 2], (1 - w) * u[:, 3], h, w], dim=1)

    def __call__(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        crops = apply_crops(images, self.sample(images.shape[0], generator), self.size)
        if self.hflip:
            flip = torch.rand(images.shape[0], generator=generator) < 0.5
            crops = torch.where(flip[:, None, None, None], crops.flip(-1), crops)
        return crops


@torch.no_grad()
def _teacher_probs(teacher: nn.Module, crops: torch.Tensor, temperature: float, batch_size: int = 1024) -> torch.Tensor:
    was = teacher.training
    teacher.eval()
    out = torch.cat([F.softmax(teacher(crops[i:i + batch_size]) / temperature, dim=1)
                     for i in range(0, crops.shape[0], batch_size)])
    teacher.train(was)
    return out


# main classes

class StoredSoftLabels:
    """Pre-computed soft labels for n crops of each distilled image [A10] (use ``build``).

    Attributes:
        images (N, C, H, W); params (n, N, 4) float32 crop boxes; values (n, N, k) soft-label entries;
        indices (n, N, k) class ids (``None`` when k = C, i.e. full labels); temperature; num_classes.
    """

    def __init__(self, images: torch.Tensor, params: torch.Tensor, values: torch.Tensor,
                 indices: torch.Tensor | None, temperature: float, num_classes: int, crop_size: int) -> None:
        self.images, self.params, self.values, self.indices = images, params, values, indices
        self.temperature, self.num_classes, self.crop_size = float(temperature), int(num_classes), int(crop_size)

    @classmethod
    def build(cls, teacher: nn.Module, images: torch.Tensor, n_crops: int, crop_fn: RandomResizedCrop,
              temperature: float = 20.0, topk: int | None = None, seed: int = 0,
              value_dtype: torch.dtype = torch.float16) -> "StoredSoftLabels":
        """Sample n crops per image with a seeded generator and store the teacher's tempered soft labels."""
        _check_images(images)
        if isinstance(n_crops, bool) or not isinstance(n_crops, int) or n_crops < 1:
            raise ValueError(f"n_crops must be a positive int, got {n_crops!r}")
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature must be a finite positive number, got {temperature!r}")
        if not isinstance(crop_fn, RandomResizedCrop):
            raise TypeError("crop_fn must be a RandomResizedCrop (its boxes are what gets stored)")
        if crop_fn.hflip:
            raise ValueError("crop_fn.hflip=True: flips are not stored with the boxes; build the stored labels with "
                             "hflip=False (flips belong to the hard phase's fresh crops)")
        N = images.shape[0]
        g = torch.Generator().manual_seed(seed)
        params = crop_fn.sample(n_crops * N, g).view(n_crops, N, 4)
        crops = apply_crops(images.repeat(n_crops, 1, 1, 1), params.reshape(-1, 4), crop_fn.size)
        probs = _teacher_probs(teacher, crops, temperature)
        C = probs.shape[1]
        if topk is not None and (isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= C):
            raise ValueError(f"topk must be an int in [1, {C}] or None, got {topk!r}")
        indices = None
        if topk is not None and topk < C:
            values, idx = probs.topk(topk, dim=1)
            values = values / values.sum(1, keepdim=True)
            indices = idx.to(torch.uint8 if C <= 256 else torch.int16 if C <= 32767 else torch.int32)
            indices = indices.view(n_crops, N, topk)
        else:
            values = probs
        values = values.to(value_dtype).view(n_crops, N, -1)
        return cls(images, params.to(torch.float32), values, indices, temperature, C, crop_fn.size)

    @property
    def n_crops(self) -> int:
        return self.params.shape[0]

    def __len__(self) -> int:
        """Number of stored (image, crop, label) triples, n |D|."""
        return self.params.shape[0] * self.params.shape[1]

    def storage_bytes(self) -> int:
        """Exact bytes of what is stored beyond the images: soft-label values, class indices, crop boxes."""
        t = [self.values, self.params] + ([self.indices] if self.indices is not None else [])
        return sum(x.numel() * x.element_size() for x in t)

    def soft_labels(self, flat_index: torch.Tensor | None = None) -> torch.Tensor:
        """Dense (len, C) float32 soft labels (top-k entries scattered back, zeros elsewhere)."""
        vals = self.values.reshape(-1, self.values.shape[-1]).float()
        idx = None if self.indices is None else self.indices.reshape(-1, self.indices.shape[-1]).long()
        if flat_index is not None:
            vals = vals[flat_index]
            idx = None if idx is None else idx[flat_index]
        if idx is None:
            return vals
        return torch.zeros(vals.shape[0], self.num_classes).scatter_(1, idx, vals)

    def batch(self, flat_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(crops, soft labels) for flat indices into the (n, N) grid (index = crop * N + image)."""
        N = self.params.shape[1]
        img = self.images[flat_index % N]
        crops = apply_crops(img, self.params.reshape(-1, 4)[flat_index], self.crop_size)
        return crops, self.soft_labels(flat_index)

    def drift_rate(self, labels: torch.Tensor) -> float:
        """LVSD rate of the stored crops: fraction with argmax of the stored soft label != image label."""
        _check_labels(labels, self.params.shape[1], self.num_classes)
        pred = self.soft_labels().argmax(1).view(self.n_crops, -1)
        return float((pred != labels.long()[None]).float().mean())


class SoftLabelPool:
    """Replay of the stored pool [A10]: a seeded permutation of all n |D| stored pairs, consumed |D| per
    epoch in batches and reshuffled when exhausted. In one pass every stored crop is used exactly once; with
    n = 1 every soft epoch replays the same |D| (crop, label) pairs.
    """

    def __init__(self, stored: StoredSoftLabels, batch_size: int = 16, seed: int = 0) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.stored, self.batch_size = stored, batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self._order = torch.empty(0, dtype=torch.long)
        self._pos = 0

    def _next(self, k: int) -> torch.Tensor:
        out = []
        while k > 0:
            if self._pos >= self._order.numel():
                self._order, self._pos = torch.randperm(len(self.stored), generator=self.generator), 0
            take = self._order[self._pos:self._pos + k]
            self._pos += take.numel()
            k -= take.numel()
            out.append(take)
        return torch.cat(out)

    def epoch(self) -> Iterator[torch.Tensor]:
        """Yield flat indices for one soft epoch (|D| pairs, the last batch may be short)."""
        N = self.stored.params.shape[1]
        idx = self._next(N)
        yield from idx.split(self.batch_size)


def lvsd_rate(teacher: nn.Module, images: torch.Tensor, labels: torch.Tensor, crop_params: torch.Tensor,
              crop_size: int | None = None) -> float:
    """Local semantic drift rate [A10]: P[argmax f_T(c(x)) != y] over the given crops.

    ``crop_params`` is (n, N, 4) or (N, 4) boxes (y0, x0, h, w) for the N ``images``.
    """
    _check_images(images)
    N = images.shape[0]
    _check_labels(labels, N)
    p = crop_params if crop_params.ndim == 3 else crop_params[None]
    if p.shape[1:] != (N, 4):
        raise ValueError(f"crop_params must be (n, {N}, 4) or ({N}, 4), got {tuple(crop_params.shape)}")
    crops = apply_crops(images.repeat(p.shape[0], 1, 1, 1), p.reshape(-1, 4), crop_size)
    pred = _teacher_probs(teacher, crops, 1.0).argmax(1).view(p.shape[0], N)
    return float((pred != labels.long()[None]).float().mean())
