"""The two-modality conflict task: a digit image and an 8-token text naming a digit, each with its own
controllable corruption [B03].

Image (difficulty v in [0, 1]):  x' = (1 - v) x + v u,  u ~ U(0, 1) per pixel   (sklearn 8x8 digits in [0, 1])
Text (difficulty t in [0, 1]):   8 copies of the digit's word; each token is replaced with probability t by a
                                 token drawn uniformly from the other 19 (9 other digit words, 10 distractors).

A conflict case pairs an image of y_v with a text for y_t != y_v, with difficulties drawn from Beta laws; moving
those laws moves the raw following ratios while the model (and its balance point) stays the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml26.harness import validate as check
from icml26.testbeds.digits import digits_tensors, shuffled_indices

N_CLASSES = 10
VOCAB = 20          # tokens 0..9 name the digits, 10..19 are distractors
TEXT_LEN = 8
SPLIT_SEED = 0      # one fixed split of the 1797 digits (our choice): train / validation / test
SPLITS = {"train": (0, 1100), "val": (1100, 1400), "test": (1400, 1797)}


def split_indices(split: str) -> torch.Tensor:
    """Indices of the digits in ``split`` (``train``, ``val`` or ``test``)."""
    check.one_of("split", split, SPLITS)
    lo, hi = SPLITS[split]
    return shuffled_indices(1797, SPLIT_SEED)[lo:hi]


def _tensors(**arrays: object) -> None:
    for name, a in arrays.items():
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(a).__name__}")


def _difficulty(name: str, d: torch.Tensor, n: int) -> None:
    check.shape(name, d, (n,))
    check.finite(name, d)
    if len(d) and (float(d.min()) < 0 or float(d.max()) > 1):
        raise ValueError(f"{name} holds difficulties in [0, 1], got values from {float(d.min())} to {float(d.max())}")


def _generator(gen: object) -> None:
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator (e.g. torch.Generator().manual_seed(0)), got "
                        f"{type(gen).__name__}")


def corrupt_images(x: torch.Tensor, v: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """x' = (1 - v) x + v u with u ~ U(0, 1) per pixel; ``v`` has one difficulty per image."""
    _tensors(x=x, v=v)
    check.finite("x", check.ndim("x", x, 2))
    _difficulty("v", v, len(x))
    _generator(gen)
    return (1 - v[:, None]) * x + v[:, None] * torch.rand(x.shape, generator=gen)


def make_texts(y: torch.Tensor, t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """(n, 8) token ids naming ``y``, each token replaced with probability ``t`` by one of the other 19 tokens."""
    _tensors(y=y, t=t)
    check.indices("y", check.ndim("y", y, 1), N_CLASSES)
    _difficulty("t", t, len(y))
    _generator(gen)
    n = len(y)
    tokens = y[:, None].expand(n, TEXT_LEN).clone()
    swap = torch.rand(n, TEXT_LEN, generator=gen) < t[:, None]
    other = (tokens + torch.randint(1, VOCAB, (n, TEXT_LEN), generator=gen)) % VOCAB
    return torch.where(swap, other, tokens)


@dataclass
class ConflictSet:
    """Conflict cases: ``image`` (n, 64) corrupted, ``text`` (n, 8), labels ``y_v`` != ``y_t``, difficulties."""

    image: torch.Tensor
    text: torch.Tensor
    y_v: torch.Tensor
    y_t: torch.Tensor
    v: torch.Tensor
    t: torch.Tensor

    def __post_init__(self) -> None:
        _tensors(image=self.image, text=self.text, y_v=self.y_v, y_t=self.y_t, v=self.v, t=self.t)
        check.same_length(image=self.image, text=self.text, y_v=self.y_v, y_t=self.y_t, v=self.v, t=self.t)
        if bool((self.y_v == self.y_t).any()):
            raise ValueError("a conflict case needs y_v != y_t on every case")

    def __len__(self) -> int:
        return len(self.y_v)

    def subset(self, idx: torch.Tensor) -> "ConflictSet":
        return ConflictSet(*(a[idx] for a in (self.image, self.text, self.y_v, self.y_t, self.v, self.t)))


def sample_conflicts(n: int, split: str, seed: int, v_beta: tuple[float, float] = (1.0, 1.0),
                     t_beta: tuple[float, float] = (1.0, 1.0)) -> ConflictSet:
    """``n`` conflict cases on the images of ``split``; difficulties v ~ Beta(*v_beta), t ~ Beta(*t_beta)."""
    n = check.positive_int("n", n)
    check.one_of("split", split, SPLITS)
    seed = check.non_negative_int("seed", seed)
    for name, beta in (("v_beta", v_beta), ("t_beta", t_beta)):
        if not isinstance(beta, (tuple, list)) or len(beta) != 2:
            raise TypeError(f"{name} must be a pair (a, b) of Beta parameters, got {check.describe(beta)}")
        for x in beta:
            check.positive(name, x)
    X, Y = digits_tensors()
    pool = split_indices(split)
    gen = torch.Generator().manual_seed(seed)
    img = pool[torch.randint(len(pool), (n,), generator=gen)]
    y_v = Y[img]
    y_t = (y_v + torch.randint(1, N_CLASSES, (n,), generator=gen)) % N_CLASSES
    rng = np.random.default_rng(seed)
    v = torch.tensor(rng.beta(*v_beta, size=n), dtype=torch.float32)
    t = torch.tensor(rng.beta(*t_beta, size=n), dtype=torch.float32)
    return ConflictSet(corrupt_images(X[img], v, gen), make_texts(y_t, t, gen), y_v, y_t, v, t)


__all__ = ["N_CLASSES", "VOCAB", "TEXT_LEN", "SPLITS", "split_indices", "corrupt_images", "make_texts",
           "ConflictSet", "sample_conflicts"]
