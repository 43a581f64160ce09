"""[A07] Self-distillation of the AHNs: the teacher is the same frozen model with full attention, the student the
sliding-window + AHN model; only the AHN parameters are optimised.

    loss = mean over positions t >= S + W (where the window has dropped tokens) of KL(p_teacher(t) || p_student(t))
           (optionally only over labelled positions, as the reference code does for instruction data)

Each step samples the window W (and the number of sinks) at random, so one AHN serves many window sizes (the
paper's randomized training: T/8 < W < T).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.nn.functional as F

from icml26.harness import validate as _chk

from .model import AHNModel


@dataclass
class DistillResult:
    """Per-step record of :func:`self_distill_ahn`."""

    losses: list[float] = field(default_factory=list)   # KL per step
    windows: list[int] = field(default_factory=list)    # W sampled per step
    sinks: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("losses", "windows", "sinks"):
            if not isinstance(getattr(self, name), list):
                raise TypeError(f"{name} must be a list, got {_chk.describe(getattr(self, name))}")


def kl_to_teacher(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(p_teacher || p_student) per position: [B, T, V] x2 -> [B, T] (nats)."""
    lt = F.log_softmax(teacher_logits.float(), -1)
    ls = F.log_softmax(student_logits.float(), -1)
    return (lt.exp() * (lt - ls)).sum(-1)


def self_distill_ahn(model: AHNModel, data: torch.Tensor, *, steps: int, batch_size: int = 8, lr: float = 3e-3,
                     windows: Sequence[int] = (16, 32, 64), sinks: Sequence[int] = (4,), random_window: bool = True,
                     seed: int = 0, weight_decay: float = 0.0, loss_mask: torch.Tensor | None = None) -> DistillResult:
    """Train ``model``'s AHNs by self-distillation from its own frozen base with full attention [A07].

    Args:
        model: an :class:`AHNModel` (its base stays frozen).
        data: LongTensor [N, T] of training sequences; each step draws ``batch_size`` rows (seeded).
        steps: optimiser steps (AdamW, cosine decay after a 10% warm-up).
        windows, sinks: the W and S values sampled per step (only W with T/8 < W < T are used); with
            ``random_window=False`` the model's ``cfg.window`` / ``cfg.num_sinks`` are used throughout.
        loss_mask: optional bool [N, T]: positions that count in the KL besides t >= S + W (the reference code
            counts labelled tokens only, ``labels != -100``: e.g. the response of an instruction sample). On plain
            text every token is labelled and the mask changes nothing.
    """
    if not isinstance(model, AHNModel):
        raise TypeError(f"model must be an AHNModel (see augment_with_ahn), got {type(model).__name__}")
    if not isinstance(data, torch.Tensor) or data.dim() != 2 or data.dtype != torch.long:
        raise ValueError("data must be a LongTensor [N, T] of token sequences")
    _chk.positive_int("steps", steps)
    _chk.positive_int("batch_size", batch_size)
    _chk.positive("lr", lr)
    _chk.non_negative("weight_decay", weight_decay)
    _chk.non_negative_int("seed", seed)
    _chk.non_empty("windows", windows)
    _chk.non_empty("sinks", sinks)
    for w in windows:
        _chk.positive_int("windows entry", w)
    for s_ in sinks:
        _chk.non_negative_int("sinks entry", s_)
    if data.shape[0] == 0 or data.shape[1] < 2:
        raise ValueError(f"data must hold at least one sequence of >= 2 tokens, got shape {tuple(data.shape)}")
    V = model.base.config.vocab_size
    if data.min() < 0 or data.max() >= V:
        raise ValueError(f"data token ids out of range [0, {V}); check the tokenizer matches the model")
    T = data.shape[1]
    if loss_mask is not None and (not isinstance(loss_mask, torch.Tensor) or loss_mask.shape != data.shape
                                  or loss_mask.dtype != torch.bool):
        raise ValueError(f"loss_mask must be a bool tensor of the data's shape {tuple(data.shape)}")
    ok = [w for w in windows if T / 8 < w < T] if random_window else [model.cfg.window]
    if not ok:
        raise ValueError(f"no window in {tuple(windows)} satisfies T/8 < W < T for T={T}; pass windows between "
                         f"{T // 8 + 1} and {T - 1}")
    S_opts = list(sinks) if random_window else [model.cfg.num_sinks]
    g = torch.Generator().manual_seed(seed)
    params = model.ahn_parameters()
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))))
    res = DistillResult()
    model.base.eval()
    for _ in range(steps):
        rows = torch.randint(0, data.shape[0], (batch_size,), generator=g)
        W = ok[int(torch.randint(len(ok), (1,), generator=g))]
        S = S_opts[int(torch.randint(len(S_opts), (1,), generator=g))]
        ids = data[rows]
        with torch.no_grad():
            teacher = model(ids, window=None).logits
        student = model(ids, window=W, num_sinks=S).logits
        kl = kl_to_teacher(student[:, S + W:], teacher[:, S + W:])
        if loss_mask is None:
            loss = kl.mean()
        else:
            m = loss_mask[rows][:, S + W:].float()
            loss = (kl * m).sum() / m.sum().clamp(min=1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        res.losses.append(float(loss.detach()))
        res.windows.append(W)
        res.sinks.append(S)
    return res
