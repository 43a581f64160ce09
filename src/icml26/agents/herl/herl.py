"""[B07] HeRL: hindsight-experience-guided GRPO (Zhang et al., arXiv 2603.20046; official code sikelifei/HeRL).

One training step on prompts x_1..x_P (following the official trainer ``_augment_with_rewrite_he``):

 1. rollout: G responses y_i ~ pi_theta(.|x) per prompt; rubric reward r_i = sum_k w_k 1[k met] / sum_k w_k.
 2. hindsight selection: groups with max_i r_i < tau; candidates = the responses with the best reward (ties broken
    by the number of rubrics met), at most ``candidate_limit``.
 3. guidance: h = instruction + satisfied rubrics + unmet rubrics + draft (+ "keep satisfied, fix unmet");
    revision y' ~ pi_theta(.|h) at temperature 0.3 (same policy).
 4. replacement (``replace_rule="official"``, the official trainer's rule): every revised group overwrites
    ``replace_top_n`` random slots of its own group (group size stays G) with, in order, the best revisions with
    r(y') > max_i r_i, then revisions with r(y') >= max_i r_i, then copies of the best originals (by reward, then
    rubrics met); only rows holding a revision are flagged in ``he_mask``. ``replace_rule="strict"`` (our earlier
    rule, kept as an option): only revisions with r(y') > max_i r_i (``fallback``: >=) replace, nothing else.
 5. bonus: the revised candidate c gets r_c <- r_c + alpha (r(y'_c) - r_c)  (alpha = 0.05).
 6. advantages: A_i = (r_i - mean_g) / (std_g + eps) over the modified group (eps = 1e-6, verl's default).
 7. loss (``mixpolicy_vanilla``), token mean over the response mask:
      on-policy tokens:  dual-clip PPO, l = max(-A rho, -A clip(rho, 1-eps, 1+eps)), and for A < 0 min(l, -A c)
      hindsight tokens:  l = -A f(rho),  f(rho) = rho / (rho + gamma),  rho = pi_theta / pi_old   (no clipping)
    so at rho = 1 a hindsight token's gradient is -A gamma/(1+gamma)^2 grad log pi.
    Options (off by default; the reproduction uses both): ``entropy_coef`` c subtracts c x the entropy of
    pi_theta summed over the response tokens of ``entropy_rows`` ("on_policy", the default: rows not flagged in
    ``he_mask``, so the bonus falls on p(. | x) at the policy's own samples, as GRPO's does; "all": every trained
    row, hindsight rows included, the official verl trainer's behaviour, ``entropy_coeff``) divided by all trained
    response tokens, the policy loss's denominator (see :func:`entropy_bonus`); ``mini_batches`` splits the rollout
    batch into runs of whole groups with one optimiser update each (verl's ``ppo_mini_batch_size``; later
    mini-batches run at rho != 1).
 8. ``train_context``: hindsight rows are trained as (h, y') ("hindsight", the default since the fresh-eyes
    review: the official scripts' ``train_use_rewrite_prompt=True``) or (x, y') ("original", the abstract's reading;
    on the toy task it unlearns the revision skill during RL).

With ``enable=False`` the same trainer is plain GRPO (same loss with an empty ``he_mask``): the baseline.
Test-time refinement: draft, score, revise under guidance, keep the best (``test_time_refine``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from icml26.harness import validate as v
from icml26.testbeds.grpo import (
    Rollout,
    generate_with_logprobs,
    group_advantages,
    token_logprobs,
    token_logprobs_and_entropy,
)

from .rubrics import RubricList, RubricResult, RubricVerifier

TRAIN_CONTEXTS = ("original", "hindsight")
REPLACE_RULES = ("official", "strict")
ENTROPY_ROWS = ("on_policy", "all")

# guide(prompt_index, prompt_ids [L], draft_ids [C], met_row [K] bool) -> guidance prompt ids [L']
GuideFn = Callable[[int, Tensor, Tensor, Tensor], Tensor]


@dataclass
class HeRLConfig:
    """HeRL hyper-parameters (official defaults; ``enable=False`` gives the GRPO baseline)."""

    group_size: int = 8
    threshold: float = 1.0
    candidate_limit: int = 16
    replace_top_n: int = 1
    bonus_alpha: float = 0.05
    shaping_gamma: float = 1.0
    revise_temperature: float = 0.3
    train_context: str = "hindsight"
    clip_eps: float = 0.2
    clip_ratio_c: float = 3.0
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    entropy_rows: str = "on_policy"             # "all": the official trainer's rows (matters only if entropy_coef > 0)
    mini_batches: int = 1
    lr: float = 1e-4
    max_new_tokens: int = 16
    temperature: float = 1.0
    fallback: bool = False
    replace_rule: str = "official"
    adv_eps: float = 1e-6
    enable: bool = True
    max_grad_norm: float | None = 1.0
    eos_token_id: int | None = None
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        self.group_size = v.positive_int("group_size", self.group_size, minimum=2)   # GRPO/HeRL need a group baseline
        self.threshold = v.finite_number("threshold", self.threshold)
        self.candidate_limit = v.non_negative_int("candidate_limit", self.candidate_limit)
        self.replace_top_n = v.positive_int("replace_top_n", self.replace_top_n)
        if self.replace_top_n > self.group_size:
            raise ValueError(f"replace_top_n ({self.replace_top_n}) cannot exceed group_size ({self.group_size})")
        self.bonus_alpha = v.in_range("bonus_alpha", self.bonus_alpha, 0.0, 1.0)
        self.shaping_gamma = v.non_negative("shaping_gamma", self.shaping_gamma)
        self.revise_temperature = v.non_negative("revise_temperature", self.revise_temperature)
        v.one_of("train_context", self.train_context, TRAIN_CONTEXTS)
        self.clip_eps = v.in_range("clip_eps", self.clip_eps, 0.0, 1.0, low_open=True, high_open=True)
        self.clip_ratio_c = v.finite_number("clip_ratio_c", self.clip_ratio_c)
        if self.clip_ratio_c <= 1.0:
            raise ValueError(f"clip_ratio_c (dual clip) must be > 1, got {self.clip_ratio_c}")
        self.kl_coef = v.non_negative("kl_coef", self.kl_coef)
        self.entropy_coef = v.non_negative("entropy_coef", self.entropy_coef)
        v.one_of("entropy_rows", self.entropy_rows, ENTROPY_ROWS)
        self.mini_batches = v.positive_int("mini_batches", self.mini_batches)
        self.lr = v.positive("lr", self.lr)
        self.max_new_tokens = v.positive_int("max_new_tokens", self.max_new_tokens)
        self.temperature = v.non_negative("temperature", self.temperature)
        v.one_of("replace_rule", self.replace_rule, REPLACE_RULES)
        self.adv_eps = v.positive("adv_eps", self.adv_eps)
        for name in ("fallback", "enable"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {v.describe(getattr(self, name))}")
        if self.max_grad_norm is not None:
            self.max_grad_norm = v.positive("max_grad_norm", self.max_grad_norm)
        if self.eos_token_id is not None:
            self.eos_token_id = v.non_negative_int("eos_token_id", self.eos_token_id)
        self.pad_token_id = v.non_negative_int("pad_token_id", self.pad_token_id)


# guidance prompts (text form, for real LLMs)

DEFAULT_TEMPLATE = ("You are a rewrite assistant. Keep satisfied rubrics intact and fix the unmet ones.\n\n"
                    "[Instruction]\n{prompt}\n\n[Rubric Status]\nSatisfied:\n{met}\n\nNot satisfied:\n{unmet}\n\n"
                    "[Candidate]\nDraft:\n{draft}\n\nRewrite the draft so that every rubric is satisfied.")


def build_guidance_prompt(prompt: str, draft: str, met: Sequence[str], unmet: Sequence[str],
                          template: str = DEFAULT_TEMPLATE) -> str:
    """Guidance prompt h from the instruction, the draft and its satisfied / unmet rubric descriptions."""
    for name, val in (("prompt", prompt), ("draft", draft), ("template", template)):
        if not isinstance(val, str):
            raise TypeError(f"{name} must be a string, got {v.describe(val)}")
    for name, val in (("met", met), ("unmet", unmet)):
        if isinstance(val, str) or not isinstance(val, Sequence) or not all(isinstance(x, str) for x in val):
            raise TypeError(f"{name} must be a list of rubric descriptions (strings), got {v.describe(val)}")
    for name in ("{prompt}", "{draft}", "{met}", "{unmet}"):
        if name not in template:
            raise ValueError(f"template must contain the field {name}")
    block = lambda xs: "\n".join(f"- {x}" for x in xs) if xs else "none"  # noqa: E731
    return template.format(prompt=prompt, draft=draft, met=block(met), unmet=block(unmet))


def text_guide(tokenizer, rubric_lists, template: str = DEFAULT_TEMPLATE) -> GuideFn:
    """A :data:`GuideFn` for a text policy: decode prompt and draft, build the text guidance prompt from the rubric
    descriptions, encode it (``tokenizer`` is any HF tokenizer)."""
    if not (callable(tokenizer) and hasattr(tokenizer, "decode")):
        raise TypeError(f"tokenizer must be a Hugging Face tokenizer (callable, with .decode), got "
                        f"{v.describe(tokenizer)}")
    _rubric_lists(rubric_lists)
    build_guidance_prompt("", "", [], [], template)          # the template's fields, before any work

    def guide(p: int, prompt_ids: Tensor, draft: Tensor, met_row: Tensor) -> Tensor:
        met, unmet = rubric_lists[p].split(met_row)
        text = build_guidance_prompt(tokenizer.decode(prompt_ids.tolist(), skip_special_tokens=True),
                                     tokenizer.decode(draft.tolist(), skip_special_tokens=True),
                                     [r.describe() for r in met], [r.describe() for r in unmet], template)
        return torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)

    return guide


# argument checks

def _rubric_lists(rubric_lists) -> None:
    if isinstance(rubric_lists, RubricList) or not isinstance(rubric_lists, Sequence):
        raise TypeError(f"rubric_lists must be a sequence of RubricList (one per prompt), got "
                        f"{v.describe(rubric_lists)}")
    v.non_empty("rubric_lists", rubric_lists)
    for rl in rubric_lists:
        if not isinstance(rl, RubricList):
            raise TypeError(f"rubric_lists must hold RubricList instances, got {type(rl).__name__}")


def _config(cfg) -> "HeRLConfig":
    if not isinstance(cfg, HeRLConfig):
        raise TypeError(f"cfg must be a HeRLConfig, got {v.describe(cfg)}")
    return cfg


def _tensor(name: str, value, *, dim: int | None = None, integer: bool = False, finite: bool = False) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch tensor, got {v.describe(value)}")
    if dim is not None and value.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimension(s), got shape {tuple(value.shape)}")
    if integer and (value.is_floating_point() or value.is_complex()):
        raise TypeError(f"{name} must hold integers, got a {value.dtype} tensor")
    if finite:
        v.finite(name, value)
    return value


# selection, replacement, bonus (pure tensor functions)

def select_hindsight(rewards: Tensor, n_met: Tensor, cfg: HeRLConfig) -> Tensor:
    """Rows to revise: in each group whose best reward is below ``cfg.threshold``, the best-reward responses
    (ties within 1e-6, ordered by rubrics met, then index), at most ``cfg.candidate_limit`` per group."""
    G = _config(cfg).group_size
    _tensor("rewards", rewards, finite=True)
    if rewards.dim() != 1 or rewards.numel() % G or rewards.numel() == 0:
        raise ValueError(f"rewards must be 1-D with a multiple of group_size={G} entries, got {tuple(rewards.shape)}")
    _tensor("n_met", n_met, integer=True)
    if n_met.shape != rewards.shape:
        raise ValueError(f"n_met must have the shape of rewards {tuple(rewards.shape)}, got {tuple(n_met.shape)}")
    r = rewards.view(-1, G)
    best = r.max(1, keepdim=True).values
    tie = (r - best).abs() < 1e-6
    eligible = tie & (best < cfg.threshold)
    # order: eligible first, more rubrics met first, then index (stable)
    key = eligible.float() * 1e6 + n_met.view(-1, G).float() * 1e3 - torch.arange(G).float()
    order = key.argsort(dim=1, descending=True)
    k = min(cfg.candidate_limit, G)
    take = order[:, :k]
    ok = eligible.gather(1, take)
    rows = take + torch.arange(r.shape[0])[:, None] * G
    return rows[ok]


@dataclass
class Augmented:
    """Result of :func:`augment_group`: the modified rewards, the hindsight flags, which revision fills each
    replaced row (``source[i] = j``: row i now holds revision j; -1: none) and which original row a slot copies
    (``copy_of[i] = o``: row i now holds a copy of original row o, official rule only; -1: none)."""

    rewards: Tensor
    he_mask: Tensor
    source: Tensor
    copy_of: Tensor | None = None
    n_bonus: int = 0
    groups_revised: int = 0
    groups_replaced: int = 0

    def __post_init__(self) -> None:
        _tensor("rewards", self.rewards, dim=1)
        for name in ("he_mask", "source") + (("copy_of",) if self.copy_of is not None else ()):
            t = _tensor(name, getattr(self, name), dim=1)
            if t.shape != self.rewards.shape:
                raise ValueError(f"Augmented.{name} must have the shape of rewards {tuple(self.rewards.shape)}, got "
                                 f"{tuple(t.shape)}")


def augment_group(rewards: Tensor, owner: Tensor, revision_rewards: Tensor, cfg: HeRLConfig,
                  generator: torch.Generator | None = None, n_met: Tensor | None = None) -> Augmented:
    """Bonus, acceptance and replacement for one batch of groups (the official ``_augment_with_rewrite_he``).

    ``rewards [B]`` (group-contiguous), ``owner [R]``: the row each revision revised, ``revision_rewards [R]``,
    ``n_met [B]`` (optional): rubrics met per row, the official tie-break when picking the best original to copy.
    Bonus: each revised row c gets ``alpha (max_j r'_j - r_c)`` over its revisions j (before replacement, so a copy
    of a revised original carries its bonus, as in the official code). Replacement, per revised group, into
    ``replace_top_n`` uniformly random distinct slots of that group:

    - ``cfg.replace_rule == "official"``: revisions with ``r' > max_i r_i`` best first, then revisions with
      ``r' >= max_i r_i``, then copies of the best originals (reward before the bonus, then ``n_met``, then index):
      every revised group is overwritten, which moves its advantages even when no revision is better;
    - ``"strict"``: only revisions with ``r' > max_i r_i`` (``cfg.fallback``: ``>=`` to fill up); a group with
      no better revision is left unchanged.
    """
    G = _config(cfg).group_size
    _tensor("rewards", rewards, dim=1, finite=True)
    B = rewards.numel()
    if B == 0 or B % G:
        raise ValueError(f"rewards must hold a multiple of group_size={G} entries, got {B}")
    _tensor("owner", owner, dim=1, integer=True)
    _tensor("revision_rewards", revision_rewards, dim=1, finite=True)
    if owner.shape != revision_rewards.shape:
        raise ValueError("owner and revision_rewards must have the same shape [R]")
    v.indices("owner", owner, B)
    if n_met is not None and n_met.shape != rewards.shape:
        raise ValueError(f"n_met must have the shape of rewards {tuple(rewards.shape)}, got {tuple(n_met.shape)}")
    new = rewards.clone().float()
    he = torch.zeros(B, dtype=torch.bool)
    source = torch.full((B,), -1, dtype=torch.long)
    copy_of = torch.full((B,), -1, dtype=torch.long)
    if owner.numel() == 0:
        return Augmented(new, he, source, copy_of)
    best_orig = rewards.view(-1, G).max(1).values
    # bonus on revised candidates (before replacement, as in the official code)
    best_rev = torch.full((B,), -math.inf).scatter_reduce(0, owner, revision_rewards.float(), "amax")
    revised = torch.isfinite(best_rev)
    if cfg.bonus_alpha > 0:
        new[revised] = new[revised] + cfg.bonus_alpha * (best_rev[revised] - new[revised])
    shaped = new.clone()                                  # rewards a copy of an original carries
    n_bonus = int(revised.sum())
    groups = (owner // G)
    met = torch.zeros(B) if n_met is None else n_met.float()
    n_replaced = 0
    for g in groups.unique().tolist():
        idx = (groups == g).nonzero().squeeze(1)
        rr = revision_rewards[idx]
        order = idx[rr.argsort(descending=True, stable=True)]
        sel = [int(j) for j in order if float(revision_rewards[j]) > float(best_orig[g])][: cfg.replace_top_n]
        if (cfg.fallback or cfg.replace_rule == "official") and len(sel) < cfg.replace_top_n:
            sel += [int(j) for j in order if int(j) not in sel
                    and float(revision_rewards[j]) >= float(best_orig[g])][: cfg.replace_top_n - len(sel)]
        items: list[tuple[str, int]] = [("rev", j) for j in sel]
        if cfg.replace_rule == "official" and len(items) < cfg.replace_top_n:
            rows = list(range(g * G, (g + 1) * G))
            rows.sort(key=lambda i: (-float(rewards[i]), -float(met[i]), i))
            items += [("orig", o) for o in rows[: cfg.replace_top_n - len(items)]]
        if not items:
            continue
        slots = torch.randperm(G, generator=generator)[: len(items)] + g * G
        for (kind, j), s in zip(items, slots.tolist()):
            if kind == "rev":
                new[s] = revision_rewards[j].float()
                he[s] = True
                source[s] = j
            else:
                new[s] = shaped[j]
                copy_of[s] = j
        n_replaced += int(any(kind == "rev" for kind, _ in items))
    return Augmented(new, he, source, copy_of, n_bonus=n_bonus, groups_revised=int(groups.unique().numel()),
                     groups_replaced=n_replaced)


# loss

def shaping(rho: Tensor, gamma: float) -> Tensor:
    """f(rho) = rho / (rho + gamma) (gamma <= 0: f = rho); f'(1) = gamma / (1 + gamma)^2."""
    gamma = v.finite_number("gamma", gamma)
    return rho if gamma <= 0 else rho / (rho + gamma)


def _check_flags(he_mask: Tensor) -> None:
    """A hindsight mask flags rows (or tokens) as hindsight or not: bool, or 0/1 values."""
    if he_mask.is_complex() or (he_mask.dtype != torch.bool and not bool(((he_mask == 0) | (he_mask == 1)).all())):
        raise ValueError("he_mask must flag hindsight rows with bool or 0/1 values (a row is hindsight or not); "
                         f"got dtype {he_mask.dtype}, values {list(dict.fromkeys(he_mask.flatten().tolist()))[:5]}")


def herl_policy_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, he_mask: Tensor | None = None,
                     *, clip_eps: float = 0.2, clip_ratio_c: float = 3.0, shaping_gamma: float = 1.0,
                     he_logp: Tensor | None = None) -> tuple[Tensor, dict]:
    """The official ``mixpolicy_vanilla`` loss, token mean over ``mask``: dual-clip PPO on on-policy tokens and
    the unclipped shaped surrogate ``-A f(rho)`` on hindsight tokens (``he_mask`` rows ``[B]`` or ``[B, T]``).
    ``he_logp`` (default ``old_logp``) is the denominator of rho for hindsight tokens."""
    for name, t in (("logp", logp), ("old_logp", old_logp), ("advantages", advantages), ("mask", mask)):
        _tensor(name, t, finite=True)
    if logp.dim() != 2 or logp.shape != old_logp.shape or logp.shape != mask.shape:
        raise ValueError("logp, old_logp and mask must have the same [B, T] shape")
    if advantages.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(f"advantages must be [B] or [B, T] for logp of shape {tuple(logp.shape)}, got "
                         f"{tuple(advantages.shape)}")
    if he_mask is not None and (not isinstance(he_mask, Tensor) or he_mask.shape not in (logp.shape[:1], logp.shape)):
        raise ValueError(f"he_mask must be a [B] or [B, T] tensor for logp of shape {tuple(logp.shape)}, got "
                         f"{v.describe(he_mask)}")
    if he_mask is not None:
        _check_flags(he_mask)
    if he_logp is not None:
        _tensor("he_logp", he_logp, finite=True)
        if he_logp.shape != logp.shape:
            raise ValueError(f"he_logp must have the shape of logp {tuple(logp.shape)}, got {tuple(he_logp.shape)}")
    clip_eps = v.in_range("clip_eps", clip_eps, 0.0, 1.0, low_open=True, high_open=True)
    if v.finite_number("clip_ratio_c", clip_ratio_c) <= 1.0:
        raise ValueError(f"clip_ratio_c (dual clip) must be > 1, got {clip_ratio_c}")
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    mask = mask.to(logp.dtype)
    if he_mask is None:
        off = torch.zeros_like(mask)
    else:
        off = (he_mask.unsqueeze(1) if he_mask.dim() == 1 else he_mask).to(logp.dtype) * mask
    on = mask * (1 - off)
    log_ratio = torch.clamp(logp - old_logp, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    clipped = torch.maximum(l1, l2)
    dual = torch.minimum(-adv * clip_ratio_c, clipped)
    on_loss = torch.where(adv < 0, dual, clipped) * on
    he_ref = old_logp if he_logp is None else he_logp
    off_ratio = torch.exp(torch.clamp(logp - he_ref, -20.0, 20.0))
    off_loss = -adv * shaping(off_ratio, shaping_gamma) * off
    n = mask.sum().clamp(min=1.0)
    loss = (on_loss + off_loss).sum() / n
    with torch.no_grad():
        metrics = {"clip_fraction": float(((l2 > l1).to(mask.dtype) * on).sum() / on.sum().clamp(min=1.0)),
                   "he_frac": float(off.sum() / n), "ppo_kl": float((-log_ratio * on).sum() / on.sum().clamp(min=1.0)),
                   "loss": float(loss.detach())}
    return loss, metrics


def entropy_bonus(entropy: Tensor, mask: Tensor, he_mask: Tensor | None = None, rows: str = "on_policy") -> Tensor:
    """The entropy term the trainer subtracts (times ``entropy_coef``): ``entropy [B, T]`` summed over the response
    tokens ``mask [B, T]`` of the chosen rows, divided by all of ``mask``'s tokens (the policy loss's token-mean
    denominator, so an on-policy token carries the same entropy weight relative to its policy-gradient weight as
    in GRPO). ``rows="on_policy"``: rows flagged in ``he_mask [B]`` (hindsight rows) contribute nothing, value or
    gradient; ``"all"``: every row (verl's ``entropy_coeff``; the trainer's rule before the option existed)."""
    _tensor("entropy", entropy, dim=2)
    _tensor("mask", mask, dim=2)
    if mask.shape != entropy.shape:
        raise ValueError(f"mask must have the shape of entropy {tuple(entropy.shape)}, got {tuple(mask.shape)}")
    v.one_of("rows", rows, ENTROPY_ROWS)
    if he_mask is not None:
        _tensor("he_mask", he_mask, dim=1)
        if he_mask.shape != entropy.shape[:1]:
            raise ValueError(f"he_mask must be [B] = {tuple(entropy.shape[:1])}, got {tuple(he_mask.shape)}")
        _check_flags(he_mask)
    n = mask.sum().clamp(min=1.0)                       # all response tokens, hindsight rows included
    if rows == "on_policy" and he_mask is not None:     # masked out, not multiplied: an inf there stays out
        entropy = torch.where(he_mask.bool().unsqueeze(1), torch.zeros_like(entropy), entropy)
    return (entropy * mask).sum() / n


def logprobs_and_entropy(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """``(log p(input_ids[:, 1:] | prefix), entropy of p(. | prefix))``, both ``[B, T-1]`` float32, from one
    forward pass: :func:`~icml26.testbeds.grpo.token_logprobs_and_entropy` (position ids skip left padding)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a causal LM), got {v.describe(model)}")
    return token_logprobs_and_entropy(model, input_ids, attention_mask)


# trainer

def _left_pad(seqs: Sequence[Tensor], pad: int) -> tuple[Tensor, Tensor]:
    L = max(int(s.numel()) for s in seqs)
    ids = torch.full((len(seqs), L), pad, dtype=torch.long)
    mask = torch.zeros(len(seqs), L, dtype=torch.long)
    for i, s in enumerate(seqs):
        if s.numel():
            ids[i, L - s.numel():] = s
            mask[i, L - s.numel():] = 1
    return ids, mask


def _unpad(ids: Tensor, mask: Tensor) -> list[Tensor]:
    return [row[m.bool()] for row, m in zip(ids, mask)]


def assemble(model: nn.Module, prompts: Sequence[Tensor], completions: Tensor, completion_mask: Tensor,
             pad: int = 0, num_return_sequences: int = 1) -> Rollout:
    """A :class:`Rollout` from per-row prompts (unpadded, any lengths; left-padded here) and completions
    ``[B, C]`` with their mask; ``old_logp`` = ``token_logprobs`` of ``model`` (no gradient)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a causal LM), got {v.describe(model)}")
    _tensor("completions", completions, dim=2, integer=True)
    _tensor("completion_mask", completion_mask, dim=2)
    if completion_mask.shape != completions.shape:
        raise ValueError(f"completion_mask must have the shape of completions {tuple(completions.shape)}, got "
                         f"{tuple(completion_mask.shape)}")
    if isinstance(prompts, Tensor) or not isinstance(prompts, Sequence) or len(prompts) != completions.shape[0]:
        raise ValueError(f"prompts must be a list of {completions.shape[0]} 1-D id tensors (one per completion row), "
                         f"got {v.describe(prompts)}")
    for i, pr in enumerate(prompts):
        _tensor(f"prompts[{i}]", pr, dim=1, integer=True)
    pad = v.non_negative_int("pad", pad)
    num_return_sequences = v.positive_int("num_return_sequences", num_return_sequences)
    p_ids, p_mask = _left_pad(prompts, pad)
    L = p_ids.shape[1]
    seq = torch.cat([p_ids, completions], 1)
    attn = torch.cat([p_mask, completion_mask.long()], 1)
    cm = torch.cat([torch.zeros(len(prompts), L - 1), completion_mask.float()], 1)
    with torch.no_grad():
        old = token_logprobs(model, seq, attn)
    return Rollout(seq, attn, cm, old, L, num_return_sequences)


@dataclass
class Counters:
    """Budget bookkeeping: generated sequences (rollouts + revisions), revisions alone, verifier calls, rollout
    steps and optimiser updates (``mini_batches`` per step)."""

    samples: int = 0
    revisions: int = 0
    verifier_calls: int = 0
    steps: int = 0
    updates: int = 0
    history: list = field(default_factory=list)


def revise(policy: nn.Module, guide: GuideFn, prompt_index: Sequence[int], prompts: Sequence[Tensor],
           drafts: Sequence[Tensor], met_rows: Tensor, *, max_new_tokens: int, temperature: float,
           generator: torch.Generator | None, eos_token_id: int | None, pad: int) -> tuple[Tensor, Tensor, list]:
    """Sample one revision per draft from the same policy under guidance prompts. Returns
    ``(completion_ids [R, C], completion_mask [R, C], guidance prompts)``."""
    hs = [guide(int(p), x, d, m) for p, x, d, m in zip(prompt_index, prompts, drafts, met_rows)]
    h_ids, h_mask = _left_pad(hs, pad)
    roll = generate_with_logprobs(policy, h_ids, h_mask, num_return_sequences=1, max_new_tokens=max_new_tokens,
                                  temperature=temperature, eos_token_id=eos_token_id, generator=generator,
                                  pad_token_id=pad)
    return roll.completion_ids, roll.completion_token_mask, hs


def _check_prompts(prompt_ids, prompt_mask, prompt_index, verifier) -> Tensor:
    """``prompt_ids [P, L]`` integer ids, ``prompt_mask`` the same shape, ``prompt_index [P]`` (in range of the
    verifier's rubric lists when it is a :class:`ListVerifier`); returns ``prompt_index`` as a long tensor."""
    _tensor("prompt_ids", prompt_ids, dim=2, integer=True)
    v.non_empty("prompt_ids", prompt_ids)
    _tensor("prompt_mask", prompt_mask, dim=2)
    if prompt_mask.shape != prompt_ids.shape:
        raise ValueError(f"prompt_mask must have the shape of prompt_ids {tuple(prompt_ids.shape)}, got "
                         f"{tuple(prompt_mask.shape)}")
    lists = getattr(verifier, "lists", None)
    v.indices("prompt_index", prompt_index, len(lists) if lists is not None else 2 ** 62)
    prompt_index = torch.as_tensor(prompt_index, dtype=torch.long)
    if prompt_index.dim() != 1 or prompt_index.shape[0] != prompt_ids.shape[0]:
        raise ValueError(f"{prompt_index.shape[0] if prompt_index.dim() else 0} prompt indices for "
                         f"{prompt_ids.shape[0]} prompts")
    return prompt_index


class HeRLTrainer:
    """HeRL (or, with ``cfg.enable=False``, GRPO) on a Hugging Face causal LM.

    Args:
        policy: any causal LM (``PreTrainedModel`` or a module returning logits).
        verifier: ``RubricVerifier`` scoring ``(prompt_index, responses, mask)``.
        cfg: :class:`HeRLConfig`.
        guide: builds the guidance prompt ids from ``(prompt_index, prompt_ids, draft_ids, met_row)``
            (:func:`text_guide` for text policies; the toy task has a token-level one).
        ref: optional frozen reference policy for the k3 KL term (``cfg.kl_coef > 0``).
        generator: torch generator for all sampling (same seed -> same run).
    """

    def __init__(self, policy: nn.Module, verifier: RubricVerifier, cfg: HeRLConfig, *, guide: GuideFn | None = None,
                 ref: nn.Module | None = None, optimizer: torch.optim.Optimizer | None = None,
                 generator: torch.Generator | None = None) -> None:
        if not isinstance(policy, nn.Module):
            raise TypeError(f"policy must be a torch.nn.Module (e.g. a transformers PreTrainedModel), got "
                            f"{type(policy).__name__}")
        if not callable(verifier):
            raise TypeError(f"verifier must be a RubricVerifier (e.g. ListVerifier), got {v.describe(verifier)}")
        _config(cfg)
        if cfg.enable and guide is None:
            raise ValueError("HeRL needs a guide function that builds guidance prompts (or set enable=False)")
        if guide is not None and not callable(guide):
            raise TypeError(f"guide must be a function (text_guide(...) or make_guide(...)), got {v.describe(guide)}")
        if cfg.kl_coef > 0 and ref is None:
            raise ValueError("kl_coef > 0 needs a reference policy (ref=...)")
        if ref is not None and not isinstance(ref, nn.Module):
            raise TypeError(f"ref must be a torch.nn.Module or None, got {v.describe(ref)}")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer or None, got {v.describe(optimizer)}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {v.describe(generator)}")
        self.policy, self.verifier, self.cfg, self.guide, self.ref = policy, verifier, cfg, guide, ref
        self.opt = optimizer or torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=0.0)
        self.gen = generator or torch.Generator().manual_seed(0)
        self.count = Counters()

    def step(self, prompt_ids: Tensor, prompt_mask: Tensor, prompt_index: Tensor) -> dict:
        """One HeRL/GRPO update on ``P`` prompts (``prompt_ids [P, L]`` left-padded, ``prompt_index [P]`` into the
        verifier's rubric lists). Returns metrics (rewards, zero-advantage groups, revisions, loss ...)."""
        cfg, G = self.cfg, self.cfg.group_size
        prompt_index = _check_prompts(prompt_ids, prompt_mask, prompt_index, self.verifier)
        roll = generate_with_logprobs(self.policy, prompt_ids, prompt_mask, num_return_sequences=G,
                                      max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                      eos_token_id=cfg.eos_token_id, generator=self.gen, pad_token_id=cfg.pad_token_id)
        comp, cmask = roll.completion_ids, roll.completion_token_mask
        row_prompt = prompt_index.repeat_interleave(G)
        res: RubricResult = self.verifier(row_prompt, comp, cmask)
        rewards = res.scores.float()
        B = comp.shape[0]
        self.count.samples += B
        self.count.verifier_calls += B
        prompts = [p for p in _unpad(prompt_ids, prompt_mask) for _ in range(G)]
        metrics = {"reward_mean": float(rewards.mean()), "pass_rate": float(res.passed.float().mean()),
                   "zero_adv_groups": float((rewards.view(-1, G).max(1).values
                                             == rewards.view(-1, G).min(1).values).float().mean())}
        he = torch.zeros(B, dtype=torch.bool)
        train_prompts = list(prompts)
        if cfg.enable:
            cand = select_hindsight(rewards, res.n_met, cfg)
            if cand.numel():
                r_ids, r_mask, hs = revise(self.policy, self.guide, row_prompt[cand].tolist(),
                                           [prompts[i] for i in cand.tolist()], [comp[i][cmask[i].bool()]
                                                                                for i in cand.tolist()],
                                           res.met[cand], max_new_tokens=cfg.max_new_tokens,
                                           temperature=cfg.revise_temperature, generator=self.gen,
                                           eos_token_id=cfg.eos_token_id, pad=cfg.pad_token_id)
                r_res = self.verifier(row_prompt[cand], r_ids, r_mask)
                self.count.samples += int(cand.numel())
                self.count.revisions += int(cand.numel())
                self.count.verifier_calls += int(cand.numel())
                aug = augment_group(rewards, cand, r_res.scores.float(), cfg, self.gen, n_met=res.n_met)
                rewards, he = aug.rewards, aug.he_mask
                C = max(comp.shape[1], r_ids.shape[1])
                comp = torch.nn.functional.pad(comp, (0, C - comp.shape[1]), value=cfg.pad_token_id)
                cmask = torch.nn.functional.pad(cmask, (0, C - cmask.shape[1]))
                comp0, cmask0 = comp.clone(), cmask.clone()
                for s in (aug.copy_of >= 0).nonzero().squeeze(1).tolist():     # official: copies of the best original
                    o = int(aug.copy_of[s])
                    comp[s], cmask[s] = comp0[o], cmask0[o]
                    train_prompts[s] = prompts[o]
                for s in he.nonzero().squeeze(1).tolist():
                    j = int(aug.source[s])
                    comp[s] = torch.nn.functional.pad(r_ids[j], (0, C - r_ids.shape[1]), value=cfg.pad_token_id)
                    cmask[s] = torch.nn.functional.pad(r_mask[j], (0, C - r_mask.shape[1]))
                    if cfg.train_context == "hindsight":
                        train_prompts[s] = hs[j]
                metrics |= {"revisions": float(cand.numel()), "revision_reward": float(r_res.scores.mean()),
                            "revision_pass": float(r_res.passed.float().mean()),
                            "groups_replaced": float(aug.groups_replaced),
                            "copied_rows": float((aug.copy_of >= 0).sum())}
        adv = group_advantages(rewards, G, eps=cfg.adv_eps)
        batch = assemble(self.policy, train_prompts, comp, cmask, cfg.pad_token_id, G)
        self.policy.train()
        n_groups = B // G
        chunks = torch.arange(n_groups).chunk(min(cfg.mini_batches, n_groups))
        lms = []
        for groups in chunks:             # verl's ppo_mini_batch_size: whole groups, in order, one update each
            rows = (groups[:, None] * G + torch.arange(G)).reshape(-1)
            seq, attn, m = batch.sequences[rows], batch.attention_mask[rows], batch.completion_mask[rows]
            if cfg.entropy_coef > 0:
                logp, ent = logprobs_and_entropy(self.policy, seq, attn)
            else:
                logp = token_logprobs(self.policy, seq, attn)
            loss, lm = herl_policy_loss(logp, batch.old_logp[rows], adv[rows], m, he[rows], clip_eps=cfg.clip_eps,
                                        clip_ratio_c=cfg.clip_ratio_c, shaping_gamma=cfg.shaping_gamma)
            if cfg.entropy_coef > 0:            # verl's entropy_coeff: loss - c * entropy (rows: cfg.entropy_rows)
                entropy = entropy_bonus(ent, m, he[rows], cfg.entropy_rows)
                loss = loss - cfg.entropy_coef * entropy
                lm["entropy"] = float(entropy.detach())
            if cfg.kl_coef > 0:
                with torch.no_grad():
                    ref = token_logprobs(self.ref, seq, attn)
                d = ref - logp
                kl = ((torch.exp(d) - d - 1) * m).sum() / m.sum().clamp(min=1.0)
                loss = loss + cfg.kl_coef * kl
                lm["kl"] = float(kl.detach())
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
            self.opt.step()
            self.count.updates += 1
            lms.append(lm)
        lm = {k: sum(d[k] for d in lms) / len(lms) for k in lms[0]}
        self.count.steps += 1
        metrics |= lm
        metrics["he_rows"] = float(he.sum())
        return metrics


# test-time refinement

@torch.no_grad()
def test_time_refine(policy: nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, prompt_index: Tensor,
                     verifier: RubricVerifier, guide: GuideFn, *, rounds: int = 1, max_new_tokens: int = 16,
                     temperature: float = 0.0, revise_temperature: float = 0.3, eos_token_id: int | None = None,
                     pad_token_id: int = 0, generator: torch.Generator | None = None) -> dict:
    """Experience-guided self-improvement at test time: draft (``temperature``; 0 = greedy), score, then
    ``rounds`` guided revisions of the current best answer, keeping a revision only when its score is higher.

    Returns ``{"responses", "masks", "initial": RubricResult, "final": RubricResult, "samples", "verifier_calls"}``.
    """
    if not isinstance(policy, nn.Module):
        raise TypeError(f"policy must be a torch.nn.Module (a causal LM), got {v.describe(policy)}")
    rounds = v.non_negative_int("rounds", rounds)
    max_new_tokens = v.positive_int("max_new_tokens", max_new_tokens)
    v.non_negative("temperature", temperature)
    v.non_negative("revise_temperature", revise_temperature)
    pad_token_id = v.non_negative_int("pad_token_id", pad_token_id)
    if not callable(verifier) or not callable(guide):
        raise TypeError("verifier and guide must be callables (ListVerifier, make_guide / text_guide)")
    prompt_index = _check_prompts(prompt_ids, prompt_mask, prompt_index, verifier)
    roll = generate_with_logprobs(policy, prompt_ids, prompt_mask, num_return_sequences=1,
                                  max_new_tokens=max_new_tokens, temperature=temperature, eos_token_id=eos_token_id,
                                  generator=generator, pad_token_id=pad_token_id)
    best, bmask = roll.completion_ids.clone(), roll.completion_token_mask.clone()
    first = verifier(prompt_index, best, bmask)
    cur = RubricResult(first.met.clone(), first.weights)
    prompts = _unpad(prompt_ids, prompt_mask)
    samples = calls = len(prompts)
    for _ in range(rounds):
        todo = (~cur.passed).nonzero().squeeze(1)
        if todo.numel() == 0:
            break
        r_ids, r_mask, _ = revise(policy, guide, prompt_index[todo].tolist(), [prompts[i] for i in todo.tolist()],
                                  [best[i][bmask[i].bool()] for i in todo.tolist()], cur.met[todo],
                                  max_new_tokens=max_new_tokens, temperature=revise_temperature,
                                  generator=generator, eos_token_id=eos_token_id, pad=pad_token_id)
        rr = verifier(prompt_index[todo], r_ids, r_mask)
        samples += int(todo.numel())
        calls += int(todo.numel())
        better = rr.scores > cur.scores[todo]
        C = max(best.shape[1], r_ids.shape[1])
        best = torch.nn.functional.pad(best, (0, C - best.shape[1]), value=pad_token_id)
        bmask = torch.nn.functional.pad(bmask, (0, C - bmask.shape[1]))
        for k in better.nonzero().squeeze(1).tolist():
            i = int(todo[k])
            best[i] = torch.nn.functional.pad(r_ids[k], (0, C - r_ids.shape[1]), value=pad_token_id)
            bmask[i] = torch.nn.functional.pad(r_mask[k], (0, C - r_mask.shape[1]))
            cur.met[i] = rr.met[k]
    return {"responses": best, "masks": bmask, "initial": first, "final": cur, "samples": samples,
            "verifier_calls": calls}


test_time_refine.__test__ = False  # not a pytest test despite its name


__all__ = ["Augmented", "Counters", "DEFAULT_TEMPLATE", "ENTROPY_ROWS", "GuideFn", "HeRLConfig", "HeRLTrainer",
           "REPLACE_RULES", "TRAIN_CONTEXTS", "assemble", "augment_group", "build_guidance_prompt", "entropy_bonus",
           "herl_policy_loss", "logprobs_and_entropy", "revise", "select_hindsight", "shaping", "test_time_refine",
           "text_guide"]
