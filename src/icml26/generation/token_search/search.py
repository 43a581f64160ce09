"""Verifier-guided test-time search over token sequences [A01]: best-of-N, beam and lookahead search.

Components: a tokenizer with prefix readouts dec(z_{1:t}) = x_hat_t, a prior pi(z_t | z_<t, c) (an AR model, or
uniform for training-free search) and a verifier r(x, c). All searches run for a batch of targets (prompt classes)
at once; one verifier call scores every candidate of every target in a step.

- Best-of-N: z^(i) ~ pi(. | c), i = 1..N; return argmax_i r(dec z^(i), c).                   Cost: N calls.
- Beam(B, K, s): keep B prefixes; extend each by K sampled s-token continuations (without replacement under a
  uniform prior); score the prefix readouts r(dec z_{1:t+s}, c); keep the top B. The first step expands the empty
  prefix into B*K candidates.                                                                  Cost: B*K*ceil(L/s).
- Lookahead(B, K, s, h): as beam, but a candidate is scored on r(dec(rollout_h), c) where pi extends it by h
  more tokens (h >= L - t is a full rollout). Same verifier calls as beam; h extra prior tokens per candidate.
  Lookahead with h = 0 is beam search (same random draws).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...harness import validate as v
from .verifiers import check_cond


class Tokenizer(Protocol):
    n_tokens: int
    vocab_size: int

    def decode(self, tokens: np.ndarray, prefix_len: int | None = None) -> np.ndarray: ...


class Prior(Protocol):
    V: int
    L: int

    def extend(self, prefix, cond, n_tokens, rng=None) -> np.ndarray: ...

    def expand(self, prefix, cond, k, s, rng=None) -> np.ndarray: ...


@dataclass
class SearchResult:
    """Outcome of one search over a batch of T targets.

    ``tokens`` (T, L), ``image`` (T, D) = dec(tokens), ``score`` (T,) = r(image, c); ``n_verifier_calls`` and
    ``n_prior_calls`` are per target (images scored, tokens sampled from the prior); ``n_verifier_batches``
    counts batched verifier invocations; ``trace`` has one entry per search step.
    """

    tokens: np.ndarray
    image: np.ndarray
    score: np.ndarray
    n_verifier_calls: int
    n_prior_calls: int
    trace: list[dict[str, Any]] = field(default_factory=list)
    n_verifier_batches: int = 0


# helper functions

def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _pos_int(name: str, value: Any) -> int:
    return v.positive_int(name, value)


def _distinct(prior: Prior) -> bool:
    return bool(getattr(prior, "without_replacement", False))


def planned_verifier_calls(seq_len: int, beam_width: int, expand: int, step: int, vocab_size: int | None = None
                           ) -> int:
    """Verifier calls per target of beam/lookahead search: B*K*ceil(L/s), fewer when continuations are drawn
    without replacement from V^s possibilities (pass ``vocab_size`` for a uniform prior)."""
    seq_len, beam_width = v.positive_int("seq_len", seq_len), v.positive_int("beam_width", beam_width)
    expand, step = v.positive_int("expand", expand), v.positive_int("step", step)
    if vocab_size is not None:
        vocab_size = v.positive_int("vocab_size", vocab_size, minimum=2)
    calls, b, t = 0, 1, 0
    while t < seq_len:
        s = min(step, seq_len - t)
        k = beam_width * expand if t == 0 else expand
        if vocab_size is not None:
            k = min(k, vocab_size ** s)
        calls += b * k
        b = min(beam_width, b * k)
        t += s
    return calls


def _check_budget(planned: int, max_verifier_calls: int | None, what: str) -> None:
    if max_verifier_calls is None:
        return
    if not isinstance(max_verifier_calls, (int, np.integer)) or max_verifier_calls < 1:
        raise ValueError(f"max_verifier_calls={max_verifier_calls!r} is smaller than one candidate: a search "
                         "needs at least one verifier call per target")
    if planned > max_verifier_calls:
        raise ValueError(f"{what} needs {planned} verifier calls per target, more than max_verifier_calls="
                         f"{max_verifier_calls}; lower N, beam_width, expand or raise step")


def _setup(tokenizer: Tokenizer, prior: Prior, verifier: Any, cond: Any) -> tuple[int, np.ndarray]:
    if not callable(getattr(tokenizer, "decode", None)):
        raise TypeError(f"tokenizer must have a decode(tokens) method (e.g. OrderedPCATokenizer), got "
                        f"{v.describe(tokenizer)}")
    if callable(getattr(tokenizer, "_require_fit", None)):
        tokenizer._require_fit()
    if not all(hasattr(tokenizer, a) for a in ("n_tokens", "vocab_size")):
        raise TypeError(f"tokenizer must have n_tokens and vocab_size, got {v.describe(tokenizer)}")
    if not all(hasattr(prior, a) for a in ("V", "L", "extend", "expand")):
        raise TypeError(f"prior must be a prior over tokens with V, L, extend() and expand() (UniformPrior or "
                        f"ARPrior), got {v.describe(prior)}")
    if not callable(verifier):
        raise TypeError(f"verifier must be callable as verifier(images, cond) -> scores, got {v.describe(verifier)}")
    L = int(tokenizer.n_tokens)
    if prior.L != L or prior.V != tokenizer.vocab_size:
        raise ValueError(f"prior is over V={prior.V}, L={prior.L} but the tokenizer has V={tokenizer.vocab_size}, "
                         f"L={L}; train the prior on this tokenizer's tokens")
    classes = getattr(verifier, "classes_", None)
    c = check_cond(cond, np.unique(np.asarray(cond)) if classes is None else classes)
    return L, c


def _scores(scores: Any, n: int) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (n,):
        raise ValueError(f"verifier must return one score per image, shape ({n},), got shape {scores.shape}")
    if not np.all(np.isfinite(scores)):
        raise ValueError("verifier returned NaN or infinite scores; a search cannot rank candidates by them")
    return scores


# main functions

def best_of_n(tokenizer: Tokenizer, prior: Prior, verifier: Any, cond: np.ndarray | list[int], n: int, *,
              rng: np.random.Generator | int | None = None, condition_prior: bool = True,
              max_verifier_calls: int | None = None) -> SearchResult:
    """Sample N full sequences per target from the prior and keep the verifier's favourite [A01].

    Samples are drawn sample-major, so with the same seed the first m of N samples are the m-sample run
    (nested): the best score is non-decreasing in N.
    """
    n = _pos_int("n", n)
    _check_budget(n, max_verifier_calls, f"best-of-{n}")
    L, c = _setup(tokenizer, prior, verifier, cond)
    T = len(c)
    cc = np.tile(c, n)                                        # row i*T + j: sample i of target j
    z = prior.extend(np.zeros((n * T, 0), np.int64), cc if condition_prior else None, L, _rng(rng))
    images = tokenizer.decode(z)
    scores = _scores(verifier(images, cc), n * T).reshape(n, T)
    best = scores.argmax(0)
    rows = best * T + np.arange(T)
    trace = [{"step": 1, "prefix_len": L, "n_candidates": n, "best_score": scores.max(0)}]
    return SearchResult(z[rows], images[rows], scores[best, np.arange(T)], n, n * L, trace, 1)


def lookahead_search(tokenizer: Tokenizer, prior: Prior, verifier: Any, cond: np.ndarray | list[int], *,
                     beam_width: int, expand: int, step: int = 1, horizon: int = 0,
                     rng: np.random.Generator | int | None = None, condition_prior: bool = True,
                     max_verifier_calls: int | None = None) -> SearchResult:
    """Beam search whose candidates are scored after a prior rollout of ``horizon`` tokens [A01].

    ``horizon=0`` is plain beam search (score the prefix readout dec(z_{1:t+s})).
    """
    B, K, s = _pos_int("beam_width", beam_width), _pos_int("expand", expand), _pos_int("step", step)
    if not isinstance(horizon, (int, np.integer)) or horizon < 0:
        raise ValueError(f"horizon must be an int >= 0, got {horizon!r}")
    L, c = _setup(tokenizer, prior, verifier, cond)
    planned = planned_verifier_calls(L, B, K, s, prior.V if _distinct(prior) else None)
    _check_budget(planned, max_verifier_calls, f"beam(B={B}, K={K}, s={s})")
    rng = _rng(rng)
    T = len(c)
    beams = np.zeros((T, 1, 0), np.int64)
    calls = prior_tokens = batches = 0
    trace: list[dict[str, Any]] = []
    t = 0
    while t < L:
        b, se = beams.shape[1], min(s, L - t)
        k = B * K if t == 0 else K
        pcond = np.repeat(c, b)
        cands = prior.expand(beams.reshape(T * b, t), pcond if condition_prior else None, k, se, rng)
        m = len(cands) // T                                   # candidates per target (b * k')
        ccand = np.repeat(c, m)
        prior_tokens += m * se
        rolled = cands
        if horizon and t + se < L:
            rolled = prior.extend(cands, ccand if condition_prior else None, horizon, rng)
            prior_tokens += m * (rolled.shape[1] - cands.shape[1])
        scores = _scores(verifier(tokenizer.decode(rolled), ccand), T * m).reshape(T, m)
        calls += m
        batches += 1
        order = np.argsort(-scores, axis=1, kind="stable")[:, :B]
        beams = cands.reshape(T, m, t + se)[np.arange(T)[:, None], order]
        best = scores[np.arange(T)[:, None], order]
        t += se
        trace.append({"step": len(trace) + 1, "prefix_len": t, "n_candidates": m, "best_score": best[:, 0]})
    assert calls == planned, (calls, planned)
    tokens = beams[:, 0]
    return SearchResult(tokens, tokenizer.decode(tokens), best[:, 0], calls, prior_tokens, trace, batches)


def beam_search(tokenizer: Tokenizer, prior: Prior, verifier: Any, cond: np.ndarray | list[int], *,
                beam_width: int, expand: int, step: int = 1, rng: np.random.Generator | int | None = None,
                condition_prior: bool = True, max_verifier_calls: int | None = None) -> SearchResult:
    """Beam search on prefix readouts: keep the B best of B*K s-token extensions per step [A01]."""
    return lookahead_search(tokenizer, prior, verifier, cond, beam_width=beam_width, expand=expand, step=step,
                            horizon=0, rng=rng, condition_prior=condition_prior,
                            max_verifier_calls=max_verifier_calls)
