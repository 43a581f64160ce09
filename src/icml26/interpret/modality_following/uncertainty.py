"""Uncertainty indices and relative preference uncertainty [B03].

For a class distribution p over K classes (every index is scaled so that one-hot = 0 and uniform = 1):

    entropy:   U(p) = H(p) / log K,             H(p) = -sum_k p_k log p_k
    margin:    U(p) = 1 - (p_(1) - p_(2))        (top-1 minus top-2 probability)
    max_prob:  U(p) = (1 - p_(1)) / (1 - 1/K)

Relative preference uncertainty of modality a against modality b on one conflict case:

    dU = U(p_a) - U(p_b)

With a = text and b = vision, dU > 0 means the text alone is less certain than the image alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml26.harness import validate as check

INDICES = ("entropy", "margin", "max_prob")


# helper functions

def as_probs(p: Any, name: str = "p") -> np.ndarray:
    """``p`` as a float64 array of shape (n, K) whose rows are probability vectors; clear errors otherwise."""
    if hasattr(p, "detach") and hasattr(p, "cpu"):  # a torch tensor
        p = p.detach().cpu().double().numpy()
    arr = np.asarray(check.finite(name, p), dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(f"{name} must have shape (n_cases, n_classes) with n_classes >= 2, got {arr.shape}")
    check.non_empty(name, arr)
    if np.any(arr < -1e-9) or np.any(np.abs(arr.sum(axis=1) - 1.0) > 1e-4):
        raise ValueError(f"the rows of {name} must be probability vectors (non-negative, summing to 1); "
                         "apply softmax to logits first")
    return np.clip(arr, 0.0, 1.0)


# main functions

def uncertainty(p: Any, index: str = "entropy") -> np.ndarray:
    """Per-row uncertainty of class distributions ``p`` (n, K) under ``index`` (see module docstring) [B03]."""
    check.one_of("index", index, INDICES)
    p = as_probs(p)
    k = p.shape[1]
    if index == "entropy":
        h = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=1)
        return h / np.log(k)
    top2 = -np.partition(-p, 1, axis=1)[:, :2]
    if index == "margin":
        return 1.0 - (top2[:, 0] - top2[:, 1])
    return (1.0 - top2[:, 0]) / (1.0 - 1.0 / k)


def relative_uncertainty(p_a: Any, p_b: Any, index: str = "entropy") -> np.ndarray:
    """Relative preference uncertainty dU = U(p_a) - U(p_b), per case [B03].

    ``p_a``, ``p_b``: (n, K) unimodal class distributions of the same n conflict cases (e.g. a = text with the
    image masked, b = vision with the text masked). Positive dU: modality a is the less certain one.
    """
    check.one_of("index", index, INDICES)
    pa, pb = as_probs(p_a, "p_a"), as_probs(p_b, "p_b")
    if pa.shape != pb.shape:
        raise ValueError(f"p_a and p_b must describe the same cases over the same classes, got shapes {pa.shape} "
                         f"and {pb.shape}")
    return uncertainty(pa, index) - uncertainty(pb, index)


__all__ = ["INDICES", "uncertainty", "relative_uncertainty", "as_probs"]
