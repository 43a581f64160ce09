"""[B04] Speculative decoding with an EAGLE-3 draft: a chain or a small static tree, greedy verification.

One round (prefix x_0..x_m, x_m the last emitted token, target features known for positions 0..m-1):

1. draft prefill: the positions that just got target features, inputs (x_{j+1}, fc(g_j)); its output at
   position m-1 proposes x_{m+1};
2. drafting: a chain of ``num_steps`` tokens (argmax, feeding the draft's own output a back as the feature) or
   a static tree (top-k children per node, one batched draft call per depth, tree attention);
3. verification: one target call on [x_m, drafted tokens] (tree: with a tree attention mask and positions
   m + depth); the longest drafted path whose every token equals the target's argmax at its parent is accepted,
   plus the target's argmax after it (the bonus token). The target KV cache keeps the accepted positions only
   (``crop`` for a chain, an index select for a tree) and the draft cache drops everything drafted.

Every emitted token is the target's own argmax given the emitted prefix, so the output equals plain greedy
decoding for any draft; the draft only changes how many tokens one target call yields (the acceptance length).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import torch
from torch import nn

from .draft import DraftCache, Eagle3Draft, target_hidden_size, target_vocab_size

# output


@dataclass
class SpecStats:
    """Per-call bookkeeping: ``accept_lengths[i]`` tokens emitted by verification call i (accepted + bonus)."""

    accept_lengths: list[int] = field(default_factory=list)
    target_calls: int = 0   # all target forwards, the prefill included
    draft_calls: int = 0    # draft forwards (one per chain step / tree depth, plus the prefill of new positions)
    new_tokens: int = 0

    @property
    def mean_accept_length(self) -> float:
        """tau: mean tokens per verification call (1.0 for plain greedy)."""
        return sum(self.accept_lengths) / max(1, len(self.accept_lengths))

    @property
    def target_calls_per_token(self) -> float:
        return self.target_calls / max(1, self.new_tokens)


class SpecOutput(NamedTuple):
    sequences: torch.Tensor  # [1, prompt + new] token ids
    stats: SpecStats


# helper functions


def validate_generation_inputs(model: nn.Module, input_ids: torch.Tensor, max_new_tokens: int, tokenizer=None) -> None:
    """Clear errors for the inputs every decoding entry point shares."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long:
        raise TypeError("input_ids must be a LongTensor of token ids, shape [1, prompt_len]")
    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must have shape [1, prompt_len] (one prompt), got {tuple(input_ids.shape)}")
    if input_ids.shape[1] == 0:
        raise ValueError("the prompt is empty: speculative decoding needs at least one prompt token")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
    max_pos = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(max_pos, int) and input_ids.shape[1] + max_new_tokens > max_pos:
        raise ValueError(f"prompt ({input_ids.shape[1]} tokens) + max_new_tokens ({max_new_tokens}) exceeds the "
                         f"model's max_position_embeddings ({max_pos}): shorten the prompt or lower max_new_tokens")
    vocab = target_vocab_size(model)
    if tokenizer is not None and len(tokenizer) > vocab:
        raise ValueError(f"tokenizer has {len(tokenizer)} tokens but the model's vocabulary has {vocab}: "
                         "they do not belong together (use the tokenizer the model was trained with)")
    if int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab:
        raise ValueError(f"input_ids hold ids outside the model's vocabulary [0, {vocab}): wrong tokenizer?")


def _check_draft(target: nn.Module, draft: Eagle3Draft) -> None:
    if not isinstance(draft, Eagle3Draft):
        raise TypeError(f"draft must be an Eagle3Draft, got {type(draft).__name__}")
    if draft.config.hidden_size != target_hidden_size(target):
        raise ValueError(f"draft width {draft.config.hidden_size} does not fit the target's hidden size "
                         f"{target_hidden_size(target)}: build the draft with Eagle3Draft.from_target(target)")
    if draft.config.vocab_size != target_vocab_size(target):
        raise ValueError(f"draft maps into a vocabulary of {draft.config.vocab_size} tokens but the target has "
                         f"{target_vocab_size(target)}: the draft was built for another model/tokenizer")


def _target_forward(target, ids, cache, aux_layers, position_ids=None, attention_mask=None):
    """Logits and the fused features g = [h^(l) for l in aux_layers] of the fed positions."""
    key = _cache_kwarg(type(target))
    out = target(input_ids=ids, use_cache=True, output_hidden_states=aux_layers is not None,
                 position_ids=position_ids, attention_mask=attention_mask, **{key: cache})
    aux = None if aux_layers is None else torch.cat([out.hidden_states[i + 1] for i in aux_layers], dim=-1)
    return out.logits, aux, cache  # the DynamicCache is updated in place


@functools.lru_cache(maxsize=None)
def _cache_kwarg(cls) -> str:
    """``cache`` on newer transformers (``past_key_values`` is deprecated there), else ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def _new_cache(target):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=target.config)
    except TypeError:  # older transformers
        return DynamicCache()


def _cache_select(cache, keep: torch.Tensor) -> None:
    """Keep only the positions ``keep`` (sorted) of every layer of a DynamicCache (tree verification)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            layer.keys, layer.values = layer.keys[..., keep, :], layer.values[..., keep, :]
    elif hasattr(cache, "key_cache"):  # transformers < 4.56
        for i in range(len(cache.key_cache)):
            cache.key_cache[i] = cache.key_cache[i][..., keep, :]
            cache.value_cache[i] = cache.value_cache[i][..., keep, :]
    else:
        raise TypeError("tree verification needs a DynamicCache whose positions can be selected")


def _cache_crop(cache, length: int) -> None:
    drop = cache.get_seq_length() - length
    if drop > 0:
        cache.crop(-drop)  # negative: remove that many positions (works on old and new transformers)


def _finish_round(emitted: torch.Tensor, out: list[torch.Tensor], n_out: int, max_new: int, eos) -> tuple[int, bool]:
    emitted = emitted[: max_new - n_out]
    done = False
    if eos is not None:
        hit = (emitted == eos).nonzero()
        if hit.numel():
            emitted, done = emitted[: int(hit[0]) + 1], True
    out.append(emitted)
    n_out += emitted.numel()
    return n_out, done or n_out >= max_new


# static trees


@dataclass(frozen=True)
class StaticTree:
    """A static draft tree given as paths of top-k ranks, e.g. ``(0,), (1,), (0, 0)``: node (0, 0) is the
    top-1 child of the top-1 child of the root. Every prefix of a path must be a path too."""

    paths: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        paths = tuple(sorted({tuple(int(r) for r in p) for p in self.paths}, key=lambda p: (len(p), p)))
        if not paths or any(len(p) == 0 or min(p) < 0 for p in paths):
            raise ValueError("a static tree needs non-empty paths of non-negative top-k ranks")
        missing = [p for p in paths if len(p) > 1 and p[:-1] not in paths]
        if missing:
            raise ValueError(f"tree paths {missing} lack their parent path {missing[0][:-1]}")
        object.__setattr__(self, "paths", paths)

    @property
    def depth(self) -> int:
        return len(self.paths[-1])

    def arrays(self):
        """parent index (-1 = root), depth, rank and the ancestor matrix (node i is an ancestor-or-self of j)."""
        index = {p: i for i, p in enumerate(self.paths)}
        parent = torch.tensor([index[p[:-1]] if len(p) > 1 else -1 for p in self.paths])
        depth = torch.tensor([len(p) for p in self.paths])
        rank = torch.tensor([p[-1] for p in self.paths])
        anc = torch.tensor([[len(q) <= len(p) and p[: len(q)] == q for p in self.paths] for q in self.paths])
        return parent, depth, rank, anc


DEFAULT_TREE = StaticTree(((0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 1, 0), (0, 0, 0, 0)))


def chain_tree(num_steps: int) -> StaticTree:
    return StaticTree(tuple((0,) * i for i in range(1, num_steps + 1)))


# main functions


@torch.inference_mode()
def greedy_generate(target: nn.Module, input_ids: torch.Tensor, max_new_tokens: int, *,
                    eos_token_id: int | None = None, tokenizer=None) -> SpecOutput:
    """Plain greedy decoding with the KV cache, one target call per token (the baseline)."""
    validate_generation_inputs(target, input_ids, max_new_tokens, tokenizer)
    stats, cache = SpecStats(), _new_cache(target)
    logits, _, cache = _target_forward(target, input_ids, cache, None)
    stats.target_calls = 1
    out: list[torch.Tensor] = []
    tok = logits[0, -1:].argmax(-1)
    n_out, done = _finish_round(tok, out, 0, max_new_tokens, eos_token_id)
    while not done:
        logits, _, cache = _target_forward(target, tok[None], cache, None)
        stats.target_calls += 1
        tok = logits[0, -1:].argmax(-1)
        n_out, done = _finish_round(tok, out, n_out, max_new_tokens, eos_token_id)
        stats.accept_lengths.append(1)
    stats.new_tokens = n_out
    return SpecOutput(torch.cat([input_ids[0], *out])[None], stats)


@torch.inference_mode()
def eagle3_generate(target: nn.Module, draft: Eagle3Draft, input_ids: torch.Tensor, max_new_tokens: int, *,
                    num_steps: int = 4, topk: int = 1, tree: StaticTree | Sequence[Sequence[int]] | None = None,
                    eos_token_id: int | None = None, tokenizer=None) -> SpecOutput:
    """Greedy speculative decoding of ``target`` with an EAGLE-3 ``draft`` [B04].

    ``topk = 1``: a chain of ``num_steps`` drafted tokens per round. ``topk > 1`` or ``tree``: a static tree
    (``tree`` paths of top-k ranks; default with ``topk > 1``: :data:`DEFAULT_TREE`). Output is token-identical
    to :func:`greedy_generate` for any draft. Returns ``(sequences, SpecStats)``.
    """
    validate_generation_inputs(target, input_ids, max_new_tokens, tokenizer)
    _check_draft(target, draft)
    if not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps must be a positive int, got {num_steps!r}")
    if not isinstance(topk, int) or topk < 1:
        raise ValueError(f"topk must be a positive int, got {topk!r}")
    if tree is None:
        tree = chain_tree(num_steps) if topk == 1 else DEFAULT_TREE
    elif not isinstance(tree, StaticTree):
        tree = StaticTree(tuple(tuple(p) for p in tree))
    is_chain = all(r == 0 for p in tree.paths for r in p)
    if max(r for p in tree.paths for r in p) >= draft.config.draft_vocab_size:
        raise ValueError("tree ranks must be smaller than the draft vocabulary size")

    dev = input_ids.device
    aux_layers = draft.config.aux_layers
    parent, depth, rank, anc = (t.to(dev) for t in tree.arrays())
    n_nodes = len(tree.paths)
    stats, cache, dcache = SpecStats(), _new_cache(target), DraftCache()

    seq = input_ids[0]
    logits, aux, cache = _target_forward(target, input_ids, cache, aux_layers)
    stats.target_calls = 1
    out: list[torch.Tensor] = []
    n_out, done = _finish_round(logits[0, -1:].argmax(-1), out, 0, max_new_tokens, eos_token_id)
    seq = torch.cat([seq, out[-1]])
    feats = draft.project(aux)  # features of positions dcache.length .. m-1, not yet fed to the draft
    while not done:
        m = seq.numel() - 1
        p0 = dcache.length
        # 1. draft prefill of the positions that just got target features
        a = draft.step(seq[p0 + 1: m + 1][None], feats, dcache, torch.arange(p0, m, device=dev))
        stats.draft_calls += 1
        root_a = a[:, -1:]  # output at position m-1, proposes x_{m+1}
        # 2. drafting
        budget = max_new_tokens - n_out  # never verify more tokens than are left to emit
        if budget <= 1:
            tokens, nodes = torch.empty(0, dtype=torch.long, device=dev), 0
        elif is_chain:
            tokens, nodes = _draft_chain(draft, root_a, dcache, m, min(tree.depth, budget - 1), stats)
        else:
            tokens, nodes = _draft_tree(draft, root_a, dcache, m, tree, parent, depth, rank, anc, stats), n_nodes
        dcache.crop(m)
        # 3. verification
        v_in = torch.cat([seq[-1:], tokens])[None]
        if is_chain or nodes == 0:
            logits, aux, cache = _target_forward(target, v_in, cache, aux_layers)
        else:
            mask = _tree_verify_mask(cache.get_seq_length(), anc, logits.dtype)
            pos = (m + torch.cat([depth.new_zeros(1), depth]))[None]  # root at m, a node at m + its depth
            logits, aux, cache = _target_forward(target, v_in, cache, aux_layers, position_ids=pos, attention_mask=mask)
        stats.target_calls += 1
        y = logits[0].argmax(-1)  # target's argmax at the root and at every node
        if is_chain or nodes == 0:
            n_acc = int((tokens == y[: tokens.numel()]).long().cumprod(0).sum())
            path = torch.arange(1, n_acc + 1, device=dev)
            _cache_crop(cache, m + 1 + n_acc)
        else:
            ok = tokens == y[parent + 1]  # node token equals the target argmax at its parent
            path_ok = (anc.long() * (~ok).long()[:, None]).sum(0) == 0  # ... and at every ancestor's parent
            best = torch.where(path_ok, depth, torch.zeros_like(depth))
            n_acc = int(best.max())
            path = (anc[:, int(best.argmax())] if n_acc else torch.zeros(n_nodes, dtype=torch.bool, device=dev)).nonzero()[:, 0] + 1
            keep = torch.cat([torch.arange(m + 1, device=dev), m + path])
            _cache_select(cache, keep)
        sel = torch.cat([torch.zeros(1, dtype=torch.long, device=dev), path])  # root + accepted nodes
        emitted = torch.cat([v_in[0, path], y[sel[-1:]]])
        stats.accept_lengths.append(min(emitted.numel(), budget))
        n_out, done = _finish_round(emitted, out, n_out, max_new_tokens, eos_token_id)
        seq = torch.cat([seq, out[-1]])
        feats = draft.project(aux[:, sel])
    stats.new_tokens = n_out
    return SpecOutput(seq[None], stats)


def _tree_verify_mask(past: int, anc: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive 4-D mask for [root, nodes]: everything sees the cached prefix and the root; a node also sees
    its ancestors and itself (``anc[i, j]``: node i is an ancestor-or-self of node j)."""
    n = anc.shape[0]
    allowed = torch.ones(n + 1, past + n + 1, dtype=torch.bool, device=anc.device)
    allowed[0, past + 1:] = False
    allowed[1:, past + 1:] = anc.T
    mask = torch.zeros(allowed.shape, dtype=dtype, device=anc.device).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def _draft_ids_to_target(draft: Eagle3Draft, logits: torch.Tensor, k: int) -> torch.Tensor:
    return draft.d2t[logits.topk(k, dim=-1).indices]


def _draft_chain(draft, root_a, dcache, m, k, stats):
    """2. chain drafting: argmax token, the draft's own output a as the next feature."""
    tok = draft.d2t[draft.logits(root_a)[0].argmax(-1)]  # [1]
    tokens, a = [tok], root_a
    for i in range(1, k):
        a = draft.step(tok[None], a, dcache, torch.tensor([m + i - 1], device=tok.device))
        stats.draft_calls += 1
        tok = draft.d2t[draft.logits(a)[0].argmax(-1)]
        tokens.append(tok)
    return torch.cat(tokens), k


def _draft_tree(draft, root_a, dcache, m, tree, parent, depth, rank, anc, stats):
    """2. tree drafting: one batched draft call per depth, each node attending to the prefix and its ancestors."""
    dev = root_a.device
    n = len(tree.paths)
    kmax = int(rank.max()) + 1
    tokens = torch.zeros(n, dtype=torch.long, device=dev)
    node_a = root_a.new_zeros(1, n, root_a.shape[-1])
    d1 = (depth == 1).nonzero()[:, 0]
    tokens[d1] = _draft_ids_to_target(draft, draft.logits(root_a), kmax)[0, 0][rank[d1]]
    key_of = torch.full((n,), -1, dtype=torch.long, device=dev)  # node -> column in the draft cache
    prefix = dcache.length
    for lvl in range(1, tree.depth):
        cur = (depth == lvl).nonzero()[:, 0]
        feat = root_a.expand(1, cur.numel(), -1) if lvl == 1 else node_a[:, parent[cur]]
        key_of[cur] = dcache.length + torch.arange(cur.numel(), device=dev)
        S = dcache.length + cur.numel()
        mask = torch.zeros(cur.numel(), S, dtype=torch.bool, device=dev)
        mask[:, :prefix] = True
        placed = key_of >= 0
        cols = key_of[placed]
        mask[:, cols] = anc[placed][:, cur].T  # ancestors (and the node itself) among drafted keys
        a = draft.step(tokens[cur][None], feat, dcache, m + depth[cur] - 1, attn_mask=mask)
        stats.draft_calls += 1
        node_a[:, cur] = a
        kids = (depth == lvl + 1).nonzero()[:, 0]
        top = _draft_ids_to_target(draft, draft.logits(a), kmax)[0]  # [len(cur), kmax]
        row = torch.searchsorted(cur, parent[kids])
        tokens[kids] = top[row, rank[kids]]
    return tokens
