"""Token-level baselines for next-byte prediction at a prompt boundary [B11].

- naive: encode the prompt, take the model's next-token distribution, and read off each token's first byte,
  P_naive(b | s) = sum_{v : bytes(v)[0] = b} p(v | encode(s))  (EOS keeps its own mass).
- token healing: back up one token r = last(encode(s)) and constrain the next token to those starting with
  bytes(r); a token longer than r predicts its byte after r, the token r itself hands over to the naive
  distribution after it:  P_heal(b | s) ∝ sum_{v ⊋ r, v[|r|] = b} p(v | ctx) + p(r | ctx) P_naive(b | s).
Both use the raw softmax (no canonicity mask), as a user calling the token model would.
"""

from __future__ import annotations

import torch

from icml26.harness import validate as v

from .bpe import ByteBPE, _as_bytes
from .lm import EOS, N_OUT, _scatter_logsumexp

__all__ = ["naive_next_byte_logprobs", "token_healing_next"]


def _setup(model, tokenizer, prompt, bos_token_id):
    if not callable(model) or not hasattr(model, "parameters"):
        raise TypeError(f"model must be a torch causal LM, got {v.describe(model)}")
    data = _as_bytes(prompt, "prompt")
    bpe = tokenizer if isinstance(tokenizer, ByteBPE) else ByteBPE(tokenizer)
    bos = bos_token_id if bos_token_id is not None else getattr(bpe.tokenizer, "bos_token_id", None)
    bos = bpe.eos_id if bos is None else v.non_negative_int("bos_token_id", bos)
    n_model = getattr(getattr(model, "config", None), "vocab_size", None)
    if n_model is not None and bos >= n_model:
        raise ValueError(f"bos_token_id must be a token id below the model's vocabulary size {n_model}, got {bos}")
    return bpe, bos, data


@torch.no_grad()
def _token_logprobs(model, bpe: ByteBPE, ids: list[int]) -> torch.Tensor:
    """Raw next-token log-probabilities after each position: float64 [len(ids), V]."""
    dev = next(model.parameters()).device
    logits = model(input_ids=torch.tensor([ids], device=dev), use_cache=False).logits[0]
    if logits.shape[-1] < bpe.vocab_size:
        raise ValueError(f"model/tokenizer vocabulary mismatch: the model scores {logits.shape[-1]} tokens, the "
                         f"tokenizer has {bpe.vocab_size}")
    return torch.log_softmax(logits.to("cpu", torch.float64), -1)[:, : bpe.vocab_size]


def _first_byte_marginal(bpe: ByteBPE, lp: torch.Tensor, lo: int = 0, hi: int | None = None, depth: int = 0) -> torch.Tensor:
    """Unnormalised log-mass per next byte of the tokens order[lo:hi] longer than ``depth`` bytes."""
    hi = len(bpe.order) if hi is None else hi
    idx = torch.from_numpy(bpe.byte_at[lo:hi, depth]).long()
    keep = idx >= 0
    vals = lp[torch.from_numpy(bpe.order[lo:hi])][keep]
    return _scatter_logsumexp(vals, idx[keep], N_OUT)


def _normalise(s: torch.Tensor) -> torch.Tensor:
    return s - torch.logsumexp(s, 0)


def naive_next_byte_logprobs(model, tokenizer, prompt: bytes | str, *, bos_token_id: int | None = None) -> torch.Tensor:
    """Next-byte log-probabilities [257] of the naive method: first byte of the next token after encode(prompt)."""
    bpe, bos, data = _setup(model, tokenizer, prompt, bos_token_id)
    lp = _token_logprobs(model, bpe, [bos] + bpe.encode(data))[-1]
    s = _first_byte_marginal(bpe, lp)
    s[EOS] = lp[bpe.eos_id]
    return _normalise(s)


def token_healing_next(model, tokenizer, prompt: bytes | str, *, bos_token_id: int | None = None) -> torch.Tensor:
    """Next-byte log-probabilities [257] with token healing (back up one token, constrain to its bytes)."""
    bpe, bos, data = _setup(model, tokenizer, prompt, bos_token_id)
    if not data:
        raise ValueError("token healing needs a non-empty prompt (it backs up over the prompt's last token)")
    ids = bpe.encode(data)
    r = ids[-1]
    lp = _token_logprobs(model, bpe, [bos] + ids)   # rows -2: after ctx = ids[:-1]; -1: after the full prompt
    lo, hi = bpe.prefix_range(bpe.token_bytes[r])
    longer = _first_byte_marginal(bpe, lp[-2], lo, hi, depth=len(bpe.token_bytes[r]))
    naive = _first_byte_marginal(bpe, lp[-1])
    naive[EOS] = lp[-1, bpe.eos_id]
    return _normalise(torch.logaddexp(longer, lp[-2, r] + _normalise(naive)))
