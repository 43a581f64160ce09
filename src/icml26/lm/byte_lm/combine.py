"""Combining byte-level LMs whose tokenizers differ: ensembles and proxy tuning [B11].

Once every model speaks the same 257-symbol alphabet (256 bytes + EOS) their next-byte distributions combine
directly, whatever their tokenizers:

    mixture:  log P(b | s) = log sum_i lambda_i P_i(b | s)
    product:  log P(b | s) = sum_i lambda_i log P_i(b | s) - log Z(s)
    proxy tuning:  log P(b | s) = log P_base(b | s) + alpha (log P_expert(b | s) - log P_anti(b | s)) - log Z(s)
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from icml26.harness import validate as v

from .bpe import _as_bytes
from .lm import ByteModel

__all__ = ["ByteEnsemble", "ProxyTunedByteLM"]


def _normalise(s: torch.Tensor) -> torch.Tensor:
    return s - torch.logsumexp(s, 0)


def _check_members(models: Sequence) -> list:
    models = list(models)
    if not models:
        raise ValueError("need at least one byte-level model")
    for m in models:
        if not isinstance(m, ByteModel):
            raise TypeError(f"members must be ByteModel instances (e.g. ByteLevelLM(model, tok)), got {type(m).__name__}")
    return models


class _CombinedStream:
    """Pushes every byte to each member's stream; combines their next-byte log-probabilities."""

    def __init__(self, streams: list, combine: Callable[[list[torch.Tensor]], torch.Tensor]) -> None:
        self.streams, self.combine = streams, combine

    def push(self, byte: int) -> None:
        for s in self.streams:
            s.push(byte)

    def logprobs(self) -> torch.Tensor:
        return self.combine([s.logprobs() for s in self.streams])


class ByteEnsemble(ByteModel):
    """Ensemble of byte-level LMs (any tokenizers): ``mode="mixture"`` (weighted average of probabilities) or
    ``"product"`` (weighted geometric pool, renormalised). Weights default to 1/n, so an ensemble of a model with
    itself is that model in both modes."""

    def __init__(self, lms: Sequence[ByteModel], weights: Sequence[float] | None = None, mode: str = "mixture") -> None:
        self.lms = _check_members(lms)
        if mode not in ("mixture", "product"):
            raise ValueError(f"unknown mode {mode!r}; use 'mixture' or 'product'")
        if weights is not None and (isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__")):
            raise TypeError(f"weights must be a sequence of numbers, got {type(weights).__name__}")
        w = [1.0 / len(self.lms)] * len(self.lms) if weights is None else \
            [v.finite_number(f"weights[{i}]", x) for i, x in enumerate(weights)]
        if len(w) != len(self.lms):
            raise ValueError(f"got {len(w)} weights for {len(self.lms)} models")
        if any(not math.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:
            raise ValueError(f"weights must be finite, non-negative and not all zero, got {w}")
        if mode == "mixture":
            w = [x / sum(w) for x in w]
        self.mode, self.weights = mode, torch.tensor(w, dtype=torch.float64)

    def combine(self, lps: list[torch.Tensor]) -> torch.Tensor:
        x = torch.stack(lps)
        if self.mode == "mixture":
            return torch.logsumexp(x + torch.log(self.weights)[:, None], 0)
        terms = torch.where(self.weights[:, None] > 0, self.weights[:, None] * x, torch.zeros_like(x))
        return _normalise(terms.sum(0))

    def stream(self, prompt: bytes | str = b"") -> _CombinedStream:
        prompt = _as_bytes(prompt, "prompt")
        return _CombinedStream([m.stream(prompt) for m in self.lms], self.combine)


class ProxyTunedByteLM(ByteModel):
    """Proxy tuning across tokenizers: base + alpha (expert - anti-expert) on next-byte log-probabilities."""

    def __init__(self, base: ByteModel, expert: ByteModel, anti: ByteModel, alpha: float = 1.0) -> None:
        self.base, self.expert, self.anti = _check_members([base, expert, anti])
        if not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
            raise ValueError(f"alpha must be a finite number, got {alpha!r}")
        self.alpha = float(alpha)

    def combine(self, lps: list[torch.Tensor]) -> torch.Tensor:
        base, expert, anti = lps
        delta = torch.nan_to_num(expert - anti, nan=0.0, posinf=0.0, neginf=-math.inf)  # -inf - -inf: no change
        return _normalise(base + self.alpha * delta)

    def stream(self, prompt: bytes | str = b"") -> _CombinedStream:
        prompt = _as_bytes(prompt, "prompt")
        return _CombinedStream([m.stream(prompt) for m in (self.base, self.expert, self.anti)], self.combine)
