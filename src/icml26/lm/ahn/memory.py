"""[A07] Compressed long-term memories of an AHN: Gated DeltaNet, DeltaNet and a Mamba2-style scalar-decay SSM.

All three keep, per head, a fixed-size state S (d_k x d_v) and read it with a query:

    Gated DeltaNet   S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T      a_t = exp(-e^A softplus(w_a x_t + c))
                                                                                b_t = sigmoid(w_b x_t)
    DeltaNet         the same with a_t = 1
    Mamba2 (scalar)  S_t = a_t S_{t-1} + D_t k_t v_t^T                          D_t = softplus(w_a x_t + c),
                                                                                a_t = exp(-e^A D_t)
    readout          o_t = S^T q_t / sqrt(d_k)        (q, k L2-normalised per head; Mamba2: S^T q_t)

(state written S[d_k, d_v], so the readout is q^T S). Two equivalent forms: :func:`chunk_memory_rule` (chunked
parallel form for training: within a chunk of C tokens the delta-rule corrections are one triangular solve, the
WY representation; between chunks the state is carried) and :func:`memory_step` (the recurrence, for decoding).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate as _chk

KINDS = ("gdn", "deltanet", "mamba2")


# helper functions

def _tensor(name: str, x, dims: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor with {dims} dimensions, got {_chk.describe(x)}")
    if x.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimensions, got shape {tuple(x.shape)}")
    _chk.finite(name, x)
    return x


def _check_rule_inputs(q, k, v_, beta, g, state=None, *, step: bool = False) -> None:
    """Shapes (and finiteness) of the memory-rule inputs: [B, H, (T,) d] and gates [B, H, (T)]."""
    n = 3 if step else 4
    _tensor("k", k, n)
    _tensor("v", v_, n)
    if q is not None:
        _tensor("q", q, n)
        if q.shape != k.shape:
            raise ValueError(f"q and k must have the same shape, got {tuple(q.shape)} and {tuple(k.shape)}")
    if v_.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"v must match k in every dimension but the last, got {tuple(v_.shape)} and {tuple(k.shape)}")
    for name, x in (("beta", beta), ("g", g)):
        _tensor(name, x, n - 1)
        if x.shape != k.shape[:-1]:
            raise ValueError(f"{name} must have shape {tuple(k.shape[:-1])} (one gate per token and head), got "
                             f"{tuple(x.shape)}")
    if (g > 0).any():
        raise ValueError("g is the log-decay log a_t and must be <= 0 (a_t in (0, 1])")
    if state is not None:
        _tensor("state" if step else "initial_state", state, 4)
        want = (k.shape[0], k.shape[1], k.shape[-1], v_.shape[-1])
        if tuple(state.shape) != want:
            raise ValueError(f"the state must have shape [B, H, d_k, d_v] = {want}, got {tuple(state.shape)}")


def chunk_memory_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor, *,
                      delta_rule: bool = True, chunk_size: int = 64,
                      initial_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked parallel form of the (gated) delta rule / scalar-decay linear recurrence (arguments checked; see
    :func:`_chunk_memory_rule`)."""
    _check_rule_inputs(q, k, v, beta, g, initial_state)
    chunk_size = _chk.positive_int("chunk_size", chunk_size)
    return _chunk_memory_rule(q, k, v, beta, g, delta_rule=delta_rule, chunk_size=chunk_size,
                              initial_state=initial_state)


def _chunk_memory_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor, *,
                       delta_rule: bool = True, chunk_size: int = 64,
                       initial_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked parallel form of the (gated) delta rule / scalar-decay linear recurrence.

    With log-decay g_t = log a_t, per head: S_t = e^{g_t} (I - b_t k_t k_t^T)^{[delta]} S_{t-1} + b_t k_t v_t^T and
    o_t = q_t^T S_t (no scaling here: the caller scales q). Shapes: q, k [B, H, T, d_k]; v [B, H, T, d_v];
    beta, g [B, H, T]. Returns (o [B, H, T, d_v], final state [B, H, d_k, d_v]). Computed in float32 at least
    (float64 inputs stay float64).

    Within a chunk (cumulative log-decay G_i), the delta-rule pseudo-values u solve (I + L) u = b v with
    L_ij = b_i e^{G_i - G_j} k_i^T k_j (j < i), so u - w S_prev are the chunk's corrected values, w = (I+L)^{-1}
    (b k e^{G}); without the delta rule u = b v and w = 0.
    """
    dtype = v.dtype
    q, k, v, beta, g = (_at_least_f32(t) for t in (q, k, v, beta, g))
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    C = int(chunk_size)
    pad = (-T) % C
    if pad:  # padded steps have b = 0 and a = 1: they leave the state unchanged
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        beta, g = (F.pad(t, (0, pad)) for t in (beta, g))
    N = (T + pad) // C
    q, k, v = (t.reshape(B, H, N, C, -1) for t in (q, k, v))
    beta, g = (t.reshape(B, H, N, C) for t in (beta, g))
    G = g.cumsum(-1)
    tril = torch.ones(C, C, dtype=torch.bool, device=k.device).tril()
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~tril, -math.inf).exp()  # e^{G_i - G_j}, j <= i
    k_beta = k * beta[..., None]
    v_beta = v * beta[..., None]
    if delta_rule:
        L = ((k_beta @ k.transpose(-1, -2)) * decay).tril(-1)
        eye = torch.eye(C, dtype=k.dtype, device=k.device).expand_as(L)
        A = torch.linalg.solve_triangular(eye + L, eye, upper=False, unitriangular=True)
        u = A @ v_beta
        w = A @ (k_beta * G.exp()[..., None])
    else:
        u, w = v_beta, None
    qk = (q @ k.transpose(-1, -2)) * decay                                   # intra-chunk, j <= i
    q_dec = q * G.exp()[..., None]
    k_dec = k * (G[..., -1:] - G).exp()[..., None]
    last = G[..., -1].exp()[..., None, None]
    S = torch.zeros(B, H, dk, dv, dtype=k.dtype, device=k.device) if initial_state is None else initial_state.to(k.dtype)
    out = torch.empty(B, H, N, C, dv, dtype=k.dtype, device=k.device)
    for n in range(N):  # the carry between chunks; everything inside a chunk is batched matmuls
        v_new = u[:, :, n] if w is None else u[:, :, n] - w[:, :, n] @ S
        out[:, :, n] = q_dec[:, :, n] @ S + qk[:, :, n] @ v_new
        S = S * last[:, :, n] + k_dec[:, :, n].transpose(-1, -2) @ v_new
    return out.reshape(B, H, N * C, dv)[:, :, :T].to(dtype), S


def _at_least_f32(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32, or float64 if it already is (the recurrences never run in half precision)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def memory_step(state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor, *,
                delta_rule: bool = True) -> torch.Tensor:
    """Absorb one token into the state: S <- e^g (I - b k k^T)^{[delta]} S + b k v^T.

    Shapes: state [B, H, d_k, d_v]; k [B, H, d_k]; v [B, H, d_v]; beta, g [B, H]. Returns the new state."""
    _check_rule_inputs(None, k, v, beta, g, state, step=True)
    return _memory_step(state, k, v, beta, g, delta_rule=delta_rule)


def _memory_step(state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor, *,
                 delta_rule: bool = True) -> torch.Tensor:
    S = state * g.exp()[..., None, None]
    if delta_rule:
        v = v - (k[..., None, :] @ S).squeeze(-2)
    return S + k[..., :, None] * (beta[..., None] * v)[..., None, :]


def memory_read(state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """o = q^T S: state [B, H, d_k, d_v], q [B, H, d_k] -> [B, H, d_v]."""
    _tensor("state", state, 4)
    _tensor("q", q, 3)
    if q.shape != state.shape[:3]:
        raise ValueError(f"q must have shape [B, H, d_k] = {tuple(state.shape[:3])} to read the state, got "
                         f"{tuple(q.shape)}")
    return _memory_read(state, q)


def _memory_read(state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return (q[..., None, :] @ state).squeeze(-2)


def _linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` in ``x``'s dtype: the memory works in at least float32 even when the model (and so this
    layer) was cast to bf16 / fp16."""
    bias = None if layer.bias is None else layer.bias.to(x.dtype)
    return F.linear(x, layer.weight.to(x.dtype), bias)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.to(x.dtype)


# main class

STYLES = ("official", "v1")


class AHNMemory(nn.Module):
    """One layer's Artificial Hippocampus Network [A07]: gates from the evicted token's normalised hidden state x,
    a fixed-size per-head state, a readout with the current query, and a zero-initialised output stage.

    Output stage and initialisation, ``style="official"`` (default; ByteDance-Seed/AHN ``src/ahn/rnn``):

        GDN / DeltaNet   o_h <- RMSNorm_h(o_h) * silu(g_h(x_t))           g = W_g x_t (per head, no bias; x_t the
                                                                          *current* token's normalised input)
        Mamba2           o   <- RMSNorm_{H d}(o * silu(g(x_t)))           g = W_g x_t + b (gate before the norm)
        then             y_h  = o_h W_h                                    per-head d x d blocks (GroupLinear), 0 init
        gates            GDN: A ~ U(0, 16) per head, dt_bias = softplus^-1(dt), dt ~ logU[1e-3, 1e-1], W_a, W_b of
                         nn.Linear's default init, no bias; DeltaNet: W_b; Mamba2: A_h = h (1..H), dt_bias = 1,
                         dt = softplus(W_a x + b + dt_bias) (about 1.3 at init), q not scaled by 1/sqrt(d)

    ``style="v1"`` (this project's first version, kept to compare): o <- RMSNorm_h(o), no gate, one dense
    (H d) x (H d) projection; A = (1..16)/16 spread over heads, dt ~ logU[0.01, 0.1], W_a, W_b ~ N(0, 0.02^2); q
    scaled by 1/sqrt(d) for every kind.

    Args:
        kind: ``"gdn"`` (Gated DeltaNet), ``"deltanet"`` or ``"mamba2"`` (scalar-decay SSM, no delta correction).
        hidden_size: the base model's hidden size (the gates read x).
        num_heads, head_dim: the attention layer's query heads and head size (one state per query head).
        use_q_proj: re-project the (RoPE'd) query before reading the memory (off by default, as in the spec).
        chunk_size: chunk length of the parallel form.
        style: ``"official"`` or ``"v1"`` (see above).
    """

    def __init__(self, kind: str, hidden_size: int, num_heads: int, head_dim: int, *, use_q_proj: bool = False,
                 chunk_size: int = 64, style: str = "official") -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown AHN kind {kind!r}; use one of {', '.join(KINDS)}")
        if style not in STYLES:
            raise ValueError(f"unknown AHN style {style!r}; use one of {', '.join(STYLES)}")
        for name, val in (("hidden_size", hidden_size), ("num_heads", num_heads), ("head_dim", head_dim),
                          ("chunk_size", chunk_size)):
            _chk.positive_int(name, val)
        if not isinstance(use_q_proj, bool):
            raise TypeError(f"use_q_proj must be a bool, got {_chk.describe(use_q_proj)}")
        self.kind, self.num_heads, self.head_dim, self.chunk_size = kind, num_heads, head_dim, chunk_size
        self.style = style
        self.delta_rule = kind != "mamba2"
        official = style == "official"
        H = num_heads
        self.b_proj = nn.Linear(hidden_size, H, bias=False)                       # b_t = sigmoid(w_b x_t)
        self.a_proj = nn.Linear(hidden_size, H, bias=official and kind == "mamba2")  # dt = softplus(w_a x + dt_bias)
        if official:
            if kind == "mamba2":
                A = torch.arange(1, H + 1, dtype=torch.float32)
                dt_bias = torch.ones(H)
            else:
                A = torch.empty(H).uniform_(0, 16)
                dt = torch.exp(torch.rand(H) * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
                dt_bias = dt + torch.log(-torch.expm1(-dt))
        else:
            A = torch.linspace(1.0, 16.0, H) / 16.0
            nn.init.normal_(self.a_proj.weight, std=0.02)
            nn.init.normal_(self.b_proj.weight, std=0.02)
            dt = torch.linspace(math.log(0.01), math.log(0.1), H).exp()       # Mamba2's dt range
            dt_bias = dt + torch.log(-torch.expm1(-dt))
        self.A_log = nn.Parameter(torch.log(A))
        self.dt_bias = nn.Parameter(dt_bias)
        self.q_proj = nn.Linear(head_dim, head_dim, bias=False) if use_q_proj else None
        if self.q_proj is not None:
            nn.init.eye_(self.q_proj.weight)
        if official:
            self.g_proj = nn.Linear(hidden_size, H, bias=kind == "mamba2")    # output gate from the current token
            self.o_norm = RMSNorm(H * head_dim if kind == "mamba2" else head_dim, eps=1e-5)
            self.out_proj = nn.Parameter(torch.zeros(H, head_dim, head_dim))  # per-head blocks (GroupLinear)
        else:
            self.g_proj = None
            self.o_norm = RMSNorm(head_dim)
            self.out_proj = nn.Linear(H * head_dim, H * head_dim, bias=False)
            nn.init.zeros_(self.out_proj.weight)                              # AHN starts as a no-op

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(beta, g = log a), each [B, H, T], from hidden states x [B, T, hidden]."""
        x = x.to(self.compute_dtype)
        if self.kind == "mamba2":
            dt = F.softplus(_linear(self.a_proj, x) + self.dt_bias.to(x.dtype))
            beta, g = dt, -self.A_log.to(x.dtype).exp() * dt
        else:
            beta = torch.sigmoid(_linear(self.b_proj, x))
            g = (-self.A_log.to(x.dtype).exp() * F.softplus(_linear(self.a_proj, x) + self.dt_bias.to(x.dtype))
                 if self.kind == "gdn"
                 else torch.zeros_like(beta))
        return beta.transpose(1, 2), g.transpose(1, 2)

    def prep_k(self, k: torch.Tensor) -> torch.Tensor:
        return F.normalize(k.to(self.compute_dtype), dim=-1, eps=1e-6)

    def prep_q(self, q: torch.Tensor) -> torch.Tensor:
        q = q.to(self.compute_dtype)
        q = q if self.q_proj is None else _linear(self.q_proj, q)
        q = F.normalize(q, dim=-1, eps=1e-6)
        if self.style == "official" and self.kind == "mamba2":
            return q                                   # Mamba2's C = normalised q, no 1/sqrt(d)
        return q / math.sqrt(self.head_dim)

    def forward(self, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor, q: torch.Tensor,
                state: torch.Tensor | None = None, x_q: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Chunked form: absorb tokens (k, v, x) in order; row i of the output reads the state after token i with
        query q_i (and output gate from x_q[i], the reading token's normalised input; needed by the official
        style). k, q [B, H, n, d]; v [B, H, n, d]; x, x_q [B, n, hidden]. Returns (readout [B, H, n, d], final
        state [B, H, d, d])."""
        self._check_io(k, v, x, q, x_q, 4)
        beta, g = self.gates(x)
        o, S = _chunk_memory_rule(self.prep_q(q), self.prep_k(k), v.to(self.compute_dtype), beta, g,
                                  delta_rule=self.delta_rule,
                                  chunk_size=self.chunk_size, initial_state=state)
        return self.project(o, x_q), S

    def _check_io(self, k, v, x, q, x_q, dims: int) -> None:
        """Cheap shape checks of forward/step inputs (no pass over the data)."""
        H, d = self.num_heads, self.head_dim
        for name, t in (("k", k), ("v", v), ("q", q)):
            if not isinstance(t, torch.Tensor) or t.dim() != dims or t.shape[1] != H or t.shape[-1] != d:
                raise ValueError(f"{name} must be a tensor [B, {H}, {'n, ' if dims == 4 else ''}{d}] (heads, head_dim "
                                 f"of this memory), got {_chk.describe(t)}")
        hidden = self.b_proj.in_features
        for name, t in (("x", x), ("x_q", x_q)):
            if t is None and name == "x_q":
                continue
            if not isinstance(t, torch.Tensor) or t.dim() != dims - 1 or t.shape[-1] != hidden:
                raise ValueError(f"{name} must be a tensor [B, {'n, ' if dims == 4 else ''}{hidden}] (the tokens' "
                                 f"normalised hidden states), got {_chk.describe(t)}")

    def absorb(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
               g: torch.Tensor) -> torch.Tensor:
        """Recurrent form: absorb one evicted token (k [B, H, d], v, and its gates [B, H]) into the state."""
        return _memory_step(state.to(self.compute_dtype), self.prep_k(k), v.to(self.compute_dtype), beta, g,
                            delta_rule=self.delta_rule)

    def step(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor,
             q: torch.Tensor, x_q: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One recurrent step (absorb token (k, v, x), then read with q and the reading token's x_q): the decoding
        form of :meth:`forward`. k, v, q [B, H, d]; x, x_q [B, hidden]. Returns (readout [B, H, d], new state)."""
        self._check_io(k, v, x, q, x_q, 3)
        beta, g = self.gates(x[:, None])
        state = self.absorb(state, k, v, beta[..., 0], g[..., 0])
        return self.read(state, q, x_q), state

    def read(self, state: torch.Tensor, q: torch.Tensor, x_q: torch.Tensor | None = None) -> torch.Tensor:
        """Readout for queries q [B, H, d] (x_q [B, hidden]) or [B, H, n, d] (x_q [B, n, hidden])."""
        if q.dim() == 3:
            xq = None if x_q is None else x_q[:, None]
            return self.project(_memory_read(state, self.prep_q(q))[:, :, None], xq)[:, :, 0]
        return self.project(self.prep_q(q) @ state, x_q)

    def project(self, o: torch.Tensor, x_q: torch.Tensor | None = None) -> torch.Tensor:
        """The output stage (see the class doc): [B, H, n, d] (and x_q [B, n, hidden]) -> [B, H, n, d]."""
        B, H, n, d = o.shape
        if self.g_proj is None:                                           # v1: RMSNorm, dense projection
            y = _linear(self.out_proj, self.o_norm(o).transpose(1, 2).reshape(B, n, H * d))
            return y.view(B, n, H, d).transpose(1, 2)
        if x_q is None:
            raise ValueError("the official AHN output stage needs x_q, the reading tokens' normalised hidden states "
                             "(its output gate); pass x_q=[B, n, hidden]")
        z = _linear(self.g_proj, x_q.to(self.compute_dtype)).transpose(1, 2)[..., None]  # [B, H, n, 1]: one gate per head
        if self.kind == "mamba2":                                         # RMSNormGated(H d, norm_before_gate=False)
            y = (o * F.silu(z)).transpose(1, 2).reshape(B, n, H * d)
            o = self.o_norm(y).view(B, n, H, d).transpose(1, 2)
        else:                                                             # FusedRMSNormSwishGate per head
            o = self.o_norm(o) * F.silu(z)
        return torch.einsum("bhnd,hde->bhne", o, self.out_proj.to(o.dtype))

    @property
    def compute_dtype(self) -> torch.dtype:
        """The memory's working precision: its parameters' dtype, at least float32 (a float64 model stays float64,
        so streaming and parallel forms can be compared to round-off)."""
        return torch.promote_types(self.A_log.dtype, torch.float32)

    def init_state(self, batch: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.zeros(batch, self.num_heads, self.head_dim, self.head_dim, dtype=self.compute_dtype,
                           device=device)


def GatedDeltaNetMemory(hidden_size: int, num_heads: int, head_dim: int, **kw) -> AHNMemory:
    """AHN-GDN [A07]: ``AHNMemory("gdn", ...)``."""
    return AHNMemory("gdn", hidden_size, num_heads, head_dim, **kw)


def DeltaNetMemory(hidden_size: int, num_heads: int, head_dim: int, **kw) -> AHNMemory:
    """AHN-DeltaNet [A07]: ``AHNMemory("deltanet", ...)`` (a_t = 1)."""
    return AHNMemory("deltanet", hidden_size, num_heads, head_dim, **kw)


def Mamba2Memory(hidden_size: int, num_heads: int, head_dim: int, **kw) -> AHNMemory:
    """AHN-Mamba2 [A07]: ``AHNMemory("mamba2", ...)`` (scalar decay, no delta correction)."""
    return AHNMemory("mamba2", hidden_size, num_heads, head_dim, **kw)
