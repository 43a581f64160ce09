"""Behaviour-cloned action-chunk policy with skill-conditioned MoE layers, and its peers [B05].

pi(s, skill) -> chunk of H actions. h_0 = W_s s + W_c mean_j e(tok_j) (e: ``SkillEmbedder``, the official skill
embedding: N(0, 0.01^2) table scaled by sqrt(S)); for each block
h <- h + F(LN(h)); a_{1:H} = W_a LN(h). tok = [motion cluster, VerbNet class, verb, object] (object token is
our addition for verb-object tasks). F is, per arm:
  "skillnet": SkillConditionedMoE routed by cross-attention to the skill-token embeddings (the first
              ``n_skill_tokens`` tokens = [motion cluster, VerbNet class, verb], as in the paper; the object
              token enters only through the conditioning embedding);
  "state_moe": the same MoE routed on the hidden state (router = W_r h), its expert width raised so that the
               policy's parameter count matches SkillNet's (it has no query / attention weights);
  "dense": one gated FFN whose hidden width matches SkillNet's parameter count (conditioned on all four tokens);
  "dense_verb": the same dense policy conditioned on [verb, object] only (a verb one-hot, no hierarchy).
Loss: MSE on the (scaled) action chunk plus the MoE balance loss (BC, not flow matching: our choice), plus
optionally the similarity regulariser L_sim = mean_{i!=j} (cos(g_i, g_j) - S_ij)^2 over the skills in the batch
(g_i = mean router probabilities of skill i, S = hierarchy similarity; spec's option, our choice).
"""

from __future__ import annotations

import torch
from torch import nn

from icml26.harness import validate as check

from .moe import GatedFFN, SkillConditionedMoE, SkillEmbedder, routing_similarity

ARMS = ("skillnet", "state_moe", "dense", "dense_verb")


def _n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


class SkillNetPolicy(nn.Module):
    def __init__(self, arm: str, obs_dim: int, n_tokens: int, *, dim: int = 48, hidden: int = 48,
                 skill_dim: int = 16, num_experts: int = 4, chunk: int = 4, act_dim: int = 3, blocks: int = 2,
                 n_skill_tokens: int = 3):
        super().__init__()
        for name, x in (("obs_dim", obs_dim), ("n_tokens", n_tokens), ("dim", dim), ("hidden", hidden),
                        ("skill_dim", skill_dim), ("num_experts", num_experts), ("chunk", chunk), ("act_dim", act_dim),
                        ("blocks", blocks), ("n_skill_tokens", n_skill_tokens)):
            check.positive_int(name, x)
        self.n_skill, self.obs_dim, self.n_tokens = n_skill_tokens, obs_dim, n_tokens
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; use one of {ARMS}")
        self.arm, self.chunk, self.act_dim = arm, chunk, act_dim
        self.emb = SkillEmbedder(n_tokens, skill_dim)
        self.inp, self.cond = nn.Linear(obs_dim, dim), nn.Linear(skill_dim, dim)
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(blocks))

        def moe(routing: str, width: int) -> SkillConditionedMoE:
            return SkillConditionedMoE(dim, width, skill_dim, num_experts=num_experts, top_k=1, routing=routing)

        target = _n_params(moe("skill", hidden))          # SkillNet's layer: every arm's layer matches its count
        if arm in ("dense", "dense_verb"):
            per_unit = _n_params(GatedFFN(dim, 2)) - _n_params(GatedFFN(dim, 1))
            self.ffns = nn.ModuleList(GatedFFN(dim, max(1, round(target / per_unit))) for _ in range(blocks))
        elif arm == "state_moe":
            base, per_unit = _n_params(moe("state", hidden)), _n_params(moe("state", hidden + 1)) - \
                _n_params(moe("state", hidden))
            width = hidden + max(0, round((target - base) / per_unit))
            self.ffns = nn.ModuleList(moe("state", width) for _ in range(blocks))
        else:
            self.ffns = nn.ModuleList(moe("skill", hidden) for _ in range(blocks))
        self.out_norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, chunk * act_dim)

    def forward(self, obs: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list]:
        """obs (B, obs_dim), tokens (B, L) long -> (actions (B, chunk, act_dim), balance loss, router probs)."""
        _inputs(self, obs, tokens)
        e = self.emb(tokens)
        c = e[:, self.n_skill - 1:] if self.arm == "dense_verb" else e          # [verb, object] only
        h = (self.inp(obs) + self.cond(c.mean(1)))[:, None]
        bal, probs = obs.new_zeros(()), []
        for norm, f in zip(self.norms, self.ffns):
            if self.arm in ("dense", "dense_verb"):
                h = h + f(norm(h))
                continue
            y, aux = f(norm(h), e[:, :self.n_skill] if self.arm == "skillnet" else None)
            h, bal = h + y, bal + aux["balance_loss"] / len(self.ffns)
            probs.append(aux["probs"][:, 0])
        return self.head(self.out_norm(h[:, 0])).view(-1, self.chunk, self.act_dim), bal, probs


def _inputs(policy: "SkillNetPolicy", obs: torch.Tensor, tokens: torch.Tensor) -> None:
    if not isinstance(obs, torch.Tensor) or not isinstance(tokens, torch.Tensor):
        raise TypeError(f"obs and tokens must be tensors, got {type(obs).__name__} and {type(tokens).__name__}")
    check.shape("obs", obs, (None, policy.obs_dim))
    check.finite("obs", obs)
    if tokens.dim() != 2 or tokens.shape[0] != obs.shape[0] or tokens.shape[1] < policy.n_skill:
        raise ValueError(f"tokens must be ({obs.shape[0]}, L >= {policy.n_skill}) token ids "
                         f"[motion cluster, VerbNet class, verb, ...], got shape {tuple(tokens.shape)}")
    check.indices("tokens", tokens, policy.n_tokens)


def similarity_loss(probs: torch.Tensor, skill_ids: torch.Tensor, similarity: torch.Tensor) -> torch.Tensor:
    """L_sim = mean over skill pairs i != j present in the batch of (cos(g_i, g_j) - S_ij)^2 (spec's option)."""
    if not isinstance(similarity, torch.Tensor) or similarity.dim() != 2 or similarity.shape[0] != similarity.shape[1]:
        raise ValueError(f"similarity must be a square (n_skills, n_skills) tensor, got {check.describe(similarity)}")
    check.finite("similarity", similarity)
    n = similarity.shape[0]
    R = routing_similarity(probs, skill_ids, n)
    seen = torch.bincount(skill_ids, minlength=n) > 0
    pair = seen[:, None] & seen[None, :] & ~torch.eye(n, dtype=torch.bool)
    return ((R - similarity.to(R.dtype)) ** 2)[pair].mean() if pair.any() else R.new_zeros(())


def train_bc(policy: SkillNetPolicy, obs: torch.Tensor, tokens: torch.Tensor, actions: torch.Tensor, *,
             steps: int, batch: int = 256, lr: float = 3e-3, cosine: bool = True,
             generator: torch.Generator | None = None, sim_coef: float = 0.0,
             skill_ids: torch.Tensor | None = None, similarity: torch.Tensor | None = None) -> list[float]:
    """Minimise MSE(pi(s_t), a_{t:t+H}) + balance loss with Adam on (obs, tokens, action chunks).

    ``cosine``: learning rate decays as lr * (1 + cos(pi t / steps)) / 2 (our choice; it sharpens the
    final precision of the regressed actions)."""
    if not isinstance(policy, SkillNetPolicy):
        raise TypeError(f"policy must be a SkillNetPolicy, got {type(policy).__name__}")
    steps, batch, lr = check.positive_int("steps", steps), check.positive_int("batch", batch), check.positive("lr", lr)
    sim_coef = check.non_negative("sim_coef", sim_coef)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if not isinstance(actions, torch.Tensor):
        raise TypeError(f"actions must be a tensor (N, chunk, act_dim), got {type(actions).__name__}")
    if not (len(obs) == len(tokens) == len(actions)) or len(obs) == 0:
        raise ValueError("obs, tokens and actions need the same, nonzero length")
    _inputs(policy, obs, tokens)
    check.shape("actions", actions, (None, policy.chunk, policy.act_dim))
    check.finite("actions", actions)
    if sim_coef:
        if skill_ids is None or similarity is None or skill_ids.shape != (len(obs),):
            raise ValueError("sim_coef > 0 needs skill_ids (N,) and the similarity matrix S (n_skills, n_skills)")
        if policy.arm == "dense" or policy.arm == "dense_verb":
            raise ValueError("L_sim needs an MoE arm (router probabilities)")
        if not isinstance(similarity, torch.Tensor) or similarity.dim() != 2 or \
                similarity.shape[0] != similarity.shape[1]:
            raise ValueError(f"similarity must be a square (n_skills, n_skills) tensor, got {check.describe(similarity)}")
        check.indices("skill_ids", skill_ids, similarity.shape[0])
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if cosine else None
    losses = []
    for _ in range(steps):
        i = torch.randint(len(obs), (min(batch, len(obs)),), generator=generator)
        pred, bal, probs = policy(obs[i], tokens[i])
        loss = nn.functional.mse_loss(pred, actions[i]) + bal
        if sim_coef:
            loss = loss + sim_coef * sum(similarity_loss(p, skill_ids[i], similarity) for p in probs) / len(probs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(float(loss.detach()))
    return losses
