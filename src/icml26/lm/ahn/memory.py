"""[A07] Compressed long-term memories of an AHN: Gated DeltaNet, DeltaNet and a Mamba2-style scalar-decay SSM.

All three keep, per head, a fixed-size state S (d_k x d_v) and read it with a query:

    Gated DeltaNet   S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T      a_t = exp(-e^A softplus(w_a x_t + c))
                                                                                b_t = sigmoid(w_b x_t)
    DeltaNet         the same with a_t = 1
    Mamba2 (scalar)  S_t = a_t S_{t-1} + D_t k_t v_t^T                          D_t = softplus(w_a x_t + c),
                                                                                a_t = exp(-e^A D_t)
    readout          o_t = S^T q_t / sqrt(d_k)        (q, k L2-normalised per head)

(state written S[d_k, d_v], so the readout is q^T S). Two equivalent forms: :func:`chunk_memory_rule` (chunked
parallel form for training: within a chunk of C tokens the delta-rule corrections are one triangular solve, the
WY representation; between chunks the state is carried) and :func:`memory_step` (the recurrence, for decoding).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

KINDS = ("gdn", "deltanet", "mamba2")


# helper functions

def chunk_memory_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor, *,
                      delta_rule: bool = True, chunk_size: int = 64,
                      initial_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked parallel form of the (gated) delta rule / scalar-decay linear recurrence.

    With log-decay g_t = log a_t, per head: S_t = e^{g_t} (I - b_t k_t k_t^T)^{[delta]} S_{t-1} + b_t k_t v_t^T and
    o_t = q_t^T S_t (no scaling here: the caller scales q). Shapes: q, k [B, H, T, d_k]; v [B, H, T, d_v];
    beta, g [B, H, T]. Returns (o [B, H, T, d_v], final state [B, H, d_k, d_v]). Computed in float32.

    Within a chunk (cumulative log-decay G_i), the delta-rule pseudo-values u solve (I + L) u = b v with
    L_ij = b_i e^{G_i - G_j} k_i^T k_j (j < i), so u - w S_prev are the chunk's corrected values, w = (I+L)^{-1}
    (b k e^{G}); without the delta rule u = b v and w = 0.
    """
    dtype = v.dtype
    q, k, v, beta, g = (t.float() for t in (q, k, v, beta, g))
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
    S = torch.zeros(B, H, dk, dv, dtype=k.dtype, device=k.device) if initial_state is None else initial_state.float()
    out = torch.empty(B, H, N, C, dv, dtype=k.dtype, device=k.device)
    for n in range(N):  # the carry between chunks; everything inside a chunk is batched matmuls
        v_new = u[:, :, n] if w is None else u[:, :, n] - w[:, :, n] @ S
        out[:, :, n] = q_dec[:, :, n] @ S + qk[:, :, n] @ v_new
        S = S * last[:, :, n] + k_dec[:, :, n].transpose(-1, -2) @ v_new
    return out.reshape(B, H, N * C, dv)[:, :, :T].to(dtype), S


def memory_step(state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor, *,
                delta_rule: bool = True) -> torch.Tensor:
    """Absorb one token into the state: S <- e^g (I - b k k^T)^{[delta]} S + b k v^T.

    Shapes: state [B, H, d_k, d_v]; k [B, H, d_k]; v [B, H, d_v]; beta, g [B, H]. Returns the new state."""
    S = state * g.exp()[..., None, None]
    if delta_rule:
        v = v - (k[..., None, :] @ S).squeeze(-2)
    return S + k[..., :, None] * (beta[..., None] * v)[..., None, :]


def memory_read(state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """o = q^T S: state [B, H, d_k, d_v], q [B, H, d_k] -> [B, H, d_v]."""
    return (q[..., None, :] @ state).squeeze(-2)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


# main class

class AHNMemory(nn.Module):
    """One layer's Artificial Hippocampus Network [A07]: gates from the evicted token's normalised hidden state x,
    a fixed-size per-head state, a readout with the current query, and a zero-initialised output projection.

    Args:
        kind: ``"gdn"`` (Gated DeltaNet), ``"deltanet"`` or ``"mamba2"`` (scalar-decay SSM, no delta correction).
        hidden_size: the base model's hidden size (the gates read x).
        num_heads, head_dim: the attention layer's query heads and head size (one state per query head).
        use_q_proj: re-project the (RoPE'd) query before reading the memory (off by default, as in the spec).
        chunk_size: chunk length of the parallel form.
    """

    def __init__(self, kind: str, hidden_size: int, num_heads: int, head_dim: int, *, use_q_proj: bool = False,
                 chunk_size: int = 64) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown AHN kind {kind!r}; use one of {', '.join(KINDS)}")
        self.kind, self.num_heads, self.head_dim, self.chunk_size = kind, num_heads, head_dim, chunk_size
        self.delta_rule = kind != "mamba2"
        self.b_proj = nn.Linear(hidden_size, num_heads, bias=True)           # b_t = sigmoid(w_b x_t)
        self.a_proj = nn.Linear(hidden_size, num_heads, bias=True)           # dt = softplus(w_a x_t + c)
        self.A_log = nn.Parameter(torch.log(torch.linspace(1.0, 16.0, num_heads)) - math.log(16.0))
        nn.init.normal_(self.a_proj.weight, std=0.02)
        nn.init.normal_(self.b_proj.weight, std=0.02)
        with torch.no_grad():  # initial dt around 0.01..0.1 (Mamba2's dt range)
            dt = torch.linspace(math.log(0.01), math.log(0.1), num_heads).exp()
            self.a_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
            self.b_proj.bias.zero_()
        self.q_proj = nn.Linear(head_dim, head_dim, bias=False) if use_q_proj else None
        if self.q_proj is not None:
            nn.init.eye_(self.q_proj.weight)
        self.o_norm = RMSNorm(head_dim)
        self.out_proj = nn.Linear(num_heads * head_dim, num_heads * head_dim, bias=False)
        nn.init.zeros_(self.out_proj.weight)                                  # AHN starts as a no-op

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(beta, g = log a), each [B, H, T], from hidden states x [B, T, hidden]."""
        x = x.float()
        if self.kind == "mamba2":
            dt = F.softplus(self.a_proj(x))
            beta, g = dt, -self.A_log.exp() * dt
        else:
            beta = torch.sigmoid(self.b_proj(x))
            g = -self.A_log.exp() * F.softplus(self.a_proj(x)) if self.kind == "gdn" else torch.zeros_like(beta)
        return beta.transpose(1, 2), g.transpose(1, 2)

    def prep_k(self, k: torch.Tensor) -> torch.Tensor:
        return F.normalize(k.float(), dim=-1, eps=1e-6)

    def prep_q(self, q: torch.Tensor) -> torch.Tensor:
        q = q.float() if self.q_proj is None else self.q_proj(q.float())
        return F.normalize(q, dim=-1, eps=1e-6) / math.sqrt(self.head_dim)

    def forward(self, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor, q: torch.Tensor,
                state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Chunked form: absorb tokens (k, v, x) in order; row i of the output reads the state after token i with
        query q_i. k, q [B, H, n, d]; v [B, H, n, d]; x [B, n, hidden]. Returns (projected readout [B, H, n, d],
        final state [B, H, d, d])."""
        beta, g = self.gates(x)
        o, S = chunk_memory_rule(self.prep_q(q), self.prep_k(k), v.float(), beta, g, delta_rule=self.delta_rule,
                                 chunk_size=self.chunk_size, initial_state=state)
        return self.project(o), S

    def absorb(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
               g: torch.Tensor) -> torch.Tensor:
        """Recurrent form: absorb one evicted token (k [B, H, d], v, and its gates [B, H]) into the state."""
        return memory_step(state, self.prep_k(k), v.float(), beta, g, delta_rule=self.delta_rule)

    def step(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor,
             q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One recurrent step (absorb token (k, v, x), then read with q): the decoding form of :meth:`forward`.
        k, v, q [B, H, d]; x [B, hidden]. Returns (projected readout [B, H, d], new state)."""
        beta, g = self.gates(x[:, None])
        state = self.absorb(state, k, v, beta[..., 0], g[..., 0])
        return self.read(state, q), state

    def read(self, state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Projected readout for queries q [B, H, d] (or [B, H, n, d] against one state per batch row)."""
        if q.dim() == 3:
            return self.project(memory_read(state, self.prep_q(q))[:, :, None])[:, :, 0]
        return self.project(self.prep_q(q) @ state)

    def project(self, o: torch.Tensor) -> torch.Tensor:
        """out_proj(RMSNorm(o)) over the concatenated heads: [B, H, n, d] -> [B, H, n, d]."""
        B, H, n, d = o.shape
        y = self.out_proj(self.o_norm(o).transpose(1, 2).reshape(B, n, H * d))
        return y.view(B, n, H, d).transpose(1, 2)

    def init_state(self, batch: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.zeros(batch, self.num_heads, self.head_dim, self.head_dim, device=device)


def GatedDeltaNetMemory(hidden_size: int, num_heads: int, head_dim: int, **kw) -> AHNMemory:
    """AHN-GDN [A07]: ``AHNMemory("gdn", ...)``."""
    return AHNMemory("gdn", hidden_size, num_heads, head_dim, **kw)


def DeltaNetMemory(hidden_size: int, num_heads: int, head_dim: int, **kw) -> AHNMemory:
    """AHN-DeltaNet [A07]: ``AHNMemory("deltanet", ...)`` (a_t = 1)."""
    return AHNMemory("deltanet", hidden_size, num_heads, head_dim, **kw)


def Mamba2Memory(hidden_size: int, num_heads: int, head_dim: int, **kw) -> AHNMemory:
    """AHN-Mamba2 [A07]: ``AHNMemory("mamba2", ...)`` (scalar decay, no delta correction)."""
    return AHNMemory("mamba2", hidden_size, num_heads, head_dim, **kw)
