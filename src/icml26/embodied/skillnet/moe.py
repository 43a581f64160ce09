"""Skill-conditioned mixture-of-experts FFN of [B05] SkillNet, as in the official ``MoEFeedForward``.

Router (official VIPL-VSU/SkillNet, ``gemma_moe_skill.py``): the query is the token's hidden state x, projected to
the skill width S by a linear map with bias *only when D != S* (``query = x`` when D = S); multi-head
cross-attention with its own Q, K, V projections (with bias) over the skill-token embeddings e (padding masked
with -1e9), scores Q K^T / sqrt(S / heads), **no output projection**; router logits = W_r attn (no bias),
p = softmax. Output (top-k, always-on shared expert):

    y = shared(x) + sum_{e in top-k(p)} p_e E_e(x)          (probabilities not renormalised, as released)

Experts are gated-GELU FFNs, E(x) = W_o (gelu(W_g x) * W_u x) with the tanh approximation of GELU (Flax's
``nn.gelu`` default, as released; ``approximate="none"`` gives the exact erf GELU). Load-balance loss (Switch
Transformer):

    L_bal = coef * E * sum_e f_e P_e,   f_e = fraction of tokens whose top-k contains e, P_e = mean p_e

which is coef under uniform routing and coef * E under full collapse (top-1).

``routing="state"`` is the state-routed baseline (router = W_r x, no bias); it holds no query / attention
parameters, and the skill-routed layer holds no state router, so parameter counts count only what is used.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from icml26.harness import validate as check

ROUTINGS = ("skill", "state")


class GatedFFN(nn.Module):
    """E(x) = W_o (gelu(W_g x) * W_u x); ``approximate="tanh"`` (official, Flax default) or ``"none"`` (erf)."""

    def __init__(self, dim: int, hidden: int, *, approximate: str = "tanh"):
        super().__init__()
        dim, hidden = check.positive_int("dim", dim), check.positive_int("hidden", hidden)
        if approximate not in ("tanh", "none"):
            raise ValueError(f"approximate must be 'tanh' or 'none', got {approximate!r}")
        self.approximate = approximate
        self.g, self.u, self.o = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False), \
            nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.o(nn.functional.gelu(self.g(x), approximate=self.approximate) * self.u(x))


class SkillEmbedder(nn.Module):
    """Skill-token embeddings as released (official ``Embedder``): table ~ N(0, 0.01^2), looked up and scaled by
    sqrt(S) (sqrt(64) = 8 at the official S = 64)."""

    def __init__(self, n_tokens: int, dim: int, *, init_std: float = 0.01):
        super().__init__()
        self.dim = dim
        self.weight = nn.Parameter(torch.randn(n_tokens, dim) * init_std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.weight[tokens] * math.sqrt(self.dim)


class SkillConditionedMoE(nn.Module):
    """Skill-routed MoE FFN [B05]. ``forward(x (B, T, D), skill_emb (B, L, S), skill_mask (B, L) bool)``
    returns ``(y (B, T, D), aux)`` with ``aux = {"balance_loss", "probs" (B, T, E), "topk_mask" (B, T, E)}``.

    ``routing="state"`` routes on the hidden state alone (router = W_r x; ``skill_emb`` is ignored).
    """

    def __init__(self, dim: int, hidden: int, skill_dim: int = 64, *, num_experts: int = 8, top_k: int = 1,
                 shared_expert: bool = True, balance_coef: float = 0.01, num_heads: int = 4,
                 routing: str = "skill", approximate: str = "tanh"):
        super().__init__()
        dim, hidden, skill_dim = (check.positive_int(k, x) for k, x in
                                  (("dim", dim), ("hidden", hidden), ("skill_dim", skill_dim)))
        num_experts, top_k = check.positive_int("num_experts", num_experts), check.positive_int("top_k", top_k)
        num_heads = check.positive_int("num_heads", num_heads)
        balance_coef = check.non_negative("balance_coef", balance_coef)
        if not isinstance(shared_expert, bool):
            raise TypeError(f"shared_expert must be True or False, got {shared_expert!r}")
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"need 1 <= top_k <= num_experts, got top_k={top_k}, num_experts={num_experts}")
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
        if routing == "skill" and skill_dim % num_heads:
            raise ValueError(f"skill_dim ({skill_dim}) must be divisible by num_heads ({num_heads})")
        self.E, self.k, self.coef, self.heads, self.routing = num_experts, top_k, balance_coef, num_heads, routing
        self.skill_dim, self.dim = skill_dim, dim
        if routing == "skill":
            self.query = nn.Linear(dim, skill_dim) if dim != skill_dim else None   # official: skipped when D = S
            self.q, self.k_proj, self.v = (nn.Linear(skill_dim, skill_dim) for _ in range(3))
            self.router = nn.Linear(skill_dim, num_experts, bias=False)
        else:
            self.router = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList(GatedFFN(dim, hidden, approximate=approximate) for _ in range(num_experts))
        self.shared = GatedFFN(dim, hidden, approximate=approximate) if shared_expert else None

    def attend(self, x: torch.Tensor, skill_emb: torch.Tensor, skill_mask: torch.Tensor | None) -> torch.Tensor:
        """The router's input: multi-head cross-attention of the (projected) state over the skill tokens."""
        B, T, _ = x.shape
        L, S, H = skill_emb.shape[1], self.skill_dim, self.heads
        q = x if self.query is None else self.query(x)
        Q = self.q(q).view(B, T, H, S // H).transpose(1, 2)                    # (B, H, T, hd)
        K = self.k_proj(skill_emb).view(B, L, H, S // H).transpose(1, 2)       # (B, H, L, hd)
        V = self.v(skill_emb).view(B, L, H, S // H).transpose(1, 2)
        scores = Q @ K.transpose(-1, -2) / math.sqrt(S // H)
        if skill_mask is not None:
            scores = scores.masked_fill(~skill_mask[:, None, None, :], -1e9)
        return (torch.softmax(scores, -1) @ V).transpose(1, 2).reshape(B, T, S)

    def route(self, x: torch.Tensor, skill_emb: torch.Tensor | None, skill_mask: torch.Tensor | None
              ) -> torch.Tensor:
        """Router probabilities p (B, T, E)."""
        if self.routing == "state":
            return torch.softmax(self.router(x), -1)
        if skill_emb is None:
            raise ValueError("a skill-routed MoE needs skill_emb (B, L, S); use routing='state' to route on x")
        if skill_emb.dim() != 3 or skill_emb.shape[0] != x.shape[0] or skill_emb.shape[-1] != self.skill_dim:
            raise ValueError(f"skill_emb must be (B={x.shape[0]}, L, S={self.skill_dim}), got {tuple(skill_emb.shape)}")
        if skill_mask is not None:
            if skill_mask.shape != skill_emb.shape[:2]:
                raise ValueError(f"skill_mask must be {tuple(skill_emb.shape[:2])}, got {tuple(skill_mask.shape)}")
            if not skill_mask.any(-1).all():
                raise ValueError("every row of skill_mask needs at least one valid (True) skill token")
            skill_mask = skill_mask.bool()
        return torch.softmax(self.router(self.attend(x, skill_emb, skill_mask)), -1)

    def forward(self, x: torch.Tensor, skill_emb: torch.Tensor | None = None,
                skill_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a tensor (B, T, D={self.dim}), got {type(x).__name__}")
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must be (B, T, D={self.dim}), got {tuple(x.shape)}")
        check.finite("x", x)
        if skill_emb is not None:
            if not isinstance(skill_emb, torch.Tensor):
                raise TypeError(f"skill_emb must be a tensor (B, L, S), got {type(skill_emb).__name__}")
            check.finite("skill_emb", skill_emb)
        if skill_mask is not None and (not isinstance(skill_mask, torch.Tensor) or skill_mask.is_floating_point()):
            raise TypeError(f"skill_mask must be a bool tensor (B, L), got {check.describe(skill_mask)}")
        p = self.route(x, skill_emb, skill_mask)
        top = torch.topk(p, self.k, -1).indices
        mask = torch.zeros_like(p).scatter_(-1, top, 1.0)
        out = torch.stack([e(x) for e in self.experts], -2)                  # (B, T, E, D); dense (small E)
        y = ((mask * p).unsqueeze(-1) * out).sum(-2)
        if self.shared is not None:
            y = y + self.shared(x)
        f, P = mask.mean((0, 1)), p.mean((0, 1))
        bal = self.coef * self.E * (f * P).sum()
        return y, {"balance_loss": bal, "probs": p, "topk_mask": mask}


def routing_similarity(gates: torch.Tensor, skill_ids: torch.Tensor, n_skills: int) -> torch.Tensor:
    """Cosine similarity (n_skills, n_skills) of mean expert activations per skill.

    gates (N, E) expert probabilities (or top-k masks) per token; skill_ids (N,) in [0, n_skills).
    """
    if not isinstance(gates, torch.Tensor) or not isinstance(skill_ids, torch.Tensor):
        raise TypeError(f"gates and skill_ids must be tensors, got {type(gates).__name__} and "
                        f"{type(skill_ids).__name__}")
    n_skills = check.positive_int("n_skills", n_skills)
    if gates.dim() != 2 or skill_ids.shape != gates.shape[:1]:
        raise ValueError(f"gates must be (N, E) and skill_ids (N,), got {tuple(gates.shape)}, {tuple(skill_ids.shape)}")
    check.finite("gates", check.non_empty("gates", gates))
    check.indices("skill_ids", skill_ids, n_skills)
    g = torch.zeros(n_skills, gates.shape[1], dtype=gates.dtype).index_add_(0, skill_ids, gates)
    g = g / torch.bincount(skill_ids, minlength=n_skills).clamp_min(1)[:, None]
    g = nn.functional.normalize(g, dim=-1)
    return g @ g.T
