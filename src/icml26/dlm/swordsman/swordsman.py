"""[A15] Swordsman: entropy-driven adaptive block partition for masked diffusion LM decoding.

One forward pass gives, per masked response position i, the marginal p_i, its confidence c_i = max_v p_i(v)
and entropy H_i = -sum_v p_i(v) log p_i(v).

1. Partition (only at a block start s, reusing the block's first forward pass). For j in [s+b_min, s+b_max],
   the adjacent-token entropy shift is  dH_j = H_j - H_{j-1}  (``shift="abs"``: |dH_j|). Candidate ends are the
   j with dH_j >= delta: entropy rises at the head of the next constituent (the entropy-reduction hypothesis).
   The block is [s, e*) with e* the candidate of largest shift (earliest on ties; ``select="first"``: the
   earliest candidate); with no candidate, e* = s + b_default.
2. Dynamic threshold inside a block of n positions with u already unmasked:
       tau(u) = tau_hi - (tau_hi - tau_lo) * u / n,
   commit every in-block i with c_i >= tau(u); if none, commit argmax_i c_i.
3. Prefix KV cache: prompt and finished blocks are cached and refreshed once per block (the framework's cache).

With delta = inf, b_default = b and tau_hi = tau_lo = tau, Swordsman is exactly Fast-dLLM's
``ConfidenceThresholdDecoder(b, tau)``.
"""

from __future__ import annotations

import math

import torch

from icml26.harness import validate as v
from icml26.testbeds.diffusion_lm.decoding import (
    MaskedDiffusionDecoder,
    RoundView,
    Selection,
    check_positive_int,
    check_tau,
    threshold_commit,
)
from icml26.testbeds.diffusion_lm.decoding import token_entropy as _token_entropy

SHIFTS = ("rise", "abs")
SELECTS = ("largest", "first")


# helper functions

def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of softmax(logits) over the last axis, shape ``logits.shape[:-1]`` [A15].

    ``-inf`` logits (banned tokens) are fine; NaN or ``+inf`` logits, a 0-d tensor or an empty vocabulary axis
    are refused.
    """
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch Tensor (..., vocab), got {v.describe(logits)}")
    if logits.dim() == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty last (vocabulary) axis, got shape {tuple(logits.shape)}")
    if logits.is_floating_point():
        bad = int((torch.isnan(logits) | (logits == float("inf"))).sum())
        if bad:
            raise ValueError(f"logits has {bad} NaN or +inf entries (of {logits.numel()}); -inf is allowed "
                             "for banned tokens")
    return _token_entropy(logits)


def entropy_shift_boundary(entropies: torch.Tensor, start: int | torch.Tensor, b_min: int = 2, b_max: int = 16,
                           delta: float = 0.5, shift: str = "rise", b_default: int = 8,
                           select: str = "largest") -> torch.Tensor:
    """Block end e* for blocks starting at ``start`` from per-position entropies (G,) or (A, G) [A15].

    Window j in [s + b_min, min(s + b_max, G - 1)]; candidates dH_j >= delta; returns the candidate with the
    largest shift (earliest on ties) or, with ``select="first"``, the earliest; else min(s + b_default, G).
    Returns a tensor of the same leading shape as ``start`` (an int start and 1-D entropies give a 0-d tensor).
    """
    if shift not in SHIFTS:
        raise ValueError(f"shift must be one of {SHIFTS}, got {shift!r}")
    if select not in SELECTS:
        raise ValueError(f"select must be one of {SELECTS}, got {select!r}")
    b_min, b_max, b_default = (check_positive_int(val, n) for val, n in ((b_min, "b_min"), (b_max, "b_max"), (b_default, "b_default")))
    if not b_min <= b_max:
        raise ValueError(f"need b_min <= b_max, got b_min={b_min}, b_max={b_max}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or math.isnan(delta) or delta < 0:
        raise ValueError(f"delta must be a number >= 0 (inf disables adaptive ends), got {delta!r}")
    H = v.finite("entropies", entropies)
    H = torch.as_tensor(H, dtype=torch.float64)
    v.ndim("entropies", H, 1, 2)
    if H.shape[-1] == 0:
        raise ValueError(f"entropies is empty (shape {tuple(H.shape)}); pass one entropy per response position")
    if H.numel() and float(H.min()) < 0:
        raise ValueError(f"entropies must be >= 0 (Shannon entropies in nats), got a minimum of {float(H.min())}")
    single = H.dim() == 1
    H = H[None] if single else H
    G = H.shape[1]
    start_t = torch.as_tensor(start)
    v.indices("start", start_t, G)
    if start_t.dim() > 1 or start_t.numel() not in (1, H.shape[0]):
        raise ValueError(f"start must be an int or hold one block start per row of entropies ({H.shape[0]}), "
                         f"got shape {tuple(start_t.shape)}")
    s = start_t.to(torch.long).reshape(-1).expand(H.shape[0])
    dH = torch.full_like(H, float("-inf"))
    dH[:, 1:] = H[:, 1:] - H[:, :-1]
    if shift == "abs":
        dH = dH.abs()
    j = torch.arange(G)[None]
    window = (j >= s[:, None] + b_min) & (j <= s[:, None] + b_max)
    cand = window & (dH >= delta)
    if select == "largest":
        e = dH.masked_fill(~cand, float("-inf")).argmax(1)  # first index of the maximum: earliest on ties
    else:
        e = cand.long().argmax(1)
    e = torch.where(cand.any(1), e, (s + b_default).clamp_max(G))
    return e[0] if single and torch.as_tensor(start).dim() == 0 else e


def dynamic_threshold(u: int | torch.Tensor, n: int | torch.Tensor, tau_hi: float = 0.95, tau_lo: float = 0.7):
    """tau(u) = tau_hi - (tau_hi - tau_lo) * u / n: strict while the block is empty, relaxing as it fills [A15].

    ``u`` (positions already unmasked, 0 <= u <= n) and ``n`` (block size, >= 1) are ints or tensors of one shape.
    """
    tau_hi, tau_lo = check_tau(tau_hi, "tau_hi"), check_tau(tau_lo, "tau_lo")
    if tau_lo > tau_hi:
        raise ValueError(f"need tau_lo <= tau_hi, got tau_lo={tau_lo}, tau_hi={tau_hi}")
    u_t, n_t = torch.as_tensor(u), torch.as_tensor(n)
    for name, t in (("u", u_t), ("n", n_t)):
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers (a count of positions), got a {t.dtype} tensor")
    if u_t.dim() and n_t.dim() and u_t.shape != n_t.shape:
        raise ValueError(f"u and n must have the same shape, got {tuple(u_t.shape)} and {tuple(n_t.shape)}")
    if n_t.numel() and int(n_t.min()) < 1:
        raise ValueError(f"n (the block size) must be >= 1, got a minimum of {int(n_t.min())}")
    if u_t.numel() and (int(u_t.min()) < 0 or bool((u_t > n_t).any())):
        raise ValueError("u (positions already unmasked in the block) must lie in [0, n], "
                         f"got u from {int(u_t.min())} to {int(u_t.max())} with n from {int(n_t.min())}")
    return tau_hi - (tau_hi - tau_lo) * u_t.to(torch.float64) / n_t.to(torch.float64)


# main class

class SwordsmanDecoder(MaskedDiffusionDecoder):
    """[A15] Entropy-shift block partition + dynamic in-block threshold, on the framework's prefix KV cache."""

    def __init__(self, b_min: int = 2, b_max: int = 16, b_default: int = 8, delta: float = 0.5, shift: str = "rise",
                 tau_hi: float = 0.95, tau_lo: float = 0.7, use_cache: bool = True, select: str = "largest") -> None:
        for val, n in ((b_min, "b_min"), (b_max, "b_max"), (b_default, "b_default")):
            check_positive_int(val, n)
        if not b_min <= b_default <= b_max:
            raise ValueError(f"need b_min <= b_default <= b_max, got {b_min}, {b_default}, {b_max}")
        if shift not in SHIFTS:
            raise ValueError(f"shift must be one of {SHIFTS}, got {shift!r}")
        if select not in SELECTS:
            raise ValueError(f"select must be one of {SELECTS}, got {select!r}")
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or math.isnan(delta) or delta < 0:
            raise ValueError(f"delta must be a number >= 0 (inf disables adaptive ends), got {delta!r}")
        self.b_min, self.b_max, self.b_default, self.delta, self.shift = b_min, b_max, b_default, float(delta), shift
        self.tau_hi, self.tau_lo = check_tau(tau_hi, "tau_hi"), check_tau(tau_lo, "tau_lo")
        if self.tau_lo > self.tau_hi:
            raise ValueError(f"need tau_lo <= tau_hi, got tau_lo={tau_lo}, tau_hi={tau_hi}")
        if not isinstance(use_cache, bool):
            raise TypeError(f"use_cache must be True or False, got {use_cache!r}")
        self.use_cache, self.select_rule = use_cache, select

    def partition(self, view: RoundView) -> torch.Tensor:
        return entropy_shift_boundary(view.entropy, view.block_start, self.b_min, self.b_max, self.delta,
                                      self.shift, self.b_default, self.select_rule)

    def select(self, view: RoundView) -> Selection:
        tau = dynamic_threshold(view.block_unmasked, view.block_size, self.tau_hi, self.tau_lo).float()
        if self.tau_hi == self.tau_lo:
            tau = torch.full_like(tau, self.tau_hi)  # bit-exact with the fixed-threshold rule
        commit, kind = threshold_commit(view.conf, view.in_block, tau)
        return Selection(commit, kind=kind)


__all__ = ["SwordsmanDecoder", "entropy_shift_boundary", "dynamic_threshold", "token_entropy"]
