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


KV_CACHES = ("preallocated", "dynamic")


class _PreallocatedLayer:
    """Mixin for a transformers ``DynamicLayer`` whose keys/values live in one buffer allocated at the first call.

    ``update`` writes the new positions in place and returns views of the first ``length`` positions (no
    ``torch.cat`` of the whole cache per call); ``crop`` only moves ``length``; ``keep_tail`` compacts the accepted
    tree nodes in place. Outputs are the same tensors a ``DynamicLayer`` would return.
    """

    _layer_type = None  # never register this class in transformers' layer-type mapping

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.length = capacity, 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        B, H, _, D = key_states.shape
        self.device = key_states.device
        self.kbuf = key_states.new_empty(B, H, self.capacity, D)
        self.vbuf = value_states.new_empty(B, H, self.capacity, value_states.shape[-1])
        self.keys, self.values = self.kbuf[..., :0, :], self.vbuf[..., :0, :]
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        a, b = self.length, self.length + key_states.shape[-2]
        if b > self.capacity:
            raise ValueError(f"the pre-allocated KV cache holds {self.capacity} positions, {b} were needed")
        self.kbuf[..., a:b, :] = key_states
        self.vbuf[..., a:b, :] = value_states
        self.length = b
        self.keys, self.values = self.kbuf[..., :b, :], self.vbuf[..., :b, :]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes the negative number of positions to remove")
        if self.is_initialized and tokens_to_remove:
            self.length = max(0, self.length + tokens_to_remove)
            self.keys, self.values = self.kbuf[..., : self.length, :], self.vbuf[..., : self.length, :]

    def keep_tail(self, start: int, idx: torch.Tensor) -> None:
        """Keep positions [0, start) and then ``idx`` (sorted, all >= start), moved to start, start+1, ..."""
        if not self.is_initialized:
            return
        n = start + idx.numel()
        self.kbuf[..., start:n, :] = self.kbuf[..., idx, :]   # the gather copies first: overlap is safe
        self.vbuf[..., start:n, :] = self.vbuf[..., idx, :]
        self.length = n
        self.keys, self.values = self.kbuf[..., :n, :], self.vbuf[..., :n, :]


def _new_cache(target, capacity: int | None = None):
    """A DynamicCache for ``target``; with ``capacity``, its full-attention layers write into buffers of that many
    positions allocated once (other layer kinds, e.g. sliding windows, keep transformers' own layers)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    try:
        cache = DynamicCache(config=target.config)
    except TypeError:  # older transformers
        return DynamicCache()
    layers = getattr(cache, "layers", None)
    if capacity is not None and layers and all(type(layer) is DynamicLayer for layer in layers):
        cls = _prealloc_class(DynamicLayer)
        cache.layers = [cls(capacity) for _ in layers]
    return cache


@functools.lru_cache(maxsize=None)
def _prealloc_class(base):
    return type("PreallocatedDynamicLayer", (_PreallocatedLayer, base), {"_layer_type": None})


def _cache_select(cache, start: int, idx: torch.Tensor) -> None:
    """Keep positions [0, start) and then ``idx`` of every layer (tree verification: the accepted path)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            if isinstance(layer, _PreallocatedLayer):
                layer.keep_tail(start, idx)
            else:
                keep = torch.cat([torch.arange(start, device=idx.device), idx])
                layer.keys, layer.values = layer.keys[..., keep, :], layer.values[..., keep, :]
    elif hasattr(cache, "key_cache"):  # transformers < 4.56
        keep = torch.cat([torch.arange(start, device=idx.device), idx])
        for i in range(len(cache.key_cache)):
            cache.key_cache[i] = cache.key_cache[i][..., keep, :]
            cache.value_cache[i] = cache.value_cache[i][..., keep, :]
    else:
        raise TypeError("tree verification needs a DynamicCache whose positions can be selected")


def _cache_crop(cache, length: int) -> None:
    drop = cache.get_seq_length() - length
    if drop > 0:
        cache.crop(-drop)  # negative: remove that many positions (works on old and new transformers)


def _check_kv_cache(kv_cache: str) -> None:
    if kv_cache not in KV_CACHES:
        raise ValueError(f"kv_cache must be one of {KV_CACHES}, got {kv_cache!r}")


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


# per-tree-shape tables (built once per call, sliced every round)


class _TreePlan:
    """Everything about a static tree that does not change between rounds [B04].

    Masks are stored right-aligned in one buffer: columns for the cached prefix are "attend" and the tree part
    sits at the right end, so the mask for any prefix length p is a view of the last p + (tree part) columns.
    """

    def __init__(self, tree: StaticTree, max_prefix: int, dtype: torch.dtype, device) -> None:
        parent, depth, rank, anc = (t.to(device) for t in tree.arrays())
        self.parent, self.depth, self.rank, self.anc = parent, depth, rank, anc
        n = self.n = len(tree.paths)
        self.tree_depth = tree.depth
        self.kmax = int(rank.max()) + 1
        self.parent_row = parent + 1                         # row of a node's parent in [root, nodes]
        self.verify_pos = torch.cat([depth.new_zeros(1), depth])[None]   # + m: root at m, a node at m + depth
        self.anc_long_T = anc.long()                          # for the path check
        # target verification mask [1, 1, n+1, W]: root sees the prefix; a node sees the prefix, root, ancestors
        allowed = torch.ones(n + 1, max_prefix + n + 1, dtype=torch.bool, device=device)
        allowed[0, -n:] = False
        allowed[1:, -n:] = anc.T
        self.verify_mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(
            ~allowed, torch.finfo(dtype).min)[None, None]
        # draft tree levels: nodes of depth lvl (contiguous, as paths are sorted by length) attend the prefix and
        # their drafted ancestors, whose keys sit at prefix + node index
        self.levels = []
        for lvl in range(1, tree.depth):
            cur = (depth == lvl).nonzero()[:, 0]
            lo, hi = int(cur[0]), int(cur[-1]) + 1
            kids = (depth == lvl + 1).nonzero()[:, 0]
            m = torch.ones(hi - lo, max_prefix + hi, dtype=torch.bool, device=device)
            m[:, -hi:] = anc[:hi, lo:hi].T
            self.levels.append((lo, hi, parent[lo:hi], depth[lo:hi] - 1, m, kids, parent[kids] - lo, rank[kids]))
        self.d1 = (depth == 1).nonzero()[:, 0]
        self.rank_d1 = rank[self.d1]

    def verify_mask_for(self, past: int) -> torch.Tensor:
        return self.verify_mask[..., self.verify_mask.shape[-1] - (past + self.n + 1):]


def _causal_mask_buffer(n_max: int, max_prefix: int, dtype: torch.dtype, device) -> torch.Tensor:
    """Additive causal mask [1, 1, n_max, max_prefix + n_max], right-aligned: ``_tail(buf, n, past)`` is the mask of
    n new positions after ``past`` cached ones (built once per call, so HF skips building one per forward)."""
    m = torch.zeros(n_max, max_prefix + n_max, dtype=dtype, device=device)
    m[:, max_prefix:] = torch.full((n_max, n_max), torch.finfo(dtype).min, dtype=dtype, device=device).triu(1)
    return m[None, None]


def _tail(buf: torch.Tensor, n: int, past: int) -> torch.Tensor:
    return buf[..., buf.shape[-2] - n:, buf.shape[-1] - (past + n):]


# main functions


@torch.inference_mode()
def greedy_generate(target: nn.Module, input_ids: torch.Tensor, max_new_tokens: int, *,
                    eos_token_id: int | None = None, tokenizer=None, kv_cache: str = "preallocated") -> SpecOutput:
    """Plain greedy decoding with the KV cache, one target call per token (the baseline).

    ``kv_cache="preallocated"`` (default) writes keys/values into buffers sized once for prompt + new tokens;
    ``"dynamic"`` uses transformers' growing DynamicCache (a torch.cat per layer per call) and lets transformers
    build the attention mask on every call; the default also passes a causal mask built once per call.
    """
    validate_generation_inputs(target, input_ids, max_new_tokens, tokenizer)
    _check_kv_cache(kv_cache)
    pre = kv_cache == "preallocated"
    P = input_ids.shape[1]
    stats, cache = SpecStats(), _new_cache(target, P + max_new_tokens if pre else None)
    mask = _causal_mask_buffer(1, P + max_new_tokens, next(target.parameters()).dtype, input_ids.device) if pre else None
    logits, _, cache = _target_forward(target, input_ids, cache, None)
    stats.target_calls = 1
    out = torch.empty(max_new_tokens, dtype=torch.long, device=input_ids.device)
    tok = logits[0, -1:].argmax(-1)
    n = 0
    while True:
        out[n: n + 1] = tok
        n += 1
        if n >= max_new_tokens or (eos_token_id is not None and int(tok) == eos_token_id):
            break
        logits, _, cache = _target_forward(target, tok[None], cache, None,
                                           attention_mask=None if mask is None else _tail(mask, 1, P + n - 1))
        stats.target_calls += 1
        stats.accept_lengths.append(1)
        tok = logits[0, -1:].argmax(-1)
    stats.new_tokens = n
    return SpecOutput(torch.cat([input_ids[0], out[:n]])[None], stats)


@torch.inference_mode()
def eagle3_generate(target: nn.Module, draft: Eagle3Draft, input_ids: torch.Tensor, max_new_tokens: int, *,
                    num_steps: int = 4, topk: int = 1, tree: StaticTree | Sequence[Sequence[int]] | None = None,
                    eos_token_id: int | None = None, tokenizer=None, kv_cache: str = "preallocated") -> SpecOutput:
    """Greedy speculative decoding of ``target`` with an EAGLE-3 ``draft`` [B04].

    ``topk = 1``: a chain of ``num_steps`` drafted tokens per round. ``topk > 1`` or ``tree``: a static tree
    (``tree`` paths of top-k ranks; default with ``topk > 1``: :data:`DEFAULT_TREE`). Output is token-identical
    to :func:`greedy_generate` for any draft. ``kv_cache``: ``"preallocated"`` (default; target and draft caches
    are buffers sized once, rolled back by moving a length; the verification masks are built once per call and
    sliced) or ``"dynamic"`` (transformers' DynamicCache, cropped or index-selected, and transformers' own causal
    mask for chain verification). Returns ``(sequences, SpecStats)``.
    """
    validate_generation_inputs(target, input_ids, max_new_tokens, tokenizer)
    _check_draft(target, draft)
    _check_kv_cache(kv_cache)
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
    P = input_ids.shape[1]
    total = P + max_new_tokens                       # the sequence never grows past this
    n_nodes = len(tree.paths)
    dtype = next(target.parameters()).dtype
    plan = None if is_chain else _TreePlan(tree, total, dtype, dev)
    pre = kv_cache == "preallocated"
    causal = _causal_mask_buffer(tree.depth + 1, total, dtype, dev) if pre else None   # chain verification
    stats = SpecStats()
    cache = _new_cache(target, total + n_nodes + 1 if pre else None)
    dcache = DraftCache(capacity=total + n_nodes + 1 if pre else 0)
    positions = torch.arange(total + n_nodes + 1, device=dev)   # sliced for draft positions
    seq = torch.empty(total, dtype=torch.long, device=dev)      # prompt + emitted tokens, written in place
    seq[:P] = input_ids[0]
    L = P                                                        # current sequence length

    logits, aux, cache = _target_forward(target, input_ids, cache, aux_layers)
    stats.target_calls = 1
    seq[L] = logits[0, -1].argmax(-1)
    L, n_out = L + 1, 1
    done = n_out >= max_new_tokens or (eos_token_id is not None and int(seq[L - 1]) == eos_token_id)
    feats = draft.project(aux)  # features of positions dcache.length .. m-1, not yet fed to the draft
    while not done:
        m = L - 1
        p0 = dcache.length
        # 1. draft prefill of the positions that just got target features
        a = draft.step(seq[p0 + 1: m + 1][None], feats, dcache, positions[p0:m])
        stats.draft_calls += 1
        root_a = a[:, -1:]  # output at position m-1, proposes x_{m+1}
        # 2. drafting
        budget = max_new_tokens - n_out  # never verify more tokens than are left to emit
        if budget <= 1:
            tokens, nodes = seq.new_empty(0), 0
        elif is_chain:
            tokens, nodes = _draft_chain(draft, root_a, dcache, m, min(tree.depth, budget - 1), stats, positions)
        else:
            tokens, nodes = _draft_tree(draft, root_a, dcache, m, plan, stats), n_nodes
        dcache.crop(m)
        # 3. verification
        v_in = torch.cat([seq[m:L], tokens])[None]
        if is_chain or nodes == 0:
            logits, aux, cache = _target_forward(target, v_in, cache, aux_layers, attention_mask=None if causal is None
                                                 else _tail(causal, v_in.shape[1], m))
        else:
            logits, aux, cache = _target_forward(target, v_in, cache, aux_layers, position_ids=plan.verify_pos + m,
                                                 attention_mask=plan.verify_mask_for(m))
        stats.target_calls += 1
        y = logits[0].argmax(-1)  # target's argmax at the root and at every node
        if is_chain or nodes == 0:
            n_acc = int((tokens == y[: tokens.numel()]).cumprod(0).sum())   # the round's one host read
            emitted = y[: n_acc + 1]                     # accepted drafted tokens equal y there; then the bonus
            sel = positions[: n_acc + 1]
            _cache_crop(cache, m + 1 + n_acc)
        else:
            ok = tokens == y[plan.parent_row]            # node token equals the target argmax at its parent
            path_ok = (plan.anc_long_T * (~ok).long()[:, None]).sum(0) == 0   # ... and at every ancestor's parent
            best = torch.where(path_ok, plan.depth, 0)
            n_acc, leaf = best.max(0)
            n_acc = int(n_acc)
            path = plan.anc[:, int(leaf)].nonzero()[:, 0] + 1 if n_acc else positions[:0]
            sel = torch.cat([positions[:1], path])       # root + accepted nodes, rows of the verification call
            emitted = y[sel]                             # y at the root and at accepted nodes: tokens 1.., bonus
            _cache_select(cache, m + 1, m + path)
        k = min(emitted.numel(), budget)
        stats.accept_lengths.append(k)
        emitted = emitted[:k]
        if eos_token_id is not None:
            hit = (emitted == eos_token_id).nonzero()
            if hit.numel():
                k, done = int(hit[0]) + 1, True
                emitted = emitted[:k]
        seq[L: L + k] = emitted
        L, n_out = L + k, n_out + k
        done = done or n_out >= max_new_tokens
        feats = draft.project(aux[:, sel])
    stats.new_tokens = n_out
    return SpecOutput(seq[:L][None].clone(), stats)


def _draft_ids_to_target(draft: Eagle3Draft, logits: torch.Tensor, k: int) -> torch.Tensor:
    return draft.d2t[logits.topk(k, dim=-1).indices]


def _draft_chain(draft, root_a, dcache, m, k, stats, positions):
    """2. chain drafting: argmax token, the draft's own output a as the next feature."""
    tokens = torch.empty(k, dtype=torch.long, device=root_a.device)
    tokens[0:1] = draft.d2t[draft.logits(root_a)[0].argmax(-1)]
    a = root_a
    for i in range(1, k):
        a = draft.step(tokens[i - 1: i][None], a, dcache, positions[m + i - 1: m + i])
        stats.draft_calls += 1
        tokens[i: i + 1] = draft.d2t[draft.logits(a)[0].argmax(-1)]
    return tokens, k


def _draft_tree(draft, root_a, dcache, m, plan: _TreePlan, stats):
    """2. tree drafting: one batched draft call per depth, each node attending to the prefix and its ancestors."""
    n = plan.n
    tokens = torch.zeros(n, dtype=torch.long, device=root_a.device)
    node_a = root_a.new_zeros(1, n, root_a.shape[-1])
    tokens[plan.d1] = _draft_ids_to_target(draft, draft.logits(root_a), plan.kmax)[0, 0][plan.rank_d1]
    prefix = dcache.length
    for lvl, (lo, hi, par, pos, mask, kids, kid_row, kid_rank) in enumerate(plan.levels, start=1):
        feat = root_a.expand(1, hi - lo, -1) if lvl == 1 else node_a[:, par]
        mask = mask[:, mask.shape[1] - (prefix + hi):]   # the prefix, then drafted nodes 0..hi-1
        a = draft.step(tokens[lo:hi][None], feat, dcache, m + pos, attn_mask=mask)
        stats.draft_calls += 1
        node_a[:, lo:hi] = a
        top = _draft_ids_to_target(draft, draft.logits(a), plan.kmax)[0]  # [hi - lo, kmax]
        tokens[kids] = top[kid_row, kid_rank]
    return tokens
