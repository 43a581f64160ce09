"""[A07] Augmenting a frozen Hugging Face Llama-style model with Artificial Hippocampus Networks.

Per attention layer, with q, k, v after RoPE (as in the reference code) and x the layer's normalised input:

    o_att(t) = softmax over sinks ∪ window(t) of q_t k_j / sqrt(d)  ·  v_j        window(t) = {t-W+1 .. t}
    o_mem(t) = AHN.out(S_{t-W}^T q_t / sqrt(d), x_t)                            S_m: state after tokens S..m
                                                                                out: per-head RMSNorm x swish gate
                                                                                from x_t, per-head projection
    y_t      = W_O (o_att(t) + o_mem(t))

Every token that leaves the window (j = t - W, j >= S) is absorbed into the AHN state with its own k_j, v_j and gates
from x_j. ``out_proj`` is zero-initialised, so a fresh AHN model is exactly the window-only model, and for
t < S + W exactly the base model. The base model's weights are frozen; only the AHN parameters train.

Works on any model laid out like ``LlamaForCausalLM`` / ``MistralForCausalLM`` / ``Qwen2ForCausalLM``
(``model.model.{embed_tokens, layers, norm, rotary_emb}``, ``layer.self_attn.{q,k,v,o}_proj``, ``layer.mlp``).
The attention is computed here (not by patching HF internals), from the layer's own projections.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate as _chk

from .attention import check_window, sliding_window_mask
from .memory import KINDS, STYLES, AHNMemory


@dataclass(frozen=True)
class AHNConfig:
    """AHN settings [A07].

    Args:
        kind: ``"gdn"`` | ``"deltanet"`` | ``"mamba2"``.
        window: sliding-window size W (tokens of lossless KV cache besides the sinks).
        num_sinks: attention-sink tokens S kept from the start.
        use_q_proj: re-project the query before reading the memory.
        chunk_size: chunk length of the parallel (training) form.
        style: ``"official"`` (the reference code's gated output stage, per-head projection and gate
            initialisation; default) or ``"v1"`` (no gate, dense projection; see :class:`AHNMemory`).
        seed: seed of the AHN parameters' initialisation (the global RNG is left untouched).
    """

    kind: str = "gdn"
    window: int = 32
    num_sinks: int = 4
    use_q_proj: bool = False
    chunk_size: int = 64
    style: str = "official"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown AHN kind {self.kind!r}; use one of {', '.join(KINDS)}")
        check_window(self.window, self.num_sinks)
        if self.style not in STYLES:
            raise ValueError(f"unknown AHN style {self.style!r}; use one of {', '.join(STYLES)}")
        if not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {self.chunk_size!r}")
        if not isinstance(self.use_q_proj, bool):
            raise TypeError(f"use_q_proj must be a bool, got {_chk.describe(self.use_q_proj)}")
        _chk.non_negative_int("seed", self.seed)


@dataclass
class AHNOutput:
    """What :meth:`AHNModel.forward` returns: logits [B, T, V] and, with ``return_cache``, the cache."""

    logits: torch.Tensor
    cache: "AHNCache | None" = None

    def __post_init__(self) -> None:
        if not isinstance(self.logits, torch.Tensor):
            raise TypeError(f"logits must be a torch.Tensor, got {_chk.describe(self.logits)}")
        if self.cache is not None and not isinstance(self.cache, AHNCache):
            raise TypeError(f"cache must be an AHNCache or None, got {type(self.cache).__name__}")


@dataclass
class AHNCache:
    """Fixed-size decoding cache [A07]: per layer one K/V buffer of S + W slots (slots 0..S-1: the sinks; slots
    S + (j - S) mod W: a ring over the last W tokens j), the AHN gates of the ringed tokens, and the AHN state.
    With ``window=None`` it is the full-attention baseline: a K/V buffer of ``capacity`` slots filled in order.
    ``pos`` is the number of tokens seen."""

    window: int | None
    num_sinks: int
    k: list[torch.Tensor]
    v: list[torch.Tensor]
    beta: list[torch.Tensor] | None = None
    g: list[torch.Tensor] | None = None
    state: list[torch.Tensor] | None = None
    pos: int = 0

    def __post_init__(self) -> None:
        check_window(self.window, self.num_sinks)
        _chk.non_negative_int("pos", self.pos)
        for name in ("k", "v", "beta", "g", "state"):
            ts = getattr(self, name)
            if ts is None and name not in ("k", "v"):
                continue
            if not isinstance(ts, list) or not all(isinstance(t, torch.Tensor) for t in ts):
                raise TypeError(f"{name} must be a list of tensors (one per layer), got {_chk.describe(ts)}")
        if len(self.k) != len(self.v) or not self.k:
            raise ValueError(f"k and v must hold one tensor per layer (at least one), got {len(self.k)} and "
                             f"{len(self.v)}")

    def slot(self, j: int) -> int:
        """Buffer slot of token j."""
        _chk.non_negative_int("j", j)
        if self.window is None or j < self.num_sinks:
            return j
        return self.num_sinks + (j - self.num_sinks) % self.window

    def nbytes(self) -> int:
        """Bytes held by the cache tensors (what decoding keeps in memory)."""
        ts = [*self.k, *self.v, *(self.beta or []), *(self.g or []), *(self.state or [])]
        return int(sum(t.numel() * t.element_size() for t in ts))


def _check_layout(model: nn.Module) -> None:
    inner = getattr(model, "model", None)
    need = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or any(not hasattr(inner, n) for n in need) or not hasattr(model, "lm_head"):
        raise ValueError(f"{type(model).__name__} is not laid out like LlamaForCausalLM (model.model.embed_tokens/"
                         "layers/norm/rotary_emb and lm_head); pass a LlamaForCausalLM, MistralForCausalLM or "
                         "Qwen2ForCausalLM (or a model with the same module names)")
    for i, layer in enumerate(inner.layers):
        attn = getattr(layer, "self_attn", None)
        if attn is None or any(not hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj")) \
                or not hasattr(layer, "input_layernorm") or not hasattr(layer, "mlp"):
            raise ValueError(f"layer {i} of {type(model).__name__} has no Llama-style self_attn.q_proj/k_proj/v_proj/"
                             "o_proj, input_layernorm and mlp; AHN needs standard multi-head attention layers")


# main class

class AHNModel(nn.Module):
    """A frozen causal LM with sliding-window attention + sinks and one AHN per attention layer [A07].

    ``forward(ids, window=..., num_sinks=..., use_memory=...)`` is the parallel (training / prefill) form;
    ``window=None`` gives the base model's full attention (the teacher). ``generate`` decodes with an
    :class:`AHNCache` whose size does not grow with the sequence.
    """

    def __init__(self, base: nn.Module, cfg: AHNConfig) -> None:
        super().__init__()
        if not isinstance(cfg, AHNConfig):
            raise TypeError(f"cfg must be an AHNConfig, got {type(cfg).__name__}")
        _check_layout(base)
        self.base, self.cfg = base, cfg
        for p in base.parameters():
            p.requires_grad_(False)
        c = base.config
        self.num_heads = c.num_attention_heads
        self.num_kv_heads = getattr(c, "num_key_value_heads", None) or self.num_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // self.num_heads
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.memories = nn.ModuleList(
                AHNMemory(cfg.kind, c.hidden_size, self.num_heads, self.head_dim, use_q_proj=cfg.use_q_proj,
                          chunk_size=cfg.chunk_size, style=cfg.style) for _ in base.model.layers)
        ref = next(base.parameters())
        self.memories.to(device=ref.device)

    # helper functions

    def ahn_parameters(self) -> list[nn.Parameter]:
        """The trainable parameters (the AHNs only)."""
        return list(self.memories.parameters())

    def _check_ids(self, input_ids: torch.Tensor) -> None:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype not in (torch.long, torch.int):
            raise ValueError("input_ids must be an integer tensor of shape [batch, seq_len]")
        if input_ids.shape[1] == 0:
            raise ValueError("input_ids is empty; pass at least one token")
        V = self.base.config.vocab_size
        if input_ids.min() < 0 or input_ids.max() >= V:
            raise ValueError(f"input_ids out of range [0, {V}); check the tokenizer matches the model")

    def _qkv(self, layer, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        attn = layer.self_attn
        B, T, _ = h.shape
        q = attn.q_proj(h).view(B, T, -1, self.head_dim)
        k = attn.k_proj(h).view(B, T, -1, self.head_dim)
        v = attn.v_proj(h).view(B, T, -1, self.head_dim)
        if hasattr(attn, "q_norm"):  # Qwen3-style per-head norms
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return q, k, v   # k, v keep the model's num_key_value_heads (GQA); see _rep

    def _rep(self, x: torch.Tensor) -> torch.Tensor:
        """K/V heads repeated to the query heads (the AHN keeps one state per query head)."""
        rep = self.num_heads // self.num_kv_heads
        return x.repeat_interleave(rep, 1) if rep > 1 else x

    def _scale(self, layer) -> float:
        return getattr(layer.self_attn, "scaling", self.head_dim ** -0.5)

    # parallel form

    def forward(self, input_ids: torch.Tensor, *, window: int | None | str = "cfg", num_sinks: int | None = None,
                use_memory: bool = True, return_cache: bool = False,
                memory_from: torch.Tensor | None = None) -> AHNOutput:
        """Logits [B, T, V] of sliding-window attention (+ sinks) + AHN memory, all positions in parallel.

        ``window="cfg"`` uses ``cfg.window``; ``window=None`` is full attention (then no memory is used).
        ``use_memory=False`` gives the window-only model (StreamingLLM). ``return_cache`` also returns the
        :class:`AHNCache` to continue decoding from (prefill). ``memory_from`` (a diagnostic control, LongTensor
        [B]): row b's memory absorbs the evicted tokens of row ``memory_from[b]`` instead of its own (a memory
        of the wrong sequence), everything else unchanged."""
        self._check_ids(input_ids)
        W = self.cfg.window if window == "cfg" else window
        S = self.cfg.num_sinks if num_sinks is None else num_sinks
        check_window(W, S)
        use_memory = use_memory and W is not None
        if memory_from is not None:
            memory_from = torch.as_tensor(memory_from, dtype=torch.long)
            if memory_from.shape != (input_ids.shape[0],) or memory_from.min() < 0 \
                    or memory_from.max() >= input_ids.shape[0]:
                raise ValueError(f"memory_from must be a LongTensor [batch] of row indices in [0, {input_ids.shape[0]})")
        inner = self.base.model
        B, T = input_ids.shape
        x = inner.embed_tokens(input_ids)
        pos = torch.arange(T, device=x.device)[None].expand(B, T)
        cos, sin = inner.rotary_emb(x, pos)
        mask = sliding_window_mask(T, W, S, device=x.device)
        n_ev = T - W - S if W is not None else 0   # positions that read the memory: t = S+W .. T-1
        caches = [] if return_cache else None
        for layer, mem in zip(inner.layers, self.memories):
            h = layer.input_layernorm(x)
            q, k, v = self._qkv(layer, h, cos, sin)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self._scale(layer), enable_gqa=True)
            state = None
            if use_memory and n_ev > 0:
                # evicted token j = S.. T-1-W is read by the query at j + W (its first position outside the window)
                src = slice(None) if memory_from is None else memory_from
                o_mem, state = mem(self._rep(k[src, :, S:T - W]), self._rep(v[src, :, S:T - W]), h[src, S:T - W],
                                   q[:, :, S + W:], x_q=h[:, S + W:])
                o = torch.cat([o[:, :, :S + W], o[:, :, S + W:] + o_mem.to(o.dtype)], 2)
            if return_cache:
                caches.append((k, v, h, state))
            x = x + layer.self_attn.o_proj(o.transpose(1, 2).reshape(B, T, -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        logits = self.base.lm_head(inner.norm(x))
        cache = self._cache_from_prefill(caches, W, S, T, use_memory) if return_cache else None
        return AHNOutput(logits=logits, cache=cache)

    # streaming form

    def new_cache(self, batch: int, *, window: int | None | str = "cfg", num_sinks: int | None = None,
                  use_memory: bool = True, capacity: int | None = None) -> AHNCache:
        """An empty cache. ``window=None`` (full attention) needs ``capacity`` (max tokens)."""
        _chk.positive_int("batch", batch)
        if capacity is not None:
            _chk.positive_int("capacity", capacity)
        W = self.cfg.window if window == "cfg" else window
        S = self.cfg.num_sinks if num_sinks is None else num_sinks
        check_window(W, S)
        if W is None and (capacity is None or capacity < 1):
            raise ValueError("a full-attention cache (window=None) needs capacity=<max tokens>")
        ref = next(self.base.parameters())
        L, n = len(self.memories), (capacity if W is None else S + W)
        kv = lambda: [torch.zeros(batch, self.num_kv_heads, n, self.head_dim, dtype=ref.dtype, device=ref.device)  # noqa: E731
                      for _ in range(L)]
        gdt = self.memories[0].compute_dtype
        gate = lambda: [torch.zeros(batch, self.num_heads, W, dtype=gdt, device=ref.device) for _ in range(L)]  # noqa: E731
        mem = use_memory and W is not None
        return AHNCache(window=W, num_sinks=S if W is not None else 0, k=kv(), v=kv(),
                        beta=gate() if mem else None, g=gate() if mem else None,
                        state=[m.init_state(batch, ref.device) for m in self.memories] if mem else None)

    def _cache_from_prefill(self, caches, W, S, T, use_memory) -> AHNCache:
        B = caches[0][0].shape[0]
        cache = self.new_cache(B, window=W, num_sinks=S, use_memory=use_memory, capacity=T if W is None else None)
        cache.pos = T
        for li, ((k, v, h, state), mem) in enumerate(zip(caches, self.memories)):
            if W is None:
                cache.k[li], cache.v[li] = k.clone(), v.clone()
                continue
            j = torch.cat([torch.arange(min(S, T)), torch.arange(max(S, T - W), T)]).to(k.device)  # sinks + window
            slot = torch.where(j < S, j, S + (j - S) % W)
            cache.k[li][:, :, slot], cache.v[li][:, :, slot] = k[:, :, j], v[:, :, j]
            if cache.state is not None:
                jw = j[j >= S]
                beta, g = mem.gates(h[:, jw])
                cache.beta[li][:, :, (jw - S) % W], cache.g[li][:, :, (jw - S) % W] = beta, g
                if state is not None:
                    cache.state[li] = state
        return cache

    def step(self, token: torch.Tensor, cache: AHNCache) -> torch.Tensor:
        """Decode one token per row (token [B]) at position ``cache.pos``, updating ``cache`` in place; returns
        logits [B, V]. Cost per token is O(S + W) attention + one AHN update, independent of the position."""
        if not isinstance(cache, AHNCache):
            raise TypeError(f"cache must be an AHNCache (from new_cache or prefill), got {type(cache).__name__}")
        if not isinstance(token, torch.Tensor) or token.dim() != 1 or token.dtype not in (torch.long, torch.int):
            raise ValueError(f"token must be an integer tensor [batch] (one token per row), got {_chk.describe(token)}")
        if token.shape[0] != cache.k[0].shape[0]:
            raise ValueError(f"token has {token.shape[0]} rows but the cache was made for {cache.k[0].shape[0]}")
        V = self.base.config.vocab_size
        if token.min() < 0 or token.max() >= V:
            raise ValueError(f"token out of range [0, {V}); check the tokenizer matches the model")
        inner = self.base.model
        t, W, S = cache.pos, cache.window, cache.num_sinks
        B = token.shape[0]
        if W is None and t >= cache.k[0].shape[2]:
            raise ValueError(f"full-attention cache is full ({t} tokens); create it with a larger capacity")
        x = inner.embed_tokens(token[:, None])
        cos, sin = inner.rotary_emb(x, torch.full((B, 1), t, device=x.device, dtype=torch.long))
        slot = cache.slot(t)
        n_valid = t + 1 if W is None else min(t + 1, S + W)
        ring = None if W is None or t < S else (t - S) % W
        memory = cache.state is not None and ring is not None
        evict = memory and t - W >= S            # token t - W leaves the window (it sits in this slot)
        for li, (layer, mem) in enumerate(zip(inner.layers, self.memories)):
            h = layer.input_layernorm(x)
            q, k, v = self._qkv(layer, h, cos, sin)                        # [B, H(kv), 1, d]
            if evict:
                cache.state[li] = mem.absorb(cache.state[li], self._rep(cache.k[li][:, :, slot]),
                                             self._rep(cache.v[li][:, :, slot]), cache.beta[li][:, :, ring],
                                             cache.g[li][:, :, ring])
            cache.k[li][:, :, slot], cache.v[li][:, :, slot] = k[:, :, 0], v[:, :, 0]
            if memory:
                beta, g = mem.gates(h)
                cache.beta[li][:, :, ring], cache.g[li][:, :, ring] = beta[..., 0], g[..., 0]
            o = F.scaled_dot_product_attention(q, cache.k[li][:, :, :n_valid], cache.v[li][:, :, :n_valid],
                                               scale=self._scale(layer), enable_gqa=True)
            if memory and t - W >= S:
                o = o + mem.read(cache.state[li], q[:, :, 0], h[:, 0])[:, :, None].to(o.dtype)
            x = x + layer.self_attn.o_proj(o.transpose(1, 2).reshape(B, 1, -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        cache.pos = t + 1
        return self.base.lm_head(inner.norm(x))[:, 0]

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor, *, window: int | None | str = "cfg", num_sinks: int | None = None,
                use_memory: bool = True, extra_capacity: int = 0) -> tuple[torch.Tensor, AHNCache]:
        """Parallel forward of a prompt; returns (last logits [B, V], the cache to decode from). A full-attention
        cache (``window=None``) gets room for ``extra_capacity`` more tokens."""
        if not isinstance(extra_capacity, int) or extra_capacity < 0:
            raise ValueError(f"extra_capacity must be an int >= 0, got {extra_capacity!r}")
        W = self.cfg.window if window == "cfg" else window
        out = self.forward(input_ids, window=W, num_sinks=num_sinks, use_memory=use_memory, return_cache=True)
        cache = out.cache
        if W is None and extra_capacity:
            cache.k = [F.pad(k, (0, 0, 0, extra_capacity)) for k in cache.k]
            cache.v = [F.pad(v, (0, 0, 0, extra_capacity)) for v in cache.v]
        return out.logits[:, -1], cache

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, *, window: int | None | str = "cfg",
                 num_sinks: int | None = None, use_memory: bool = True) -> torch.Tensor:
        """Greedy decoding: parallel prefill of the prompt, then :meth:`step` per token with a fixed-size cache
        (``window=None``: full attention with a growing-in-use cache, the baseline). Returns [B, T + new]."""
        if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        self._check_ids(input_ids)
        logits, cache = self.prefill(input_ids, window=window, num_sinks=num_sinks, use_memory=use_memory,
                                     extra_capacity=max_new_tokens)
        seq = [input_ids]
        nxt = logits.argmax(-1)
        for i in range(max_new_tokens):
            seq.append(nxt[:, None])
            if i + 1 < max_new_tokens:
                nxt = self.step(nxt, cache).argmax(-1)
        return torch.cat(seq, 1)


def augment_with_ahn(model: nn.Module, cfg: AHNConfig | None = None, **kw) -> AHNModel:
    """Wrap a Hugging Face Llama-style causal LM with per-layer AHNs; the base is frozen (``requires_grad=False``)
    and otherwise unchanged [A07]. ``augment_with_ahn(model, kind="gdn", window=32)`` also works."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a Hugging Face causal LM (a torch.nn.Module), got {type(model).__name__}")
    if cfg is None:
        cfg = AHNConfig(**kw)
    elif kw:
        raise ValueError("pass either cfg or keyword settings, not both")
    return AHNModel(model, cfg)
