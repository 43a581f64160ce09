"""Seeded tasks with exact ground truth for masked-diffusion-LM decoding (A15, B01).

Three tasks share one layout: a sequence is ``prompt (P tokens) | response (R tokens)``; the response is what a
decoder generates. Every task knows its vocabulary (``vocab_size`` ordinary tokens; ``mask_token_id ==
vocab_size`` is the one extra ``[MASK]`` id), samples ``(prompts, responses)`` from a seed, and checks validity.

- **T1 phrase grammar** (:class:`PhraseGrammar`): a probabilistic finite-state grammar over phrase types.
  A phrase is a head token h drawn from its type's lexicon, then a deterministic tail of 0-3 tokens fixed by h.
  Types follow a Markov chain with zeros (so invalid strings exist), a sentence stops after a phrase with a
  per-type probability, then EOS and PAD up to R. Exact ``log p(x)``, a DFA validity check and the true
  constituent (phrase) boundaries come for free. The prompt is ``[BOS]``.
- **T1c translation** (:class:`TranslationTask`): the prompt is a T1 sentence; the response is its
  phrase-by-phrase translation. Source phrase (h, tail) becomes ``marker  agree  content(h)``: ``marker`` is one
  of two markers of h's type (probabilities ``marker_p``, ``1 - marker_p``), ``agree`` is the agreement token
  fixed by which marker was chosen, and ``content(h)`` is a fixed 1-3-token dictionary entry, so phrase lengths
  change. A response is valid iff every phrase is one of its two translations (exact match up to the marker
  choice). The uncertainty sits at the head of each constituent, the entropy-reduction picture of [A15].
- **T2 4x4 Sudoku** (:class:`SudokuTask`): exactly 288 valid grids (by enumeration); the prompt is the grid with
  k givens (others ``BLANK``), the response the full grid. Its information is ``log #completions``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np
import torch

PAD, EOS, BOS = 0, 1, 2


# helper functions

def _as_rng(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int or numpy Generator, got {type(seed).__name__}")
    return np.random.default_rng(int(seed))


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return int(n)


def _tokens(x: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    a = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must be a 2-D integer array (batch, length), got shape {a.shape} dtype {a.dtype}")
    return a.astype(np.int64)


# T1: phrase grammar

@dataclass(frozen=True)
class PhraseGrammarConfig:
    n_types: int = 4
    heads_per_type: int = 8
    n_tail_tokens: int = 8
    max_tail: int = 3
    stop_prob: float = 0.25  # P(sentence ends | a phrase just ended)
    response_length: int = 32
    seed: int = 0


class PhraseGrammar:
    """[T1] Probabilistic phrase grammar; also an HMM with deterministic emissions over (head, tail-offset).

    Token ids: PAD=0, EOS=1, BOS=2, heads ``3 .. 3+T*Hd-1``, tail tokens after them; ``extra_tokens`` more ids
    are reserved after the tails (the translation task uses them). ``mask_token_id == vocab_size``.

    log p(x) = log pi(type_1) + sum_j log q(h_j | type_j) + sum_j log [(1-stop) T(type_j, type_j+1)]
               + log stop(type_n) - log Z,   Z = P(sentence length <= R-1)  (the sample is conditioned to fit).
    """

    def __init__(self, config: PhraseGrammarConfig = PhraseGrammarConfig(), extra_tokens: int = 0):
        c = config
        if c.n_types < 2 or c.heads_per_type < 2 or not 0 < c.stop_prob < 1 or c.response_length < 4:
            raise ValueError(f"invalid PhraseGrammarConfig {c}")
        self.config = c
        rng = np.random.default_rng(c.seed)
        T, Hd = c.n_types, c.heads_per_type
        self.n_heads = T * Hd
        self.head0 = 3
        self.tail0 = self.head0 + self.n_heads
        self.extra0 = self.tail0 + c.n_tail_tokens
        self.vocab_size = self.extra0 + extra_tokens
        self.mask_token_id = self.vocab_size
        self.prompt_length, self.response_length = 1, c.response_length
        self.start = rng.dirichlet(np.full(T, 2.0))
        trans = np.zeros((T, T))
        for t in range(T):  # each type may be followed by 2 of the types: zeros make invalid strings
            allowed = rng.choice(T, size=2, replace=False)
            trans[t, allowed] = rng.dirichlet(np.full(2, 2.0))
        self.trans = trans
        self.head_type = np.repeat(np.arange(T), Hd)
        self.head_p = np.concatenate([rng.dirichlet(np.full(Hd, 2.0)) for _ in range(T)])  # q(h | type)
        self.tail_len = rng.integers(0, c.max_tail + 1, size=self.n_heads)
        self.tails = [tuple(int(v) for v in self.tail0 + rng.integers(0, c.n_tail_tokens, size=n)) for n in self.tail_len]
        self._build_hmm()

    # --- the HMM view: states (h, k) emit head (k=0) or tail[k-1]; then EOS, then PAD forever
    def _build_hmm(self) -> None:
        states = [(h, k) for h in range(self.n_heads) for k in range(self.tail_len[h] + 1)]
        idx = {s: i for i, s in enumerate(states)}
        S = len(states) + 2
        self.eos_state, self.pad_state = S - 2, S - 1
        A, emit, pi = np.zeros((S, S)), np.zeros(S, dtype=np.int64), np.zeros(S)
        stop = self.config.stop_prob
        for (h, k), i in idx.items():
            emit[i] = self.head0 + h if k == 0 else self.tails[h][k - 1]
            if k == 0:
                pi[i] = self.start[self.head_type[h]] * self.head_p[h]
            if k < self.tail_len[h]:
                A[i, idx[(h, k + 1)]] = 1.0
            else:
                A[i, self.eos_state] = stop
                for h2 in range(self.n_heads):
                    A[i, idx[(h2, 0)]] = (1 - stop) * self.trans[self.head_type[h], self.head_type[h2]] * self.head_p[h2]
        emit[self.eos_state], emit[self.pad_state] = EOS, PAD
        A[self.eos_state, self.pad_state] = A[self.pad_state, self.pad_state] = 1.0
        self.hmm_A, self.hmm_emit, self.hmm_pi = A, emit, pi
        final = np.zeros(S)
        final[[self.eos_state, self.pad_state]] = 1.0
        self.hmm_final = final
        # Z = P(the sentence fits in R positions), by the forward recursion without observations
        alpha = pi.copy()
        for _ in range(self.response_length - 1):
            alpha = alpha @ A
        self.log_Z = float(np.log(alpha @ final))

    def sample_sentence(self, rng: np.random.Generator, max_len: int | None = None) -> list[list[int]]:
        """One sentence as a list of phrases (token lists), conditioned on total length <= max_len."""
        max_len = self.response_length - 1 if max_len is None else max_len
        while True:
            phrases, t = [], rng.choice(self.config.n_types, p=self.start)
            while True:
                hs = np.flatnonzero(self.head_type == t)
                h = int(rng.choice(hs, p=self.head_p[hs]))
                phrases.append([self.head0 + h, *self.tails[h]])
                if rng.random() < self.config.stop_prob:
                    break
                t = rng.choice(self.config.n_types, p=self.trans[t])
            if sum(map(len, phrases)) <= max_len:
                return phrases

    def _pad(self, toks: list[int], length: int) -> list[int]:
        return toks + [EOS] + [PAD] * (length - len(toks) - 1)

    def sample(self, n: int, seed: int | np.random.Generator = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` sentences: prompts ``(n, 1)`` = BOS, responses ``(n, R)`` = sentence, EOS, PAD..."""
        rng, n = _as_rng(seed), _check_n(n)
        resp = [self._pad([t for p in self.sample_sentence(rng) for t in p], self.response_length) for _ in range(n)]
        return torch.full((n, 1), BOS, dtype=torch.long), torch.tensor(resp, dtype=torch.long)

    def log_prob(self, responses: torch.Tensor | np.ndarray) -> np.ndarray:
        """Exact log p(x) of each response under the grammar conditioned to fit (``-inf`` if invalid)."""
        x = _tokens(responses, "responses")
        A, pi, emit = self.hmm_A, self.hmm_pi, self.hmm_emit
        match = (emit[None, None, :] == x[:, :, None]).astype(float)  # (B, R, S)
        with np.errstate(divide="ignore"):
            alpha = pi[None] * match[:, 0]
            logc = np.zeros(len(x))
            for t in range(1, x.shape[1]):
                s = alpha.sum(1, keepdims=True)
                logc += np.log(np.where(s > 0, s, 1.0))[:, 0]
                alpha = (alpha / np.where(s > 0, s, 1.0)) @ A * match[:, t]
            return logc + np.log(alpha @ self.hmm_final) - self.log_Z

    def is_valid(self, responses: torch.Tensor | np.ndarray) -> np.ndarray:
        """DFA check: the response is a grammatical sentence, then EOS, then only PAD."""
        return np.isfinite(self.log_prob(responses))

    def boundaries(self, responses: torch.Tensor | np.ndarray) -> list[list[int]]:
        """True constituent boundaries per response: the start of every phrase but the first, and the EOS
        position (the end of the last phrase). Positions are response-relative."""
        x = _tokens(responses, "responses")
        is_head = (x >= self.head0) & (x < self.tail0)
        out = []
        for row, heads in zip(x, is_head):
            eos = int(np.argmax(row == EOS)) if (row == EOS).any() else len(row)
            out.append([int(i) for i in np.flatnonzero(heads[:eos]) if i > 0] + [eos])
        return out


# T1c: conditional translation

@dataclass(frozen=True)
class TranslationConfig:
    grammar: PhraseGrammarConfig = PhraseGrammarConfig()
    max_source: int = 12
    response_length: int = 24
    n_content_tokens: int = 24
    max_content: int = 3
    marker_p: float = 0.5  # probability of a type's first marker
    seed: int = 1


class TranslationTask:
    """[T1c] Phrase-by-phrase translation of a T1 sentence (prompt: BOS, sentence, EOS, PAD...).

    Target phrase for source head h: ``marker_o(type h)  agree_o  content(h)``, o in {0, 1} with
    p(o=0) = marker_p, independently per phrase, so  log p(y | x) = sum_j log p(o_j).
    """

    def __init__(self, config: TranslationConfig = TranslationConfig()):
        c = config
        if not 0 < c.marker_p < 1 or c.max_content < 1 or c.response_length < 4 or c.max_source < 1:
            raise ValueError(f"invalid TranslationConfig {c}")
        n_extra = 2 * c.grammar.n_types + 2 + c.n_content_tokens
        self.grammar = g = PhraseGrammar(c.grammar, extra_tokens=n_extra)
        self.config = c
        rng = np.random.default_rng(c.seed)
        self.marker0 = g.extra0  # markers: 2 per type
        self.agree0 = self.marker0 + 2 * c.grammar.n_types  # 2 agreement tokens
        self.content0 = self.agree0 + 2
        self.vocab_size, self.mask_token_id = g.vocab_size, g.mask_token_id
        self.prompt_length, self.response_length = c.max_source + 2, c.response_length
        self.content_len = rng.integers(1, c.max_content + 1, size=g.n_heads)
        content = np.full((g.n_heads, c.max_content), PAD)
        for h in range(g.n_heads):
            content[h, : self.content_len[h]] = self.content0 + rng.integers(0, c.n_content_tokens, size=self.content_len[h])
        self.content = content
        self.phrase_len = 2 + self.content_len  # target phrase length per source head
        self.option_logp = np.log([c.marker_p, 1 - c.marker_p])

    def translate(self, heads: list[int], option: list[int]) -> list[int]:
        """Target tokens for source head ids ``heads`` (0-based) and marker choices ``option``."""
        out = []
        for h, o in zip(heads, option):
            out += [self.marker0 + 2 * int(self.grammar.head_type[h]) + o, self.agree0 + o]
            out += [int(v) for v in self.content[h, : self.content_len[h]]]
        return out

    def sample(self, n: int, seed: int | np.random.Generator = 0) -> tuple[torch.Tensor, torch.Tensor]:
        rng, n, g = _as_rng(seed), _check_n(n), self.grammar
        P, R = self.prompt_length, self.response_length
        prompts, resp = [], []
        while len(prompts) < n:
            phrases = g.sample_sentence(rng, self.config.max_source)
            heads = [p[0] - g.head0 for p in phrases]
            if int(self.phrase_len[heads].sum()) > R - 1:
                continue
            opts = list((rng.random(len(heads)) >= self.config.marker_p).astype(int))
            prompts.append([BOS] + g._pad([t for p in phrases for t in p], P - 1))
            resp.append(g._pad(self.translate(heads, opts), R))
        return torch.tensor(prompts, dtype=torch.long), torch.tensor(resp, dtype=torch.long)

    def structure(self, prompts: torch.Tensor | np.ndarray) -> dict[str, np.ndarray]:
        """Vectorised layout of the target: for each response position its segment id (-1: EOS/PAD) and its
        token under option 0 and option 1 (equal where deterministic)."""
        p = _tokens(prompts, "prompts")
        g, R = self.grammar, self.response_length
        is_head = (p >= g.head0) & (p < g.tail0)
        n_seg = is_head.sum(1)
        S = max(int(n_seg.max()), 1)
        order = np.argsort(~is_head, axis=1, kind="stable")[:, :S]  # positions of heads, in order
        heads = np.where(np.arange(S)[None] < n_seg[:, None], np.take_along_axis(p, order, 1) - g.head0, 0)
        seg_len = np.where(np.arange(S)[None] < n_seg[:, None], self.phrase_len[heads], 0)
        ends = np.cumsum(seg_len, 1)
        total = ends[:, -1]
        t = np.arange(R)[None].repeat(len(p), 0)
        seg = (t[:, :, None] >= ends[:, None, :]).sum(2)  # index of the segment containing t
        inside = t < total[:, None]
        segc = np.minimum(seg, S - 1)
        start = np.take_along_axis(ends - seg_len, segc, 1)
        k = t - start
        h = np.take_along_axis(heads, segc, 1)
        cand = np.zeros((len(p), R, 2), dtype=np.int64)
        for o in (0, 1):
            marker = self.marker0 + 2 * g.head_type[h] + o
            content = self.content[h, np.clip(k - 2, 0, self.config.max_content - 1)]
            tok = np.where(k == 0, marker, np.where(k == 1, self.agree0 + o, content))
            cand[:, :, o] = np.where(inside, tok, np.where(t == total[:, None], EOS, PAD))
        return {"segment": np.where(inside, segc, -1), "candidates": cand, "n_segments": n_seg,
                "starts": ends - seg_len, "total": total}

    def is_valid(self, prompts: torch.Tensor | np.ndarray, responses: torch.Tensor | np.ndarray) -> np.ndarray:
        """Exact match up to the marker choice: every phrase is one of its two translations, then EOS, PAD."""
        return np.isfinite(self.log_prob(prompts, responses))

    def log_prob(self, prompts: torch.Tensor | np.ndarray, responses: torch.Tensor | np.ndarray) -> np.ndarray:
        """Exact log p(y | x) (``-inf`` if y is not a translation of x)."""
        y, st = _tokens(responses, "responses"), self.structure(prompts)
        cand, seg = st["candidates"], st["segment"]
        if y.shape != cand.shape[:2]:
            raise ValueError(f"responses must have shape {cand.shape[:2]}, got {y.shape}")
        match = y[:, :, None] == cand  # (B, R, 2)
        ok_fixed = np.where(seg < 0, match[:, :, 0], True).all(1)
        S = max(int(st["n_segments"].max()), 1)
        out = np.zeros(len(y))
        for s in range(S):  # segments are few (<= max_source); positions are vectorised
            inseg = seg == s
            has = inseg.any(1)
            ok = np.stack([np.where(inseg, match[:, :, o], True).all(1) for o in (0, 1)], 1)
            lp = np.where(ok, self.option_logp[None], -np.inf).max(1)
            out += np.where(has, lp, 0.0)
        return np.where(ok_fixed, out, -np.inf)

    def boundaries(self, prompts: torch.Tensor | np.ndarray) -> list[list[int]]:
        """True constituent boundaries of the target: every phrase start but the first, and the EOS position."""
        st = self.structure(prompts)
        return [[int(s) for s in st["starts"][i, 1: st["n_segments"][i]]] + [int(st["total"][i])]
                for i in range(len(st["total"]))]


# T2: 4x4 Sudoku

@functools.lru_cache(maxsize=1)
def sudoku_grids() -> np.ndarray:
    """All valid 4x4 Sudoku grids, shape (288, 16), digits 1..4, by brute-force enumeration."""
    perms = np.array(list(itertools.permutations(range(1, 5))))  # the 24 possible rows
    grids = perms[:, None, :]
    for r in range(1, 4):  # add rows one at a time, keeping only column- and box-consistent partial grids
        g = np.concatenate([np.repeat(grids, 24, 0), np.tile(perms[:, None, :], (len(grids), 1, 1))], 1)
        cols_ok = np.all(g[:, :r, :] != g[:, r:r + 1, :], axis=(1, 2))
        box_ok = np.ones(len(g), dtype=bool)
        if r % 2 == 1:  # the row completes a band of 2x2 boxes
            a, b = g[:, r - 1], g[:, r]
            box_ok = np.all(np.sort(np.stack([a[:, :2], b[:, :2]], 1).reshape(-1, 4), 1) == [1, 2, 3, 4], 1)
            box_ok &= np.all(np.sort(np.stack([a[:, 2:], b[:, 2:]], 1).reshape(-1, 4), 1) == [1, 2, 3, 4], 1)
        grids = g[cols_ok & box_ok]
    return grids.reshape(-1, 16).astype(np.int64)


@dataclass(frozen=True)
class SudokuConfig:
    n_givens: int = 4


class SudokuTask:
    """[T2] 4x4 Sudoku. Tokens: BLANK=0, digits 1..4, ``mask_token_id == 5``. Prompt: 16 cells (digit or
    BLANK); response: the 16 digits. A puzzle with k givens is a uniform grid with k uniform cells revealed."""

    BLANK = 0

    def __init__(self, config: SudokuConfig = SudokuConfig()):
        if not 0 <= config.n_givens <= 16:
            raise ValueError(f"n_givens must be in [0, 16], got {config.n_givens}")
        self.config = config
        self.vocab_size, self.mask_token_id = 5, 5
        self.prompt_length = self.response_length = 16

    def sample(self, n: int, seed: int | np.random.Generator = 0, n_givens: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        rng, n = _as_rng(seed), _check_n(n)
        k = self.config.n_givens if n_givens is None else n_givens
        if not 0 <= k <= 16:
            raise ValueError(f"n_givens must be in [0, 16], got {k}")
        grids = sudoku_grids()[rng.integers(0, 288, size=n)]
        keep = np.argsort(rng.random((n, 16)), axis=1) < k
        return torch.tensor(np.where(keep, grids, self.BLANK)), torch.tensor(grids)

    def consistent(self, prompts: torch.Tensor | np.ndarray) -> np.ndarray:
        """(B, 288) bool: which grids agree with the givens."""
        p = _tokens(prompts, "prompts")
        return np.all((p[:, None, :] == self.BLANK) | (p[:, None, :] == sudoku_grids()[None]), axis=2)

    def n_completions(self, prompts: torch.Tensor | np.ndarray) -> np.ndarray:
        """#valid completions per puzzle; ``log`` of it is the puzzle's exact information (nats)."""
        return self.consistent(prompts).sum(1)

    def is_valid(self, prompts: torch.Tensor | np.ndarray, responses: torch.Tensor | np.ndarray) -> np.ndarray:
        """The response is a valid grid that keeps every given."""
        y = _tokens(responses, "responses")
        hit = np.all(y[:, None, :] == sudoku_grids()[None], axis=2)
        return (hit & self.consistent(prompts)).any(1)
