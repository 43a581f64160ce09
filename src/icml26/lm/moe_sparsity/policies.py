"""Token-expert drop policies [A09]: which (token, expert) pairs an MoE layer computes, and how much of each.

Every policy maps the routing weights of the selected pairs, ``w`` of shape ``[N, K]`` (sorted descending per
token; parent-equivalent weights after the model's own normalisation, see :class:`SparseMoE`), to a *level* per
pair: 0 = dropped, 1 = major part only (the first ``major_fraction`` of the expert's neurons), 2 = full expert.

    ThresholdDrop(tau)              level = 2 if w >= tau else 0                                   (the paper)
    DualThresholdDrop(lo, hi)       level = 0 if w < lo; 1 if lo <= w < hi; 2 if w >= hi           (the paper)
    RandomDrop(rate)                drop pairs uniformly at random at the given pair rate          (baseline)
    TopKReduce(k)                   keep the k highest-weight pairs of each token (static top-k)   (baseline)
    TopKPartial(k)                  top k pairs in full, the others major part only (fixed partial)(baseline)
    CapacityDrop(capacity_factor)   each expert takes at most C = cf * N * K / E pairs, highest w first (baseline)
    RatioSkip(beta)                 NAEE-style dynamic skipping: drop pair j if w_j < beta * w_1   (baseline)

By default every policy keeps each token's highest-weight expert (``keep_top1=True``, our choice), so no token is
left with no expert; with Mixtral's renormalised top-2 the top weight is >= 0.5 and thresholds <= 0.5 never
touch it anyway.

Partitioned layers (``num_parts = P > 1``, see :func:`partition_experts`): sub-expert ``c`` is child ``c mod P``
of original expert ``c // P``. Every policy acts on *original experts* where its rule is about experts: the top
expert kept by ``keep_top1`` is all P children of the top pair's parent, ``RandomDrop`` drops whole parents,
``TopKReduce(k)`` keeps the k * P highest-weight children. So at initialisation (children carry their parent's
weight) a partitioned layer under any policy computes exactly what the unpartitioned layer computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from icml26.harness import validate as v

# helper functions


def _check_unit(name: str, value: float) -> float:
    value = v.finite_number(name, value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1] (a routing weight after normalisation), got {value}; "
                         f"pass a value between 0 (drop nothing) and 1")
    return value


def _check_parts(num_experts: int, num_parts: int) -> int:
    num_experts = v.positive_int("num_experts", num_experts)
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or num_parts < 1 or num_experts % num_parts:
        raise ValueError(f"num_parts must be a positive integer dividing num_experts={num_experts}, got {num_parts!r}")
    return num_parts


def _check_call(w: torch.Tensor, experts: torch.Tensor, num_experts: int, num_parts: int) -> int:
    """Arguments of ``policy(w, experts, num_experts, num_parts)``: weights ``[N, K]`` and expert ids of the
    same shape in ``[0, num_experts)``."""
    num_parts = _check_parts(num_experts, num_parts)
    for name, t in (("w", w), ("experts", experts)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {v.describe(t)}")
    v.ndim("w", w, 2)
    v.shape("experts", experts, tuple(w.shape))
    v.finite("w", w)
    v.indices("experts", experts, num_experts)
    return num_parts


def _protect_top1(level: torch.Tensor, keep_top1: bool, experts: torch.Tensor, num_parts: int = 1) -> torch.Tensor:
    """Keep, at full level, every selected child of the parent of each token's top pair (column 0: weights are
    sorted descending). With ``num_parts = 1`` that is column 0 alone."""
    if keep_top1:
        parent = torch.div(experts, num_parts, rounding_mode="floor")
        top = parent == parent[:, :1]
        level = torch.where(top, torch.clamp(level, min=2), level)
    return level


# main classes


class DropPolicy:
    """Base class: ``policy(w, experts, num_experts, num_parts=1) -> level`` (int8 ``[N, K]``; 0 drop, 1 major,
    2 full). ``num_parts`` is the layer's partition factor P (children ``c`` of parent ``c // P``)."""

    keep_top1: bool = True

    def __call__(self, w: torch.Tensor, experts: torch.Tensor, num_experts: int, num_parts: int = 1) -> torch.Tensor:
        _check_call(w, experts, num_experts, num_parts)
        raise NotImplementedError(f"{type(self).__name__} is the base class: subclass it and define __call__, or use "
                                  "ThresholdDrop / DualThresholdDrop / a baseline policy")

    def _check_flag(self) -> None:
        if not isinstance(self.keep_top1, bool):
            raise TypeError(f"keep_top1 must be True or False, got {v.describe(self.keep_top1)}")


@dataclass
class ThresholdDrop(DropPolicy):
    """Drop the pair (token, e) when its routing weight w_e < tau [A09]; survivors keep their weight."""

    tau: float
    keep_top1: bool = True

    def __post_init__(self) -> None:
        self.tau = _check_unit("tau", self.tau)
        self._check_flag()

    def __call__(self, w, experts, num_experts, num_parts=1):
        _check_call(w, experts, num_experts, num_parts)
        return _protect_top1((w >= self.tau).to(torch.int8) * 2, self.keep_top1, experts, num_parts)


@dataclass
class DualThresholdDrop(DropPolicy):
    """Two thresholds tau_lo <= tau_hi [A09]: w < tau_lo drops the expert, tau_lo <= w < tau_hi computes only its
    major (most important) neurons, w >= tau_hi computes the full expert. tau_lo == tau_hi is ThresholdDrop."""

    tau_lo: float
    tau_hi: float
    keep_top1: bool = True

    def __post_init__(self) -> None:
        self.tau_lo, self.tau_hi = _check_unit("tau_lo", self.tau_lo), _check_unit("tau_hi", self.tau_hi)
        self._check_flag()
        if self.tau_lo > self.tau_hi:
            raise ValueError(f"tau_lo must be <= tau_hi, got tau_lo={self.tau_lo} > tau_hi={self.tau_hi}; swap them")

    def __call__(self, w, experts, num_experts, num_parts=1):
        _check_call(w, experts, num_experts, num_parts)
        level = (w >= self.tau_lo).to(torch.int8) + (w >= self.tau_hi).to(torch.int8)
        return _protect_top1(level, self.keep_top1, experts, num_parts)


@dataclass
class RandomDrop(DropPolicy):
    """Baseline: drop each (token, expert) pair at random so that a fraction ``rate`` of all pairs is dropped
    (top expert kept). In a partitioned layer a draw drops a whole parent (all its selected children), so the
    partitioned and unpartitioned layers drop the same work under the same seed."""

    rate: float
    seed: int = 0
    keep_top1: bool = True

    def __post_init__(self) -> None:
        self.rate = _check_unit("rate", self.rate)
        self.seed = v.non_negative_int("seed", self.seed)
        self._check_flag()
        self._gen = torch.Generator().manual_seed(int(self.seed))

    def __call__(self, w, experts, num_experts, num_parts=1):
        _check_call(w, experts, num_experts, num_parts)
        n, kp = w.shape
        k = max(1, kp // num_parts)                 # selected parents per token
        droppable = k - 1 if self.keep_top1 else k
        if self.rate > droppable / k + 1e-12:
            raise ValueError(f"RandomDrop(rate={self.rate}) would leave tokens with no expert: with top-{k} routing "
                             f"and the top expert kept at most {droppable / k:.3g} of the pairs can be dropped; "
                             f"use rate <= {droppable / k:.3g}")
        p = 0.0 if droppable == 0 else self.rate * k / droppable
        parent = torch.div(experts, num_parts, rounding_mode="floor")
        u = torch.rand(n, num_experts // num_parts, generator=self._gen)   # one draw per (token, parent)
        drop = u.gather(1, parent) < p
        if self.keep_top1:
            drop &= parent != parent[:, :1]
        return (~drop).to(torch.int8) * 2


@dataclass
class TopKReduce(DropPolicy):
    """Baseline: static top-k reduction, keep only the ``k`` highest-weight experts of each token (in a
    partitioned layer the ``k * P`` highest-weight children, the same compute)."""

    k: int

    def __post_init__(self) -> None:
        if isinstance(self.k, int) and not isinstance(self.k, bool) and self.k < 1:
            raise ValueError(f"TopKReduce needs k >= 1 (k = 0 would leave every token with no expert), got {self.k!r}")
        self.k = v.positive_int("k", self.k)

    def __call__(self, w, experts, num_experts, num_parts=1):
        _check_call(w, experts, num_experts, num_parts)
        level = torch.zeros_like(w, dtype=torch.int8)
        level[:, : self.k * num_parts] = 2
        return level


@dataclass
class TopKPartial(DropPolicy):
    """Baseline for the dual threshold: a *fixed* partial rule that ignores the routing weights' values. The
    ``k`` highest-weight experts of each token run in full, every other selected expert runs its major part only
    (level 1; in a partitioned layer the ``k * P`` highest-weight children in full). With top-2 routing and
    ``k = 1`` this is ``DualThresholdDrop(0, 1)``; at ``major_fraction = 0.5`` it drops (K - k) / (2K) of the
    routed compute (25% for top-2 with k = 1 and for top-4 with k = 2)."""

    k: int

    def __post_init__(self) -> None:
        self.k = v.positive_int("k", self.k)

    def __call__(self, w, experts, num_experts, num_parts=1):
        _check_call(w, experts, num_experts, num_parts)
        level = torch.ones_like(w, dtype=torch.int8)
        level[:, : self.k * num_parts] = 2
        return level


@dataclass
class RatioSkip(DropPolicy):
    """Baseline, NAEE-style dynamic skipping (Lu et al. 2024): drop pair j when w_j < beta * w_1."""

    beta: float

    def __post_init__(self) -> None:
        self.beta = _check_unit("beta", self.beta)
        self._check_flag()

    def __call__(self, w, experts, num_experts, num_parts=1):
        _check_call(w, experts, num_experts, num_parts)
        return _protect_top1((w >= self.beta * w[:, :1]).to(torch.int8) * 2, True, experts, num_parts)


@dataclass
class CapacityDrop(DropPolicy):
    """Baseline, capacity-factor dropping (GShard / DeepSpeed-MoE style): expert e processes at most
    C = ceil(capacity_factor * N * K / E) pairs; the highest-weight ones win (our choice, instead of token order)."""

    capacity_factor: float
    keep_top1: bool = True

    def __post_init__(self) -> None:
        self.capacity_factor = v.positive("capacity_factor", self.capacity_factor)
        self._check_flag()

    def __call__(self, w, experts, num_experts, num_parts=1):
        _check_call(w, experts, num_experts, num_parts)
        n, k = w.shape
        cap = math.ceil(self.capacity_factor * n * k / num_experts)
        flat_w, flat_e = w.reshape(-1), experts.reshape(-1)
        # rank of each pair inside its expert by descending weight: sort by (expert, -w)
        key = flat_e.to(torch.float64) * 4.0 - flat_w.to(torch.float64)  # w in [0, 1]: experts never interleave
        order = torch.argsort(key, stable=True)
        counts = torch.bincount(flat_e, minlength=num_experts)
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.empty_like(order)
        rank[order] = torch.arange(len(order)) - starts[flat_e[order]]
        level = ((rank < cap).to(torch.int8) * 2).view(n, k)
        return _protect_top1(level, self.keep_top1, experts, num_parts)


__all__ = ["DropPolicy", "ThresholdDrop", "DualThresholdDrop", "RandomDrop", "TopKReduce", "TopKPartial", "RatioSkip",
           "CapacityDrop"]
