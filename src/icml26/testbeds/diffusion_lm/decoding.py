"""Decoder framework for masked diffusion LMs: block-wise parallel unmasking with a prefix KV cache.

``decode(model, prompt_ids, gen_length, decoder)`` starts from ``prompt | [MASK] * gen_length`` and runs rounds.
A **round** is one sequential forward pass over the batch; in it the decoder commits (unmasks) at least one
masked position of each unfinished sequence, and committed tokens never change. The response is split into
contiguous **blocks** decided by the decoder at each block start (``decoder.partition``), from the first
forward pass of that block; inside a block the decoder picks which positions to commit (``decoder.select``).

A decoder is a :class:`MaskedDiffusionDecoder` subclass with two methods over a :class:`RoundView`:

- ``partition(view) -> end`` (rows starting a block at ``view.block_start``): the block is ``[start, end)``.
- ``select(view) -> Selection(commit, tokens=None, kind=None)``: which masked positions to commit this round
  (any masked position, even outside the block: cross-block commits are allowed), with which tokens
  (default: argmax) and a commit ``kind`` code (``COMMIT_*``) that the result keeps for analysis.

Baselines: :class:`LowConfidenceRemasking` (LLaDA arXiv 2502.09992: semi-autoregressive blocks, a fixed
number of steps per block, each committing the most confident masked tokens) and
:class:`ConfidenceThresholdDecoder` (Fast-dLLM arXiv 2505.22618: commit every masked in-block position with
max-prob >= tau, else the single most confident one).

Any model works whose ``forward(input_ids)`` returns logits (B, L, V) or an object with ``.logits``, and that
names its ``[MASK]`` id (``model.mask_token_id``, ``model.config.mask_token_id`` or the ``mask_token_id``
argument). If the model's forward also takes ``past_key_values`` and ``use_cache`` (HF style, legacy tuple
cache), decoders with ``use_cache=True`` use a prefix KV cache: the prompt and finished blocks are encoded
once per block (at its first round) and reused for the block's later rounds (Fast-dLLM's prefix cache). The
cache changes wall-clock and, slightly, the logits (the prefix does not see later commits); never rounds.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import torch

COMMIT_THRESHOLD, COMMIT_FALLBACK, COMMIT_SCHEDULE, COMMIT_EXPLORE, COMMIT_CROSS = 0, 1, 2, 3, 4


# helper functions

def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of softmax(logits) over the last axis; -inf logits are fine."""
    return torch.special.entr(torch.softmax(logits.float(), -1)).sum(-1)


def check_tau(tau: float, name: str = "tau") -> float:
    """A confidence threshold must lie in (0, 1]."""
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0.0 < float(tau) <= 1.0:
        raise ValueError(f"{name} must be a number in (0, 1], got {tau!r}")
    return float(tau)


def check_positive_int(v: int, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def threshold_commit(conf: torch.Tensor, in_block: torch.Tensor, tau: float | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fast-dLLM rule: commit in-block positions with conf >= tau; rows with none commit their argmax.

    ``tau`` is a float or a per-row tensor (A,). Returns ``(commit, kind)`` with kind THRESHOLD or FALLBACK.
    """
    tau = torch.as_tensor(tau, dtype=conf.dtype).reshape(-1, 1) if torch.is_tensor(tau) else tau
    commit = in_block & (conf >= tau)
    stuck = ~commit.any(1) & in_block.any(1)
    best = conf.masked_fill(~in_block, -1.0).argmax(1)
    fallback = torch.zeros_like(commit)
    fallback[stuck, best[stuck]] = True
    kind = torch.where(fallback, COMMIT_FALLBACK, COMMIT_THRESHOLD).to(torch.int8)
    return commit | fallback, kind


# what a decoder sees and returns

@dataclass
class RoundView:
    """One round, for the ``A`` active rows (``rows`` index the batch). Positions are response-relative.

    ``probs`` (A, G, V) with the [MASK] column at 0; ``conf``/``pred``/``entropy`` (A, G) are max-prob, argmax and
    entropy (nats), 0/-/0 at committed positions. ``block_start``/``block_end`` (A,) delimit the current block,
    ``in_block`` = masked & inside it; ``block_round`` counts the rounds already spent in the block (0: its first,
    partitioning pass); ``block_unmasked`` = committed positions in the block before this round (u);
    ``block_size`` = end - start (n). ``forward(responses (A, K, G)) -> probs (A, K, G, V)`` runs extra passes
    (counted: +K forward passes and +1 round per row).
    """

    rows: torch.Tensor
    x: torch.Tensor
    masked: torch.Tensor
    probs: torch.Tensor
    conf: torch.Tensor
    pred: torch.Tensor
    entropy: torch.Tensor
    block_start: torch.Tensor
    block_end: torch.Tensor
    block_round: torch.Tensor
    gen_length: int
    mask_token_id: int
    generator: torch.Generator
    _forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = field(default=None, repr=False)

    @property
    def positions(self) -> torch.Tensor:
        return torch.arange(self.gen_length)

    @property
    def in_block(self) -> torch.Tensor:
        p = self.positions[None]
        return self.masked & (p >= self.block_start[:, None]) & (p < self.block_end[:, None])

    @property
    def block_size(self) -> torch.Tensor:
        return self.block_end - self.block_start

    @property
    def block_unmasked(self) -> torch.Tensor:
        p = self.positions[None]
        inside = (p >= self.block_start[:, None]) & (p < self.block_end[:, None])
        return (inside & ~self.masked).sum(1)

    def subset(self, idx: torch.Tensor) -> "RoundView":
        t = {k: getattr(self, k)[idx] for k in ("rows", "x", "masked", "probs", "conf", "pred", "entropy",
                                                 "block_start", "block_end", "block_round")}
        fwd = self._forward
        return replace(self, **t, _forward=None if fwd is None else (lambda r, resp: fwd(r, resp)))

    def forward(self, responses: torch.Tensor) -> torch.Tensor:
        """Extra forward passes on candidate responses (A, K, G) of these rows; returns probs (A, K, G, V)."""
        if self._forward is None:
            raise RuntimeError("extra forward passes are not available in this view")
        return self._forward(self.rows, responses)


@dataclass
class Selection:
    """A decoder's choice for one round: ``commit`` (A, G) bool; optional ``tokens`` (A, G) (default: argmax)
    and ``kind`` (A, G) int codes (default: ``COMMIT_THRESHOLD``)."""

    commit: torch.Tensor
    tokens: torch.Tensor | None = None
    kind: torch.Tensor | None = None


@dataclass
class DecodeResult:
    """Output of :func:`decode`. Per sequence b: ``rounds[b]`` sequential passes, ``nfe[b]`` forward passes
    (rows through the model), ``blocks[b]`` the list of ``(start, end)`` response blocks. Per response position:
    the round it was committed in (0-based), the probability and entropy of its marginal at that moment, and the
    commit kind. ``extra_rounds[b]`` counts rounds spent in ``RoundView.forward`` passes (they commit
    nothing themselves). ``commits`` gives, per sequence and round, the list of ``(pos, token, prob, entropy)``."""

    sequences: torch.Tensor
    prompt_length: int
    rounds: torch.Tensor
    nfe: torch.Tensor
    commit_round: torch.Tensor
    commit_prob: torch.Tensor
    commit_entropy: torch.Tensor
    commit_kind: torch.Tensor
    blocks: list[list[tuple[int, int]]]
    wall_time: float
    used_cache: bool
    extra_rounds: torch.Tensor

    @property
    def tokens(self) -> torch.Tensor:
        """The response tokens (B, gen_length)."""
        return self.sequences[:, self.prompt_length:]

    @property
    def commits(self) -> list[list[list[tuple[int, int, float, float]]]]:
        out = []
        for b in range(len(self.rounds)):
            per = [[] for _ in range(int(self.rounds[b]))]
            for pos in torch.argsort(self.commit_round[b], stable=True).tolist():
                r = int(self.commit_round[b, pos])
                per[r].append((pos, int(self.tokens[b, pos]), float(self.commit_prob[b, pos]),
                               float(self.commit_entropy[b, pos])))
            out.append(per)
        return out

    @property
    def surprisal(self) -> torch.Tensor:
        """-log p of each committed token at commit time (B, G), nats."""
        return -torch.log(self.commit_prob.clamp_min(1e-30))

    @property
    def tokens_per_round(self) -> float:
        return float(self.tokens.numel() / self.rounds.sum().clamp_min(1))


# the decoders

class MaskedDiffusionDecoder:
    """Base class: subclasses implement ``partition`` and ``select`` (see the module docstring)."""

    use_cache: bool = True

    def partition(self, view: RoundView) -> torch.Tensor:
        raise NotImplementedError

    def select(self, view: RoundView) -> Selection:
        raise NotImplementedError

    def tail_blocks(self, start: int, gen_length: int) -> list[tuple[int, int]]:
        """Blocks for ``[start, gen_length)`` when commits outside the current block (cross-block commits)
        filled that tail before decoding reached it: no forward pass is left to partition it with, so by
        default it is one block."""
        return [(start, gen_length)] if start < gen_length else []

    def decode(self, model: Any, prompt_ids: torch.Tensor, gen_length: int, **kwargs: Any) -> DecodeResult:
        return decode(model, prompt_ids, gen_length, self, **kwargs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class FixedBlockDecoder(MaskedDiffusionDecoder):
    """Blocks of ``block_length`` positions (the last one shorter)."""

    def __init__(self, block_length: int = 8, use_cache: bool = True) -> None:
        self.block_length = check_positive_int(block_length, "block_length")
        self.use_cache = bool(use_cache)

    def partition(self, view: RoundView) -> torch.Tensor:
        return (view.block_start + self.block_length).clamp_max(view.gen_length)

    def tail_blocks(self, start: int, gen_length: int) -> list[tuple[int, int]]:
        return [(a, min(a + self.block_length, gen_length)) for a in range(start, gen_length, self.block_length)]


class ConfidenceThresholdDecoder(FixedBlockDecoder):
    """Fast-dLLM parallel decoding: in the current block, commit every masked position with c_i >= tau;
    if none qualifies, commit the single most confident one."""

    def __init__(self, block_length: int = 8, tau: float = 0.9, use_cache: bool = True) -> None:
        super().__init__(block_length, use_cache)
        self.tau = check_tau(tau)

    def select(self, view: RoundView) -> Selection:
        commit, kind = threshold_commit(view.conf, view.in_block, self.tau)
        return Selection(commit, kind=kind)


class LowConfidenceRemasking(FixedBlockDecoder):
    """LLaDA semi-autoregressive decoding with low-confidence remasking: ``steps_per_block`` rounds per block;
    round r commits the k_r most confident masked positions, k_r spreading the block evenly (LLaDA's
    ``get_num_transfer_tokens``: n // S each, the first n % S rounds one more). Vanilla LLaDA has no cache."""

    def __init__(self, block_length: int = 8, steps_per_block: int = 4, use_cache: bool = False) -> None:
        super().__init__(block_length, use_cache)
        self.steps_per_block = check_positive_int(steps_per_block, "steps_per_block")

    def select(self, view: RoundView) -> Selection:
        n = view.block_size  # the block is fully masked at its start (no cross-block commits here)
        S = n.clamp_max(self.steps_per_block)
        k = n // S + (view.block_round < n % S).long()
        k = torch.minimum(k, view.in_block.sum(1)).clamp_min(1)
        order = view.conf.masked_fill(~view.in_block, -1.0).argsort(dim=1, descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(view.gen_length).expand_as(order))
        commit = view.in_block & (rank < k[:, None])
        return Selection(commit, kind=torch.full_like(commit, COMMIT_SCHEDULE, dtype=torch.int8))


# the decoding loop

def _context_length(model: Any) -> int | None:
    for obj in (model, getattr(model, "config", None)):
        for name in ("max_len", "max_position_embeddings", "max_sequence_length"):
            v = getattr(obj, name, None)
            if isinstance(v, int):
                return v
    return None


def resolve_mask_token_id(model: Any, mask_token_id: int | None = None) -> int:
    """The ``[MASK]`` id: the argument, else ``model.mask_token_id``, else ``model.config.mask_token_id``."""
    if mask_token_id is None:
        mask_token_id = getattr(model, "mask_token_id", None)
    if mask_token_id is None:
        mask_token_id = getattr(getattr(model, "config", None), "mask_token_id", None)
    if mask_token_id is None:
        raise ValueError("the model's vocabulary has no mask token: set model.mask_token_id or "
                         "model.config.mask_token_id, or pass mask_token_id= to decode()")
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int) or mask_token_id < 0:
        raise ValueError(f"mask_token_id must be a non-negative int, got {mask_token_id!r}")
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(vocab, int) and mask_token_id >= vocab:
        raise ValueError(f"mask_token_id {mask_token_id} is outside the model's vocabulary of {vocab} tokens: "
                         "the vocabulary has no mask token")
    return mask_token_id


def _supports_cache(model: Any) -> bool:
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    return "past_key_values" in params and "use_cache" in params


def _logits(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _legacy(cache: Any) -> Sequence[tuple[torch.Tensor, torch.Tensor]]:
    return cache.to_legacy_cache() if hasattr(cache, "to_legacy_cache") else cache


@torch.inference_mode()
def decode(model: Any, prompt_ids: torch.Tensor | Sequence[Sequence[int]], gen_length: int,
           decoder: MaskedDiffusionDecoder, *, mask_token_id: int | None = None, seed: int = 0,
           temperature: float = 0.0) -> DecodeResult:
    """Decode ``gen_length`` tokens after each prompt with ``decoder``; batched over prompts (B, P).

    ``temperature == 0``: ``view.pred`` is the argmax and ``view.conf`` its probability (greedy, deterministic).
    ``temperature > 0``: ``view.pred`` is sampled from p^(1/T) (seeded by ``seed``) and ``view.conf`` is the
    model probability of the sampled token (Fast-dLLM/LLaDA sampling); results then depend on the batch.

    Every round commits >= 1 token per unfinished sequence and never changes a committed token, so
    rounds <= gen_length (+ any extra rounds a decoder spends through ``RoundView.forward``).
    """
    if not isinstance(decoder, MaskedDiffusionDecoder):
        raise TypeError(f"decoder must be a MaskedDiffusionDecoder, got {type(decoder).__name__}")
    if isinstance(gen_length, bool) or not isinstance(gen_length, int) or gen_length <= 0:
        raise ValueError(f"gen_length must be a positive int, got {gen_length!r}")
    prompt = prompt_ids if torch.is_tensor(prompt_ids) else torch.as_tensor(prompt_ids)
    if prompt.dim() == 1:
        prompt = prompt[None]
    if prompt.dim() != 2 or prompt.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError(f"prompt_ids must be integer token ids of shape (batch, prompt_len), got "
                        f"{tuple(prompt.shape)} {prompt.dtype}")
    if prompt.shape[0] == 0:
        raise ValueError("prompt_ids has no rows: pass at least one prompt, shape (batch >= 1, prompt_len)")
    mask_id = resolve_mask_token_id(model, mask_token_id)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    B, P = prompt.shape
    G, L = gen_length, prompt.shape[1] + gen_length
    ctx = _context_length(model)
    if ctx is not None and L > ctx:
        raise ValueError(f"prompt ({P} tokens) + gen_length ({G}) = {L} exceeds the model context of {ctx} "
                         "tokens; shorten the prompt or generate fewer tokens")
    if (prompt == mask_id).any():
        raise ValueError(f"the prompt contains the mask token id {mask_id}; prompts must be fully known")
    device = next((p.device for p in getattr(model, "parameters", lambda: iter(()))()), torch.device("cpu"))
    x = torch.cat([prompt.long().to(device), torch.full((B, G), mask_id, device=device)], 1)
    use_cache = decoder.use_cache and _supports_cache(model)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    start = torch.zeros(B, dtype=torch.long)
    end = torch.zeros(B, dtype=torch.long)
    block_round = torch.zeros(B, dtype=torch.long)
    rounds = torch.zeros(B, dtype=torch.long)
    extra = torch.zeros(B, dtype=torch.long)
    nfe = torch.zeros(B, dtype=torch.long)
    c_round = torch.full((B, G), -1, dtype=torch.long)
    c_prob, c_ent = torch.zeros(B, G), torch.zeros(B, G)
    c_kind = torch.full((B, G), -1, dtype=torch.int8)
    blocks: list[list[tuple[int, int]]] = [[] for _ in range(B)]
    cache: list[list[torch.Tensor]] | None = None
    pos = torch.arange(G)
    t0 = time.perf_counter()

    def to_probs(logits: torch.Tensor) -> torch.Tensor:
        if logits.shape[-1] <= mask_id:
            raise ValueError(f"the model returns {logits.shape[-1]} logits per position but mask_token_id is "
                             f"{mask_id}: its vocabulary has no mask token")
        logits = logits.float().clone()
        logits[..., mask_id] = float("-inf")
        return torch.softmax(logits, -1).cpu()

    def extra_forward(rows: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        A, K, _ = responses.shape
        seqs = torch.cat([x[rows, :P].repeat_interleave(K, 0), responses.reshape(A * K, G).to(device)], 1)
        nfe[rows] += K
        rounds[rows] += 1
        extra[rows] += 1
        return to_probs(_logits(model(seqs))[:, P:]).view(A, K, G, -1)

    while True:
        masked = (x[:, P:] == mask_id).cpu()
        active = masked.any(1)
        if not active.any():
            break
        in_blk = masked & (pos[None] >= start[:, None]) & (pos[None] < end[:, None])
        refresh = active & ~in_blk.any(1)  # the current block is finished: a new one starts at its end
        start = torch.where(refresh, end, start)
        block_round[refresh] = 0
        rows = active.nonzero()[:, 0]
        # --- one forward pass (grouped by cached-prefix length when the prefix cache is on)
        probs = None
        if not use_cache:
            probs = to_probs(_logits(model(x[rows]))[:, P:])
        else:
            groups = [(refresh[rows], None)] + [((~refresh[rows]) & (start[rows] == s), int(s))
                                                for s in torch.unique(start[rows][~refresh[rows]])]
            for sel, s in groups:
                if not sel.any():
                    continue
                g = rows[sel]
                if s is None:  # block start: encode everything, keep the keys/values for the prefix
                    out = model(x[g], use_cache=True)
                    kv = _legacy(out.past_key_values)
                    if cache is None:
                        cache = [[torch.zeros((B, *k.shape[1:]), dtype=k.dtype, device=k.device),
                                  torch.zeros((B, *v.shape[1:]), dtype=v.dtype, device=v.device)] for k, v in kv]
                    for layer, (k, v) in zip(cache, kv):
                        layer[0][g.to(device)], layer[1][g.to(device)] = k, v
                    lg = _logits(out)[:, P:]
                else:
                    past = tuple((k[g.to(device), :, : P + s], v[g.to(device), :, : P + s]) for k, v in cache)
                    lg = _logits(model(x[g, P + s:], past_key_values=past, use_cache=False))
                    lg = torch.cat([torch.zeros(len(g), s, lg.shape[-1], dtype=lg.dtype, device=lg.device), lg], 1)
                pg = to_probs(lg)
                if probs is None:
                    probs = torch.zeros(len(rows), G, pg.shape[-1])
                probs[sel] = pg
        nfe[rows] += 1
        probs = probs * masked[rows][:, :, None]
        conf, pred = probs.max(-1)
        if temperature > 0:
            w = (probs.clamp_min(1e-30).log() / temperature).softmax(-1)
            pred = torch.multinomial(w.view(-1, w.shape[-1]), 1, generator=gen).view(pred.shape)
            conf = probs.gather(-1, pred[..., None])[..., 0]
        entropy = torch.special.entr(probs).sum(-1)
        view = RoundView(rows, x[rows, P:].cpu(), masked[rows], probs, conf, pred, entropy, start[rows],
                         end[rows], block_round[rows], G, mask_id, gen, extra_forward)
        # --- partition: rows at a block start get [start, end) from the decoder (skipping filled blocks)
        need = refresh[rows].clone()
        while need.any():
            idx = need.nonzero()[:, 0]
            sub = view.subset(idx)
            e = torch.as_tensor(decoder.partition(sub), dtype=torch.long).reshape(-1)
            s_ = sub.block_start
            if e.shape != s_.shape or (e <= s_).any() or (e > G).any():
                raise RuntimeError(f"{type(decoder).__name__}.partition must return block ends in (start, {G}]")
            for b, a, z in zip(rows[idx].tolist(), s_.tolist(), e.tolist()):
                blocks[b].append((a, z))
            view.block_end[idx] = e
            has = (view.masked[idx] & (pos[None] >= s_[:, None]) & (pos[None] < e[:, None])).any(1)
            view.block_start[idx[~has]] = e[~has]  # an already-filled block (cross-block commits): next one
            need[idx[has]] = False
        start[rows], end[rows] = view.block_start, view.block_end
        # --- selection
        sel = decoder.select(view)
        commit = sel.commit.bool()
        if commit.shape != (len(rows), G):
            raise RuntimeError(f"{type(decoder).__name__}.select returned commit of shape {tuple(commit.shape)}, "
                               f"expected {(len(rows), G)}")
        if (commit & ~view.masked).any():
            raise RuntimeError(f"{type(decoder).__name__} tried to change an already committed token")
        if not commit.any(1).all():
            raise RuntimeError(f"{type(decoder).__name__} committed no token in a round")
        tokens = pred if sel.tokens is None else sel.tokens.long()
        if ((tokens == mask_id) & commit).any():
            raise RuntimeError(f"{type(decoder).__name__} committed the mask token")
        kind = torch.full_like(commit, COMMIT_THRESHOLD, dtype=torch.int8) if sel.kind is None else sel.kind.to(torch.int8)
        r_idx, p_idx = commit.nonzero(as_tuple=True)
        b_idx = rows[r_idx]
        tok = tokens[r_idx, p_idx]
        x[b_idx.to(device), (P + p_idx).to(device)] = tok.to(device)
        c_round[b_idx, p_idx] = rounds[b_idx]
        c_prob[b_idx, p_idx] = probs[r_idx, p_idx, tok]
        c_ent[b_idx, p_idx] = entropy[r_idx, p_idx]
        c_kind[b_idx, p_idx] = kind[r_idx, p_idx]
        rounds[rows] += 1
        block_round[rows] += 1
    for bl in blocks:  # blocks that cross-block commits finished before decoding entered them
        bl.extend(decoder.tail_blocks(bl[-1][1] if bl else 0, G))
    return DecodeResult(x.cpu(), P, rounds, nfe, c_round, c_prob, c_ent, c_kind, blocks,
                        time.perf_counter() - t0, use_cache, extra)


def generate(model: Any, input_ids: torch.Tensor, decoder: MaskedDiffusionDecoder, max_new_tokens: int,
             **kwargs: Any) -> torch.Tensor:
    """transformers-style wrapper: returns ``input_ids`` followed by ``max_new_tokens`` decoded tokens."""
    return decode(model, input_ids, max_new_tokens, decoder, **kwargs).sequences


def check_invariants(result: DecodeResult, mask_token_id: int) -> None:
    """Raise ``AssertionError`` unless: no mask is left; every round of every sequence (extra passes aside)
    committed >= 1 token; blocks are contiguous, disjoint and cover the response."""
    G = result.tokens.shape[1]
    assert not (result.tokens == mask_token_id).any(), "masked tokens left"
    assert (result.commit_round >= 0).all(), "a position was never committed"
    for b in range(len(result.rounds)):
        R, extra = int(result.rounds[b]), int(result.extra_rounds[b])
        n_commit_rounds = len(torch.unique(result.commit_round[b]))
        assert n_commit_rounds == R - extra, f"sequence {b}: {R - extra - n_commit_rounds} rounds committed nothing"
        assert R - extra <= G
        bl = result.blocks[b]
        assert bl and bl[0][0] == 0 and bl[-1][1] == G, f"blocks {bl} do not cover [0, {G})"
        assert all(e > s for s, e in bl) and all(bl[i][1] == bl[i + 1][0] for i in range(len(bl) - 1)), \
            f"blocks {bl} are not contiguous"
