"""Post-training of a (partitioned) MoE LM [A09]: a short next-token fine-tune on a token stream, the same
recipe for the original and the partitioned models (equal steps, data order and learning rate).

With ``train="router"`` only the router rows learn (the partitioned children's rows start as copies of their
parent's and diverge); with ``train="all"`` every parameter learns.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from icml26.harness import validate as v

from .moe import moe_layers


def post_train(model: nn.Module, tokens: torch.Tensor, *, steps: int, lr: float = 1e-3, batch_size: int = 8,
               seq_len: int = 128, seed: int = 0, train: str = "all") -> list[float]:
    """Fine-tune ``model`` in place for ``steps`` AdamW steps (warmup 10%, cosine); returns the training losses."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a converted MoE causal LM), got {v.describe(model)}")
    v.one_of("train", train, ("all", "router"))
    steps = v.non_negative_int("steps", steps)
    lr = v.positive("lr", lr)
    batch_size, seq_len = v.positive_int("batch_size", batch_size), v.positive_int("seq_len", seq_len)
    seed = v.non_negative_int("seed", seed)
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a torch.Tensor of token ids, got {v.describe(tokens)}")
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(vocab, int):
        v.indices("tokens", tokens, vocab)
    elif tokens.is_floating_point():
        raise TypeError(f"tokens must hold integer token ids, got a {tokens.dtype} tensor")
    tokens = tokens.reshape(-1)
    if len(tokens) < seq_len + 2:
        raise ValueError(f"need more than seq_len + 1 = {seq_len + 1} tokens to fine-tune, got {len(tokens)}")
    layers = moe_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no SparseMoE layer; convert it first with convert_hf_moe(model)")
    params = [p for m in layers for p in m.router.parameters()] if train == "router" else list(model.parameters())
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / max(steps, 1)))))
    g = torch.Generator().manual_seed(seed)
    offsets = torch.arange(seq_len + 1)
    losses = []
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(tokens) - seq_len - 1, (batch_size,), generator=g)
        batch = tokens[starts[:, None] + offsets]
        logits = model(input_ids=batch[:, :-1], use_cache=False).logits
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(True)
    return losses


__all__ = ["post_train"]
