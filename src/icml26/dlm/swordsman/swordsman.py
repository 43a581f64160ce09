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

from icml26.testbeds.diffusion_lm.decoding import (
    MaskedDiffusionDecoder,
    RoundView,
    Selection,
    check_positive_int,
    check_tau,
    threshold_commit,
    token_entropy,
)

SHIFTS = ("rise", "abs")
SELECTS = ("largest", "first")


# helper functions

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
    b_min, b_max, b_default = (check_positive_int(v, n) for v, n in ((b_min, "b_min"), (b_max, "b_max"), (b_default, "b_default")))
    if not b_min <= b_max:
        raise ValueError(f"need b_min <= b_max, got b_min={b_min}, b_max={b_max}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or math.isnan(delta):
        raise ValueError(f"delta must be a number (inf disables adaptive ends), got {delta!r}")
    H = torch.as_tensor(entropies, dtype=torch.float64)
    single = H.dim() == 1
    H = H[None] if single else H
    s = torch.as_tensor(start, dtype=torch.long).reshape(-1).expand(H.shape[0])
    G = H.shape[1]
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
    """tau(u) = tau_hi - (tau_hi - tau_lo) * u / n: strict while the block is empty, relaxing as it fills [A15]."""
    return tau_hi - (tau_hi - tau_lo) * torch.as_tensor(u, dtype=torch.float64) / torch.as_tensor(n, dtype=torch.float64)


# main class

class SwordsmanDecoder(MaskedDiffusionDecoder):
    """[A15] Entropy-shift block partition + dynamic in-block threshold, on the framework's prefix KV cache."""

    def __init__(self, b_min: int = 2, b_max: int = 16, b_default: int = 8, delta: float = 0.5, shift: str = "rise",
                 tau_hi: float = 0.95, tau_lo: float = 0.7, use_cache: bool = True, select: str = "largest") -> None:
        for v, n in ((b_min, "b_min"), (b_max, "b_max"), (b_default, "b_default")):
            check_positive_int(v, n)
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
        self.use_cache, self.select_rule = bool(use_cache), select

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
