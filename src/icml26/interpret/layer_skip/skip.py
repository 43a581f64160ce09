"""[A14] Skip plans applied with forward hooks (removed on exit), FastV token pruning, and FLOPs accounting.

Three kinds of skip (block index i = 0..L-1):

    skip block i for S    h_{i+1}[n] := h_i[n] for n in S; the other tokens run block i normally and attend to
                          the un-updated states of S (S's keys and values are still computed)
    vision exit at e      V is dropped from blocks e..L-1 (text stops attending to V; V's states stay frozen)
    late vision entry s   V is dropped from blocks 0..s-1 and joins block s with its layer-0 states h_0

Dropping a token from a block runs the block on the remaining tokens only (a forward pre-hook gathers the hidden
states and every sequence-shaped keyword argument: attention masks, position ids, rotary cos/sin, so rotary
positions stay the original ones); a forward hook scatters the block's output back, dropped tokens keeping their
input state. Causal attention among the remaining tokens is then the paper's "drop V from the block".

FastV [Chen et al. 2024] (baseline): after block K-1 (the K-th layer), rank the vision tokens by the attention
they receive in that block (mean over heads and queries) and drop the (1 - keep) lowest-ranked from blocks K..L-1.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from icml26.harness import validate as v

from .trace import check_layer_index, find_attention, find_blocks, hidden_in, hidden_out, hooks_removed


@dataclass(frozen=True)
class SkipPlan:
    """A skip plan [A14]. ``skip_vision``: blocks where V is skipped (V keeps its input state, text runs and
    attends to it); ``skip_all``: blocks skipped for every token (ShortGPT-style layer removal);
    ``vision_exit`` e: V is dropped from blocks e..L-1 (None: no exit); ``vision_entry`` s: V is dropped from
    blocks 0..s-1 (0: no late entry).

    Note: in a causal model read at its text positions (answer logits, generation), block L-1's outputs at the
    vision tokens are never read, so skipping the last block for V changes no output: it is free for every rule
    (and the reproduction ranks only blocks 0..L-2)."""

    skip_vision: tuple[int, ...] = ()
    skip_all: tuple[int, ...] = ()
    vision_exit: int | None = None
    vision_entry: int = 0

    def __post_init__(self) -> None:
        for name in ("skip_vision", "skip_all"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list, set, frozenset, range)):
                raise TypeError(f"{name} must be a tuple of block indices, got {v.describe(value)}")
            idx = tuple(sorted(v.non_negative_int(f"{name} block index", i) for i in value))
            if len(set(idx)) != len(idx):
                raise ValueError(f"{name} lists a block twice: {value!r}")
            object.__setattr__(self, name, idx)
        if self.vision_exit is not None:
            object.__setattr__(self, "vision_exit", v.non_negative_int("vision_exit", self.vision_exit))
        object.__setattr__(self, "vision_entry", v.non_negative_int("vision_entry", self.vision_entry))

    def validate(self, num_layers: int) -> None:
        """``ValueError`` when an index is out of range for a model with ``num_layers`` blocks or entry > exit."""
        for name in ("skip_vision", "skip_all"):
            for i in getattr(self, name):
                check_layer_index(i, num_layers, f"{name} block index")
        if self.vision_exit is not None and not 0 <= int(self.vision_exit) <= num_layers:
            raise ValueError(f"vision_exit {self.vision_exit} is out of range 0..{num_layers} (the model has "
                             f"{num_layers} blocks)")
        if not 0 <= int(self.vision_entry) <= num_layers:
            raise ValueError(f"vision_entry {self.vision_entry} is out of range 0..{num_layers}")
        if self.vision_exit is not None and self.vision_entry > self.vision_exit:
            raise ValueError(f"vision_entry {self.vision_entry} is after vision_exit {self.vision_exit}: V would "
                             "never be processed")

    def dropped(self, i: int, num_layers: int) -> bool:
        """Whether V is dropped from block i."""
        e = num_layers if self.vision_exit is None else self.vision_exit
        return i < self.vision_entry or i >= e


def _gather_seq(x: Any, idx: torch.Tensor, N: int) -> Any:
    """Gather the sequence dimension(s) of a block argument by ``idx`` [B, N'] (recursing into tuples/lists).

    4-D tensors (attention masks [B, 1|H, N, N]) are gathered on both last dims; 2-D / 3-D tensors (position
    ids [B, N], rotary cos/sin [B, N, hd], hidden states) on dim 1; 1-D (cache positions) on dim 0 when all rows
    of ``idx`` agree. Tensors without a dimension of size N are left alone."""
    if isinstance(x, (tuple, list)):
        return type(x)(_gather_seq(v, idx, N) for v in x)
    if not torch.is_tensor(x):
        return x
    B, M = idx.shape
    if x.ndim == 4 and x.shape[-1] == N and x.shape[-2] == N:
        x = x.expand(B, *x.shape[1:]) if x.shape[0] == 1 else x
        i = idx.to(x.device)
        x = x.gather(2, i[:, None, :, None].expand(-1, x.shape[1], -1, N))
        return x.gather(3, i[:, None, None, :].expand(-1, x.shape[1], M, -1))
    if x.ndim in (2, 3) and x.shape[1] == N:
        x = x.expand(B, *x.shape[1:]) if x.shape[0] == 1 and B > 1 else x
        i = idx.to(x.device)
        return x.gather(1, i if x.ndim == 2 else i[..., None].expand(-1, -1, x.shape[2]))
    if x.ndim == 1 and x.shape[0] == N and bool((idx == idx[0]).all()):
        return x[idx[0].to(x.device)]
    return x


def _keep_index(keep: torch.Tensor) -> torch.Tensor:
    """[B, N] bool with the same count per row -> [B, N'] sorted indices of the kept tokens."""
    counts = keep.sum(1)
    if not bool((counts == counts[0]).all()):
        raise ValueError("every example must keep the same number of tokens (fixed-length vision prefix)")
    return torch.nonzero(keep)[:, 1].view(keep.shape[0], int(counts[0]))


class _Dropper:
    """Pre/post hooks that run a block on the kept tokens only (``keep_fn(B, N, device) -> [B, N] bool``)."""

    def __init__(self, keep_fn) -> None:
        self.keep_fn = keep_fn
        self.saved: tuple[torch.Tensor, torch.Tensor] | None = None

    def pre(self, mod, args, kwargs):
        h = hidden_in(args, kwargs)
        B, N, _ = h.shape
        keep = self.keep_fn(B, N, h.device)
        if keep is None or bool(keep.all()):
            self.saved = None
            return None
        idx = _keep_index(keep)
        self.saved = (h, idx)
        if args:
            args = (_gather_seq(h, idx, N),) + tuple(_gather_seq(a, idx, N) for a in args[1:])
        kwargs = {k: _gather_seq(v, idx, N) for k, v in kwargs.items()}  # hidden_states=, masks, positions
        return args, kwargs

    def post(self, mod, args, output):
        if self.saved is None:
            return None
        h, idx = self.saved
        self.saved = None
        out = hidden_out(output)
        full = h.clone().scatter(1, idx[..., None].expand(-1, -1, h.shape[-1]), out.to(h.dtype))
        if isinstance(output, tuple):
            return (full,) + tuple(output[1:])
        if isinstance(output, list):
            return [full] + list(output[1:])
        return full


def _vision_mask(vision_mask: torch.Tensor, B: int, N: int, device) -> torch.Tensor:
    vm = vision_mask.to(device)
    if vm.ndim == 1:
        vm = vm[None].expand(B, -1)
    if vm.shape != (B, N):
        raise ValueError(f"vision_mask has shape {tuple(vision_mask.shape)}; the sequence is [B={B}, N={N}]")
    return vm


def _check_mask(vision_mask: Any) -> None:
    if not torch.is_tensor(vision_mask) or vision_mask.dtype != torch.bool or vision_mask.ndim not in (1, 2):
        raise TypeError("vision_mask must be a bool tensor of shape [N] or [B, N] (True at vision tokens), got "
                        f"{v.describe(vision_mask)}")


@contextmanager
def apply_skip_plan(model: nn.Module, plan: SkipPlan, vision_mask: torch.Tensor, *,
                    layers: nn.ModuleList | None = None) -> Iterator[nn.Module]:
    """``with apply_skip_plan(model, plan, vision_mask): model(...)`` runs the model under ``plan`` [A14].

    Forward hooks on the blocks implement the plan; they are removed on exit (also on error), leaving the model
    exactly as it was. Caching (``use_cache=True``) is not supported under a plan that drops tokens.
    """
    if not isinstance(plan, SkipPlan):
        raise TypeError(f"plan must be a SkipPlan, got {type(plan).__name__}")
    _check_mask(vision_mask)
    blocks = find_blocks(model, layers)
    L = len(blocks)
    plan.validate(L)
    skip_v, skip_a = set(plan.skip_vision), set(plan.skip_all)
    with hooks_removed([]) as handles:
        for i, block in enumerate(blocks):
            if i in skip_a:
                handles.append(block.register_forward_hook(
                    lambda mod, args, kwargs, output: _replace(output, hidden_in(args, kwargs)), with_kwargs=True))
            elif plan.dropped(i, L):
                d = _Dropper(lambda B, N, dev: ~_vision_mask(vision_mask, B, N, dev))
                handles.append(block.register_forward_pre_hook(d.pre, with_kwargs=True))
                handles.append(block.register_forward_hook(d.post))
            elif i in skip_v:
                def keep_v(mod, args, kwargs, output):
                    h = hidden_in(args, kwargs)
                    vm = _vision_mask(vision_mask, h.shape[0], h.shape[1], h.device)
                    return _replace(output, torch.where(vm[..., None], h, hidden_out(output)))
                handles.append(block.register_forward_hook(keep_v, with_kwargs=True))
        yield model


def _replace(output: Any, h: torch.Tensor) -> Any:
    if isinstance(output, tuple):
        return (h,) + tuple(output[1:])
    if isinstance(output, list):
        return [h] + list(output[1:])
    return h


@contextmanager
def fastv_pruning(model: nn.Module, vision_mask: torch.Tensor, K: int = 2, keep: float = 0.5, *,
                  layers: nn.ModuleList | None = None) -> Iterator[nn.Module]:
    """FastV-style attention-based vision-token pruning (baseline): in block K-1 the vision tokens are ranked by
    the attention they receive (mean over heads and all queries), and only the top ``keep`` fraction (rounded)
    takes part in blocks K..L-1. Needs attention probabilities from block K-1's attention module."""
    _check_mask(vision_mask)
    blocks = find_blocks(model, layers)
    L = len(blocks)
    if isinstance(K, bool) or not isinstance(K, int) or not 1 <= K <= L:
        raise ValueError(f"K must be an int in 1..{L} (prune after block K-1), got {K!r}")
    keep = v.probability("keep", keep)
    state: dict[str, torch.Tensor | None] = {"keep": None}

    def score(mod, args, output):
        w = output[1] if isinstance(output, (tuple, list)) and len(output) > 1 else None
        if not torch.is_tensor(w) or w.ndim != 4:
            raise ValueError("FastV needs attention probabilities; load Hugging Face models with "
                             "attn_implementation='eager'")
        B, N = w.shape[0], w.shape[-1]
        vm = _vision_mask(vision_mask, B, N, w.device)
        received = w.mean(1).mean(1)                              # [B, N] mean attention each key receives
        received = received.masked_fill(~vm, float("-inf"))
        n_v = int(vm[0].sum())
        n_keep = int(round(keep * n_v))
        top = received.topk(n_keep, dim=1).indices if n_keep > 0 else received[:, :0].long()
        kept = ~vm
        kept = kept.scatter(1, top, True) if n_keep > 0 else kept
        state["keep"] = kept

    with hooks_removed([]) as handles:
        handles.append(find_attention(blocks[K - 1]).register_forward_hook(score))
        for i in range(K, L):
            d = _Dropper(lambda B, N, dev: state["keep"])
            handles.append(blocks[i].register_forward_pre_hook(d.pre, with_kwargs=True))
            handles.append(blocks[i].register_forward_hook(d.post))
        yield model


# FLOPs accounting (per block; embeddings and the head are the same for every plan and left out)

@dataclass(frozen=True)
class BlockCost:
    """Per-token costs of one block: ``d`` hidden size, ``d_ff`` MLP width, ``mlp_mats`` (2 for a GELU MLP,
    3 for SwiGLU). FLOPs = 2 x multiply-adds."""

    d: int
    d_ff: int
    mlp_mats: int = 2

    def __post_init__(self) -> None:
        for name in ("d", "d_ff", "mlp_mats"):
            object.__setattr__(self, name, v.positive_int(name, getattr(self, name)))

    def flops(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """FLOPs of one block per example, given which tokens are computed (``query`` [B, N]) and which take part
        as keys/values (``key`` [B, N]; a superset of ``query``). Causal attention: a query sees keys at or
        before it.

            per query token: q and o projections 4d^2, MLP 2 mlp_mats d d_ff, scores + mix 4 d (# visible keys)
            per key token:   k and v projections 4d^2
        """
        q, k = query.double(), key.double()
        visible = torch.cumsum(k, 1)                               # keys at or before each position
        per_q = 4 * self.d ** 2 + 2 * self.mlp_mats * self.d * self.d_ff + 4 * self.d * visible
        return (q * per_q).sum(1) + k.sum(1) * 4 * self.d ** 2


def plan_flops(plan: SkipPlan, vision_mask: torch.Tensor, num_layers: int, cost: BlockCost,
               fastv: tuple[int, int] | None = None) -> float:
    """Block FLOPs of a forward pass under ``plan`` as a fraction of the full model's (mean over examples).

    ``fastv=(K, n_keep)``: additionally drop all but ``n_keep`` vision tokens from blocks K..L-1 (the kept
    positions do not change the count, the last ``n_keep`` vision positions are used)."""
    if not isinstance(plan, SkipPlan):
        raise TypeError(f"plan must be a SkipPlan, got {v.describe(plan)}")
    _check_mask(vision_mask)
    num_layers = v.positive_int("num_layers", num_layers)
    if not isinstance(cost, BlockCost):
        raise TypeError(f"cost must be a BlockCost(d, d_ff, mlp_mats), got {v.describe(cost)}")
    plan.validate(num_layers)
    if fastv is not None:
        if not isinstance(fastv, (tuple, list)) or len(fastv) != 2:
            raise TypeError(f"fastv must be (K, n_keep), got {v.describe(fastv)}")
        K = v.positive_int("fastv K", fastv[0])
        if K > num_layers:
            raise ValueError(f"fastv K must be in 1..{num_layers}, got {K}")
        n_keep = v.non_negative_int("fastv n_keep", fastv[1])
        n_v = int(vision_mask.sum(-1).max())
        if n_keep > n_v:
            raise ValueError(f"fastv n_keep must be <= the number of vision tokens ({n_v}), got {n_keep}")
        fastv = (K, n_keep)
    vm = vision_mask if vision_mask.ndim == 2 else vision_mask[None]
    allm = torch.ones_like(vm)
    full = cost.flops(allm, allm) * num_layers
    total = torch.zeros_like(full)
    for i in range(num_layers):
        if i in plan.skip_all:
            continue
        present = allm.clone()
        if plan.dropped(i, num_layers):
            present = ~vm
        elif fastv is not None and i >= fastv[0]:
            pos = torch.cumsum(vm.long().flip(1), 1).flip(1)      # rank from the end among vision tokens
            present = ~vm | (vm & (pos <= fastv[1]))
        query = present & ~vm if (i in plan.skip_vision and not plan.dropped(i, num_layers)) else present
        total += cost.flops(query, present)
    return float((total / full).mean())


__all__ = ["SkipPlan", "apply_skip_plan", "fastv_pruning", "BlockCost", "plan_flops"]
