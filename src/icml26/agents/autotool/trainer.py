"""AutoTool's dual-phase training [B18]: Phase I (SFT on demonstrations, then GRPO on the outcome reward) and
Phase II (KL-regularised Plackett–Luce ranking of candidate tools at decision states).

Phase I GRPO uses the shared core :mod:`icml26.testbeds.grpo` (``group_advantages``, ``grpo_loss``); the
"tokens" of a trajectory are its tool decisions, log pi_theta(tool_t | h_t), so the clipped token-level surrogate
and the k3 KL to the SFT policy apply unchanged.

Phase II, at a decision state h (a step t of an on-policy rollout):
  1. draw K candidate tools from pi_theta(.|h) without replacement (Gumbel-top-K);
  2. complete each candidate greedily with the current policy, giving returns R_k;
  3. rank the candidates by R (no loss terms between tied candidates) and minimise the PL-DPO loss of :func:`kl_pl_loss` with the frozen
     Phase-I policy as the reference.
Every tool call (demonstrations, rollouts, candidate completions) is counted in ``env.env_steps``, the budget on
which the arms are compared.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from icml26.harness import validate as v
from icml26.testbeds.grpo import group_advantages, grpo_loss

from .env import BLOCK, MAX_OPS, PREFIX, EnvState, Tasks, ToolCatalog, ToolEnv, sample_tasks
from .plackett_luce import kl_pl_loss, sample_plackett_luce
from .policy import AutoToolPolicy

__all__ = ["AutoToolConfig", "AutoToolTrainer", "rollout", "evaluate", "expert_choice"]

ANCHORS = torch.tensor([PREFIX + BLOCK * t for t in range(MAX_OPS)])


@dataclass(frozen=True)
class AutoToolConfig:
    """Training settings (our choices where the paper gives none)."""

    lr: float = 1e-3                  # Phase I RL and Phase II
    sft_lr: float = 2e-3              # Phase I SFT
    sft_batch: int = 128
    legacy_rate: float = 0.3          # the scripted expert picks the legacy twin this often (SFT plateaus)
    group_size: int = 8               # GRPO G
    clip_eps: float = 0.2             # GRPO epsilon
    kl_beta: float = 1e-3             # GRPO KL to the SFT policy
    rl_tasks: int = 16                # tasks per GRPO update (x group_size episodes)
    pl_k: int = 4                     # Phase II candidates per decision state
    pl_beta: float = 0.1              # Phase II beta
    pl_tasks: int = 32                # decision states per Phase II update
    pl_lr: float | None = None        # Phase II learning rate (None: lr)
    pl_skip_ties: bool = True         # drop decision states whose K returns all tie (no ranking signal)
    pl_shuffle: bool = False          # control: permute the K returns within each row (ranking signal removed,
    #                                   tie structure kept)
    pl_ties: str = "group"            # kl_pl_loss ties: no loss terms between candidates with equal returns
    inventory_size: int = 20
    ops_range: tuple = (2, 4)         # operations per training task (lo, hi); harder tasks leave headroom
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (GRPO needs a group baseline), got {self.group_size}")
        if self.pl_k < 2:
            raise ValueError(f"pl_k must be >= 2 candidates to rank, got {self.pl_k}")
        if not 0.0 <= self.legacy_rate <= 1.0:
            raise ValueError(f"legacy_rate must lie in [0, 1], got {self.legacy_rate}")
        if self.inventory_size < 1:
            raise ValueError(f"inventory_size must be >= 1 (an inventory of size 0 offers no tool), "
                             f"got {self.inventory_size}")
        for name in ("lr", "sft_lr", "pl_beta", "clip_eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        lo, hi = self.ops_range
        if not 1 <= lo <= hi <= MAX_OPS:
            raise ValueError(f"ops_range must satisfy 1 <= lo <= hi <= {MAX_OPS}, got {self.ops_range!r}")
        if self.kl_beta < 0:
            raise ValueError(f"kl_beta must be >= 0, got {self.kl_beta}")
        v.one_of("pl_ties", self.pl_ties, ("group", "random", "first"))


# helper functions

def _check_count(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_policy_env(policy, env) -> None:
    if not isinstance(policy, AutoToolPolicy):
        raise TypeError(f"policy must be an AutoToolPolicy, got {v.describe(policy)}")
    if env is not None and not isinstance(env, ToolEnv):
        raise TypeError(f"env must be a ToolEnv, got {v.describe(env)}")


def _tool_logits(policy: AutoToolPolicy, env: ToolEnv, state: EnvState, t: int) -> Tensor:
    ctx = env.context(state, t)
    return policy(ctx, torch.tensor([ctx.shape[1] - 1]), state.tasks.inventory)[:, 0]


def expert_choice(tasks: Tasks, t: int, legacy_rate: float, generator: torch.Generator) -> Tensor:
    """The scripted expert: the stable tool for op t, its legacy twin with probability ``legacy_rate``."""
    if not isinstance(tasks, Tasks):
        raise TypeError(f"tasks must be Tasks (sample_tasks()), got {v.describe(tasks)}")
    v.in_range("t", v.non_negative_int("t", t), 0, MAX_OPS - 1)
    legacy_rate = v.probability("legacy_rate", legacy_rate)
    c = tasks.ops[:, t].clamp_min(0)
    twin = (torch.rand(c.shape, generator=generator) < legacy_rate).long()
    return (tasks.inventory == (2 * c + twin)[:, None]).float().argmax(1)


@torch.no_grad()
def rollout(policy: AutoToolPolicy, env: ToolEnv, state: EnvState, *, t0: int = 0, greedy: bool = False,
            generator: torch.Generator | None = None, first_choice: Tensor | None = None
            ) -> tuple[EnvState, Tensor, Tensor, Tensor]:
    """Play from step ``t0`` to the end: sample (or argmax) each tool; ``first_choice`` forces step t0's choice.

    Returns (final state, reward ``[B]``, choices ``[B, MAX_OPS]``, log-probs ``[B, MAX_OPS]`` of the choices).
    """
    _check_policy_env(policy, env)
    if not isinstance(state, EnvState):
        raise TypeError(f"state must be an EnvState (env.reset(tasks)), got {v.describe(state)}")
    v.in_range("t0", v.non_negative_int("t0", t0), 0, MAX_OPS - 1)
    b = len(state.tasks)
    choices = torch.zeros(b, MAX_OPS, dtype=torch.long)
    logps = torch.zeros(b, MAX_OPS)
    reward = torch.zeros(b)
    for t in range(t0, MAX_OPS):
        if bool(state.done.all()):
            break
        if t == t0 and first_choice is not None:
            ch = first_choice
        else:
            logits = _tool_logits(policy, env, state, t)
            if greedy:
                ch = logits.argmax(-1)
            else:
                ch = torch.multinomial(F.softmax(logits, -1), 1, generator=generator).squeeze(1)
            logps[:, t] = F.log_softmax(logits, -1).gather(1, ch[:, None]).squeeze(1)
        choices[:, t] = ch
        active = ~state.done
        state, r, _ = env.step(state, ch, generator)
        reward = torch.where(active, r, reward)
    return state, reward, choices, logps


def _decision_logits(policy: AutoToolPolicy, env: ToolEnv, state: EnvState) -> Tensor:
    """Logits ``[B, MAX_OPS, M]`` at every decision of finished trajectories (one forward pass)."""
    return policy(env.full_context(state), ANCHORS, state.tasks.inventory)


@torch.no_grad()
def evaluate(policy: AutoToolPolicy, catalog: ToolCatalog, tasks: Tasks, *, n_samples: int = 5,
             generator: torch.Generator | None = None) -> dict[str, Tensor]:
    """Per-task success (mean over ``n_samples`` sampled runs and greedy), per-step selection accuracy,
    consistency (all runs pick the same tool for the same sub-instruction) and the rate of selecting the
    needed tool when it is unseen. Uses its own environment: evaluation steps are not training budget."""
    _check_policy_env(policy, None)
    if not isinstance(catalog, ToolCatalog):
        raise TypeError(f"catalog must be a ToolCatalog, got {v.describe(catalog)}")
    if not isinstance(tasks, Tasks):
        raise TypeError(f"tasks must be Tasks (sample_tasks()), got {v.describe(tasks)}")
    n_samples = v.positive_int("n_samples", n_samples)
    policy.eval()
    env = ToolEnv(catalog)
    n = len(tasks)
    rep = tasks.repeat(n_samples)
    final, reward, choices, _ = rollout(policy, env, env.reset(rep), generator=generator)
    tool = rep.inventory.gather(1, choices)                                     # [n*s, MAX_OPS]
    valid = torch.arange(MAX_OPS)[None] < rep.n_ops[:, None]
    right = (tool == 2 * rep.ops.clamp_min(0)) & valid                          # the stable needed tool
    success = (reward > 0).float().view(n, n_samples).mean(1)
    same = (tool.view(n, n_samples, MAX_OPS) == tool.view(n, n_samples, MAX_OPS)[:, :1]).all(1)
    v1 = valid.view(n, n_samples, MAX_OPS)[:, 0]
    _, g_reward, _, _ = rollout(policy, env, env.reset(tasks), greedy=True, generator=generator)
    need_seen = torch.as_tensor(catalog.seen)[rep.ops.clamp_min(0)]
    unseen_steps = valid & ~need_seen
    return {"success": success, "greedy_success": (g_reward > 0).float(),
            "step_accuracy": (right.float().sum(1) / valid.sum(1)).view(n, n_samples).mean(1),
            "consistency": (same & v1).float().sum(1) / v1.sum(1),
            "legacy_rate": ((tool == 2 * rep.ops.clamp_min(0) + 1) & valid).float().sum() / valid.sum(),
            "unseen_pick_rate": ((right & unseen_steps).float().sum() / unseen_steps.sum().clamp_min(1))}


# main class

class AutoToolTrainer:
    """AutoTool's pipeline on a :class:`ToolEnv`: ``phase1_sft`` -> ``phase1_rl`` -> ``phase2_rank`` [B18].

    The trainer owns its environment, so ``env.env_steps`` is this run's budget; :meth:`branch` copies the whole
    trainer (policy, optimizer, reference, counter, random state) to continue two arms from one Phase-I policy.
    """

    def __init__(self, policy: AutoToolPolicy, catalog: ToolCatalog, cfg: AutoToolConfig = AutoToolConfig(),
                 seed: int = 0):
        if not isinstance(policy, AutoToolPolicy):
            raise TypeError(f"policy must be an AutoToolPolicy, got {type(policy).__name__}")
        if not isinstance(catalog, ToolCatalog):
            raise TypeError(f"catalog must be a ToolCatalog (build_catalog()), got {v.describe(catalog)}")
        if not isinstance(cfg, AutoToolConfig):
            raise TypeError(f"cfg must be an AutoToolConfig, got {v.describe(cfg)}")
        self.policy, self.cat, self.cfg = policy, catalog, cfg
        self.env = ToolEnv(catalog)
        self.opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=0.0)
        self.gen = torch.Generator().manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.ref: AutoToolPolicy | None = None
        self.log: dict[str, list[float]] = {"sft_loss": [], "grpo_reward": [], "pl_loss": [], "pl_reward": [], "pl_tied_rows": []}
        self.updates = {"sft": 0, "grpo": 0, "pl": 0}
        self.max_update_steps = 0  # the most environment steps one RL update spent (the budget loops overshoot by < this)

    def branch(self) -> "AutoToolTrainer":
        return copy.deepcopy(self)

    def _tasks(self, n: int) -> Tasks:
        return sample_tasks(self.cat, n, split="seen", inventory_size=self.cfg.inventory_size,
                            ops_range=tuple(self.cfg.ops_range), rng=self.rng)

    def _update(self, loss: Tensor) -> None:
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
        self.opt.step()

    def _set_lr(self, lr: float) -> None:
        for group in self.opt.param_groups:
            group["lr"] = lr

    def _freeze_ref(self) -> None:
        self.ref = copy.deepcopy(self.policy).eval().requires_grad_(False)

    # Phase I: SFT on demonstrations

    def phase1_sft(self, n_demos: int, n_updates: int) -> None:
        """Cross-entropy on the expert's tool choices over ``n_demos`` demonstrations (their tool calls count as
        environment steps), ``n_updates`` minibatches of ``cfg.sft_batch``. Freezes the result as the reference."""
        _check_count("n_demos", n_demos, 1)
        _check_count("n_updates", n_updates, 0)
        tasks = self._tasks(n_demos)
        state = self.env.reset(tasks)
        choices = torch.zeros(n_demos, MAX_OPS, dtype=torch.long)
        for t in range(MAX_OPS):
            choices[:, t] = expert_choice(tasks, t, self.cfg.legacy_rate, self.gen)
            state, _, _ = self.env.step(state, choices[:, t], self.gen)
        ctx = self.env.full_context(state)
        valid = torch.arange(MAX_OPS)[None] < tasks.n_ops[:, None]
        self._set_lr(self.cfg.sft_lr)
        self.policy.train()
        for _ in range(n_updates):
            idx = torch.randint(0, n_demos, (self.cfg.sft_batch,), generator=self.gen)
            logits = self.policy(ctx[idx], ANCHORS, tasks.inventory[idx])
            ce = F.cross_entropy(logits.flatten(0, 1), choices[idx].flatten(), reduction="none")
            loss = (ce * valid[idx].flatten()).sum() / valid[idx].sum()
            self._update(loss)
            self.log["sft_loss"].append(float(loss.detach()))
            self.updates["sft"] += 1
        self._set_lr(self.cfg.lr)
        self._freeze_ref()

    # Phase I: GRPO on the outcome reward (shared core)

    def grpo_update(self) -> dict:
        """One GRPO update on ``cfg.rl_tasks`` tasks x ``cfg.group_size`` sampled episodes."""
        cfg = self.cfg
        tasks = self._tasks(cfg.rl_tasks).repeat(cfg.group_size)
        self.policy.eval()
        final, reward, choices, old = rollout(self.policy, self.env, self.env.reset(tasks), generator=self.gen)
        adv = group_advantages(reward, cfg.group_size)
        mask = (torch.arange(MAX_OPS)[None] < tasks.n_ops[:, None]).float()
        self.policy.train()
        logp = F.log_softmax(_decision_logits(self.policy, self.env, final), -1).gather(2, choices[..., None])[..., 0]
        ref_logp = None
        if cfg.kl_beta > 0:
            with torch.no_grad():
                ref_logp = F.log_softmax(_decision_logits(self.ref, self.env, final), -1).gather(
                    2, choices[..., None])[..., 0]
        loss, info = grpo_loss(logp, old, adv, mask, ref_logp=ref_logp, clip_eps=cfg.clip_eps, beta=cfg.kl_beta)
        self._update(loss)
        self.log["grpo_reward"].append(float(reward.mean()))
        self.updates["grpo"] += 1
        return info

    def phase1_rl(self, env_steps: int) -> None:
        """GRPO updates until this trainer has spent ``env_steps`` more environment steps."""
        _check_count("env_steps", env_steps, 0)
        if self.ref is None:
            self._freeze_ref()
        stop = self.env.env_steps + env_steps
        while self.env.env_steps < stop:
            before = self.env.env_steps
            self.grpo_update()
            self.max_update_steps = max(self.max_update_steps, self.env.env_steps - before)

    # Phase II: KL-regularised Plackett–Luce ranking

    def pl_update(self) -> float:
        """One Phase-II update over ``cfg.pl_tasks`` decision states (one random step per on-policy rollout)."""
        cfg, env = self.cfg, self.env
        tasks = self._tasks(cfg.pl_tasks)
        self.policy.eval()
        final, _, choices, _ = rollout(self.policy, env, env.reset(tasks), generator=self.gen)
        b = len(tasks)
        t_dec = (torch.rand(b, generator=self.gen) * tasks.n_ops).long()       # decision step per episode
        # the state at the decision: the rollout's history up to t_dec (results included), step = t_dec
        keep = torch.arange(BLOCK * MAX_OPS)[None] < BLOCK * t_dec[:, None]
        prev = final.hist[torch.arange(b), (BLOCK * t_dec - 1).clamp_min(0)] - env.cat.vocab["v0"]
        value = torch.where(t_dec == 0, tasks.start, prev)
        state = EnvState(tasks, value, t_dec.clone(), final.hist * keep)
        logits_all = _decision_logits(self.policy, env, final)                 # same prefix up to each anchor
        logits = logits_all[torch.arange(b), t_dec]                            # [b, M]
        k = min(cfg.pl_k, tasks.inventory.shape[1])
        cand = sample_plackett_luce(logits.detach(), k, self.gen, mask=tasks.inventory >= 0)   # [b, K]
        returns = torch.zeros(b, k)
        for t in range(MAX_OPS):                                               # lockstep by decision step
            rows = torch.nonzero(t_dec == t).squeeze(1)
            if rows.numel() == 0:
                continue
            sub = env.fork(state, rows.repeat_interleave(k))
            _, r, _, _ = rollout(self.policy, env, sub, t0=t, greedy=True, generator=self.gen,
                                 first_choice=cand[rows].flatten())
            returns[rows] = r.view(-1, k)
        self.policy.train()
        logits = _decision_logits(self.policy, env, state)[torch.arange(b), t_dec]
        with torch.no_grad():
            ref_logits = _decision_logits(self.ref, env, state)[torch.arange(b), t_dec]
        logp = F.log_softmax(logits, -1).gather(1, cand)
        logp_ref = F.log_softmax(ref_logits, -1).gather(1, cand)
        rank_by = (returns.gather(1, torch.rand(returns.shape, generator=self.gen).argsort(1)) if cfg.pl_shuffle
                   else returns)
        per_state = kl_pl_loss(logp, logp_ref, rank_by, beta=cfg.pl_beta, ties=cfg.pl_ties, generator=self.gen,
                               reduction="none")
        w = (returns.max(1).values > returns.min(1).values).float() if cfg.pl_skip_ties else torch.ones(b)
        loss = (per_state * w).sum() / w.sum().clamp_min(1.0)
        if float(w.sum()) > 0:
            self._update(loss)
        self.log["pl_loss"].append(float(loss.detach()))
        self.log["pl_reward"].append(float(returns.max(1).values.mean()))
        self.log["pl_tied_rows"].append(float((returns.max(1).values == returns.min(1).values).float().mean()))
        self.updates["pl"] += 1
        return float(loss.detach())

    def phase2_rank(self, env_steps: int) -> None:
        """Phase II updates until ``env_steps`` more environment steps are spent; the current policy becomes the
        frozen reference pi_ref (the Phase-I policy)."""
        _check_count("env_steps", env_steps, 0)
        self._freeze_ref()
        if self.cfg.pl_lr is not None:
            self._set_lr(self.cfg.pl_lr)
        stop = self.env.env_steps + env_steps
        while self.env.env_steps < stop:
            before = self.env.env_steps
            self.pl_update()
            self.max_update_steps = max(self.max_update_steps, self.env.env_steps - before)
