"""Knowledge-grounded policy optimisation (KGPO) for [B06], the SFT re-ranker, and evaluation.

KGPO = GRPO (shared core ``icml26.testbeds.grpo``) with no SFT, from a random-init policy. Reward of a completion
y for product P with decision space D(P) (our reconstruction of the paper's reward):

    r = r_fmt + r_ans + 0.25 r_center + 0.25 r_type + 0.25 r_ground

    r_fmt    = 1 if y parses as "<t> <@i> <@j> <a_k> <eos>" (else r = 0)
    r_ans    = 1 if the answer's reactant set equals the truth (canonical, order-invariant)
    r_center = 1 if the stated centre is a true centre;  r_type = 1 if the stated class is the true template
    r_ground = 1 if RDKit, executing the stated template at the stated centre, gives exactly the answer's reactants

``weights=RewardWeights.answer_only()`` keeps r_fmt + r_ans (the "r_ans only" ablation). Without a decision space
the answer *is* what RDKit gives at the stated (template, centre), so r_ground = 1 exactly when that executes.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field

import numpy as np
import torch

from icml26.harness import validate as v
from icml26.testbeds.grpo import GRPOConfig, generate_with_logprobs, group_advantages, grpo_step, token_logprobs

from .chemistry import (
    TEMPLATES,
    Rationale,
    ReactantSet,
    _apply,
    _canonical_and_order,
    _to_input,
    check_centre,
    verify_rationale,
)
from .data import Reaction
from .reasoner import grounded_completion, parse_completion
from .specialist import Candidate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardWeights:
    fmt: float = 1.0
    ans: float = 1.0
    center: float = 0.25
    type: float = 0.25
    ground: float = 0.25

    def __post_init__(self) -> None:
        for name in ("fmt", "ans", "center", "type", "ground"):
            v.non_negative(f"RewardWeights.{name}", getattr(self, name))

    @classmethod
    def answer_only(cls) -> "RewardWeights":
        return cls(center=0.0, type=0.0, ground=0.0)


@dataclass
class Example:
    """One product with its truth, decision space (empty for the no-decision-space arm) and prompt."""

    reaction: Reaction
    cands: list[Candidate]
    prompt: str

    def __post_init__(self) -> None:
        if not isinstance(self.reaction, Reaction):
            raise TypeError(f"reaction must be a Reaction, got {v.describe(self.reaction)}")
        if not isinstance(self.cands, (list, tuple)) or not all(isinstance(c, Candidate) for c in self.cands):
            raise TypeError(f"cands must be a list of Candidate (the decision space; [] without one), got "
                            f"{v.describe(self.cands)}")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise TypeError(f"prompt must be a non-empty string (ds_prompt / product_prompt), got "
                            f"{v.describe(self.prompt)}")


@dataclass
class Judged:
    """Reward terms of one completion."""

    fmt: float
    ans: float
    center: float
    type: float
    ground: float
    answer: ReactantSet | None

    def total(self, w: RewardWeights) -> float:
        return (w.fmt * self.fmt + w.ans * self.ans + w.center * self.center + w.type * self.type
                + w.ground * self.ground)


# reward

def execute(product: str, template_id: int, centre: tuple[int, int]) -> ReactantSet | None:
    """The reactant set RDKit gives for (template, centre) on the product, or None when it does not execute.
    ``centre`` holds atom indices of ``product`` as given."""
    template_id = v.non_negative_int("template_id", template_id)
    centre = check_centre("centre", centre)
    if template_id >= len(TEMPLATES):
        return None
    smi, order = _canonical_and_order(product, "product")
    want = (min(centre), max(centre))
    hits = [r for c, r in _apply(TEMPLATES[template_id], smi) if _to_input(order, c) == want]
    return hits[0] if len(hits) == 1 else None


def judge(ex: Example, text: str, *, decision_space: bool = True) -> Judged:
    """Score a completion ``text`` for example ``ex`` (all reward terms, unweighted)."""
    _example(ex)
    p = parse_completion(text, with_answer=decision_space)
    if p is None or (decision_space and p.answer >= len(ex.cands)):
        return Judged(0.0, 0.0, 0.0, 0.0, 0.0, None)
    r = ex.reaction
    if decision_space:
        answer = ex.cands[p.answer].reactants
        ground = verify_rationale(r.product, Rationale(p.template_id, p.centre, answer))
    else:
        answer = execute(r.product, p.template_id, p.centre)
        ground = answer is not None
    return Judged(1.0, float(answer == r.reactants), float(p.centre in r.centres),
                  float(p.template_id == r.template_id), float(ground), answer)


def kgpo_reward(ex: Example, text: str, weights: RewardWeights = RewardWeights(), *,
                decision_space: bool = True) -> float:
    """r = r_fmt + r_ans + 0.25 r_center + 0.25 r_type + 0.25 r_ground (weights configurable) [B06]."""
    if not isinstance(weights, RewardWeights):
        raise TypeError(f"weights must be RewardWeights(...), got {v.describe(weights)}")
    return judge(ex, text, decision_space=decision_space).total(weights)


# helpers

def _example(ex) -> None:
    if not isinstance(ex, Example):
        raise TypeError(f"ex must be an Example(reaction, cands, prompt), got {v.describe(ex)}")


def _examples(examples, *, decision_space: bool) -> None:
    if not isinstance(examples, (list, tuple)):
        raise TypeError(f"examples must be a list of Example, got {v.describe(examples)}")
    v.non_empty("examples", examples)
    for e in examples:
        _example(e)
    if not isinstance(decision_space, bool):
        raise TypeError(f"decision_space must be True or False, got {v.describe(decision_space)}")
    if decision_space and all(not e.cands for e in examples):
        raise ValueError("decision_space=True but no example has a decision space (cands); pass "
                         "decision_space=False for product prompts")


def _model_and_tokenizer(model, tokenizer) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (GrammarConstrainedLM or a causal LM), got "
                        f"{v.describe(model)}")
    if not (callable(tokenizer) and hasattr(tokenizer, "convert_ids_to_tokens")):
        raise TypeError(f"tokenizer must be the tokenizer from build_tokenizer(...), got {v.describe(tokenizer)}")


def _encode(tok, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"], enc["attention_mask"]


def _decode(tok, ids: torch.Tensor, mask: torch.Tensor) -> list[str]:
    out = []
    for row, m in zip(ids.tolist(), mask.tolist()):
        out.append(" ".join(tok.convert_ids_to_tokens([t for t, v in zip(row, m) if v])))
    return out


# KGPO trainer

@dataclass
class KGPOConfig:
    steps: int = 200
    prompts_per_step: int = 16
    grpo: GRPOConfig = field(default_factory=lambda: GRPOConfig(group_size=8, clip_eps=0.2, beta=1e-3, lr=2e-3,
                                                                max_new_tokens=5, temperature=1.0))
    weights: RewardWeights = RewardWeights()
    decision_space: bool = True

    def __post_init__(self) -> None:
        v.positive_int("steps", self.steps)
        v.positive_int("prompts_per_step", self.prompts_per_step)
        if not isinstance(self.grpo, GRPOConfig):
            raise TypeError(f"grpo must be a GRPOConfig, got {v.describe(self.grpo)}")
        if not isinstance(self.weights, RewardWeights):
            raise TypeError(f"weights must be RewardWeights(...), got {v.describe(self.weights)}")
        if not isinstance(self.decision_space, bool):
            raise TypeError(f"decision_space must be True or False, got {v.describe(self.decision_space)}")


class KGPOTrainer:
    """Pure-RL GRPO on the KGPO reward [B06]. Counts samples and verifier (RDKit) calls for budget parity."""

    def __init__(self, model, tokenizer, cfg: KGPOConfig, *, seed: int = 0):
        _model_and_tokenizer(model, tokenizer)
        if not isinstance(cfg, KGPOConfig):
            raise TypeError(f"cfg must be a KGPOConfig, got {v.describe(cfg)}")
        seed = v.non_negative_int("seed", seed)
        self.model, self.tok, self.cfg, self.seed = model, tokenizer, cfg, seed
        self.history: list[dict] = []
        self.samples = 0            # completions sampled (budget parity)
        self.verifier_calls = 0     # RDKit executions of a stated rationale

    def train(self, examples: list[Example]) -> "KGPOTrainer":
        _examples(examples, decision_space=self.cfg.decision_space)
        cfg, g = self.cfg, self.cfg.grpo
        gen = torch.Generator().manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        ref = copy.deepcopy(self.model).eval() if g.beta > 0 else None
        opt = torch.optim.AdamW(self.model.parameters(), lr=g.lr, weight_decay=0.0)
        for step in range(cfg.steps):
            batch = [examples[i] for i in rng.choice(len(examples), size=min(cfg.prompts_per_step, len(examples)),
                                                     replace=False)]
            ids, mask = _encode(self.tok, [e.prompt for e in batch])
            ro = generate_with_logprobs(self.model, ids, mask, num_return_sequences=g.group_size,
                                        max_new_tokens=g.max_new_tokens, temperature=g.temperature,
                                        eos_token_id=self.tok.eos_token_id, pad_token_id=self.tok.pad_token_id,
                                        generator=gen)
            texts = _decode(self.tok, ro.completion_ids, ro.completion_token_mask)
            judged = [judge(batch[i // g.group_size], t, decision_space=cfg.decision_space)
                      for i, t in enumerate(texts)]
            rewards = torch.tensor([j.total(cfg.weights) for j in judged])
            adv = group_advantages(rewards, g.group_size)
            m = grpo_step(self.model, opt, ro, adv, g, ref_model=ref)
            self.samples += len(texts)
            self.verifier_calls += int(sum(j.fmt for j in judged))
            m.update(step=step, reward=float(rewards.mean()), ans=float(np.mean([j.ans for j in judged])),
                     ground=float(np.mean([j.ground for j in judged])))
            self.history.append(m)
        self.model.eval()
        return self


# SFT re-ranker

def sft_train(model, tokenizer, examples: list[Example], *, steps: int, batch_size: int = 32, lr: float = 2e-3,
              seed: int = 0, decision_space: bool = True) -> list[float]:
    """Supervised training by cross-entropy. With a decision space (the SFT re-ranker): on the grounded completion
    of the true candidate (examples whose decision space misses the truth are skipped). Without
    (``decision_space=False``, the SFT-trained no-decision-space generator): on the true rationale
    ``<t_true> <i_a> <j_b> <eos>`` at the first true centre, read from the product prompt alone. Returns the loss
    per step."""
    _model_and_tokenizer(model, tokenizer)
    _examples(examples, decision_space=decision_space)
    steps, batch_size = v.positive_int("steps", steps), v.positive_int("batch_size", batch_size)
    lr, seed = v.positive("lr", lr), v.non_negative_int("seed", seed)
    if decision_space:
        data = [(e.prompt, grounded_completion(e.cands[k], k)) for e in examples
                for k in [next((i for i, c in enumerate(e.cands) if c.reactants == e.reaction.reactants), None)]
                if k is not None]
    else:
        data = [(e.prompt, grounded_completion(Candidate(e.reaction.template_id, e.reaction.centres[0],
                                                         e.reaction.reactants, 1.0), None))
                for e in examples if e.reaction.centres]
    if not data:
        raise ValueError("no training example has its truth in the decision space" if decision_space else
                         "no training example has a true centre")
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        b = [data[i] for i in rng.choice(len(data), size=min(batch_size, len(data)), replace=False)]
        ids, mask, cmask = _teacher_forced(tokenizer, [p for p, _ in b], [c for _, c in b])
        logp = token_logprobs(model, ids, mask)
        loss = -(logp * cmask).sum() / cmask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def _teacher_forced(tok, prompts: list[str], completions: list[str]):
    """Left-padded prompt+completion ids, mask, and a [B, T-1] mask on the completion tokens."""
    p_ids, p_mask = _encode(tok, prompts)
    c_ids = [tok(c, add_special_tokens=False)["input_ids"] for c in completions]
    L = max(len(c) for c in c_ids)
    B, P = p_ids.shape
    ids = torch.full((B, P + L), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((B, P + L), dtype=torch.long)
    ids[:, :P], mask[:, :P] = p_ids, p_mask
    cmask = torch.zeros((B, P + L - 1))
    for i, c in enumerate(c_ids):
        ids[i, P:P + len(c)] = torch.tensor(c)
        mask[i, P:P + len(c)] = 1
        cmask[i, P - 1:P - 1 + len(c)] = 1.0
    return ids, mask, cmask


# evaluation

@dataclass
class EvalResult:
    top1: np.ndarray          # [n] 0/1, greedy answer exact match
    top3: np.ndarray          # [n] 0/1, truth among the policy's 3 best answers
    executable: np.ndarray    # [n] 0/1, the greedy rationale executes to its answer (r_ground)
    centre: np.ndarray        # [n] 0/1, greedy centre is a true centre
    well_formed: np.ndarray   # [n] 0/1
    answers: list = field(default_factory=list)   # [n] greedy answer's reactant set (None when ill-formed)

    def __post_init__(self) -> None:
        arrays = {k: getattr(self, k) for k in ("top1", "top3", "executable", "centre", "well_formed")}
        for k, a in arrays.items():
            v.ndim(k, a, 1)
            v.finite(k, a)
        v.same_length(**arrays)


@torch.no_grad()
def evaluate_policy(model, tokenizer, examples: list[Example], *, decision_space: bool = True,
                    n_samples: int = 16, seed: int = 0, batch: int = 128) -> EvalResult:
    """Greedy decoding gives top-1, executability and centre accuracy. Top-3: with a decision space, candidates
    ranked by log p(grounded completion | prompt), the greedy answer first; without, the distinct executable
    answers of greedy + ``n_samples`` samples ranked by sequence log-probability."""
    _model_and_tokenizer(model, tokenizer)
    _examples(examples, decision_space=decision_space)
    n_samples, batch = v.positive_int("n_samples", n_samples), v.positive_int("batch", batch)
    seed = v.non_negative_int("seed", seed)
    model.eval()
    res = {k: [] for k in ("top1", "top3", "executable", "centre", "well_formed")}
    answers = []
    gen = torch.Generator().manual_seed(seed)
    for s in range(0, len(examples), batch):
        part = examples[s:s + batch]
        ids, mask = _encode(tokenizer, [e.prompt for e in part])
        ro = generate_with_logprobs(model, ids, mask, num_return_sequences=1, max_new_tokens=5, temperature=0.0,
                                    eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        greedy = [judge(e, t, decision_space=decision_space)
                  for e, t in zip(part, _decode(tokenizer, ro.completion_ids, ro.completion_token_mask))]
        if decision_space:
            ranked = _rank_candidates(model, tokenizer, part)
        else:
            ranked = _rank_samples(model, tokenizer, part, ids, mask, n_samples, gen)
        for e, j, rk in zip(part, greedy, ranked):
            order = ([j.answer] if j.answer is not None else []) + [a for a in rk if a != j.answer]
            res["top1"].append(j.ans)
            res["top3"].append(float(e.reaction.reactants in order[:3]))
            res["executable"].append(j.ground)
            res["centre"].append(j.center)
            res["well_formed"].append(j.fmt)
            answers.append(j.answer)
    return EvalResult(*(np.asarray(res[k]) for k in ("top1", "top3", "executable", "centre", "well_formed")),
                      answers=answers)


def _rank_candidates(model, tok, part: list[Example]) -> list[list[ReactantSet]]:
    rows = [(i, k) for i, e in enumerate(part) for k in range(len(e.cands))]
    if not rows:
        return [[] for _ in part]
    ids, mask, cmask = _teacher_forced(tok, [part[i].prompt for i, _ in rows],
                                       [grounded_completion(part[i].cands[k], k) for i, k in rows])
    score = (token_logprobs(model, ids, mask) * cmask).sum(-1).tolist()
    out: list[list[tuple[float, ReactantSet]]] = [[] for _ in part]
    for (i, k), sc in zip(rows, score):
        out[i].append((sc, part[i].cands[k].reactants))
    return [[r for _, r in sorted(o, key=lambda x: -x[0])] for o in out]


def _rank_samples(model, tok, part, ids, mask, n, gen) -> list[list[ReactantSet]]:
    ro = generate_with_logprobs(model, ids, mask, num_return_sequences=n, max_new_tokens=4, temperature=1.0,
                                eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, generator=gen)
    texts = _decode(tok, ro.completion_ids, ro.completion_token_mask)
    seq_lp = (ro.old_logp * ro.completion_mask).sum(-1).tolist()
    out = []
    for i, e in enumerate(part):
        best: dict[ReactantSet, float] = {}
        for j in range(i * n, (i + 1) * n):
            a = judge(e, texts[j], decision_space=False).answer
            if a is not None:
                best[a] = max(best.get(a, -np.inf), seq_lp[j])
        out.append(sorted(best, key=lambda a: -best[a]))
    return out
