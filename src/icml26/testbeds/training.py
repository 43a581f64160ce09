"""The training loop the trained testbeds share (tiny causal LMs, the masked diffusion LM): optimizer and
scheduler steps with gradient clipping and build progress. Each testbed supplies its batch loss, optimizer and
schedule (kept in the testbed, so cached weights stay bit-identical to earlier builds of the same config)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .progress import BuildProgress


def train_steps(model: nn.Module, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler,
                steps: int, batch_loss: Callable[[int], torch.Tensor], progress: BuildProgress,
                max_grad_norm: float = 1.0) -> None:
    """``steps`` optimizer steps on ``batch_loss(step)``, clipping the gradient norm, reporting to ``progress``."""
    model.train()
    for step in range(steps):
        loss = batch_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        sched.step()
        progress.update(step + 1, loss.detach())


__all__ = ["train_steps"]
