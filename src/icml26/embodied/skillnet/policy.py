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
  "skillnet_blind": SkillNet with the router's skill input set to zero (the same layers and parameters; the trunk still
               sees the skill tokens): the control that removes skill routing and nothing else.
Action head (``head``), the same for every arm, so the arms' parameter counts stay equal:
  "mse":  a_{1:H} = W_a LN(h), trained by MSE on the (scaled) action chunk (behaviour cloning);
  "flow": pi0-style flow matching (rectified flow). A velocity MLP v(z, x_t, t) on the trunk features z = LN(h),
          the noisy chunk x_t and a sinusoidal embedding of t. Training (pi0's convention): eps ~ N(0, I),
          t = 0.001 + 0.999 u^(2/3) with u ~ U(0, 1) (that is, t ~ Beta(1.5, 1) as in pi0), x_t = t eps + (1 - t) a,
          loss = |v(z, x_t, t) - (eps - a)|^2. Sampling: x_1 = eps from a seeded generator, ``flow_steps`` Euler
          steps x <- x - v(z, x, t) / N from t = 1 down to t = 0 (pi0: 10 steps); deterministic given the noise.
Loss: the head's loss plus the MoE balance loss, plus optionally the similarity regulariser
L_sim = mean_{i!=j} (cos(g_i, g_j) - S_ij)^2 over the skills in the batch (g_i = mean router probabilities of
skill i, S = hierarchy similarity; spec's option, our choice).
"""

from __future__ import annotations

import torch
from torch import nn

from icml26.harness import validate as check

from .moe import GatedFFN, SkillConditionedMoE, SkillEmbedder, routing_similarity

ARMS = ("skillnet", "state_moe", "dense", "dense_verb", "skillnet_blind")
HEADS = ("mse", "flow")


def _n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


class FlowHead(nn.Module):
    """Velocity network of the flow-matching head [B05]: v(z, x_t, t) = MLP([z, x_t, sin/cos(t * f)]).

    z (B, dim) trunk features, x (B, out) noisy flattened chunk, t (B,) in [0, 1]; two SiLU hidden layers of width
    ``hidden``; ``time_dim`` sinusoidal features of t (frequencies 1 .. 1000, geometric; our choice)."""

    def __init__(self, dim: int, out: int, *, hidden: int = 128, time_dim: int = 16):
        super().__init__()
        dim, out, hidden = (check.positive_int(k, x) for k, x in (("dim", dim), ("out", out), ("hidden", hidden)))
        time_dim = check.positive_int("time_dim", time_dim)
        if time_dim % 2:
            raise ValueError(f"time_dim must be even (sin and cos pairs), got {time_dim}")
        self.out, self.time_dim = out, time_dim
        self.register_buffer("freqs", torch.logspace(0, 3, time_dim // 2), persistent=False)
        self.net = nn.Sequential(nn.Linear(dim + out + time_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, out))

    def forward(self, z: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a = t[:, None] * self.freqs
        return self.net(torch.cat([z, x, torch.sin(a), torch.cos(a)], -1))


def _check_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


class SkillNetPolicy(nn.Module):
    def __init__(self, arm: str, obs_dim: int, n_tokens: int, *, dim: int = 48, hidden: int = 48,
                 skill_dim: int = 16, num_experts: int = 4, chunk: int = 4, act_dim: int = 3, blocks: int = 2,
                 n_skill_tokens: int = 3, head: str = "mse", flow_steps: int = 10, flow_hidden: int = 128):
        super().__init__()
        for name, x in (("obs_dim", obs_dim), ("n_tokens", n_tokens), ("dim", dim), ("hidden", hidden),
                        ("skill_dim", skill_dim), ("num_experts", num_experts), ("chunk", chunk), ("act_dim", act_dim),
                        ("blocks", blocks), ("n_skill_tokens", n_skill_tokens), ("flow_steps", flow_steps),
                        ("flow_hidden", flow_hidden)):
            check.positive_int(name, x)
        self.n_skill, self.obs_dim, self.n_tokens = n_skill_tokens, obs_dim, n_tokens
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; use one of {ARMS}")
        if head not in HEADS:
            raise ValueError(f"unknown head {head!r}; use one of {HEADS}")
        self.arm, self.chunk, self.act_dim, self.head_kind, self.flow_steps = arm, chunk, act_dim, head, flow_steps
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
        self.out_norm = nn.LayerNorm(dim)
        out = chunk * act_dim
        self.head = nn.Linear(dim, out) if head == "mse" else FlowHead(dim, out, hidden=flow_hidden)

    def features(self, obs: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list]:
        """Trunk features z = LN(h) (B, dim), the balance loss and the router probabilities (one (B, E) per MoE)."""
        _inputs(self, obs, tokens)
        e = self.emb(tokens)
        c = e[:, self.n_skill - 1:] if self.arm == "dense_verb" else e          # [verb, object] only
        h = (self.inp(obs) + self.cond(c.mean(1)))[:, None]
        bal, probs = obs.new_zeros(()), []
        for norm, f in zip(self.norms, self.ffns):
            if self.arm in ("dense", "dense_verb"):
                h = h + f(norm(h))
                continue
            skill = e[:, :self.n_skill] if self.arm in ("skillnet", "skillnet_blind") else None
            if self.arm == "skillnet_blind":                # the control: the router's skill input is zero
                skill = torch.zeros_like(skill)
            y, aux = f(norm(h), skill)
            h, bal = h + y, bal + aux["balance_loss"] / len(self.ffns)
            probs.append(aux["probs"][:, 0])
        return self.out_norm(h[:, 0]), bal, probs

    def sample(self, z: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Flow head: integrate dx/dt = v(z, x, t) from x_1 = noise (B, chunk * act_dim) at t = 1 to t = 0 with
        ``flow_steps`` Euler steps (pi0's sampler); returns x_0 (B, chunk * act_dim)."""
        x, dt = noise, 1.0 / self.flow_steps
        for i in range(self.flow_steps):
            t = z.new_full((len(z),), 1.0 - i * dt)
            x = x - dt * self.head(z, x, t)
        return x

    def _noise(self, n: int, like: torch.Tensor, generator, noise) -> torch.Tensor:
        width = self.chunk * self.act_dim
        if noise is not None:
            if not isinstance(noise, torch.Tensor):
                raise TypeError(f"noise must be a tensor ({n}, {width}), got {type(noise).__name__}")
            check.shape("noise", noise, (n, width))
            check.finite("noise", noise)
            return noise.to(like.dtype)
        _check_generator(generator)
        if generator is None:               # deterministic by default: the same noise for the same batch size
            generator = torch.Generator().manual_seed(0)
        return torch.randn(n, width, generator=generator).to(like.dtype)

    def forward(self, obs: torch.Tensor, tokens: torch.Tensor, *, generator: torch.Generator | None = None,
                noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, list]:
        """obs (B, obs_dim), tokens (B, L) long -> (actions (B, chunk, act_dim), balance loss, router probs).

        With ``head="flow"`` the actions are sampled from ``noise`` (B, chunk * act_dim), or from N(0, I) noise drawn
        with ``generator`` (default: a generator seeded 0), so the output is deterministic given the seed."""
        z, bal, probs = self.features(obs, tokens)
        if self.head_kind == "mse":
            return self.head(z).view(-1, self.chunk, self.act_dim), bal, probs
        x = self.sample(z, self._noise(len(z), z, generator, noise))
        return x.view(-1, self.chunk, self.act_dim), bal, probs

    def loss(self, obs: torch.Tensor, tokens: torch.Tensor, actions: torch.Tensor, *,
             generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, list]:
        """(head loss, balance loss, router probs): MSE on the chunk ("mse") or the flow-matching loss ("flow";
        noise and t drawn with ``generator``, or with torch's global RNG when it is None)."""
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a tensor (B, chunk, act_dim), got {type(actions).__name__}")
        check.shape("actions", actions, (len(obs), self.chunk, self.act_dim))
        check.finite("actions", actions)
        _check_generator(generator)
        z, bal, probs = self.features(obs, tokens)
        a = actions.reshape(len(z), -1).to(z.dtype)
        if self.head_kind == "mse":
            return nn.functional.mse_loss(self.head(z), a), bal, probs
        eps = torch.randn(a.shape, generator=generator).to(z.dtype)       # generator None: torch's global RNG
        u = torch.rand(len(z), generator=generator)
        t = (0.001 + 0.999 * u ** (2.0 / 3.0)).to(z.dtype)               # Beta(1.5, 1) by its inverse CDF t^1.5
        x_t = t[:, None] * eps + (1 - t[:, None]) * a
        return nn.functional.mse_loss(self.head(z, x_t, t), eps - a), bal, probs


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
    """Minimise the head's loss (MSE(pi(s_t), a_{t:t+H}) or the flow-matching loss) + balance loss with Adam on
    (obs, tokens, action chunks). ``generator`` draws the batches (and the flow head's noise and times).

    ``cosine``: learning rate decays as lr * (1 + cos(pi t / steps)) / 2 (our choice; it sharpens the
    final precision of the regressed actions)."""
    if not isinstance(policy, SkillNetPolicy):
        raise TypeError(f"policy must be a SkillNetPolicy, got {type(policy).__name__}")
    steps, batch, lr = check.positive_int("steps", steps), check.positive_int("batch", batch), check.positive("lr", lr)
    sim_coef = check.non_negative("sim_coef", sim_coef)
    _check_generator(generator)
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
        head_loss, bal, probs = policy.loss(obs[i], tokens[i], actions[i], generator=generator)
        loss = head_loss + bal
        if sim_coef:
            loss = loss + sim_coef * sum(similarity_loss(p, skill_ids[i], similarity) for p in probs) / len(probs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(float(loss.detach()))
    return losses
