"""Complete expert partition, neuron importance and reconstruction [A09].

Complete expert partition (post-training, P parts). Split expert e's F neurons into P disjoint groups G_p;
sub-expert (e, p) takes rows G_p of W1 and W3 and columns G_p of W2, so FFN_e = sum_p FFN_{e,p} exactly. The
router grows to E*P rows, row (e, p) a copy of row e; selecting the top k*P children over duplicated logits
selects complete parents, and each child carries its parent's weight (SparseMoE scales by P), so the
partitioned layer equals the original at initialisation. Fine-tuning then lets the children's rows diverge.

Reconstruction (inference). Neuron importance from calibration tokens routed to expert e (our choice):

    I_i = E_{x routed to e}[ w_e(x) * |silu(W1_i x) * (W3_i x)| ] * ||W2[:, i]||

Permuting an expert's neurons changes nothing; sorting them by descending importance puts the major part (top
``major_fraction``) first, which is what a dual-threshold level-1 pair computes.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from icml26.harness import validate as v

from .moe import SparseMoE, _check_tokens


def _check_moe(moe) -> None:
    if not isinstance(moe, SparseMoE):
        raise TypeError(f"expected a SparseMoE layer, got {type(moe).__name__}; convert HF blocks with "
                        "SparseMoE.from_hf(block) or convert_hf_moe(model)")


def _check_order(order: torch.Tensor | None, e: int, f: int) -> torch.Tensor:
    if order is None:
        return torch.arange(f).expand(e, f)
    if not isinstance(order, torch.Tensor):
        order = torch.as_tensor(v.finite("order", order))
    if order.is_floating_point() or order.is_complex():
        raise TypeError(f"order must hold integer neuron indices, got a {order.dtype} tensor")
    if order.shape == (f,):
        order = order.expand(e, f)
    if order.shape != (e, f) or not torch.equal(torch.sort(order, dim=1).values, torch.arange(f).expand(e, f)):
        raise ValueError(f"order must be a permutation of range({f}) per expert, shape ({f},) or ({e}, {f}); "
                         f"got shape {tuple(order.shape)}")
    return order


@torch.no_grad()
def permute_neurons(moe: SparseMoE, order: torch.Tensor) -> SparseMoE:
    """A copy of ``moe`` whose expert e has its neurons in order ``order[e]`` (output unchanged)."""
    _check_moe(moe)
    order = _check_order(order, moe.num_experts, moe.ffn_size)
    out = copy.deepcopy(moe)
    ar = torch.arange(moe.num_experts)[:, None]
    out.w_in.copy_(moe.w_in[ar, order])
    out.w_out.copy_(moe.w_out[ar, order])
    return out


@torch.no_grad()
def partition_experts(moe: SparseMoE, num_parts: int, order: torch.Tensor | None = None) -> SparseMoE:
    """Complete expert partition: each expert's neurons (optionally permuted by ``order``, per expert) are cut
    into ``num_parts`` contiguous groups of F/P neurons; the router rows are duplicated. Returns a new layer
    that equals ``moe`` at initialisation (the original is left unchanged; its drop policy is not copied)."""
    _check_moe(moe)
    num_parts = v.positive_int("num_parts", num_parts)
    if moe.ffn_size % num_parts:
        raise ValueError(f"num_parts={num_parts} must divide the expert width {moe.ffn_size}")
    base = moe if order is None else permute_neurons(moe, order)
    p, e, f, d = num_parts, moe.num_experts, moe.ffn_size // num_parts, moe.hidden_size
    out = SparseMoE(d, f, e * p, moe.top_k, renormalize=moe.renormalize, num_parts=moe.num_parts * p,
                    major_fraction=moe.major_fraction).to(dtype=moe.w_in.dtype, device=moe.w_in.device)
    out.router.weight.copy_(moe.router.weight.repeat_interleave(p, dim=0))
    out.w_in.copy_(base.w_in.reshape(e * p, f, 2, d))    # child e*P + q: neurons q*f .. (q+1)*f - 1 of expert e
    out.w_out.copy_(base.w_out.reshape(e * p, f, d))
    out.shared, out.shared_gate = copy.deepcopy(moe.shared), copy.deepcopy(moe.shared_gate)
    out.return_router_logits = moe.return_router_logits
    return out


@torch.no_grad()
def neuron_importance(moe: SparseMoE, calib_x: torch.Tensor) -> torch.Tensor:
    """I[e, i] = mean over calibration tokens routed to e of w_e |silu(W1_i x) (W3_i x)|, times ||W2[:, i]||."""
    _check_moe(moe)
    x = _check_tokens(calib_x, moe.hidden_size, "calib_x")
    w, idx = moe.route(x)
    imp = torch.zeros(moe.num_experts, moe.ffn_size)
    for e in range(moe.num_experts):
        tok, slot = torch.nonzero(idx == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        h = F.linear(x[tok], moe.w_in[e].reshape(2 * moe.ffn_size, -1)).view(-1, moe.ffn_size, 2)
        act = (F.silu(h[..., 0]) * h[..., 1]).abs()
        imp[e] = (w[tok, slot, None] * act).mean(0).float()
    return imp * moe.w_out.detach().float().norm(dim=-1)


@torch.no_grad()
def reconstruct_experts(moe: SparseMoE, importance: torch.Tensor, major_fraction: float = 0.5) -> SparseMoE:
    """Reorder each expert's neurons by descending importance (exact) and set the major part to the top
    ``major_fraction`` of them: the partial partition that dual-threshold dropping uses at level 1."""
    _check_moe(moe)
    if not isinstance(importance, torch.Tensor):
        importance = torch.as_tensor(v.finite("importance", importance))
    v.finite("importance", importance)
    v.in_range("major_fraction", major_fraction, 0.0, 1.0, low_open=True)
    if importance.shape != (moe.num_experts, moe.ffn_size):
        raise ValueError(f"importance must have shape ({moe.num_experts}, {moe.ffn_size}), got {tuple(importance.shape)}")
    out = permute_neurons(moe, torch.argsort(importance, dim=1, descending=True, stable=True))
    out.major_fraction = major_fraction
    out.drop_policy = moe.drop_policy
    return out


__all__ = ["partition_experts", "permute_neurons", "neuron_importance", "reconstruct_experts"]
