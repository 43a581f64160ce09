"""[B04] The EAGLE-3 draft head: fused low/mid/high target features, one decoder layer, a reduced vocabulary.

Notation (SpecForge / EAGLE-3). The target has L decoder layers of width d. At position t it exposes
g_t = [h^(l1)_t ; h^(l2)_t ; h^(l3)_t] in R^{3d}, the hidden states after decoder layers (l1, l2, l3) =
(1, L//2 - 1, L - 4) (0-based). The draft is

    f_t     = fc(g_t)                                     fc: R^{3d} -> R^d
    u_t     = [RMSNorm(e(x_{t+1})) ; RMSNorm(f_t)]        e: the target's embedding, copied and frozen
    a_t     = DecoderLayer(u_t, residual = f_t)           q/k/v read the 2d-wide u_t, one Llama layer
    q(. | t) = softmax(lm_head(RMSNorm(a_t)))             over the draft vocabulary V_d (subset of V)

and predicts x_{t+2}. At test time a drafted position has no target feature, so the draft feeds its own
output a_t in place of f_{t+1} (the same substitution that training-time test simulates, see ``ttt.py``).
The vocabulary maps are ``d2t`` (draft id -> target id) and ``t2d`` (boolean mask over the target vocab).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate

# helper functions


def default_aux_layers(num_layers: int) -> tuple[int, int, int]:
    """Decoder layers whose outputs form the fused feature g_t [B04].

    L >= 8: the reference's (1, L//2 - 1, L - 4) (for L = 8: (1, 3, 4)). Shallower targets make that formula
    degenerate (L = 4 gives (1, 1, 0), no "high" feature), so there we take (0, (L-1)//2, L-2): low, middle and
    the layer below the top, keeping the reference's rule of never using the last layer (our choice).
    """
    if not isinstance(num_layers, int) or num_layers < 1:
        raise ValueError(f"num_layers must be a positive int, got {num_layers!r}")
    if num_layers >= 8:
        return (1, num_layers // 2 - 1, num_layers - 4)
    return (0, max(0, (num_layers - 1) // 2), max(0, num_layers - 2))


def num_decoder_layers(target: nn.Module) -> int:
    cfg = target.config
    for name in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(getattr(cfg, name, None), int):
            return getattr(cfg, name)
    raise ValueError("cannot read the number of decoder layers from target.config (num_hidden_layers / n_layer)")


def target_hidden_size(target: nn.Module) -> int:
    cfg = target.config
    for name in ("hidden_size", "n_embd", "d_model"):
        if isinstance(getattr(cfg, name, None), int):
            return getattr(cfg, name)
    raise ValueError("cannot read the hidden size from target.config (hidden_size / n_embd)")


def target_vocab_size(target: nn.Module) -> int:
    return int(target.get_input_embeddings().weight.shape[0])


def build_draft_vocab(counts: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The draft vocabulary: the ``size`` most frequent target tokens (ties broken by the smaller id) [B04].

    Returns ``(d2t, t2d)``: ``d2t[i]`` is the target id of draft token i (ascending), ``t2d`` the boolean mask
    over the target vocabulary with ``t2d.sum() == size``.
    """
    if not isinstance(counts, torch.Tensor) or counts.ndim != 1:
        raise TypeError("counts must be a 1-D tensor of token frequencies over the target vocabulary")
    if not isinstance(size, int) or not 1 <= size <= counts.numel():
        raise ValueError(f"size must be an int in [1, {counts.numel()}] (the target vocab size), got {size!r}")
    validate.finite("counts", counts)
    if (counts < 0).any():
        raise ValueError("counts must be non-negative")
    order = torch.argsort(counts.double() * -1.0, stable=True)  # stable: equal counts keep the smaller id first
    d2t = order[:size].sort().values
    t2d = torch.zeros(counts.numel(), dtype=torch.bool)
    t2d[d2t] = True
    return d2t, t2d


def token_counts(ids: torch.Tensor, vocab_size: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Frequency of each target token in ``ids`` (only where ``mask`` is set, when given)."""
    vocab_size = validate.positive_int("vocab_size", vocab_size)
    validate.indices("ids", ids, vocab_size)   # an id >= vocab_size was silently dropped
    if mask is not None and tuple(mask.shape) != tuple(ids.shape):
        raise ValueError(f"mask must have the shape of ids {tuple(ids.shape)}, got {tuple(mask.shape)}")
    flat = ids.reshape(-1) if mask is None else ids[mask.bool()]
    return torch.bincount(flat, minlength=vocab_size)[:vocab_size]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x / sqrt(mean(x^2) + eps) * w
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@dataclass
class DraftCache:
    """The draft's own KV cache: keys/values ``[B, H, S, head_dim]`` for the S positions fed so far.

    ``k``/``v`` are views of buffers that are written in place (sized ``capacity`` positions at the first append,
    doubled when full), so appending and cropping do not copy the cache.
    """

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    capacity: int = 0
    _kb: torch.Tensor | None = field(default=None, repr=False)
    _vb: torch.Tensor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        validate.non_negative_int("capacity", self.capacity)

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.length
        b = a + k.shape[-2]
        if self._kb is None or self._kb.shape[-2] < b or self._kb.shape[:-2] != k.shape[:-2]:
            cap = max(b, self.capacity, 2 * (0 if self._kb is None else self._kb.shape[-2]), 64)
            kb = k.new_empty(*k.shape[:-2], cap, k.shape[-1])
            vb = v.new_empty(*v.shape[:-2], cap, v.shape[-1])
            if a:
                kb[..., :a, :], vb[..., :a, :] = self.k, self.v
            self._kb, self._vb = kb, vb
        self._kb[..., a:b, :] = k
        self._vb[..., a:b, :] = v
        self.k, self.v = self._kb[..., :b, :], self._vb[..., :b, :]
        return self.k, self.v

    def crop(self, length: int) -> None:
        if self.k is not None:
            self.k, self.v = self.k[..., :length, :], self.v[..., :length, :]


@dataclass(frozen=True)
class Eagle3Config:
    hidden_size: int              # d, the target's width (the draft reuses the target embedding)
    vocab_size: int               # V, the target vocabulary
    draft_vocab_size: int         # V_d
    aux_layers: tuple[int, ...] = field(default=(1, 3, 4))
    num_heads: int = 4
    num_kv_heads: int = 4
    head_dim: int = 32
    intermediate_size: int = 344
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        for name in ("hidden_size", "vocab_size", "draft_vocab_size", "num_heads", "num_kv_heads", "head_dim",
                     "intermediate_size"):
            validate.positive_int(name, getattr(self, name))
        if self.draft_vocab_size > self.vocab_size:
            raise ValueError(f"draft_vocab_size ({self.draft_vocab_size}) cannot exceed vocab_size ({self.vocab_size})")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if not self.aux_layers or any(not isinstance(a, int) or a < 0 for a in self.aux_layers):
            raise ValueError(f"aux_layers must be non-negative layer indices, got {self.aux_layers!r}")
        validate.positive("rms_norm_eps", self.rms_norm_eps)
        validate.positive("rope_theta", self.rope_theta)

    @property
    def feature_size(self) -> int:
        return len(self.aux_layers) * self.hidden_size


# main class


class Eagle3Draft(nn.Module):
    """EAGLE-3 draft head [B04]: ``fc`` over fused features, one Llama decoder layer on [e(x); f], ``lm_head``."""

    def __init__(self, config: Eagle3Config, d2t: torch.Tensor | None = None):
        super().__init__()
        c = self.config = config
        d, h, hd = c.hidden_size, c.num_heads, c.head_dim
        if c.num_heads % c.num_kv_heads:
            raise ValueError("num_heads must be a multiple of num_kv_heads")
        self.embed = nn.Embedding(c.vocab_size, d)
        self.embed.weight.requires_grad_(False)  # the target's embedding, frozen
        self.fc = nn.Linear(c.feature_size, d, bias=False)
        self.input_norm, self.hidden_norm = RMSNorm(d, c.rms_norm_eps), RMSNorm(d, c.rms_norm_eps)
        # q, k, v read the 2d-wide u; fused into one matmul (as are the MLP's gate and up) to cut per-call cost
        self.qkv_proj = nn.Linear(2 * d, (h + 2 * c.num_kv_heads) * hd, bias=False)
        self.o_proj = nn.Linear(h * hd, d, bias=False)
        self.post_norm = RMSNorm(d, c.rms_norm_eps)
        self.gate_up_proj = nn.Linear(d, 2 * c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, d, bias=False)
        self.norm = RMSNorm(d, c.rms_norm_eps)
        self.lm_head = nn.Linear(d, c.draft_vocab_size, bias=False)
        d2t = torch.arange(c.draft_vocab_size) if d2t is None else d2t.long()
        if d2t.shape != (c.draft_vocab_size,) or d2t.min() < 0 or d2t.max() >= c.vocab_size or d2t.unique().numel() != d2t.numel():
            raise ValueError(f"d2t must hold {c.draft_vocab_size} distinct target ids in [0, {c.vocab_size})")
        t2d = torch.zeros(c.vocab_size, dtype=torch.bool)
        t2d[d2t] = True
        self.register_buffer("d2t", d2t, persistent=True)
        self.register_buffer("t2d", t2d, persistent=True)
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._rope_table: torch.Tensor | None = None

    @classmethod
    def from_target(cls, target: nn.Module, draft_vocab_ids: torch.Tensor | None = None,
                    aux_layers: tuple[int, ...] | None = None, seed: int = 0) -> "Eagle3Draft":
        """A freshly initialised draft sized for ``target`` (any HF causal LM); the target is not modified.

        ``draft_vocab_ids``: target ids of the draft vocabulary (see :func:`build_draft_vocab`; default: all).
        ``aux_layers``: decoder layers to fuse (default :func:`default_aux_layers`).
        """
        cfg = target.config
        n_layers, d, vocab = num_decoder_layers(target), target_hidden_size(target), target_vocab_size(target)
        aux = default_aux_layers(n_layers) if aux_layers is None else tuple(int(i) for i in aux_layers)
        if not aux or any(not 0 <= i < n_layers for i in aux):
            raise ValueError(f"aux_layers must be a non-empty tuple of decoder layers in [0, {n_layers}), got {aux}")
        heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None) or max(1, d // 64)
        kv = getattr(cfg, "num_key_value_heads", None) or heads
        head_dim = getattr(cfg, "head_dim", None) or d // heads
        inter = getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or 4 * d
        rope = getattr(cfg, "rope_theta", None) or (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 1e4)
        if draft_vocab_ids is None:
            draft_vocab_ids = torch.arange(vocab)
        config = Eagle3Config(hidden_size=d, vocab_size=vocab, draft_vocab_size=int(draft_vocab_ids.numel()),
                              aux_layers=aux, num_heads=heads, num_kv_heads=kv, head_dim=head_dim,
                              intermediate_size=inter, rms_norm_eps=float(getattr(cfg, "rms_norm_eps", 1e-6)),
                              rope_theta=float(rope))
        torch.manual_seed(seed)
        draft = cls(config, d2t=torch.as_tensor(draft_vocab_ids))
        with torch.no_grad():
            draft.embed.weight.copy_(target.get_input_embeddings().weight.detach().float())
        return draft.to(next(target.parameters()).device)

    # feature fusion and the decoder layer

    def project(self, aux: torch.Tensor) -> torch.Tensor:
        """f = fc(g): fused target features ``[..., k*d]`` -> ``[..., d]`` (raises on a size mismatch)."""
        if aux.shape[-1] != self.config.feature_size:
            raise ValueError(
                f"the draft expects fused target features of size {self.config.feature_size} "
                f"({len(self.config.aux_layers)} layers x hidden {self.config.hidden_size}), got {aux.shape[-1]}: "
                "the draft does not fit this target (capture with the draft's aux_layers from the target it was "
                "built for)")
        return self.fc(aux)

    def _qkv(self, tokens: torch.Tensor, features: torch.Tensor, positions: torch.Tensor):
        """q, k, v (rotary at ``positions``) from u = [norm(e(x)); norm(f)]; the residual stream is f."""
        B, T = tokens.shape
        c = self.config
        u = torch.cat([self.input_norm(self.embed(tokens)), self.hidden_norm(features)], dim=-1)
        qkv = self.qkv_proj(u).view(B, T, c.num_heads + 2 * c.num_kv_heads, c.head_dim).transpose(1, 2)
        qk, v = qkv.split([c.num_heads + c.num_kv_heads, c.num_kv_heads], dim=1)
        cos, sin = self._rope(positions)
        qk = qk * cos + _rotate_half(qk) * sin  # rotary on q and k in one go
        q, k = qk.split([c.num_heads, c.num_kv_heads], dim=1)
        rep = c.num_heads // c.num_kv_heads
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return q, k, v

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of the rotary angles at ``positions`` (a table in the weights' dtype, grown on demand).

        Indexing past the table raises IndexError, which grows it: no per-step host read of ``positions.max()``
        and no per-step dtype cast (profiled: both were per-round overhead of the decoding loop)."""
        w = self.qkv_proj.weight
        table = self._rope_table
        if table is not None and table.dtype == w.dtype and table.device == w.device:
            try:
                table = table[:, positions]
                return table[0], table[1]
            except IndexError:
                pass
        need = int(positions.max()) + 1 if positions.numel() else 1
        n = max(need, 2 * (0 if self._rope_table is None else self._rope_table.shape[1]), 256)
        ang = torch.arange(n, device=self.inv_freq.device, dtype=torch.float32)[:, None] * self.inv_freq
        ang = torch.cat([ang, ang], dim=-1)
        self._rope_table = torch.stack([ang.cos(), ang.sin()]).to(w)
        table = self._rope_table[:, positions]
        return table[0], table[1]

    def _finish(self, attn: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """o_proj + residual, then the SwiGLU MLP + residual: the layer output a."""
        B, _, T, _ = attn.shape
        h = residual + self.o_proj(attn.transpose(1, 2).reshape(B, T, -1))
        gate, up = self.gate_up_proj(self.post_norm(h)).chunk(2, dim=-1)
        return h + self.down_proj(F.silu(gate) * up)

    def logits(self, a: torch.Tensor) -> torch.Tensor:
        """Draft logits over V_d: lm_head(RMSNorm(a))."""
        return self.lm_head(self.norm(a))

    # test time

    def step(self, tokens: torch.Tensor, features: torch.Tensor, cache: DraftCache, positions: torch.Tensor,
             attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """One draft forward over n new positions; appends their keys to ``cache`` and returns a ``[B, n, d]``.

        ``features`` are projected target features fc(g) or the draft's own previous outputs a. Without
        ``attn_mask`` the new positions see the whole cache and each other causally; a boolean ``attn_mask``
        ``[n, S + n]`` (True = attend) expresses tree attention.
        """
        q, k, v = self._qkv(tokens, features, positions)
        n, S = tokens.shape[1], cache.length
        K, V = cache.append(k, v)
        if attn_mask is None and n > 1:
            attn_mask = torch.arange(S + n, device=q.device)[None] <= (S + torch.arange(n, device=q.device))[:, None]
        return self._finish(F.scaled_dot_product_attention(q, K, V, attn_mask=attn_mask), features)

    # training-time test

    def ttt_states(self, ids: torch.Tensor, aux: torch.Tensor, ttt_length: int) -> list[torch.Tensor]:
        """Draft outputs a^k for the K unrolled training-time-test steps, ``[B, T, d]`` each [B04].

        Row t of step k stands for the test-time draft at position t + k: its input is (x_{t+k+1}, f_t) for
        k = 0 and (x_{t+k+1}, a^{k-1}_t) for k >= 1; it predicts x_{t+k+2}. At test time that position sees the
        true-feature positions 0..t and its own k drafted positions t+1..t+k, so the mask is derived as:
        step-0 keys causally (columns 0..t), and the keys of steps 1..k at the same row only. This makes
        step k's output identical to k autoregressive draft steps (pinned by a test).
        """
        B, T = ids.shape
        h = self.project(aux)
        pos = torch.arange(T, device=ids.device)
        causal = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()
        scale = 1.0 / math.sqrt(self.config.head_dim)
        K0 = V0 = None
        own_k: list[torch.Tensor] = []
        own_v: list[torch.Tensor] = []
        outs = []
        for k in range(ttt_length):
            tok = F.pad(ids[:, k + 1:], (0, k + 1))  # x_{t+k+1}; rows past the end are masked in the loss
            q, kk, vv = self._qkv(tok, h, pos + k)
            if k == 0:
                K0, V0 = kk, vv
            else:
                own_k.append(kk)
                own_v.append(vv)
            s0 = (q @ K0.transpose(-1, -2) * scale).masked_fill(~causal, float("-inf"))  # [B, H, T, T]
            if own_k:
                s_own = torch.stack([(q * kj).sum(-1) for kj in own_k], dim=-1) * scale  # [B, H, T, k]
                w = torch.softmax(torch.cat([s0, s_own], dim=-1), dim=-1)
                attn = w[..., :T] @ V0 + sum(w[..., T + j, None] * vj for j, vj in enumerate(own_v))
            else:
                attn = torch.softmax(s0, dim=-1) @ V0
            h = self._finish(attn, h)
            outs.append(h)
        return outs
