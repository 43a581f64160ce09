"""Denoising data for the [B16] reproduction: scikit-image's bundled images (no downloads), patches, PSNR.

Every image used here ships inside the scikit-image wheel (``skimage/data/*.png|jpg``), so
``skimage.data.<name>()`` reads a local file and never reaches pooch.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view
from torch import Tensor

TRAIN_IMAGES = ("coins", "moon", "page", "text", "brick", "grass", "gravel", "chelsea", "rocket",
                "hubble_deep_field")
TEST_IMAGES = ("camera", "astronaut", "coffee")


def load_image(name: str) -> np.ndarray:
    """A bundled scikit-image picture as a float32 grey image in [0, 1] (colour ones via ``rgb2gray``)."""
    import skimage.data
    from skimage.color import rgb2gray
    from skimage.util import img_as_float32

    if name not in TRAIN_IMAGES + TEST_IMAGES:
        raise ValueError(f"unknown image {name!r}; choose from {TRAIN_IMAGES + TEST_IMAGES}")
    img = getattr(skimage.data, name)()
    img = rgb2gray(img) if img.ndim == 3 else img_as_float32(img)
    return np.ascontiguousarray(img, dtype=np.float32)


def center_crop(img: np.ndarray, size: int) -> np.ndarray:
    h, w = img.shape
    if size > min(h, w):
        raise ValueError(f"crop {size} larger than image {img.shape}")
    top, left = (h - size) // 2, (w - size) // 2
    return img[top:top + size, left:left + size]


def patch_pool(names: tuple[str, ...], n_patches: int, size: int, rng: np.random.Generator) -> Tensor:
    """``n_patches`` random ``size`` x ``size`` crops, (N, 1, size, size), drawn evenly over ``names``."""
    counts = np.bincount(rng.integers(len(names), size=n_patches), minlength=len(names))
    out = []
    for name, k in zip(names, counts):
        windows = sliding_window_view(load_image(name), (size, size))  # view, no copy
        ys = rng.integers(windows.shape[0], size=k)
        xs = rng.integers(windows.shape[1], size=k)
        out.append(windows[ys, xs])
    pool = np.concatenate(out)[rng.permutation(n_patches)]
    return torch.from_numpy(np.ascontiguousarray(pool)).unsqueeze(1)


def test_images(size: int) -> Tensor:
    """Centre crops of camera, astronaut and coffee, (3, 1, size, size)."""
    return torch.from_numpy(np.stack([center_crop(load_image(n), size) for n in TEST_IMAGES])).unsqueeze(1)


def psnr(estimate: Tensor, clean: Tensor) -> Tensor:
    """Per-image PSNR (dB) for images in [0, 1]; the estimate is clipped to [0, 1] first."""
    mse = (estimate.clamp(0, 1) - clean).pow(2).flatten(1).mean(1)
    return 10 * torch.log10(1.0 / mse)
