"""[B01] Explore-Then-Exploit (ETE) decoding for masked diffusion LMs, and the bits-to-rounds report.

Bits-to-rounds. Round r commits the set S_r of masked positions in state x^(r); its information is

    I_r = sum_{i in S_r} -log p_theta(x_i | x^(r))          (surprisal at commit time, nats)
    I(x) = sum_r I_r.

With one commit per round and an exact model the chain rule gives I(x) = -log p(x). If every round carries at
most B nats, then R >= I(x) / B: rounds grow linearly with a sample's information and inversely with the
per-round budget. A confidence-threshold commit (c_i >= tau) carries <= log(1/tau); when nothing clears tau the
confidence-only rule commits the *most* confident token, i.e. the least information, so it stalls.

ETE, per round (one forward pass over all masked response positions):

- **Exploit**: commit every masked position of the current block with c_i >= tau, and (cross-block) every
  masked position of the next W blocks with c_i >= tau_x (tau_x >= tau).
- **Explore**: if fewer than m_min tokens were committed (stuck), also commit the k_e highest-entropy masked
  positions of the current block (>= 2 apart), with values sampled from p_i. A high-entropy commit carries the
  most information and reshapes its neighbours' conditionals, which then cascade into confidence.
- Variant ``explore_candidates=K``: the top-K values of the explored position are scored in one batched extra
  pass (+1 round, +K forward passes) and the value with the largest next-round cascade (#positions that would
  clear tau / tau_x), tie-broken by p_i(v), is committed.

With ``explore_k=0`` and ``cross_block_window=0`` ETE is exactly Fast-dLLM's ``ConfidenceThresholdDecoder``.
"""

from __future__ import annotations

import math

import torch

from icml26.harness import validate as v
from icml26.testbeds.diffusion_lm.decoding import (
    COMMIT_CROSS,
    COMMIT_EXPLORE,
    COMMIT_FALLBACK,
    COMMIT_THRESHOLD,
    DecodeResult,
    FixedBlockDecoder,
    RoundView,
    Selection,
    check_invariants,
    check_tau,
    threshold_commit,
)

EXPLORE_WHEN = ("stuck", "always")
EXPLORE_SELECT = ("max_entropy", "random")


# helper functions

def _check_int(value: int, name: str, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {value!r}")
    return value


def _check_result(result: object) -> DecodeResult:
    if not isinstance(result, DecodeResult):
        raise TypeError(f"result must be a DecodeResult from decode(), got {type(result).__name__}")
    return result


def spaced_top_k(score: torch.Tensor, eligible: torch.Tensor, k: int, min_gap: int = 2) -> torch.Tensor:
    """(A, G) bool: per row, greedily the ``k`` highest-``score`` eligible positions, pairwise >= ``min_gap``
    apart (fewer if too few are eligible). Ties go to the earliest position."""
    for name, t in (("score", score), ("eligible", eligible)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {v.describe(t)}")
    if score.ndim != 2:
        raise ValueError(f"score must be 2-D (rows, positions), got shape {tuple(score.shape)}")
    if eligible.shape != score.shape or eligible.dtype != torch.bool:
        raise ValueError(f"eligible must be a bool tensor shaped like score {tuple(score.shape)}, got "
                         f"{eligible.dtype} of shape {tuple(eligible.shape)}")
    if score.is_floating_point() and bool(torch.isnan(score).any()):
        raise ValueError("score has NaN entries; a NaN would win the argmax")
    k = v.non_negative_int("k", k)
    min_gap = v.positive_int("min_gap", min_gap)
    pos = torch.arange(score.shape[1])
    eligible = eligible.clone()
    picked = torch.zeros_like(eligible)
    rows = torch.arange(score.shape[0])
    for _ in range(k):  # k is tiny (1-2): a loop over picks, vectorised over rows and positions
        s = score.masked_fill(~eligible, float("-inf"))
        best = s.argmax(1)
        ok = eligible.any(1)
        picked[rows[ok], best[ok]] = True
        near = (pos[None] - best[:, None]).abs() < min_gap
        eligible &= ~(near & ok[:, None])
    return picked


def replay_surprisal(result: DecodeResult, marginals) -> torch.Tensor:
    """Commit-time surprisal -log p(x_i | x^(r)) of every committed token, recomputed in float64 [B01].

    ``decode`` keeps commit probabilities in float32, so sum_r I_r is exact only to ~1e-7 nats. This replays the
    decode: for each round r it rebuilds the state x^(r) (the tokens committed in rounds < r, [MASK] elsewhere)
    and asks ``marginals(rows (A,), responses (A, G)) -> probs (A, G, V)`` (float64; e.g. an exact counting
    oracle; ``rows`` index the batch, so the callable can look up the prompts; masked positions are -1) for the
    probability of the tokens committed in round r. Extra scoring rounds commit nothing and add nothing.
    Returns (B, G) float64 nats (0 where a position was never committed).
    """
    _check_result(result)
    if not callable(marginals):
        raise TypeError("marginals must be a callable (rows, responses) -> float64 probabilities (A, G, V)")
    tokens, cr = result.tokens.long(), result.commit_round
    out = torch.zeros(tokens.shape, dtype=torch.float64)
    n_rounds = int(cr.max()) + 1 if cr.numel() else 0
    for r in range(n_rounds):
        now = cr == r
        if not now.any():
            continue
        rows = now.any(1).nonzero()[:, 0]
        probs = marginals(rows, torch.where(cr[rows] < r, tokens[rows], -1))
        if not isinstance(probs, torch.Tensor) or probs.dtype != torch.float64:
            raise TypeError(f"marginals must return float64 probabilities for exact accounting, got "
                            f"{getattr(probs, 'dtype', v.describe(probs))}")
        want = (len(rows), tokens.shape[1])
        if probs.ndim != 3 or tuple(probs.shape[:2]) != want or probs.shape[2] <= int(tokens.max()):
            raise ValueError(f"marginals must return probabilities of shape ({want[0]}, {want[1]}, V) with V > "
                             f"{int(tokens.max())} (the largest committed token), got {tuple(probs.shape)}")
        p = probs.gather(2, tokens[rows][:, :, None])[:, :, 0]
        p_now = p[now[rows]]
        if not bool(torch.isfinite(p_now).all()) or bool((p_now < 0).any()) or bool((p_now > 1 + 1e-12).any()):
            raise ValueError(f"marginals gave a committed token of round {r} a probability outside [0, 1] "
                             f"(min {float(p_now.min()):.3g}, max {float(p_now.max()):.3g}): its surprisal would "
                             "be negative or NaN")
        out[rows] = torch.where(now[rows], -torch.log(p), out[rows])
    return out


def bits_to_rounds_report(result: DecodeResult, budget: float | None = None,
                          surprisal: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Information committed per round and the bits-to-rounds lower bound, per sequence [B01].

    I_r = sum of -log p(x_i | x^(r)) over the positions committed in round r (extra scoring rounds carry 0);
    total = sum_r I_r; ``budget`` B = max_r I_r per sequence (or the given a-priori budget in nats);
    lower_bound = ceil(total / B) (0 when total = 0); ``holds`` = rounds >= lower_bound. With B = max_r I_r
    the inequality is a tautology (a sum of R terms is at most R times its largest): a check of the accounting,
    not evidence for the principle. ``surprisal`` (B, G) replaces the float32 commit-time surprisal (e.g. the
    float64 values of :func:`replay_surprisal`).
    Returns tensors: rounds (B,), commit_rounds (B,), info_per_round (B, max rounds) zero-padded, total_info,
    budget, lower_bound, holds, info_rate = total / rounds (nats per round).
    """
    _check_result(result)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                               or not math.isfinite(budget) or budget <= 0):
        raise ValueError(f"budget must be a positive finite number of nats (or None), got {budget!r}")
    if surprisal is not None and not isinstance(surprisal, torch.Tensor):
        surprisal = v.finite("surprisal", surprisal)
    s = result.surprisal.double() if surprisal is None else torch.as_tensor(surprisal, dtype=torch.float64)
    if surprisal is not None:
        v.finite("surprisal", s)
        if bool((s < -1e-9).any()):  # -log p of a p that rounds just above 1 is -2e-16
            raise ValueError(f"surprisal must be >= 0 nats (-log p with p <= 1), got a minimum of {float(s.min())}")
    if s.shape != result.commit_prob.shape:
        raise ValueError(f"surprisal must have shape {tuple(result.commit_prob.shape)} (batch, gen_length), "
                         f"got {tuple(s.shape)}")
    R = result.rounds.long()
    info = torch.zeros(len(R), int(R.max()) if len(R) else 0, dtype=torch.float64)
    info.scatter_add_(1, result.commit_round.clamp_min(0), s * (result.commit_round >= 0))
    total = info.sum(1)
    B = info.amax(1) if budget is None else torch.full_like(total, float(budget))
    lower = torch.where(total > 0, torch.ceil(total / B.clamp_min(1e-300) - 1e-9), torch.zeros_like(total))
    return {"rounds": R, "commit_rounds": R - result.extra_rounds, "info_per_round": info, "total_info": total,
            "budget": B, "lower_bound": lower.long(), "holds": R >= lower,
            "info_rate": total / R.clamp_min(1).double()}


def check_ete_invariants(result: DecodeResult, mask_token_id: int, decoder: "ExploreThenExploitDecoder") -> None:
    """[B01] The framework's invariants (>= 1 commit per round, committed tokens never change, blocks contiguous
    and covering the response) plus: the bits-to-rounds inequality
    R >= ceil(sum_r I_r / max_r I_r); threshold commits have p >= tau (surprisal <= log 1/tau); cross-block
    commits have p >= tau_cross; no confidence-only fallback when exploration is on. Raises ``AssertionError``."""
    _check_result(result)
    mask_token_id = v.non_negative_int("mask_token_id", mask_token_id)
    if not isinstance(decoder, ExploreThenExploitDecoder):
        raise TypeError(f"decoder must be the ExploreThenExploitDecoder that produced result, got "
                        f"{type(decoder).__name__}")
    check_invariants(result, mask_token_id)
    rep = bits_to_rounds_report(result)
    assert bool(rep["holds"].all()), "bits-to-rounds inequality violated"
    kind, p = result.commit_kind, result.commit_prob
    assert (p[kind == COMMIT_THRESHOLD] >= decoder.tau - 1e-6).all(), "a threshold commit below tau"
    assert (p[kind == COMMIT_CROSS] >= decoder.tau_cross - 1e-6).all(), "a cross-block commit below tau_cross"
    if decoder.explore_k > 0:
        assert not (kind == COMMIT_FALLBACK).any(), "a confidence-only fallback commit while exploring"


# main class

class ExploreThenExploitDecoder(FixedBlockDecoder):
    """[B01] Explore-Then-Exploit: cross-block exploitation plus high-entropy exploration when decoding stalls.

    Args:
        tau: in-block confidence threshold (0, 1].
        tau_cross: threshold for cross-block commits in the next ``cross_block_window`` blocks, >= tau.
        cross_block_window: W, how many blocks after the current one may be exploited (0: none).
        explore_k: k_e, positions explored when stuck (0: the confidence-only fallback instead).
        explore_when: "stuck" (fewer than ``min_commits`` exploit commits) or "always".
        explore_select: "max_entropy" (the paper's rule) or "random" (ablation).
        explore_sample: sample the explored value from p_i (else take the round's prediction).
        explore_candidates: K > 0 scores the top-K values of the explored position in one extra pass.
        min_commits: m_min, the stall trigger.
        block_length, use_cache: fixed blocks and the framework's prefix KV cache.
    """

    def __init__(self, tau: float = 0.9, tau_cross: float = 0.95, cross_block_window: int = 1, explore_k: int = 1,
                 explore_when: str = "stuck", explore_select: str = "max_entropy", explore_sample: bool = True,
                 explore_candidates: int = 0, block_length: int = 8, use_cache: bool = True,
                 min_commits: int = 1) -> None:
        if not isinstance(use_cache, bool):
            raise TypeError(f"use_cache must be a bool, got {type(use_cache).__name__}")
        super().__init__(block_length, use_cache)
        self.tau, self.tau_cross = check_tau(tau), check_tau(tau_cross, "tau_cross")
        if self.tau_cross < self.tau:
            raise ValueError(f"tau_cross must be >= tau (cross-block commits are riskier), got tau_cross={tau_cross}"
                             f" < tau={tau}")
        self.cross_block_window = _check_int(cross_block_window, "cross_block_window", 0)
        self.explore_k = _check_int(explore_k, "explore_k", 0)
        if explore_when not in EXPLORE_WHEN:
            raise ValueError(f"explore_when must be one of {EXPLORE_WHEN}, got {explore_when!r}")
        if explore_select not in EXPLORE_SELECT:
            raise ValueError(f"explore_select must be one of {EXPLORE_SELECT}, got {explore_select!r}")
        if not isinstance(explore_sample, bool):
            raise TypeError(f"explore_sample must be a bool, got {type(explore_sample).__name__}")
        self.explore_when, self.explore_select, self.explore_sample = explore_when, explore_select, explore_sample
        self.explore_candidates = _check_int(explore_candidates, "explore_candidates", 0)
        if self.explore_candidates and self.explore_k != 1:
            raise ValueError(f"explore_candidates needs explore_k=1 (one explored position scored per round), "
                             f"got explore_k={explore_k}")
        self.min_commits = _check_int(min_commits, "min_commits", 1)

    # --- exploit: in-block threshold (+ the confidence-only fallback) and cross-block threshold
    def _exploit(self, view: RoundView) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        commit, kind = threshold_commit(view.conf, view.in_block, self.tau)
        fallback = kind == COMMIT_FALLBACK
        cross = self._cross_region(view) & (view.conf >= self.tau_cross)
        kind = torch.where(cross, COMMIT_CROSS, kind).to(torch.int8)
        return commit | cross, fallback & commit, kind

    def _cross_region(self, view: RoundView) -> torch.Tensor:
        p = view.positions[None]
        hi = view.block_end[:, None] + self.cross_block_window * self.block_length
        return view.masked & (p >= view.block_end[:, None]) & (p < hi)

    # --- explore: the k_e highest-entropy (or random) in-block positions, values sampled from p_i
    def _explore_positions(self, view: RoundView, eligible: torch.Tensor) -> torch.Tensor:
        if self.explore_select == "max_entropy":
            score = view.entropy
        else:
            score = torch.rand(view.conf.shape, generator=view.generator)
        return spaced_top_k(score, eligible, self.explore_k)

    def _explore_values(self, view: RoundView, picked: torch.Tensor) -> torch.Tensor:
        tokens = view.pred.clone()
        r, p = picked.nonzero(as_tuple=True)
        if len(r) and self.explore_sample:
            tokens[r, p] = torch.multinomial(view.probs[r, p].double(), 1, generator=view.generator)[:, 0]
        return tokens

    def _candidate_values(self, view: RoundView, commit: torch.Tensor, tokens: torch.Tensor,
                          picked: torch.Tensor) -> torch.Tensor:
        """Score the top-K values of each row's explored position by the next-round cascade (one extra pass)."""
        rows = picked.any(1).nonzero()[:, 0]
        if not len(rows):
            return tokens
        sub = view.subset(rows)
        pos = picked[rows].long().argmax(1)
        a = torch.arange(len(rows))
        p_i = sub.probs[a, pos]  # (A, V)
        K = min(self.explore_candidates, p_i.shape[1])
        pv, cand = p_i.topk(K, dim=1)  # (A, K)
        resp = torch.where(commit[rows], tokens[rows], sub.x)[:, None].repeat(1, K, 1)  # this round's commits
        resp[a[:, None], torch.arange(K)[None], pos[:, None]] = cand
        probs = sub.forward(resp)  # (A, K, G, V): +K forward passes, +1 round
        conf = probs.amax(-1)
        still = resp == view.mask_token_id
        p = view.positions[None, None]
        in_blk = still & (p >= sub.block_start[:, None, None]) & (p < sub.block_end[:, None, None])
        cross = still & self._cross_region(sub)[:, None] & ~in_blk
        cascade = (in_blk & (conf >= self.tau)).sum(2) + (cross & (conf >= self.tau_cross)).sum(2)
        score = (cascade.double() + 0.5 * pv.double()).masked_fill(pv <= 0, float("-inf"))
        tokens = tokens.clone()
        tokens[rows, pos] = cand[a, score.argmax(1)]
        return tokens

    def select(self, view: RoundView) -> Selection:
        if not isinstance(view, RoundView):
            raise TypeError(f"view must be the RoundView that decode() passes, got {type(view).__name__}")
        commit, fallback, kind = self._exploit(view)
        tokens = view.pred
        if self.explore_k == 0:  # confidence-only: the fallback stays, only where nothing else was committed
            stuck_fb = fallback.any(1) & ((commit & ~fallback).sum(1) == 0)
            commit = (commit & ~fallback) | (fallback & stuck_fb[:, None])
            return Selection(commit, kind=kind)
        commit = commit & ~fallback
        explore = (commit.sum(1) < self.min_commits) if self.explore_when == "stuck" else view.masked.any(1)
        eligible = view.in_block & ~commit & explore[:, None]
        picked = self._explore_positions(view, eligible)
        if self.explore_candidates:
            tokens = self._candidate_values(view, commit, tokens, picked)
        else:
            tokens = self._explore_values(view, picked)
        kind = torch.where(picked, COMMIT_EXPLORE, torch.where(commit, kind, COMMIT_THRESHOLD)).to(torch.int8)
        return Selection(commit | picked, tokens=tokens, kind=kind)


__all__ = ["ExploreThenExploitDecoder", "bits_to_rounds_report", "check_ete_invariants",
           "replay_surprisal", "spaced_top_k"]
