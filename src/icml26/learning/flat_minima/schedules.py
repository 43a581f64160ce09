"""Warmup-stable-decay learning-rate schedules: the baseline, the large-LR and the short-anneal recipes [B19].

WSD multiplier at step t of T (w = round(warmup_frac T) warm-up steps, d = round(decay_frac T) decay steps):

    m(t) = s * (t + 1) / w                                   t < w            (linear warm-up)
    m(t) = s                                                 w <= t < T - d   (stable plateau)
    m(t) = s * (1 - (1 - r) * (t - (T - d) + 1) / d)         T - d <= t       (linear decay, m(T - 1) = s r)

with s the peak scale and r = min_lr_ratio; the learning rate is m(t) times the optimizer's lr. [B19]'s
interventions: a larger peak LR (s > 1) and a shorter decay (smaller decay_frac) bias pretraining toward flatter
minima. The schedules are ``torch.optim.lr_scheduler.LambdaLR``s: call ``sched.step()`` after ``opt.step()``.
"""

from __future__ import annotations

import math
from functools import partial

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from icml26.harness import validate


def _check_wsd(total_steps: int, warmup_frac: float, decay_frac: float, min_lr_ratio: float,
               peak_scale: float) -> None:
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be a positive int, got {total_steps!r}")
    for name, v in (("warmup_frac", warmup_frac), ("decay_frac", decay_frac), ("min_lr_ratio", min_lr_ratio)):
        if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
            raise ValueError(f"{name} must lie in [0, 1], got {v!r}")
    if warmup_frac + decay_frac > 1.0:
        raise ValueError(f"warmup_frac + decay_frac must be <= 1 (got {warmup_frac} + {decay_frac}); "
                         "shorten the warm-up or the decay")
    if not (isinstance(peak_scale, (int, float)) and math.isfinite(peak_scale) and peak_scale > 0):
        raise ValueError(f"peak_scale must be a positive finite number, got {peak_scale!r}")


def wsd_multiplier(step: int, *, total_steps: int, warmup_frac: float = 0.05, decay_frac: float = 0.2,
                   min_lr_ratio: float = 0.0, peak_scale: float = 1.0) -> float:
    """m(t) above; steps past ``total_steps`` stay at the final value ``peak_scale * min_lr_ratio``."""
    validate.non_negative_int("step", step)
    _check_wsd(total_steps, warmup_frac, decay_frac, min_lr_ratio, peak_scale)
    warm = round(warmup_frac * total_steps)
    decay = round(decay_frac * total_steps)
    if step < warm:
        return peak_scale * (step + 1) / warm
    if step < total_steps - decay:
        return peak_scale
    frac = min(1.0, (step - (total_steps - decay) + 1) / decay)
    return peak_scale * (1.0 - (1.0 - min_lr_ratio) * frac)


def wsd_schedule(optimizer: Optimizer, total_steps: int, *, warmup_frac: float = 0.05, decay_frac: float = 0.2,
                 min_lr_ratio: float = 0.0, peak_scale: float = 1.0) -> LambdaLR:
    """Warmup-stable-decay schedule as a ``LambdaLR`` over ``optimizer`` (a torch optimizer or :class:`SAM`)."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError("optimizer must be a torch.optim.Optimizer (e.g. AdamW or SAM), "
                        f"got {type(optimizer).__name__}")
    _check_wsd(total_steps, warmup_frac, decay_frac, min_lr_ratio, peak_scale)
    for i, group in enumerate(optimizer.param_groups):
        lr = float(group.get("lr", 0.0))
        if not lr > 0:
            raise ValueError(f"param_groups[{i}] has lr={lr}; a schedule needs a positive base learning rate")
    return LambdaLR(optimizer, partial(wsd_multiplier, total_steps=total_steps, warmup_frac=warmup_frac,
                                       decay_frac=decay_frac, min_lr_ratio=min_lr_ratio, peak_scale=peak_scale))


def large_lr_schedule(optimizer: Optimizer, total_steps: int, *, lr_multiplier: float = 3.0,
                      **wsd_kwargs: float) -> LambdaLR:
    """[B19] intervention (2): WSD with its peak raised to ``lr_multiplier`` times the optimizer's lr."""
    return wsd_schedule(optimizer, total_steps, peak_scale=lr_multiplier, **wsd_kwargs)


def short_anneal_schedule(optimizer: Optimizer, total_steps: int, *, decay_frac: float = 0.1,
                          **wsd_kwargs: float) -> LambdaLR:
    """[B19] intervention (3): WSD with a short final decay (10% of the steps by default)."""
    return wsd_schedule(optimizer, total_steps, decay_frac=decay_frac, **wsd_kwargs)
