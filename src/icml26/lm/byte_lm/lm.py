"""ByteLevelLM: an exact byte-level language model from a BPE language model [B11].

The token LM p is restricted to canonical sequences by masking invalid next tokens and renormalising,

    p~(v | t) = p(v | t) 1[valid(last(t), v) or v = EOS] / Z(t),

so all mass lies on canonical sequences (the paper's assumption). With the covering set C(s) (see ``tree.py``)

    P(s)      = sum_{t in C(s)} p~(t)                     prefix probability of the byte string s
    P(s, end) = p~(encode(s) || EOS)
    P(b | s)  = P(sb) / P(s),   P(EOS | s) = P(s, end) / P(s)        (257 outcomes, summing to 1)

P(sb) is a log-sum-exp over the live tree nodes u (byte offset j, prefix log-probability log p~(u)) and their
valid next tokens v with bytes(v) starting with s[j:] b, grouped by the byte at index |s| - j (scatter-logsumexp);
tokens ending exactly at |s| contribute through the node at |s|. By telescoping,
sum_i log P(s_i | s_<i) + log P(EOS | s) = log p~(encode(s) || EOS): the byte LM is exact.

Every node owns the KV cache of its token sequence; a new node extends its parent's cache by one token (never a
recomputation of a prefix), and prompts are prefilled once for their fixed trunk.

Batched look-ahead (``speculate=k``, pairwise and regex tokenizers): while a token v is written after a node u at
offset j, the bytes create the nodes u || encode(bytes(v)[:m]), m = 1, 2, ... (the prefixes of the token in progress). When a
new node needs a model call, the call also runs those token paths for the valid tokens v extending s[j:] with the
largest *reach*,

    reach(v) = sum_{w : bytes(w) starts with bytes(v)} p~(w | u),

merged into a token tree of at most k tokens over u's KV cache (a tree attention mask: each token sees u's tokens
and its own ancestors, at position id = depth). A byte whose node was computed ahead costs no model call. The values
are the same single-token computations (float round-off aside), so the distribution is unchanged; ``speculate=1``
turns it off.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from icml26.harness import validate as v

from .bpe import ByteBPE, _as_bytes
from .tree import PretokTree, StreamingBPETree, TreeNode

__all__ = ["ByteLevelLM", "ByteModel", "ByteStream", "PretokByteStream", "GenerationOutput", "EOS",
           "canonical_token_logprob"]

log = logging.getLogger(__name__)
EOS = 256   # index of end-of-sequence in a next-byte distribution (bytes are 0..255)
N_OUT = 257


# helper functions

def _scatter_logsumexp(vals: torch.Tensor, idx: torch.Tensor, n: int) -> torch.Tensor:
    """out[k] = log sum_{i: idx[i] = k} exp(vals[i])   (-inf for empty groups). Shifted by the overall maximum;
    groups whose sum falls below 1e-250 of it (where float64 would lose digits) are redone with their own
    maximum."""
    out = torch.full((n,), -math.inf, dtype=vals.dtype)
    if not len(vals):
        return out
    top = vals.max()
    if not torch.isfinite(top):
        return out
    s = torch.zeros(n, dtype=vals.dtype).scatter_add_(0, idx, torch.exp(vals - top))
    out = top + torch.log(s)
    low = s < 1e-250
    if bool(low.any()):
        sel = low[idx] & torch.isfinite(vals)
        if bool(sel.any()):
            v, i = vals[sel], idx[sel]
            m = torch.full((n,), -math.inf, dtype=vals.dtype).scatter_reduce(0, i, v, "amax")
            safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
            exact = safe + torch.log(torch.zeros(n, dtype=vals.dtype).scatter_add_(0, i, torch.exp(v - safe[i])))
            out = torch.where(low, exact, out)
    return out


def _run_logsumexp(x: np.ndarray, col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log-sum-exp of ``x`` over the runs of equal values of ``col`` (contiguous groups): (the run labels, their
    log-sum-exp), float64. Shifted by the overall maximum; runs whose sum falls below 1e-250 of it are redone with
    their own maximum (a loop over those runs, at most 257 and usually none)."""
    if not len(x):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    starts = np.concatenate([[0], np.flatnonzero(col[1:] != col[:-1]) + 1])
    lab = col[starts].astype(np.int64)
    top = x.max()
    if not np.isfinite(top):
        return lab, np.full(len(starts), -math.inf)
    e = np.subtract(x, top)
    np.exp(e, out=e)
    s = np.add.reduceat(e, starts)
    with np.errstate(divide="ignore"):
        out = top + np.log(s)
    low = s < 1e-250
    if low.any():
        m = np.maximum.reduceat(x, starts)
        ends = np.append(starts[1:], len(x))
        for g in np.flatnonzero(low & np.isfinite(m)).tolist():
            out[g] = m[g] + math.log(float(np.exp(x[starts[g]:ends[g]] - m[g]).sum()))
    return lab, out


class _BranchKV:
    """The KV entries of a token sequence: ``base``'s (another cache, or none) followed by the columns ``cols`` of a
    batched tree forward (``new``: per layer (keys, values)); gathered on first use, so nodes that never run the
    model cost nothing."""

    __slots__ = ("base", "new", "cols", "_kv")

    def __init__(self, base, new, cols) -> None:
        self.base, self.new, self.cols, self._kv = base, new, cols, None

    def kv(self) -> list:
        if self._kv is None:
            c = self.cols
            idx = slice(c, c + 1) if isinstance(c, int) else (c if isinstance(c, slice) else torch.tensor(c))
            take = (lambda x: x[..., idx, :]) if not isinstance(idx, torch.Tensor) else \
                (lambda x: x.index_select(-2, idx))
            if self.base is None:
                self._kv = [(take(k), take(v)) for k, v in self.new]
            else:
                self._kv = [(torch.cat([k0, take(k)], -2), torch.cat([v0, take(v)], -2))
                            for (k0, v0), (k, v) in zip(_kv_list(self.base), self.new)]
            self.base = self.new = None
        return self._kv


class _Logits:
    """Final hidden states of a batched tree forward and the model's output head. The first ``eager`` rows (the
    node being made and the likeliest look-ahead nodes; 16 = the default ``speculate``, so all of them) are
    projected to the vocabulary at once, in one pass over the head's weights; if the bytes ever reach a later
    row's node, all remaining rows are projected in one more pass. The head's matrix product is bound by reading
    its V x d weights (one row costs about as much as 16 on CPU: at V = 64k, 4 rows at once and then one pass per
    further row cost 4-6 % more per generated byte than all 16 at once), so passes, not rows, are what count."""

    __slots__ = ("hidden", "head", "first")
    eager = 16

    def __init__(self, hidden: torch.Tensor, head) -> None:
        self.hidden, self.head = hidden, head
        with torch.no_grad():
            self.first = head(hidden[: self.eager])

    @torch.no_grad()
    def row(self, i: int) -> torch.Tensor:
        if i >= len(self.first):   # the rest of the rows in one more pass (memory-bound: ~one row's cost)
            self.first = torch.cat([self.first, self.head(self.hidden[len(self.first):])])
        return self.first[i]


def _kv_list(cache) -> list:
    return cache.kv() if isinstance(cache, _BranchKV) else [(layer.keys, layer.values) for layer in cache.layers]


def _is_dynamic(cache) -> bool:
    """A cache made of plain per-layer (keys, values) tensors (transformers' DynamicCache), or a ``_BranchKV``."""
    if isinstance(cache, _BranchKV):
        return True
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" and layer.is_initialized for layer in layers)


def _fork(cache):
    """A cache with the same contents that can be extended without touching the original."""
    if _is_dynamic(cache):
        from transformers import DynamicCache

        return DynamicCache(ddp_cache_data=_kv_list(cache))
    return copy.deepcopy(cache)


def _sample(logp: torch.Tensor, temperature: float, greedy: bool, gen: torch.Generator) -> int:
    if greedy:
        return int(torch.argmax(logp))
    p = torch.softmax(logp / temperature, dim=0)
    return int(torch.multinomial(p, 1, generator=gen))


@dataclass
class GenerationOutput:
    """What ``generate`` returns: the new bytes (without the prompt), why it stopped, and the log-probability of
    the generated bytes (and EOS, if emitted) under the untempered byte-level distribution."""

    data: bytes
    stopped_by: str     # "eos" | "stop" | "max_bytes"
    logprob: float | None   # None for the covering sampler (not scored byte by byte)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


# main classes

class ByteModel:
    """A model over 257 symbols (256 bytes + EOS). Subclasses implement ``stream(prompt)``; an object with
    ``push(byte)`` and ``logprobs() -> Tensor[257]`` (float64, log P(. | bytes pushed so far))."""

    def stream(self, prompt: bytes = b""):
        raise NotImplementedError

    def next_byte_logprobs(self, prefix: bytes | str) -> torch.Tensor:
        """log P(b | prefix) for b = 0..255 and EOS (index 256); float64, sums to 1 in probability."""
        return self.stream(prefix).logprobs()

    def logprob(self, text: bytes | str, add_eos: bool = True, prompt: bytes | str = b"") -> float:
        """sum_i log P(text_i | prompt text_<i) [+ log P(EOS | prompt text)], in nats, one byte at a time."""
        data = _as_bytes(text)
        st = self.stream(prompt)
        total = 0.0
        for b in data:
            total += float(st.logprobs()[b])
            st.push(b)
        if add_eos:
            total += float(st.logprobs()[EOS])
        return total

    def byte_logprobs(self, text: bytes | str, prompt: bytes | str = b"") -> np.ndarray:
        """Per-byte log P(text_i | prompt text_<i) (no EOS), float64 array of len(text)."""
        data = _as_bytes(text)
        st = self.stream(prompt)
        out = np.empty(len(data))
        for i, b in enumerate(data):
            out[i] = float(st.logprobs()[b])
            st.push(b)
        return out

    def generate(self, prompt: bytes | str = b"", max_bytes: int = 64, *, temperature: float = 1.0,
                 greedy: bool = False, stop: Sequence[bytes] = (), seed: int | None = 0) -> GenerationOutput:
        """Sample (or take the argmax of) one byte at a time from the exact next-byte distribution."""
        stops, gen = _check_generate_args(max_bytes, temperature, greedy, stop, seed)
        st, out, total = self.stream(prompt), bytearray(), 0.0
        while len(out) < max_bytes:
            lp = st.logprobs()
            b = _sample(lp, temperature, greedy, gen)
            total += float(lp[b])
            if b == EOS:
                return GenerationOutput(bytes(out), "eos", total)
            st.push(b)
            out.append(b)
            if any(out.endswith(s) for s in stops):
                return GenerationOutput(bytes(out), "stop", total)
        return GenerationOutput(bytes(out), "max_bytes", total)


def _check_generate_args(max_bytes, temperature, greedy, stop, seed):
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
    if not isinstance(greedy, bool):
        raise TypeError(f"greedy must be True or False, got {greedy!r}")
    if seed is not None:
        v.non_negative_int("seed", seed)
    if not greedy and not (isinstance(temperature, (int, float)) and temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    if isinstance(stop, (bytes, str)):
        stop = [stop]
    stops = [_as_bytes(x, "stop") for x in stop]
    if any(not x for x in stops):
        raise ValueError("stop sequences must be non-empty")
    return stops, torch.Generator().manual_seed(0 if seed is None else int(seed))


class ByteLevelLM(ByteModel):
    """Exact byte-level view of a Hugging Face causal LM with a byte-level BPE tokenizer [B11].

    Args:
        model: any causal LM returning ``.logits`` (left unchanged; put it in eval mode yourself).
        tokenizer: its byte-level BPE tokenizer: a ``PreTrainedTokenizerFast``, a ``tokenizers.Tokenizer`` or the
            path of a ``tokenizer.json``; pure BPE (pairwise canonicity) or with a GPT-2 / Llama-3 style regex
            pre-tokenizer (pre-token-aware covering tree, ``pretok.py``).
        bos_token_id: the token every sequence is conditioned on; default the tokenizer's BOS, else its EOS
            (the testbed models are trained on files joined by ``<eos>``).
        renormalize: ``True`` (default): the model restricted to canonical sequences, p~ (invalid next tokens
            masked, renormalised); the byte LM is the exact byte-level marginal of p~. ``False``: raw token
            probabilities summed over the valid cover and normalised over the 257 outcomes (the reference
            implementation); exact when the raw model puts all its mass on canonical sequences.
        speculate: tokens per batched tree expansion: a model call for a new node also runs
            the likely nodes of the next bytes in the same forward (see the module docstring); 1 = one call per node.

    >>> lm = ByteLevelLM(model, tok)                 # doctest: +SKIP
    >>> lm.next_byte_logprobs(b"def f(x):\\n    ret").exp().sum()   # 1.0
    """

    def __init__(self, model, tokenizer, *, bos_token_id: int | None = None, renormalize: bool = True,
                 speculate: int = 16) -> None:
        if not isinstance(renormalize, bool):
            raise TypeError(f"renormalize must be True or False, got {renormalize!r}")
        if isinstance(speculate, bool) or not isinstance(speculate, int) or speculate < 1:
            raise ValueError(f"speculate must be an int >= 1 (tokens per batched tree expansion; 1 = off), "
                             f"got {speculate!r}")
        self.speculate = speculate
        self._spec_checked = False
        self._lazy_head = False     # speculated rows projected to the vocabulary on use (set by _tree_supported)
        self.model_calls = 0     # forward passes run so far (a counter for cost reports)
        self._enc_memo: dict[bytes, tuple] = {}
        self.renormalize = renormalize
        if not callable(model) or not hasattr(model, "parameters"):
            raise TypeError(f"model must be a torch causal LM (e.g. LlamaForCausalLM), got {type(model).__name__}")
        self.model, self.tokenizer = model, tokenizer
        self.bpe = tokenizer if isinstance(tokenizer, ByteBPE) else ByteBPE(tokenizer)
        V = self.bpe.vocab_size
        out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        n_model = out.weight.shape[0] if out is not None else getattr(model.config, "vocab_size", None)
        if n_model is None or n_model < V:
            raise ValueError(f"model/tokenizer vocabulary mismatch: the model scores {n_model} tokens, the tokenizer "
                             f"has {V}; pass the tokenizer the model was trained with")
        if getattr(model, "training", False):
            log.warning("model is in training mode (dropout on); call model.eval() for deterministic results")
        bos = bos_token_id if bos_token_id is not None else getattr(tokenizer, "bos_token_id", None)
        self.bos_id = self.bpe.eos_id if bos is None else v.non_negative_int("bos_token_id", bos)
        if not 0 <= self.bos_id < n_model:
            raise ValueError(f"bos_token_id {self.bos_id} is outside the model vocabulary")
        self.device = next(model.parameters()).device
        # transformers >= 5.2x names the KV cache argument `cache`; older versions `past_key_values`
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"
        # mask[prev row] = valid next byte tokens + EOS, as an additive float64 mask over V tokens, built per row on
        # demand (pairwise tokenizers; with a regex pre-tokenizer every tree node carries its own mask)
        self.pretok = self.bpe.pretok is not None
        if not self.pretok:
            self.mask = _PairMasks(self.bpe)
        self.order = torch.from_numpy(self.bpe.order)
        self.order_np = np.ascontiguousarray(self.bpe.order, dtype=np.int64)
        self.byte_at = torch.from_numpy(self.bpe.byte_at)
        # first byte of each token id (EOS -> 256, other special tokens -> 257): the node at |s| groups by it
        first = np.full(V, N_OUT, dtype=np.int64)
        first[self.bpe.order] = self.bpe.byte_at[:, 0]
        first[self.bpe.eos_id] = EOS
        self.first_group = torch.from_numpy(first)
        # sub_end[k]: end of the positions (in ``order``) of the tokens whose bytes start with those of order[k]
        sb = self.bpe.sorted_bytes
        self.sub_end = np.array([self.bpe.prefix_range(b, k)[1] for k, b in enumerate(sb)], dtype=np.int64)

    # model calls

    def _masked_logprobs(self, logits: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """log p~(. | context) for each position: float64 [n, V], -inf on non-canonical continuations."""
        return self._next_logprobs(logits, self.mask[list(rows)])

    def _next_logprobs(self, logits: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
        """Next-token log-probabilities [n, V] in float64: log p~ (masked by the additive ``masks``, renormalised)
        or, with ``renormalize=False``, the raw softmax (the mask is then applied when covers are summed)."""
        z = logits[..., : self.bpe.vocab_size].to("cpu", torch.float64)
        return torch.log_softmax(z + masks if self.renormalize else z, dim=-1)

    def _pretok_mask(self, allowed: np.ndarray, can_end: bool) -> torch.Tensor:
        m = torch.from_numpy(np.where(allowed, 0.0, -math.inf))
        m[self.bpe.eos_id] = 0.0 if can_end else -math.inf
        return m

    def _text_masks(self, data: bytes) -> tuple[list[int], torch.Tensor]:
        """Canonical ids of ``data`` and the additive masks before each of them and after the last."""
        ids = self.bpe.encode(data)
        if not self.pretok:
            return ids, self.mask[[self.bpe.start_row] + ids]
        tree = PretokTree(self.bpe)
        for b in data:
            tree.push(b)
        node = next(u for u in tree.nodes if u.offset == len(data) and tree.fixed + list(u.suffix) == ids)
        return ids, torch.stack([self._pretok_mask(a, e) for a, e in tree.masks_along(node)])

    @torch.no_grad()
    def _forward(self, ids: Sequence[int], cache=None):
        self.model_calls += 1
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        out = self.model(input_ids=x, use_cache=True, **{self._cache_kw: cache})
        return out.logits[0], getattr(out, self._cache_kw)

    @torch.no_grad()
    def _forward_tree(self, tokens: Sequence[int], parents: Sequence[int], cache=None, lazy: bool = False):
        """One forward of a token tree over ``cache`` (or from scratch): token i follows the cached tokens and, if
        ``parents[i] >= 0``, the chain of batch tokens ending at ``parents[i]`` (< i); it attends to exactly those
        and itself, at position id (cached length + its depth). Returns (logits [k, V'], per-layer (keys, values)
        of the k new columns). With ``lazy`` (and a model whose output head could be split off, see
        ``_tree_supported``) the logits are a ``_Logits``: the final hidden states, projected to the vocabulary one
        row at a time when a row is used (at large V the output head is most of a forward's cost)."""
        self.model_calls += 1
        k = len(tokens)
        n = cache.get_seq_length() if cache is not None else 0
        mask = torch.zeros(k, n + k, dtype=torch.bool)
        mask[:, :n] = True
        depth = [0] * k
        for i, par in enumerate(parents):
            if par >= 0:
                mask[i, n:] = mask[par, n:]
                depth[i] = depth[par] + 1
            mask[i, n + i] = True
        x = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        pos = torch.tensor([[n + d for d in depth]], dtype=torch.long, device=self.device)
        kw = dict(input_ids=x, attention_mask=mask[None, None].to(self.device), position_ids=pos, use_cache=True)
        if lazy and self._lazy_head:
            out = self.model.base_model(**kw, **{self._base_cache_kw: cache})
            logits = _Logits(out.last_hidden_state[0], self.model.get_output_embeddings())
            layers = getattr(out, self._base_cache_kw).layers
        else:
            out = self.model(**kw, **{self._cache_kw: cache})
            logits = out.logits[0]
            layers = getattr(out, self._cache_kw).layers
        if n:
            new = [(layer.keys[..., n:, :].clone(), layer.values[..., n:, :].clone()) for layer in layers]
        else:
            new = [(layer.keys, layer.values) for layer in layers]
        return logits, new

    def _encode_short(self, data: bytes) -> tuple:
        """Canonical encoding of a short byte string (memoised; look-ahead paths)."""
        ids = self._enc_memo.get(data)
        if ids is None:
            if len(self._enc_memo) > 200_000:
                self._enc_memo.clear()
            ids = self._enc_memo[data] = tuple(self.bpe.encode(data))
        return ids

    def _tree_supported(self) -> bool:
        """Whether batched tree expansion is on: ``speculate > 1`` and, checked once per model on a small tree
        (two branches, one of depth 2, after BOS), tree-masked logits equal plain forwards (else switched off)."""
        if self.speculate > 1 and not self._spec_checked:
            self._spec_checked = True
            t0, t1, t2 = (int(t) for t in self.bpe.order[:3])
            _, cache = self._forward([self.bos_id])
            logits, _ = self._forward_tree([t0, t1, t2], [-1, -1, 1], _fork(cache))
            refs = [self._forward(p, _fork(cache))[0][-1] for p in ([t0], [t1], [t1, t2])]
            err = max(float((logits[i] - r).abs().max()) for i, r in enumerate(refs))
            tol = 1e-3 * (1.0 + max(float(r.abs().max()) for r in refs))
            if not err <= tol:
                log.warning("the model ignores the tree attention mask (max logit error %.3g); batched tree "
                            "expansion is switched off (speculate=1)", err)
                self.speculate = 1
            else:   # output head split off (base model + output embeddings) gives the same logits?
                self._lazy_head = self._split_head_ok()
                if self._lazy_head:
                    lazy, _ = self._forward_tree([t0, t1, t2], [-1, -1, 1], _fork(cache), True)
                    self._lazy_head = max(float((lazy.row(i) - logits[i]).abs().max()) for i in range(3)) <= tol
        return self.speculate > 1

    def _split_head_ok(self) -> bool:
        base = getattr(self.model, "base_model", None)
        head = self.model.get_output_embeddings() if hasattr(self.model, "get_output_embeddings") else None
        if base is None or base is self.model or head is None:
            return False
        params = inspect.signature(base.forward).parameters
        self._base_cache_kw = "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"
        return all(k in params for k in ("input_ids", "attention_mask", "position_ids", self._base_cache_kw))

    def stream(self, prompt: bytes | str = b""):
        """A streaming byte-level state after ``prompt`` (prefilled: one forward for the fixed trunk)."""
        cls = PretokByteStream if self.pretok else ByteStream
        return cls(self, _as_bytes(prompt, "prompt"))

    def generate(self, prompt: bytes | str = b"", max_bytes: int = 64, *, temperature: float = 1.0,
                 greedy: bool = False, stop: Sequence[bytes] = (), seed: int | None = 0,
                 method: str = "auto") -> GenerationOutput:
        """Generate from the exact byte-level distribution.

        ``method="bytewise"`` samples one byte at a time (any temperature, greedy). ``"covering"`` (exact only at
        temperature 1): draw one covering sequence t ~ p~(t | t in C(prompt)) from the tree, emit the bytes of its
        last token past the prompt, then continue with ordinary (canonically masked) token-level sampling; the
        byte strings it produces have exactly the byte LM's distribution, at token-level speed. ``"auto"`` picks
        "covering" at temperature 1 without greedy, else "bytewise".
        """
        if method not in ("auto", "bytewise", "covering"):
            raise ValueError(f"unknown method {method!r}; use 'auto', 'bytewise' or 'covering'")
        covering = not greedy and temperature == 1.0
        if method == "covering" and not covering:
            raise ValueError("method='covering' samples at temperature 1 only; use method='bytewise'")
        if method == "covering" and (self.pretok or not self.renormalize):
            raise ValueError("method='covering' needs a pairwise tokenizer (no regex pre-tokenizer) and "
                             "renormalize=True; use method='bytewise'")
        covering = covering and not self.pretok and self.renormalize
        if method == "bytewise" or not covering:
            return super().generate(prompt, max_bytes, temperature=temperature, greedy=greedy, stop=stop, seed=seed)
        stops, gen = _check_generate_args(max_bytes, temperature, greedy, stop, seed)
        if max_bytes == 0:
            return GenerationOutput(b"", "max_bytes", None)
        st = self.stream(prompt)
        node, tok = st.sample_covering(gen)
        if tok == self.bpe.eos_id:
            return GenerationOutput(b"", "eos", None)
        out = bytearray(self.bpe.token_bytes[tok][len(st.text) - node.offset:])
        cache = _fork(node.data[2])
        longest = max((len(x) for x in stops), default=0)
        while True:
            start = max(0, len(out) - len(self.bpe.token_bytes[tok]) - longest + 1)
            ends = [i + len(x) for x in stops if (i := out.find(x, start)) >= 0]
            if ends and min(ends) <= max_bytes:
                return GenerationOutput(bytes(out[: min(ends)]), "stop", None)
            if len(out) >= max_bytes:
                return GenerationOutput(bytes(out[:max_bytes]), "max_bytes", None)
            logits, cache = self._forward([tok], cache)
            p = self._masked_logprobs(logits[-1:], [tok])[0].exp()
            tok = int(torch.multinomial(p, 1, generator=gen))
            if tok == self.bpe.eos_id:
                return GenerationOutput(bytes(out), "eos", None)
            out += self.bpe.token_bytes[tok]

    def token_logprob(self, text: bytes | str, add_eos: bool = True) -> float:
        """Token-level log p~(encode(text) [|| EOS]) in one forward pass (the exactness reference)."""
        return canonical_token_logprob(self, text, add_eos=add_eos)


def canonical_token_logprob(lm: ByteLevelLM, text: bytes | str, add_eos: bool = True, masked: bool = True) -> float:
    """log p(encode(text) || EOS | BOS), summed over tokens in one forward pass; ``masked`` uses the canonical
    renormalisation p~ (what the byte LM is exact for), otherwise the raw softmax."""
    if not isinstance(lm, ByteLevelLM):
        raise TypeError(f"lm must be a ByteLevelLM, got {type(lm).__name__}")
    for name, flag in (("add_eos", add_eos), ("masked", masked)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    ids, masks = lm._text_masks(_as_bytes(text))
    ids = ids + ([lm.bpe.eos_id] if add_eos else [])
    if not ids:
        return 0.0
    logits, _ = lm._forward([lm.bos_id] + ids[:-1])
    if masked:
        lp = torch.log_softmax(logits[..., : lm.bpe.vocab_size].to("cpu", torch.float64) + masks[: len(ids)], -1)
    else:
        lp = torch.log_softmax(logits.to("cpu", torch.float64), dim=-1)
    return float(lp[torch.arange(len(ids)), torch.tensor(ids)].sum())


class _PairMasks:
    """Additive next-token masks of a pairwise tokenizer [B11]: ``masks[a]`` = float64 [V], 0 where
    ``bpe.valid[a]`` or at EOS, -inf elsewhere (a = a token id or the start row); ``masks[[a, ...]]`` stacks them
    ([n, V]). Built from the on-demand validity rows and cached (about 128 MB of rows at most), so no
    [V + 1, V] array exists (32 GB at V = 64k). Rows are shared and cached: every caller in this module reads them
    (``z + mask``, fancy-index copies, ``isfinite``, ``stack``); none may modify one in place."""

    __slots__ = ("valid", "eos", "V", "cap", "_rows")

    def __init__(self, bpe: ByteBPE) -> None:
        self.valid, self.eos, self.V = bpe.valid, bpe.eos_id, bpe.vocab_size
        self.cap = max(64, 2**27 // (8 * self.V))
        self._rows: dict[int, torch.Tensor] = {}

    def row(self, a: int) -> torch.Tensor:
        a = self.valid._index(a)   # an int token id or the start row; anything else raises (bools, floats, arrays)
        m = self._rows.get(a)
        if m is None:
            m = torch.from_numpy(np.where(self.valid.row(a), 0.0, -math.inf))
            m[self.eos] = 0.0
            if len(self._rows) >= self.cap:
                self._rows.clear()
            self._rows[a] = m
        return m

    def __getitem__(self, key) -> torch.Tensor:
        if isinstance(key, tuple):   # the dense [V + 1, V] array answered mask[a, b] with one element
            raise TypeError("index rows with masks[a] or masks[[a, ...]]; for one pair use masks[a][b]")
        if isinstance(key, list):
            if not key:
                return torch.zeros((0, self.V), dtype=torch.float64)
            return torch.stack([self.row(a) for a in key])
        return self.row(key)


class _ModelStream:
    """Model data on every tree node, ``(log p(node), log p(. | node), KV cache)`` with p = p~ (renormalised) or
    the raw model (``renormalize=False``); covers are summed with the node's canonicity mask."""

    lm: ByteLevelLM

    def _start(self, lm: ByteLevelLM, prompt: bytes) -> None:
        """Push the prompt through the (already initialised) tree, then run the model once over it."""
        self.lm = lm
        self._prefill = True
        for b in prompt:
            self.push(b)
        self._prefill = False
        self._attach_prefill()

    def _node_mask(self, u) -> torch.Tensor:
        raise NotImplementedError

    def _trunk(self, logits: torch.Tensor) -> tuple[float, torch.Tensor]:
        """(log p(trunk), log p(. | trunk)) from the logits of the forward over BOS + trunk."""
        raise NotImplementedError

    def _suffix_masks(self, u) -> torch.Tensor:
        """Additive masks after each token of u.suffix ([len(suffix), V])."""
        raise NotImplementedError

    def _cover_mask(self, u, ids: torch.Tensor) -> torch.Tensor:
        """Additive mask (0 / -inf) of the candidate next tokens ``ids`` of node ``u`` (EOS included)."""
        raise NotImplementedError

    def _make_node(self, parent: TreeNode, token: int, node: TreeNode) -> None:
        if self._prefill:
            return
        logp, nxt, cache = parent.data
        ahead = parent.spec.pop(token, None) if parent.spec else None
        if ahead is not None:          # computed ahead by an earlier batched call: no model call
            src, new, i, children = ahead
            logits = src.row(i) if isinstance(src, _Logits) else src[i]
            cache = _BranchKV(cache, new, i)
            node.spec = children or None
        elif self._can_batch(cache):
            logits, cache = self._expand(parent, token, node)
        else:
            logits, cache = self.lm._forward([token], _fork(cache))
            logits = logits[-1]
        node.data = (logp + float(nxt[token]), self._node_logprobs(node, logits), cache)

    def _node_logprobs(self, node, logits: torch.Tensor) -> torch.Tensor:
        """log p~(. | node) (or the raw log-softmax with ``renormalize=False``) from the node's logits [V']."""
        return self.lm._next_logprobs(logits[None], self._node_mask(node) if self.lm.renormalize else None)[0]

    def _can_batch(self, cache) -> bool:
        return _is_dynamic(cache) and self.lm._tree_supported()

    def _allowed_ids(self, u, lo: int, hi: int) -> torch.Tensor:
        """bool [hi - lo]: the tokens ``order[lo:hi]`` may follow node ``u``."""
        raise NotImplementedError

    def _allowed_first(self, u, token: int) -> bool:
        raise NotImplementedError

    def _paths(self, parent: TreeNode, n: int) -> list[tuple]:
        """Token paths after ``parent`` (offset j) that the next bytes may turn into tree nodes, most likely first:
        for the valid tokens v extending s[j:n] with the largest reach (reach(v) = p~ of the tokens that start
        with bytes(v)), the canonical encodings of bytes(v)[:m] for m = n - j + 1 .. |v| (the nodes the tree makes
        while v is written, e.g. `ret`, `ret u`, `return`)."""
        lm = self.lm
        lo, hi = parent.lo + 1, parent.hi     # parent.lo is the token equal to s[j:n] (the node being made)
        if hi <= lo:
            return []
        ids = lm.order[lo:hi]
        ok = self._allowed_ids(parent, lo, hi)
        logw = parent.data[1][ids]
        if not lm.renormalize:
            logw = logw.masked_fill(~ok, -math.inf)
        cs = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(torch.exp(logw), 0)])
        ends = torch.from_numpy(np.minimum(lm.sub_end[lo:hi], hi) - lo)
        reach = cs[ends] - cs[:-1]
        reach = torch.where(ok, reach, torch.full_like(reach, -1.0))
        top = torch.topk(reach, min(len(ids), lm.speculate)).indices.tolist()
        d, paths = n - parent.offset, []
        for i in top:
            if not reach[i] > 0:
                break
            b = lm.bpe.token_bytes[int(ids[i])]
            for m in range(d + 1, len(b) + 1):
                try:
                    seq = lm._encode_short(b[:m])
                except ValueError:     # a regex pre-tokenizer encodes UTF-8 text only
                    continue
                if seq and self._allowed_first(parent, seq[0]):
                    paths.append(seq)
        return paths

    def _expand(self, parent: TreeNode, token: int, node: TreeNode):
        """Model data of node = parent + token, computed in one tree-masked forward together with the likely
        nodes of the next bytes (``_paths``, up to ``speculate`` tokens in all); those are kept on the parent
        and on the node (``spec``), nested by token path."""
        lm, cache = self.lm, parent.data[2]
        toks, pars, index = [token], [-1], {(token,): 0}
        have = parent.spec or {}
        for seq in self._paths(parent, node.offset):
            if len(toks) >= lm.speculate:
                break
            if seq[0] in have:
                continue
            up = -1
            for k in range(1, len(seq) + 1):
                if seq[:k] not in index:
                    if len(toks) >= lm.speculate:
                        break
                    index[seq[:k]] = len(toks)
                    toks.append(seq[k - 1])
                    pars.append(up)
                up = index[seq[:k]]
        if len(toks) == 1:
            logits, c = lm._forward([token], _fork(cache))
            return logits[-1], c
        logits, new = lm._forward_tree(toks, pars, _fork(cache), True)
        entries = [(logits, new, i, {}) for i in range(len(toks))]
        parent.spec = dict(have)
        for path, i in index.items():
            if len(path) == 1:
                if i:
                    parent.spec[path[0]] = entries[i]
            else:
                entries[index[path[:-1]]][3][path[-1]] = entries[i]
        node.spec = entries[0][3] or None
        return (logits.row(0) if isinstance(logits, _Logits) else logits[0]), _BranchKV(cache, new, 0)

    def _attach_prefill(self) -> None:
        """BOS + trunk and every live node's (short) suffix in one tree-masked forward (suffixes branch off the
        trunk); one forward over BOS + trunk and then one per suffix if batching is off."""
        lm = self.lm
        ids = [lm.bos_id] + self.fixed
        n = len(ids)
        chains = [list(u.suffix) for u in self.nodes]
        flat, parents, spans = list(ids), list(range(-1, n - 1)), []
        for c in chains:
            spans.append((len(flat), len(flat) + len(c)))
            for j, t in enumerate(c):
                parents.append(n - 1 if j == 0 else len(flat) - 1)
                flat.append(t)
        batched = len(flat) > n and lm._tree_supported()
        if batched:
            logits, new = lm._forward_tree(flat, parents)
        else:
            logits, cache = lm._forward(ids)
            new = None
        trunk_logp, trunk_next = self._trunk(logits[:n])
        trunk_cache = _BranchKV(None, new, slice(0, n)) if batched else cache
        for u, s, (a0, b0) in zip(self.nodes, chains, spans):
            if not s:
                u.data = (trunk_logp, trunk_next, trunk_cache)
                continue
            if batched:
                lg, c = logits[a0:b0], _BranchKV(None, new, list(range(n)) + list(range(a0, b0)))
            else:
                lg, c = lm._forward(s, _fork(cache))
            lps = lm._next_logprobs(lg, self._suffix_masks(u) if lm.renormalize else None)
            inner = lps[torch.arange(len(s) - 1), torch.tensor(s[1:], dtype=torch.long)].sum()
            logp = trunk_logp + float(trunk_next[s[0]]) + float(inner)
            u.data = (logp, lps[-1], c)

    def _candidates(self):
        """Per live node: (node, d, candidate token ids, their log-weights log p(u) + log p(v | u) [+ mask])."""
        n, order, byte_at, eos = len(self.text), self.lm.order, self.lm.byte_at, self.lm.bpe.eos_id
        for u in self.nodes:
            logp, nxt, _ = u.data
            d = n - u.offset
            lo = u.lo + int(d > 0 and bool(byte_at[u.lo, d] == -1))  # the token equal to s[j:] is the node at |s|
            ids = order[lo:u.hi]
            if d == 0:
                ids = torch.cat([ids, torch.tensor([eos])])
            w = logp + nxt[ids]     # renormalised: nxt is -inf wherever the node's mask is
            yield u, d, lo, ids, w if self.lm.renormalize else w + self._cover_mask(u, ids)

    def log_scores(self) -> torch.Tensor:
        """Unnormalised log P(s b) for b = 0..255 and log P(s, end) at index 256 (float64 [257]).

        A node u at offset j covers the tokens ``order[lo:hi]`` (bytes starting with s[j:], sorted), so the tokens
        that share their next byte (index |s| - j) are *contiguous runs* of that range: each node contributes one
        log-sum-exp per run (``_run_logsumexp``, no gather over V), and the few hundred run sums of all nodes are
        combined by byte. The node at |s| (j = |s|) covers every byte token, grouped by its first byte, plus EOS;
        tokens ending exactly at |s| contribute through that node. With ``renormalize=False`` the node's
        prefix-canonicity mask is applied to its range first (log p~ is already -inf off the mask)."""
        lm = self.lm
        n, order, byte_at = len(self.text), lm.order_np, lm.bpe.byte_at
        eos = lm.bpe.eos_id
        vals, labels = [], []
        for u in self.nodes:
            logp, nxt, _ = u.data
            d = n - u.offset
            lo = u.lo + int(d > 0 and byte_at[u.lo, d] == -1)   # the token equal to s[j:] is the node at |s|
            x = nxt.numpy()[order[lo:u.hi]]
            if not lm.renormalize:
                x[~self._allowed_np(u, lo, u.hi)] = -math.inf
            lab, lse = _run_logsumexp(x, byte_at[lo:u.hi, d])
            vals.append(logp + lse)
            labels.append(lab)
            if d == 0:
                e = float(nxt[eos]) if lm.renormalize or self._eos_ok(u) else -math.inf
                vals.append(np.array([logp + e]))
                labels.append(np.array([EOS]))
        v, i = torch.from_numpy(np.concatenate(vals)), torch.from_numpy(np.concatenate(labels).astype(np.int64))
        return _scatter_logsumexp(v, i, N_OUT)

    def _allowed_np(self, u, lo: int, hi: int) -> np.ndarray:
        return self._allowed_ids(u, lo, hi).numpy()

    def _eos_ok(self, u) -> bool:
        raise NotImplementedError

    def covering(self) -> tuple[torch.Tensor, list[TreeNode], torch.Tensor, torch.Tensor]:
        """The covering set as candidates (node u, next token v): log-weights log p(u) + log p(v | u) - log P(s),
        plus (node at |s|, EOS). Returns (log-weights, nodes, node index per candidate, token per candidate)."""
        vals, toks, owners = [], [], []
        for k, (u, d, lo, ids, w) in enumerate(self._candidates()):
            vals.append(w)
            toks.append(ids)
            owners.append(torch.full((len(ids),), k))
        vals = torch.cat(vals)
        return vals - torch.logsumexp(vals, 0), list(self.nodes), torch.cat(owners), torch.cat(toks)

    def sample_covering(self, gen: torch.Generator) -> tuple[TreeNode, int]:
        """Draw (node u, next token v) with probability p~(u) p~(v | u) / P(s) over the covering set C(s), or
        (node at |s|, EOS) with probability P(s, end) / P(s)."""
        logw, nodes, owners, toks = self.covering()
        i = int(torch.multinomial(logw.exp(), 1, generator=gen))
        return nodes[int(owners[i])], int(toks[i])

    def log_prefix_prob(self) -> float:
        """log P(s) = log sum_{t in C(s)} p(t)."""
        return float(torch.logsumexp(self.log_scores(), 0))

    def logprobs(self) -> torch.Tensor:
        s = self.log_scores()
        return s - torch.logsumexp(s, 0)


class ByteStream(_ModelStream, StreamingBPETree):
    """The valid covering tree of the bytes pushed so far (pairwise canonicity), with model data on every node."""

    def __init__(self, lm: ByteLevelLM, prompt: bytes = b"") -> None:
        if not isinstance(lm, ByteLevelLM):
            raise TypeError(f"lm must be a ByteLevelLM, got {type(lm).__name__}")
        prompt = _as_bytes(prompt, "prompt")
        StreamingBPETree.__init__(self, lm.bpe)
        self._start(lm, prompt)

    def _node_mask(self, u) -> torch.Tensor:
        return self.lm.mask[u.last]

    def _cover_mask(self, u, ids: torch.Tensor) -> torch.Tensor:
        return self.lm.mask[u.last][ids]

    def _allowed_ids(self, u, lo: int, hi: int) -> torch.Tensor:
        return torch.isfinite(self.lm.mask[u.last][self.lm.order[lo:hi]])

    def _allowed_first(self, u, token: int) -> bool:
        return self.lm.bpe.valid.pair(u.last, token)

    def _eos_ok(self, u) -> bool:
        return bool(torch.isfinite(self.lm.mask[u.last][self.lm.bpe.eos_id]))

    def _trunk(self, logits: torch.Tensor) -> tuple[float, torch.Tensor]:
        lm, nf = self.lm, len(self.fixed)
        lp = lm._next_logprobs(logits, lm.mask[[lm.bpe.start_row] + self.fixed])
        return float(lp[torch.arange(nf), torch.tensor(self.fixed, dtype=torch.long)].sum()), lp[-1]

    def _suffix_masks(self, u) -> torch.Tensor:
        return self.lm.mask[list(u.suffix)]


class PretokByteStream(_ModelStream, PretokTree):
    """The pre-token-aware covering tree (regex pre-tokenizers) with model data on every node.

    After a prompt, node log-probabilities are conditional on the fixed trunk (``log_prefix_prob`` is then
    log P(s) - log p(trunk)); every cover shares the trunk, so next-byte distributions are unaffected. Pushing
    bytes from an empty prompt keeps them absolute.
    """

    def __init__(self, lm: ByteLevelLM, prompt: bytes = b"") -> None:
        if not isinstance(lm, ByteLevelLM):
            raise TypeError(f"lm must be a ByteLevelLM, got {type(lm).__name__}")
        prompt = _as_bytes(prompt, "prompt")
        PretokTree.__init__(self, lm.bpe)
        self._start(lm, prompt)

    def _node_mask(self, u) -> torch.Tensor:
        return self.lm._pretok_mask(self.full_mask(u), u.can_end)

    def _node_logprobs(self, node, logits: torch.Tensor) -> torch.Tensor:
        """As the base class, masking a fresh float64 copy of the node's logits with its bool mask in place
        (``masked_fill_``; no float64 additive mask over V and no second copy)."""
        lm = self.lm
        z = logits[: lm.bpe.vocab_size].to("cpu", torch.float64, copy=True)   # a fresh copy: the row is kept
        if lm.renormalize:
            eos = lm.bpe.eos_id
            z_eos = float(z[eos])
            z.masked_fill_(torch.from_numpy(~self.full_mask(node)), -math.inf)
            z[eos] = z_eos if node.can_end else -math.inf
        return torch.log_softmax(z, dim=-1)

    def _allowed_ids(self, u, lo: int, hi: int) -> torch.Tensor:
        return torch.from_numpy(self.allowed_range(u, lo, hi))

    def _allowed_first(self, u, token: int) -> bool:
        return bool(self.full_mask(u)[token])

    def _allowed_np(self, u, lo: int, hi: int) -> np.ndarray:
        return self.allowed_range(u, lo, hi)

    def _eos_ok(self, u) -> bool:
        return bool(u.can_end)

    def _cover_mask(self, u, ids: torch.Tensor) -> torch.Tensor:
        eos = self.lm.bpe.eos_id
        tok = ids[ids != eos].numpy()
        m = torch.full((len(ids),), -math.inf, dtype=torch.float64)
        ok = torch.zeros(len(ids), dtype=torch.bool)
        ok[ids != eos] = torch.from_numpy(self.allowed(u, tok))
        ok[ids == eos] = bool(u.can_end)
        return m.masked_fill(ok, 0.0)

    def _trunk(self, logits: torch.Tensor) -> tuple[float, torch.Tensor]:
        """(0, log p(. | trunk)): conditional on the trunk, whose last mask is the fresh-start state ()."""
        lm = self.lm
        mask = None
        if lm.renormalize:
            allowed = lm.bpe.pretok_mask(())[0]
            mask = lm._pretok_mask(allowed, lm.bpe.is_canonical(self.fixed))
        return 0.0, lm._next_logprobs(logits[-1:], None if mask is None else mask[None])[0]

    def _suffix_masks(self, u) -> torch.Tensor:
        rows = self.masks_along(u, trunk=False)[1:]
        return torch.stack([self.lm._pretok_mask(a, e) for a, e in rows])
