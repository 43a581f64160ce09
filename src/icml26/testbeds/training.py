"""The training loop the trained testbeds share (tiny causal LMs, the masked diffusion LM): optimizer and
scheduler steps with gradient clipping and build progress. Each testbed supplies its batch loss, optimizer and
schedule (kept in the testbed, so cached weights stay bit-identical to earlier builds of the same config)."""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from torch import nn

from .progress import BuildProgress


@contextmanager
def pinned_training(threads: int) -> Iterator[None]:
    """Train a testbed on exactly ``threads`` threads (torch's intra-op pool and the BLAS/OpenMP pools) with
    torch's deterministic algorithms, so one config gives the same weights whoever builds it and whatever
    ``OMP_NUM_THREADS`` or core count the builder has (float reductions depend on how work is split across
    threads). Same weights are expected on machines with the same CPU instruction set; a different SIMD width
    can still change the last bits. The previous settings are restored on exit."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    from threadpoolctl import threadpool_limits

    before, det_before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)
        torch.use_deterministic_algorithms(det_before)


def train_steps(model: nn.Module, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler,
                steps: int, batch_loss: Callable[[int], torch.Tensor], progress: BuildProgress,
                max_grad_norm: float = 1.0, losses: list[float] | None = None,
                on_step: Callable[[int], None] | None = None) -> None:
    """``steps`` optimizer steps on ``batch_loss(step)``, clipping the gradient norm, reporting to ``progress``
    (and appending each step's training loss to ``losses`` when given: the loss curve). ``on_step(done)`` runs
    after each update (``done`` = updates so far), e.g. a periodic evaluation; the model is put back in training
    mode after it."""
    model.train()
    for step in range(steps):
        loss = batch_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        sched.step()
        progress.update(step + 1, loss.detach())
        if losses is not None:
            losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step + 1)
            model.train()


def warmup_cosine(opt: torch.optim.Optimizer, warmup: int, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup over ``warmup`` steps times a cosine decay that reaches 0 at ``steps``."""
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))))


def train_lm_on_stream(model: nn.Module, data: torch.Tensor, progress: BuildProgress, *, steps: int, batch_size: int,
                       seq_len: int, lr: float, warmup: int, weight_decay: float, seed: int,
                       losses: list[float] | None = None, on_step: Callable[[int], None] | None = None) -> None:
    """Next-token training of a causal LM on random windows of the 1-D token stream ``data``: AdamW
    (betas 0.9/0.95), warmup + cosine, ``steps`` steps; the windows come from a generator seeded with ``seed``
    (the tiny causal-LM testbeds and [B11]'s regex-tokenizer LM share this recipe)."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    sched = warmup_cosine(opt, warmup, steps)
    offsets = torch.arange(seq_len + 1)

    def batch_loss(_step: int) -> torch.Tensor:
        starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,), generator=g)
        batch = data[starts[:, None] + offsets]
        logits = model(input_ids=batch[:, :-1], use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())

    train_steps(model, opt, sched, steps, batch_loss, progress, losses=losses, on_step=on_step)


__all__ = ["pinned_training", "train_steps", "train_lm_on_stream", "warmup_cosine"]
