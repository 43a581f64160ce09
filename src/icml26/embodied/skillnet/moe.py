"""Skill-conditioned mixture-of-experts FFN of [B05] SkillNet.

Router: multi-head cross-attention with query = the token's hidden state (projected to the skill width) and
keys / values = the skill-token embeddings (padding masked); router logits = W_r attn (no bias), p = softmax.
Output (top-k, always-on shared expert):

    y = shared(x) + sum_{e in top-k(p)} p_e E_e(x)          (probabilities not renormalised, as released)

Experts are gated-GELU FFNs, E(x) = W_o (gelu(W_g x) * W_u x). Load-balance loss (Switch Transformer):

    L_bal = coef * E * sum_e f_e P_e,   f_e = fraction of tokens whose top-k contains e, P_e = mean p_e

which is coef under uniform routing and coef * E under full collapse (top-1).
"""

from __future__ import annotations

import torch
from torch import nn


class GatedFFN(nn.Module):
    """E(x) = W_o (gelu(W_g x) * W_u x)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.g, self.u, self.o = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False), \
            nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.o(nn.functional.gelu(self.g(x)) * self.u(x))


class SkillConditionedMoE(nn.Module):
    """Skill-routed MoE FFN [B05]. ``forward(x (B, T, D), skill_emb (B, L, S), skill_mask (B, L) bool)``
    returns ``(y (B, T, D), aux)`` with ``aux = {"balance_loss", "probs" (B, T, E), "topk_mask" (B, T, E)}``.

    ``skill_emb=None`` routes on the hidden state alone (the state-routed baseline: router = W_r x).
    """

    def __init__(self, dim: int, hidden: int, skill_dim: int = 64, *, num_experts: int = 8, top_k: int = 1,
                 shared_expert: bool = True, balance_coef: float = 0.01, num_heads: int = 4):
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"need 1 <= top_k <= num_experts, got top_k={top_k}, num_experts={num_experts}")
        if skill_dim % num_heads:
            raise ValueError(f"skill_dim ({skill_dim}) must be divisible by num_heads ({num_heads})")
        self.E, self.k, self.coef, self.heads = num_experts, top_k, balance_coef, num_heads
        self.query = nn.Linear(dim, skill_dim)
        self.attn = nn.MultiheadAttention(skill_dim, num_heads, batch_first=True)
        self.router = nn.Linear(skill_dim, num_experts, bias=False)
        self.state_router = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList(GatedFFN(dim, hidden) for _ in range(num_experts))
        self.shared = GatedFFN(dim, hidden) if shared_expert else None

    def route(self, x: torch.Tensor, skill_emb: torch.Tensor | None, skill_mask: torch.Tensor | None
              ) -> torch.Tensor:
        """Router probabilities p (B, T, E)."""
        if skill_emb is None:
            return torch.softmax(self.state_router(x), -1)
        if skill_emb.dim() != 3 or skill_emb.shape[0] != x.shape[0]:
            raise ValueError(f"skill_emb must be (B={x.shape[0]}, L, S), got {tuple(skill_emb.shape)}")
        pad = None
        if skill_mask is not None:
            if skill_mask.shape != skill_emb.shape[:2]:
                raise ValueError(f"skill_mask must be {tuple(skill_emb.shape[:2])}, got {tuple(skill_mask.shape)}")
            if not skill_mask.any(-1).all():
                raise ValueError("every row of skill_mask needs at least one valid (True) skill token")
            pad = ~skill_mask.bool()
        a, _ = self.attn(self.query(x), skill_emb, skill_emb, key_padding_mask=pad, need_weights=False)
        return torch.softmax(self.router(a), -1)

    def forward(self, x: torch.Tensor, skill_emb: torch.Tensor | None = None,
                skill_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
        if x.dim() != 3:
            raise ValueError(f"x must be (B, T, D), got {tuple(x.shape)}")
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
    if gates.dim() != 2 or skill_ids.shape != gates.shape[:1]:
        raise ValueError(f"gates must be (N, E) and skill_ids (N,), got {tuple(gates.shape)}, {tuple(skill_ids.shape)}")
    g = torch.zeros(n_skills, gates.shape[1], dtype=gates.dtype).index_add_(0, skill_ids, gates)
    g = g / torch.bincount(skill_ids, minlength=n_skills).clamp_min(1)[:, None]
    g = nn.functional.normalize(g, dim=-1)
    return g @ g.T
