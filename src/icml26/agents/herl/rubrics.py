"""Rubric verifiers for [B07] HeRL: weighted lists of code-checked rubrics with met/unmet reporting.

A rubric list R = [(c_k, w_k)]_{k=1..K} scores a response y by

    r(y) = sum_k w_k 1[c_k(y)] / sum_k w_k                  (the official code's rubric reward)

and reports which rubrics are met and which are not (the hindsight experience that guidance prompts are built
from). Responses are batches of token ids ``[B, T]`` with a validity mask; every check is one tensor op over the
batch. Kinds: a token at a position (format), a required token, a forbidden token, a length band, and the
conjunction of several rubrics (e.g. a "pair" rubric: two positions hold given tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

import torch
from torch import Tensor

from icml26.harness import validate as v


def _check_batch(responses: Tensor, mask: Tensor | None) -> None:
    """``responses [B, T]`` integer token ids, ``mask`` None or the same shape."""
    if not isinstance(responses, Tensor):
        raise TypeError(f"responses must be a [B, T] tensor of token ids, got {v.describe(responses)}")
    if responses.dim() != 2:
        raise ValueError(f"responses must be [B, T] token ids, got shape {tuple(responses.shape)}")
    if responses.is_floating_point() or responses.is_complex():
        raise TypeError(f"responses must hold integer token ids, got a {responses.dtype} tensor")
    if mask is not None:
        if not isinstance(mask, Tensor):
            raise TypeError(f"mask must be a [B, T] tensor (1 = valid token) or None, got {v.describe(mask)}")
        if mask.shape != responses.shape:
            raise ValueError(f"mask must have the shape of responses {tuple(responses.shape)}, got "
                             f"{tuple(mask.shape)}")


def _valid(responses: Tensor, mask: Tensor | None) -> Tensor:
    _check_batch(responses, mask)
    return torch.ones_like(responses, dtype=torch.bool) if mask is None else mask.bool()


class Rubric:
    """One checkable requirement. ``check(responses [B, T], mask [B, T] | None) -> BoolTensor [B]``."""

    def check(self, responses: Tensor, mask: Tensor | None = None) -> Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def constraints(self) -> list[tuple[int, int]]:
        """Positional constraints ``(position, token)`` that make this rubric hold (for token-level guidance);
        empty when the rubric is not positional."""
        return []


@dataclass(frozen=True)
class TokenAt(Rubric):
    """Format rubric: position ``pos`` of the response holds ``token``."""

    pos: int
    token: int

    def __post_init__(self) -> None:
        v.non_negative_int("TokenAt.pos", self.pos)
        v.non_negative_int("TokenAt.token", self.token)

    def check(self, responses: Tensor, mask: Tensor | None = None) -> Tensor:
        _check_batch(responses, mask)
        if self.pos >= responses.shape[1]:
            return torch.zeros(responses.shape[0], dtype=torch.bool, device=responses.device)
        return (responses[:, self.pos] == self.token) & _valid(responses, mask)[:, self.pos]

    def describe(self) -> str:
        return f"token {self.token} at position {self.pos}"

    def constraints(self) -> list[tuple[int, int]]:
        return [(self.pos, self.token)]


@dataclass(frozen=True)
class Contains(Rubric):
    """Required word: ``token`` occurs at least ``count`` times."""

    token: int
    count: int = 1

    def __post_init__(self) -> None:
        v.non_negative_int("Contains.token", self.token)
        v.positive_int("Contains.count", self.count)

    def check(self, responses: Tensor, mask: Tensor | None = None) -> Tensor:
        return ((responses == self.token) & _valid(responses, mask)).sum(1) >= self.count

    def describe(self) -> str:
        return f"contains token {self.token}" + (f" at least {self.count} times" if self.count > 1 else "")


@dataclass(frozen=True)
class Excludes(Rubric):
    """Forbidden word: ``token`` does not occur."""

    token: int

    def __post_init__(self) -> None:
        v.non_negative_int("Excludes.token", self.token)

    def check(self, responses: Tensor, mask: Tensor | None = None) -> Tensor:
        return ~((responses == self.token) & _valid(responses, mask)).any(1)

    def describe(self) -> str:
        return f"does not contain token {self.token}"


@dataclass(frozen=True)
class LengthBetween(Rubric):
    """Length band: ``lo <= len(y) <= hi`` (valid tokens)."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        v.non_negative_int("LengthBetween.lo", self.lo)
        v.non_negative_int("LengthBetween.hi", self.hi)
        if self.lo > self.hi:
            raise ValueError(f"LengthBetween needs lo <= hi, got lo={self.lo}, hi={self.hi}")

    def check(self, responses: Tensor, mask: Tensor | None = None) -> Tensor:
        n = _valid(responses, mask).sum(1)
        return (n >= self.lo) & (n <= self.hi)

    def describe(self) -> str:
        return f"length between {self.lo} and {self.hi} tokens"


@dataclass(frozen=True)
class AllOf(Rubric):
    """Conjunction: every part holds (a "pair" rubric is ``AllOf((TokenAt(p1, v1), TokenAt(p2, v2)))``)."""

    parts: tuple[Rubric, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.parts, (tuple, list)):
            raise TypeError(f"AllOf.parts must be a tuple of Rubric, got {v.describe(self.parts)}")
        if not self.parts:
            raise ValueError("AllOf needs at least one part")
        for r in self.parts:
            if not isinstance(r, Rubric):
                raise TypeError(f"AllOf.parts must hold Rubric instances, got {type(r).__name__}")
        object.__setattr__(self, "parts", tuple(self.parts))

    def check(self, responses: Tensor, mask: Tensor | None = None) -> Tensor:
        out = self.parts[0].check(responses, mask)
        for p in self.parts[1:]:
            out = out & p.check(responses, mask)
        return out

    def describe(self) -> str:
        return " and ".join(p.describe() for p in self.parts)

    def constraints(self) -> list[tuple[int, int]]:
        return [c for p in self.parts for c in p.constraints()]


@dataclass
class RubricResult:
    """Verifier output for a batch: ``met [B, K]`` (bool), ``weights [K]``, ``scores [B]`` = weighted fraction met."""

    met: Tensor
    weights: Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.met, Tensor) or self.met.dtype != torch.bool or self.met.dim() != 2:
            raise TypeError(f"met must be a [B, K] bool tensor, got {v.describe(self.met)}"
                            + (f" of dtype {self.met.dtype}" if isinstance(self.met, Tensor) else ""))
        if not isinstance(self.weights, Tensor):
            raise TypeError(f"weights must be a [K] or [B, K] tensor, got {v.describe(self.weights)}")
        if tuple(self.weights.shape) not in ((self.met.shape[1],), tuple(self.met.shape)):
            raise ValueError(f"weights must have shape ({self.met.shape[1]},) or {tuple(self.met.shape)}, got "
                             f"{tuple(self.weights.shape)}")
        v.finite("weights", self.weights)

    @property
    def scores(self) -> Tensor:
        return (self.met.float() * self.weights).sum(-1) / self.weights.sum(-1)

    @property
    def n_met(self) -> Tensor:
        return self.met.sum(-1)

    @property
    def passed(self) -> Tensor:
        """All rubrics met."""
        return self.met.all(-1)


@dataclass
class RubricList:
    """A weighted rubric list (the reward of one prompt). Raises ``ValueError`` on an empty list or bad weights."""

    rubrics: Sequence[Rubric]
    weights: Sequence[float] | None = None

    def __post_init__(self) -> None:
        self.rubrics = tuple(self.rubrics)
        if len(self.rubrics) == 0:
            raise ValueError("a rubric list needs at least one rubric (an empty rubric gives no reward signal); "
                             "pass e.g. RubricList([TokenAt(0, 3)])")
        for r in self.rubrics:
            if not isinstance(r, Rubric):
                raise TypeError(f"rubrics must be Rubric instances (TokenAt, Contains, ...), got {type(r).__name__}")
        if self.weights is not None:
            v.finite("weights", self.weights)
        w = [1.0] * len(self.rubrics) if self.weights is None else [float(x) for x in self.weights]
        if len(w) != len(self.rubrics):
            raise ValueError(f"{len(w)} weights for {len(self.rubrics)} rubrics; give one weight per rubric")
        if any(not x >= 0 for x in w) or sum(w) <= 0:
            raise ValueError(f"weights must be >= 0 with a positive sum, got {w}")
        self.weights = tuple(w)

    def __len__(self) -> int:
        return len(self.rubrics)

    def evaluate(self, responses: Tensor, mask: Tensor | None = None) -> RubricResult:
        """Check every rubric on a batch of responses ``[B, T]`` (ids of the response only)."""
        _check_batch(responses, mask)
        met = torch.stack([r.check(responses, mask) for r in self.rubrics], dim=1)
        return RubricResult(met=met, weights=torch.tensor(self.weights, dtype=torch.float32))

    def split(self, met_row: Tensor) -> tuple[list[Rubric], list[Rubric]]:
        """``(met rubrics, unmet rubrics)`` for one response's ``met`` row."""
        if not isinstance(met_row, Tensor) or met_row.dim() != 1 or met_row.numel() != len(self.rubrics):
            raise ValueError(f"met_row must be a [K={len(self.rubrics)}] bool tensor (one flag per rubric), got "
                             f"{v.describe(met_row)}")
        met = [r for r, m in zip(self.rubrics, met_row.tolist()) if m]
        unmet = [r for r, m in zip(self.rubrics, met_row.tolist()) if not m]
        return met, unmet


@runtime_checkable
class RubricVerifier(Protocol):
    """``verifier(prompt_index [B], responses [B, T], mask [B, T]) -> RubricResult`` (same K for all rows)."""

    def __call__(self, prompt_index: Tensor, responses: Tensor, mask: Tensor | None = None) -> RubricResult: ...


@dataclass
class ListVerifier:
    """A verifier holding one :class:`RubricList` per prompt (all with the same number of rubrics), counting
    every response it scores in ``calls`` (the budget the reproduction reports)."""

    lists: Sequence[RubricList]
    calls: int = field(default=0)

    def __post_init__(self) -> None:
        if isinstance(self.lists, RubricList) or not isinstance(self.lists, Sequence):
            raise TypeError(f"lists must be a sequence of RubricList (one per prompt), got {v.describe(self.lists)}")
        if len(self.lists) == 0:
            raise ValueError("ListVerifier needs at least one rubric list")
        for rl in self.lists:
            if not isinstance(rl, RubricList):
                raise TypeError(f"lists must hold RubricList instances, got {type(rl).__name__}")
        ks = {len(rl) for rl in self.lists}
        if len(ks) != 1:
            raise ValueError(f"all rubric lists must have the same number of rubrics, got sizes {sorted(ks)}")

    def __call__(self, prompt_index: Tensor, responses: Tensor, mask: Tensor | None = None) -> RubricResult:
        _check_batch(responses, mask)
        v.indices("prompt_index", prompt_index, len(self.lists))
        prompt_index = torch.as_tensor(prompt_index, dtype=torch.long)
        if prompt_index.dim() != 1 or prompt_index.shape[0] != responses.shape[0]:
            raise ValueError(f"{prompt_index.shape[0]} prompt indices for {responses.shape[0]} responses")
        self.calls += int(responses.shape[0])
        K = len(self.lists[0])
        met = torch.zeros(responses.shape[0], K, dtype=torch.bool)
        weights = torch.zeros(responses.shape[0], K)
        for p in prompt_index.unique().tolist():
            rows = (prompt_index == p).nonzero().squeeze(1)
            res = self.lists[p].evaluate(responses[rows], None if mask is None else mask[rows])
            met[rows] = res.met
            weights[rows] = res.weights
        return RubricResult(met=met, weights=weights)


__all__ = ["AllOf", "Contains", "Excludes", "LengthBetween", "ListVerifier", "Rubric", "RubricList", "RubricResult",
           "RubricVerifier", "TokenAt"]
