"""A sparse MoE layer with grouped per-expert computation, complete expert partition, neuron reconstruction
and token-expert dropping [A09].

Setup (E' experts of F' SwiGLU neurons each, top-k router, P = number of parts per original expert):

    FFN_e(x)  = W2_e (silu(W1_e x) * W3_e x)                         (SwiGLU expert)
    p         = softmax(W_r x)  over the E' router rows                (Mixtral, OLMoE, Qwen2-MoE)
    K         = top-(k P) of p;  w_e = p_e / sum_{j in K} p_j  if renormalize (Mixtral) else p_e (OLMoE)
    w_e      <- P * w_e                                                (each child carries its parent's weight)
    y         = sum_{e in K, level_e > 0} w_e FFN_e^{(level_e)}(x)  (+ shared expert)

level_e comes from the drop policy (2 = full expert, 1 = its first ``major_fraction`` neurons, 0 = skipped).
Computation is grouped: the kept pairs are sorted by expert, each expert runs one matmul chain on the rows
gathered for it, and the results are scattered back with ``index_add_``; dropped pairs cost nothing.
"""

from __future__ import annotations

import copy
import math
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate as v

from .policies import DropPolicy

SUPPORTED_HF_BLOCKS = ("MixtralSparseMoeBlock", "OlmoeSparseMoeBlock", "Qwen2MoeSparseMoeBlock",
                       "Qwen3MoeSparseMoeBlock")


# helper functions

def _check_tokens(x: torch.Tensor, d: int, name: str = "x") -> torch.Tensor:
    """A finite tensor of token vectors of width ``d`` (any leading shape), flattened to ``[N, d]``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token vectors, got {v.describe(x)}")
    if x.ndim == 0 or x.shape[-1] != d:
        raise ValueError(f"{name} must have last dimension hidden_size = {d}, got shape {tuple(x.shape)}")
    v.non_empty(name, x)
    v.finite(name, x)
    return x.reshape(-1, d)


@torch.no_grad()
def _returns_pair(block: nn.Module, d: int, like: torch.Tensor) -> bool:
    """Whether a Hugging Face MoE block returns ``(hidden, router_logits)`` (transformers 4) or a tensor (5)."""
    was = block.training
    block.eval()
    try:
        out = block(torch.zeros(1, 1, d, dtype=like.dtype, device=like.device))
    finally:
        block.train(was)
    return isinstance(out, tuple)


# main class

class SparseMoE(nn.Module):
    """Top-k routed SwiGLU mixture of experts with grouped gather/scatter execution [A09].

    Args:
        hidden_size: model width d.
        ffn_size: neurons per expert F'.
        num_experts: number of (sub-)experts E' (router rows).
        top_k: experts per token *before* partition (the layer selects ``top_k * num_parts`` sub-experts).
        renormalize: Mixtral-style renormalisation of the top-k softmax weights (False: OLMoE-style).
        num_parts: P, how many sub-experts each original expert was split into (1 for an unpartitioned layer).
        major_fraction: share of each expert's neurons (its first ones) computed at level 1 (dual threshold).
        shared_ffn_size: width of an always-on shared SwiGLU expert (0 = none; DeepSeek-style, no gate).

    Attributes:
        drop_policy: a :class:`~icml26.lm.moe_sparsity.policies.DropPolicy` or ``None`` (compute every pair).
        last_stats: after each forward: ``pairs``, ``pair_drop_rate``, ``compute_drop`` (share of the routed
            expert FLOPs skipped), ``expert_flops`` (routed experts, 6 d n per pair with n neurons computed),
            ``router_flops`` (2 d E' per token), ``shared_flops`` (2 x the shared expert's and its gate's weights
            per token), ``flops`` (their sum) and ``moe_compute_drop`` (share of the whole layer's FLOPs without
            dropping that was skipped).
    """

    def __init__(self, hidden_size: int, ffn_size: int, num_experts: int, top_k: int, *, renormalize: bool = True,
                 num_parts: int = 1, major_fraction: float = 0.5, shared_ffn_size: int = 0) -> None:
        super().__init__()
        d, f = v.positive_int("hidden_size", hidden_size), v.positive_int("ffn_size", ffn_size)
        e = v.positive_int("num_experts", num_experts)
        top_k, num_parts = v.positive_int("top_k", top_k), v.positive_int("num_parts", num_parts)
        shared_ffn_size = v.non_negative_int("shared_ffn_size", shared_ffn_size)
        if not isinstance(renormalize, bool):
            raise TypeError(f"renormalize must be True or False, got {v.describe(renormalize)}")
        if top_k * num_parts > e:
            raise ValueError(f"top_k * num_parts = {top_k * num_parts} exceeds num_experts = {e}; lower top_k")
        self.hidden_size, self.ffn_size, self.num_experts = d, f, e
        self.top_k, self.num_parts, self.renormalize = top_k, num_parts, bool(renormalize)
        self.major_fraction = float(major_fraction)
        self.router = nn.Linear(d, e, bias=False)
        self.w_in = nn.Parameter(torch.empty(e, f, 2, d))   # [expert, neuron, (gate W1 | up W3), d]
        self.w_out = nn.Parameter(torch.empty(e, f, d))     # W2 transposed: neuron i's output column as a row
        nn.init.normal_(self.w_in, std=d ** -0.5)
        nn.init.normal_(self.w_out, std=f ** -0.5)
        nn.init.normal_(self.router.weight, std=d ** -0.5)
        self.shared: nn.Module | None = None
        self.shared_gate: nn.Module | None = None
        if shared_ffn_size:
            self.shared = SwiGLU(d, shared_ffn_size)
        self.drop_policy: DropPolicy | None = None
        self.last_stats: dict[str, float] = {}
        # transformers 4 decoder layers unpack ``hidden, router_logits = block(h)``; from_hf sets this when the
        # block it replaces returned such a pair, so the converted model keeps working there
        self.return_router_logits = False

    # properties

    @property
    def drop_policy(self) -> DropPolicy | None:
        """Which (token, expert) pairs are computed, and how much of each (``None``: every pair, in full)."""
        return self._drop_policy

    @drop_policy.setter
    def drop_policy(self, policy: DropPolicy | None) -> None:
        if policy is not None and not isinstance(policy, DropPolicy):
            raise TypeError(f"drop_policy must be a DropPolicy (e.g. ThresholdDrop(0.2)) or None, got "
                            f"{v.describe(policy)}")
        self._drop_policy = policy

    @property
    def selected(self) -> int:
        """Sub-experts selected per token: k * P."""
        return self.top_k * self.num_parts

    @property
    def major_size(self) -> int:
        """Neurons computed at level 1: round(major_fraction * F'), at least 1."""
        return max(1, min(self.ffn_size, int(round(self.major_fraction * self.ffn_size))))

    @property
    def major_fraction(self) -> float:
        return self._major_fraction

    @major_fraction.setter
    def major_fraction(self, value: float) -> None:
        value = v.finite_number("major_fraction", value)
        if not 0.0 < value <= 1.0:
            raise ValueError(f"major_fraction must lie in (0, 1] (share of each expert's neurons in the major part), "
                             f"got {value}")
        self._major_fraction = value

    # routing

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Routing weights ``w`` (parent-equivalent, sorted descending) and sub-expert ids, each ``[N, kP]``."""
        x = _check_tokens(x, self.hidden_size)
        return self._select(self.router(x), x.dtype)

    def _select(self, logits: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        probs = torch.softmax(logits.float(), dim=-1)
        w, idx = torch.topk(probs, self.selected, dim=-1)
        if self.renormalize:
            w = w / w.sum(dim=-1, keepdim=True)
        return (w * self.num_parts).to(dtype), idx

    # experts

    def _ffn(self, x: torch.Tensor, e: int, n: int) -> torch.Tensor:
        """The first ``n`` neurons of expert ``e`` on rows ``x``: W2[:, :n] (silu(W1[:n] x) * W3[:n] x)."""
        h = F.linear(x, self.w_in[e, :n].reshape(2 * n, self.hidden_size)).view(-1, n, 2)
        return (F.silu(h[..., 0]) * h[..., 1]) @ self.w_out[e, :n]

    def experts_forward(self, x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        """Grouped execution: gather the kept pairs per expert (full-level rows first), one matmul chain per
        expert and level, scale by w, scatter-add back. Returns ``[N, d]``."""
        x = _check_tokens(x, self.hidden_size)
        v.shape("idx", idx, (x.shape[0], self.selected))
        v.shape("w", w, (x.shape[0], self.selected))
        v.shape("level", level, (x.shape[0], self.selected))
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.num_experts):
            raise ValueError(f"idx must hold expert ids in [0, {self.num_experts}), got {int(idx.min())} to "
                             f"{int(idx.max())}")
        if level.numel() and not bool(((level == 0) | (level == 1) | (level == 2)).all()):
            raise ValueError("level must hold 0 (drop), 1 (major part) or 2 (full expert) per pair; a drop policy "
                             "returned something else")
        n_tok, k = idx.shape
        flat_lvl = level.reshape(-1)
        sel = torch.nonzero(flat_lvl > 0).squeeze(1)
        out = torch.zeros_like(x)
        f, m, e_total = self.ffn_size, self.major_size, self.num_experts
        self.last_stats = {"pairs": float(n_tok * k)}
        if sel.numel() == 0:
            self.last_stats |= {"pair_drop_rate": 1.0, "compute_drop": 1.0, "expert_flops": 0.0}
            return out
        e_sel = idx.reshape(-1)[sel]
        key = e_sel * 2 + (flat_lvl[sel] == 1).to(e_sel.dtype)   # per expert: full rows, then major-only rows
        order = torch.argsort(key, stable=True)
        sel = sel[order]
        counts = torch.bincount(key, minlength=2 * e_total).tolist()
        tok = torch.div(sel, k, rounding_mode="floor")
        xs = x[tok]
        ys, pos = [], 0
        for e in range(e_total):
            nf, nm = counts[2 * e], counts[2 * e + 1]
            if nf:
                ys.append(self._ffn(xs[pos:pos + nf], e, f))
            if nm:
                ys.append(self._ffn(xs[pos + nf:pos + nf + nm], e, m))
            pos += nf + nm
        y = torch.cat(ys) * w.reshape(-1)[sel].unsqueeze(1)
        out.index_add_(0, tok, y)
        n_full, n_major = sum(counts[0::2]), sum(counts[1::2])
        kept = n_full + n_major * m / f
        self.last_stats |= {"pair_drop_rate": 1.0 - (n_full + n_major) / (n_tok * k),
                            "compute_drop": 1.0 - kept / (n_tok * k),
                            "expert_flops": 6.0 * self.hidden_size * (n_full * f + n_major * m)}
        return out

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """The layer's output (same shape as the input); with ``return_router_logits`` (set by :meth:`from_hf`
        for a transformers-4 block) the pair ``(output, router_logits [N, E'])`` that such decoder layers unpack."""
        out, logits = self._forward(hidden_states)
        return (out, logits) if self.return_router_logits else out

    def output(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The layer's output tensor alone, whatever ``return_router_logits`` says."""
        return self._forward(hidden_states)[0]

    def _forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(hidden_states, torch.Tensor):
            raise TypeError(f"hidden_states must be a torch.Tensor, got {v.describe(hidden_states)}")
        if hidden_states.ndim == 0 or hidden_states.shape[-1] != self.hidden_size:
            raise ValueError(f"SparseMoE expects inputs with last dimension {self.hidden_size}, "
                             f"got shape {tuple(hidden_states.shape)}")
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, self.hidden_size)
        logits = self.router(x)
        w, idx = self._select(logits, x.dtype)
        if self.drop_policy is None:
            level = torch.full(idx.shape, 2, dtype=torch.int8)
        else:
            level = self.drop_policy(w, idx, self.num_experts, self.num_parts)
        out = self.experts_forward(x, w, idx, level)
        self._count_fixed_flops(x.shape[0])
        if self.shared is not None:
            s = self.shared(x)
            if self.shared_gate is not None:
                s = torch.sigmoid(self.shared_gate(x)) * s
            out = out + s
        return out.view(shape), logits

    def _count_fixed_flops(self, n_tok: int) -> None:
        """Add the work every token pays whatever the policy: the router (2 d E') and the shared expert(s) with
        their gate (2 x weight count: multiply-add per weight); and the layer-level totals."""
        st = self.last_stats
        st["router_flops"] = 2.0 * self.hidden_size * self.num_experts * n_tok
        shared = 0
        for mod in (self.shared, self.shared_gate):
            if mod is not None:
                shared += sum(m.weight.numel() for m in mod.modules() if isinstance(m, nn.Linear))
        st["shared_flops"] = 2.0 * shared * n_tok
        st["flops"] = st["expert_flops"] + st["router_flops"] + st["shared_flops"]
        full = 6.0 * self.hidden_size * self.ffn_size * st["pairs"] + st["router_flops"] + st["shared_flops"]
        st["moe_compute_drop"] = 1.0 - st["flops"] / full

    # Hugging Face adapters

    @classmethod
    def from_hf(cls, block: nn.Module) -> "SparseMoE":
        """Build a SparseMoE with the weights of a Hugging Face sparse MoE block (copied; the block is unchanged).

        Supported: ``MixtralSparseMoeBlock`` (renormalised top-k), ``OlmoeSparseMoeBlock``,
        ``Qwen2MoeSparseMoeBlock`` (shared expert with sigmoid gate, kept as is) and ``Qwen3MoeSparseMoeBlock``
        (``norm_topk_prob`` from the router); fused (transformers >= 5) and per-expert ``ModuleList`` layouts.
        """
        if not isinstance(block, nn.Module):
            raise TypeError(f"block must be a Hugging Face sparse MoE block (an nn.Module), got {v.describe(block)}")
        name = type(block).__name__
        if name not in SUPPORTED_HF_BLOCKS:
            raise ValueError(f"unsupported MoE block {name}; SparseMoE.from_hf takes one of {', '.join(SUPPORTED_HF_BLOCKS)}")
        gate, experts = block.gate, block.experts
        router_w = gate.weight if hasattr(gate, "weight") else gate.linear.weight
        e_num, d = router_w.shape
        top_k = getattr(gate, "top_k", None) or getattr(block, "top_k", None)
        renorm = True if name.startswith("Mixtral") else bool(getattr(gate, "norm_topk_prob",
                                                                      getattr(block, "norm_topk_prob", False)))
        act = getattr(experts, "act_fn", None)
        if act is not None and not (isinstance(act, nn.SiLU) or "silu" in type(act).__name__.lower()):
            raise ValueError(f"{name} uses activation {type(act).__name__}; SparseMoE implements SwiGLU (silu) experts")
        if hasattr(experts, "gate_up_proj"):  # transformers >= 5: fused [E, 2F, d] (gate rows, then up rows)
            gu, down = experts.gate_up_proj.detach(), experts.down_proj.detach()
            f = gu.shape[1] // 2
            w_in = gu.view(e_num, 2, f, d).transpose(1, 2)
            w_out = down.transpose(1, 2)
        elif isinstance(experts, nn.ModuleList):  # transformers 4: one MLP per expert
            names = ("w1", "w3", "w2") if hasattr(experts[0], "w1") else ("gate_proj", "up_proj", "down_proj")
            w1 = torch.stack([getattr(ex, names[0]).weight.detach() for ex in experts])
            w3 = torch.stack([getattr(ex, names[1]).weight.detach() for ex in experts])
            w_in = torch.stack([w1, w3], dim=2)
            w_out = torch.stack([getattr(ex, names[2]).weight.detach() for ex in experts]).transpose(1, 2)
            f = w1.shape[1]
        else:
            raise ValueError(f"{name}.experts has an unknown layout ({type(experts).__name__}); expected fused "
                             "gate_up_proj/down_proj tensors or a ModuleList of expert MLPs")
        moe = cls(d, f, e_num, int(top_k), renormalize=renorm)
        moe = moe.to(dtype=router_w.dtype, device=router_w.device)
        with torch.no_grad():
            moe.router.weight.copy_(router_w)
            moe.w_in.copy_(w_in)
            moe.w_out.copy_(w_out)
        if getattr(block, "shared_expert", None) is not None:
            moe.shared = copy.deepcopy(block.shared_expert)
            moe.shared_gate = copy.deepcopy(getattr(block, "shared_expert_gate", None))
        moe.return_router_logits = _returns_pair(block, d, router_w)
        return moe

    def extra_repr(self) -> str:
        return (f"d={self.hidden_size}, ffn={self.ffn_size}, experts={self.num_experts}, top_k={self.top_k}, "
                f"parts={self.num_parts}, renormalize={self.renormalize}, major_fraction={self.major_fraction}")


class SwiGLU(nn.Module):
    """A dense SwiGLU MLP (used as a shared expert)."""

    def __init__(self, d: int, f: int) -> None:
        super().__init__()
        d, f = v.positive_int("d", d), v.positive_int("f", f)
        self.gate_proj, self.up_proj = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# model-level helpers

def moe_layers(model: nn.Module) -> list[SparseMoE]:
    """Every :class:`SparseMoE` in ``model``, in module order."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {v.describe(model)}")
    return [m for m in model.modules() if isinstance(m, SparseMoE)]


def convert_hf_moe(model: nn.Module, *, inplace: bool = False) -> nn.Module:
    """Replace every supported Hugging Face sparse MoE block of ``model`` by an equivalent :class:`SparseMoE`.

    Returns the converted model (a deep copy unless ``inplace=True``; the user's model is then left unchanged).
    Raises ``ValueError`` when the model has no supported MoE block.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a Hugging Face MoE causal LM), got {type(model).__name__}")
    if not isinstance(inplace, bool):
        raise TypeError(f"inplace must be True or False, got {v.describe(inplace)}")
    target = model if inplace else copy.deepcopy(model)
    found = 0
    for parent in list(target.modules()):
        for child_name, child in list(parent.named_children()):
            if type(child).__name__ in SUPPORTED_HF_BLOCKS:
                setattr(parent, child_name, SparseMoE.from_hf(child))
                found += 1
    if not found and not moe_layers(target):
        raise ValueError(f"{type(model).__name__} has no sparse MoE block ({', '.join(SUPPORTED_HF_BLOCKS)}); "
                         "pass a Mixtral / OLMoE / Qwen2-MoE model, or build the layer with SparseMoE directly")
    return target


def set_drop_policy(model: nn.Module, policy: DropPolicy | None) -> list[SparseMoE]:
    """Set ``policy`` on every SparseMoE of ``model`` (``None`` switches dropping off); returns the layers."""
    if policy is not None and not isinstance(policy, DropPolicy):
        raise TypeError(f"policy must be a DropPolicy (e.g. ThresholdDrop(0.2)) or None, got {type(policy).__name__}")
    layers = moe_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no SparseMoE layer; convert it first with convert_hf_moe(model)")
    for m in layers:
        m.drop_policy = policy
    return layers


def model_stats(layers: Iterable[SparseMoE]) -> dict[str, float]:
    """Pair-weighted drop rates over the layers' ``last_stats``, the summed ``flops`` of the layers (routed
    experts, routers and shared experts) and ``moe_compute_drop``, the share of those FLOPs skipped."""
    if isinstance(layers, nn.Module):
        raise TypeError("layers must be a list of SparseMoE layers, not one module; pass moe_layers(model)")
    layers = list(v.non_empty("layers", list(layers)))
    for m in layers:
        if not isinstance(m, SparseMoE):
            raise TypeError(f"layers must hold SparseMoE layers, got a {type(m).__name__}")
        if "flops" not in m.last_stats:
            raise ValueError("a layer has no statistics yet: run a forward pass through the model (or layer) "
                             "before model_stats")
    pairs = sum(m.last_stats["pairs"] for m in layers)
    out = {k: sum(m.last_stats[k] * m.last_stats["pairs"] for m in layers) / pairs
           for k in ("pair_drop_rate", "compute_drop")}
    flops = sum(m.last_stats["flops"] for m in layers)
    full = sum(m.last_stats["flops"] / (1.0 - m.last_stats["moe_compute_drop"]) for m in layers
               if m.last_stats["moe_compute_drop"] < 1.0)
    out["flops"] = flops
    out["moe_compute_drop"] = 1.0 - flops / full if full > 0 else math.nan
    return out


__all__ = ["SparseMoE", "SwiGLU", "moe_layers", "convert_hf_moe", "set_drop_policy", "model_stats",
           "SUPPORTED_HF_BLOCKS"]
