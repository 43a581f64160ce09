"""Plackett–Luce utilities and the KL-regularised Plackett–Luce ranking loss of AutoTool [B18].

Plackett–Luce (PL) model over items with scores s: a ranking sigma (sigma(j) = the item placed j-th) of the top K
of n items has probability

    P(sigma | s) = prod_{j=1..K} exp s_sigma(j) / sum_{l not in sigma(1..j-1)} exp s_l

Gumbel-top-K (Yellott 1977; Kool et al. 2019): adding i.i.d. Gumbel(0, 1) noise to the scores and taking the K
largest gives a draw of sigma from exactly this law, i.e. K draws without replacement from softmax(s).

KL-regularised PL ranking loss (our reconstruction of AutoTool's Phase II; the PL generalisation of DPO): with
K candidate tools c_1..c_K at a decision state h, returns R_k, sigma the ranking by R and
u_k = beta [log pi_theta(c_k|h) - log pi_ref(c_k|h)],

    L = - sum_{j=1..K-1} [ u_sigma(j) - log sum_{l >= j} exp u_sigma(l) ]  = - log P(sigma | u).

At K = 2 this is DPO's sigmoid loss -log sigmoid(beta [(log pi_w - log ref_w) - (log pi_l - log ref_l)]).

Ties (``ties="group"``, the default): candidates with equal returns are not ranked against each other; each
candidate competes only with the strictly worse ones,

    L = - sum_k [ u_k - log( exp u_k + sum_{l: R_l < R_k} exp u_l ) ],

which equals the PL loss above when all returns differ and is exactly 0 (no gradient) when they all tie. Breaking
ties at random instead (``ties="random"``) injects zero-mean ranking noise into every tied row.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["plackett_luce_log_prob", "sample_plackett_luce", "rank_by_returns", "kl_pl_loss"]


# helper functions

def _check_scores(scores: Tensor, name: str = "scores") -> None:
    if not isinstance(scores, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(scores).__name__}")
    if scores.ndim < 1 or scores.shape[-1] < 1:
        raise ValueError(f"{name} must have at least one item along the last axis, got shape {tuple(scores.shape)}")
    if not scores.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got {scores.dtype}")


def _masked(scores: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return scores
    if mask.shape != scores.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} must equal the scores' shape {tuple(scores.shape)}")
    if not bool(mask.any(-1).all()):
        raise ValueError("every row of mask needs at least one True item (an empty set of items cannot be ranked)")
    return scores.masked_fill(~mask.bool(), float("-inf"))


# main functions

def plackett_luce_log_prob(scores: Tensor, ranking: Tensor, mask: Tensor | None = None) -> Tensor:
    """log P(ranking | scores) under Plackett–Luce, batched over leading axes [B18].

    Args:
        scores: ``[..., n]`` real scores (log-weights) of the n items.
        ranking: ``[..., K]`` item indices, best first, K <= n distinct valid items (a top-K ranking: the
            denominators also include the n - K unranked items).
        mask: optional ``[..., n]`` bool, False for items that are absent (e.g. tools not in the inventory).

    Returns ``[...]``: sum_j [s_sigma(j) - logsumexp over the items not yet placed], via a reversed logcumsumexp.
    """
    _check_scores(scores)
    if not isinstance(ranking, Tensor) or ranking.dtype not in (torch.int64, torch.int32):
        raise TypeError("ranking must be an integer (long) tensor of item indices")
    if ranking.shape[:-1] != scores.shape[:-1] or ranking.shape[-1] < 1 or ranking.shape[-1] > scores.shape[-1]:
        raise ValueError(f"ranking shape {tuple(ranking.shape)} must be [..., K] with 1 <= K <= n and the same "
                         f"leading axes as scores {tuple(scores.shape)}")
    ranking = ranking.long()
    if bool(((ranking < 0) | (ranking >= scores.shape[-1])).any()):
        raise ValueError(f"ranking indices must lie in [0, {scores.shape[-1]})")
    s = _masked(scores, mask)
    picked = s.gather(-1, ranking)                                        # s_sigma(1..K)
    if not bool(torch.isfinite(picked).all()):
        raise ValueError("ranking places a masked-out item or scores are not finite")
    placed = torch.zeros_like(s, dtype=torch.bool).scatter(-1, ranking, True)
    if bool((placed.sum(-1) != ranking.shape[-1]).any()):
        raise ValueError("ranking must not repeat an item")
    rest = torch.logsumexp(s.masked_fill(placed, float("-inf")), dim=-1, keepdim=True)   # unranked items
    suffix = torch.logcumsumexp(picked.flip(-1), dim=-1).flip(-1)         # log sum_{l >= j} exp s_sigma(l)
    denom = torch.logaddexp(suffix, rest.expand_as(suffix)) if s.shape[-1] > ranking.shape[-1] else suffix
    return (picked - denom).sum(-1)


def sample_plackett_luce(scores: Tensor, k: int, generator: torch.Generator | None = None,
                         mask: Tensor | None = None) -> Tensor:
    """Draw a top-k ranking from PL(scores) by Gumbel-top-k: ``topk(scores + Gumbel noise)`` [B18].

    Equivalent to drawing k items without replacement from softmax(scores). Returns ``[..., k]`` long indices,
    best first. ``mask`` (``[..., n]`` bool) excludes items; each row needs at least k valid items.
    """
    _check_scores(scores)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if k > scores.shape[-1]:
        raise ValueError(f"k = {k} exceeds the number of items n = {scores.shape[-1]}; use k <= n")
    if not bool(torch.isfinite(scores).all()):
        raise ValueError("scores must be finite (NaN/inf scores give no distribution to sample from)")
    if mask is not None and bool((mask.sum(-1) < k).any()):
        raise ValueError(f"every row of mask needs at least k = {k} valid items")
    s = _masked(scores.detach(), mask)
    u = torch.rand(s.shape, generator=generator, dtype=s.dtype, device=s.device)
    tiny = torch.finfo(s.dtype).tiny
    gumbel = -torch.log((-torch.log(u.clamp_min(tiny))).clamp_min(tiny))
    return torch.topk(s + gumbel, k, dim=-1).indices


def rank_by_returns(returns: Tensor, ties: str = "random", generator: torch.Generator | None = None) -> Tensor:
    """Ranking (best first) of the K candidates in each row of ``returns`` ``[..., K]``.

    ``ties="random"`` breaks ties uniformly at random (a random permutation, then a stable sort);
    ``ties="first"`` keeps the candidates' order among equals.
    """
    _check_scores(returns, "returns")
    if ties not in ("random", "first"):
        raise ValueError(f"ties must be 'random' or 'first', got {ties!r}")
    if not bool(torch.isfinite(returns).all()):
        raise ValueError("returns must be finite")
    if ties == "first":
        return torch.sort(returns, dim=-1, descending=True, stable=True).indices
    perm = torch.rand(returns.shape, generator=generator, device=returns.device).argsort(-1)
    order = torch.sort(returns.gather(-1, perm), dim=-1, descending=True, stable=True).indices
    return perm.gather(-1, order)


def _grouped_pl_nll(u: Tensor, rewards: Tensor) -> Tensor:
    """-sum_k [u_k - log(exp u_k + sum_{l: R_l < R_k} exp u_l)] per row: PL with no terms between tied candidates."""
    worse = rewards[..., None, :] < rewards[..., :, None]                  # [B, K, K]: l strictly worse than k
    eye = torch.eye(u.shape[-1], dtype=torch.bool, device=u.device)
    pool = u[..., None, :].expand(*u.shape, u.shape[-1]).masked_fill(~(worse | eye), float("-inf"))
    terms = u - torch.logsumexp(pool, dim=-1)                             # 0 where no candidate is worse
    return -terms.sum(-1)


def kl_pl_loss(logp: Tensor, logp_ref: Tensor, rewards: Tensor, *, beta: float = 0.1, ties: str = "group",
               generator: torch.Generator | None = None, reduction: str = "mean") -> Tensor:
    """KL-regularised Plackett–Luce ranking loss [B18] (our reconstruction; PL-DPO).

    Args:
        logp: ``[B, K]`` log pi_theta(c_k | h_b) of K candidates at B decision states (differentiable).
        logp_ref: ``[B, K]`` the same under the frozen reference policy.
        rewards: ``[B, K]`` returns of the candidates; the ranking sorts them best first.
        beta: KL strength; u_k = beta (logp_k - logp_ref_k).
        ties: ``"group"`` (default): no loss terms between candidates with equal returns (an all-tied row gives
            loss 0); ``"random"`` / ``"first"``: order equal returns at random / in the candidates' order.
        reduction: ``"mean"`` over decision states, ``"sum"`` or ``"none"`` (``[B]``).

    L_b = -sum_{j<K} [u_sigma(j) - log sum_{l>=j} exp u_sigma(l)]; inventory normalisers cancel because they
    are shared by all candidates, so L depends only on the candidates' score differences to the reference.
    """
    for name, t in (("logp", logp), ("logp_ref", logp_ref), ("rewards", rewards)):
        _check_scores(t, name)
    if logp.ndim != 2 or logp.shape[-1] < 2:
        raise ValueError(f"logp must be [B, K] with K >= 2 candidates, got shape {tuple(logp.shape)}")
    if logp_ref.shape != logp.shape or rewards.shape != logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, logp_ref {tuple(logp_ref.shape)} and rewards "
                         f"{tuple(rewards.shape)} must have the same [B, K] shape")
    if not (isinstance(beta, (int, float)) and beta > 0):
        raise ValueError(f"beta must be a positive number, got {beta!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if ties not in ("group", "random", "first"):
        raise ValueError(f"ties must be 'group', 'random' or 'first', got {ties!r}")
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError("rewards must be finite")
    if not (bool(torch.isfinite(logp).all()) and bool(torch.isfinite(logp_ref).all())):
        raise ValueError("logp and logp_ref must be finite (a candidate with probability 0 cannot be ranked)")
    u = beta * (logp - logp_ref.detach())
    if ties == "group":
        loss = _grouped_pl_nll(u, rewards.detach())
    else:
        loss = -plackett_luce_log_prob(u, rank_by_returns(rewards.detach(), ties=ties, generator=generator))
    return loss if reduction == "none" else (loss.mean() if reduction == "mean" else loss.sum())
