"""[B07] A synthetic rubric task a tiny policy can learn (constructed; the paper uses IFEval-style and medical rubrics).

Vocabulary: 16 content tokens 0..15, then TYPE_0..TYPE_15, POS_0..POS_7 (unused), ANS, GUIDE, MET, UNMET, DRAFT,
NONE, PAD.

- Prompt x = [TYPE_t, c_1..c_4, ANS]: a prompt type t and 4 random context tokens (a distractor). The response is
  8 content tokens. Each type t has a hidden weighted rubric list (never shown in x): ``n_single`` format rubrics
  "position p holds token v" (chance 1/16) and ``n_pair`` pair rubrics "positions p1, p2 hold v1, v2"
  (chance 1/256), on distinct positions (our choice, after the spec: pair rubrics open a real exploration gap).
- Guidance prompt h = [TYPE_t, c.., GUIDE, MET, m_1..m_8, UNMET, u_1..u_8, DRAFT, y_1..y_8, ANS]: the satisfied and
  unmet rubrics as position-aligned constraint slots (m_p / u_p = the required token or NONE), then the draft.
- Stage 0 (shared by GRPO and HeRL, cached): supervised training on (a) x -> diffuse random responses that depend
  on the prompt type (a policy that knows the format and reads its prompt, not the rubrics: position p of an
  answer to type t is drawn from softmax(sigma z_{t,p}), z ~ N(0, I) a fixed table independent of the rubrics;
  ``answer_sigma`` = 0 gives the type-independent uniform answers of the earlier passes) and (b) generic in-context
  constraint following: random constraints (not tied to the types) on a random draft -> the draft with those
  positions set, the rest copied. This hard-wires the revision skill an instruction-tuned LLM brings; it is
  constructed, not learned by RL.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from icml26.harness import validate as v
from icml26.testbeds.cache import load_cached
from icml26.testbeds.llama import tiny_llama
from icml26.testbeds.progress import BuildProgress

from .rubrics import AllOf, ListVerifier, RubricList, TokenAt

log = logging.getLogger("icml26.testbeds.herl")

N_CONTENT = 16
N_TYPES_MAX = 16
RESP_LEN = 8
CTX_LEN = 4
TYPE0 = N_CONTENT
POS0 = TYPE0 + N_TYPES_MAX
ANS, GUIDE, MET, UNMET, DRAFT, NONE, PAD = range(POS0 + RESP_LEN, POS0 + RESP_LEN + 7)
VOCAB = PAD + 1
ANSWER_TABLE_SEED = 99   # the stage-0 answer table z (fixed; the rubrics are drawn from other seeds)


@dataclass(frozen=True)
class TaskConfig:
    """The rubric task: ``n_types`` prompt types, each with ``n_single`` + ``n_pair`` hidden rubrics."""

    n_types: int = 16
    n_single: int = 2
    n_pair: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if v.positive_int("n_types", self.n_types) > N_TYPES_MAX:
            raise ValueError(f"n_types must be in 1..{N_TYPES_MAX}, got {self.n_types}")
        v.non_negative_int("n_single", self.n_single)
        v.non_negative_int("n_pair", self.n_pair)
        v.non_negative_int("seed", self.seed)
        if self.n_single + self.n_pair < 1 or self.n_single + 2 * self.n_pair > RESP_LEN:
            raise ValueError(f"need 1 <= n_single + n_pair and n_single + 2 n_pair <= {RESP_LEN}")


def make_rubrics(cfg: TaskConfig) -> list[RubricList]:
    """One hidden rubric list per prompt type (deterministic in ``cfg.seed``)."""
    if not isinstance(cfg, TaskConfig):
        raise TypeError(f"cfg must be a TaskConfig, got {v.describe(cfg)}")
    g = torch.Generator().manual_seed(10_000 + cfg.seed)
    out = []
    for _ in range(cfg.n_types):
        pos = torch.randperm(RESP_LEN, generator=g).tolist()
        val = torch.randint(0, N_CONTENT, (RESP_LEN,), generator=g).tolist()
        rubs = [TokenAt(pos[i], val[i]) for i in range(cfg.n_single)]
        k = cfg.n_single
        for _ in range(cfg.n_pair):
            rubs.append(AllOf((TokenAt(pos[k], val[k]), TokenAt(pos[k + 1], val[k + 1]))))
            k += 2
        out.append(RubricList(rubs))
    return out


def make_prompts(types: Tensor, generator: torch.Generator) -> Tensor:
    """``[P, 6]`` prompts [TYPE_t, 4 random context tokens, ANS]."""
    if not isinstance(types, Tensor) or types.dim() != 1:
        raise TypeError(f"types must be a 1-D tensor of prompt types, got {v.describe(types)}")
    v.indices("types", types, N_TYPES_MAX)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {v.describe(generator)}")
    ctx = torch.randint(0, N_CONTENT, (types.numel(), CTX_LEN), generator=generator)
    return torch.cat([TYPE0 + types[:, None], ctx, torch.full((types.numel(), 1), ANS)], 1)


def _slots(cons: list[tuple[int, int]]) -> list[int]:
    out = [NONE] * RESP_LEN
    for p, tok in cons:
        out[p] = tok
    return out


def guidance_ids(prompt: Tensor, draft: Tensor, met: list[tuple[int, int]], unmet: list[tuple[int, int]]) -> Tensor:
    """h = [x without ANS, GUIDE, MET, m_1..m_8, UNMET, u_1..u_8, DRAFT, y_1..y_8, ANS] with m_p / u_p the token a
    satisfied / unmet rubric requires at position p (NONE where no rubric speaks): position-aligned constraints."""
    x = prompt.tolist()
    if x and x[-1] == ANS:
        x = x[:-1]
    return torch.tensor(x + [GUIDE, MET] + _slots(met) + [UNMET] + _slots(unmet) + [DRAFT] + draft.tolist() + [ANS],
                        dtype=torch.long)


def make_guide(rubric_lists: list[RubricList]):
    """The toy task's :data:`~icml26.agents.herl.herl.GuideFn`: rubric lists -> positional constraints."""
    from .herl import _rubric_lists

    _rubric_lists(rubric_lists)

    def guide(p: int, prompt_ids: Tensor, draft: Tensor, met_row: Tensor) -> Tensor:
        met, unmet = rubric_lists[p].split(met_row)
        return guidance_ids(prompt_ids, draft, [c for r in met for c in r.constraints()],
                            [c for r in unmet for c in r.constraints()])

    return guide


def verifier(cfg: TaskConfig) -> ListVerifier:
    return ListVerifier(make_rubrics(cfg))


# stage 0: SFT

@dataclass(frozen=True)
class SFTConfig:
    """Stage-0 policy: a tiny Llama trained on diffuse answers + generic constraint following (cached)."""

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    steps: int = 600
    batch: int = 64
    lr: float = 1e-2
    guide_frac: float = 0.75
    answer_sigma: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "heads", "steps", "batch"):
            v.positive_int(name, getattr(self, name))
        if self.hidden % self.heads or (self.hidden // self.heads) % 2:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads}) with an even head "
                             "size (rotary embeddings)")
        v.positive("lr", self.lr)
        v.probability("guide_frac", self.guide_frac)
        v.non_negative("answer_sigma", self.answer_sigma)
        v.non_negative_int("seed", self.seed)


def answer_table(sigma: float) -> Tensor:
    """``[N_TYPES_MAX, RESP_LEN, N_CONTENT]`` stage-0 answer distributions softmax(sigma z_{t,p}) (sigma = 0:
    uniform); z is fixed (``ANSWER_TABLE_SEED``), independent of the rubrics."""
    sigma = v.non_negative("sigma", sigma)
    z = torch.randn(N_TYPES_MAX, RESP_LEN, N_CONTENT, generator=torch.Generator().manual_seed(ANSWER_TABLE_SEED))
    return (sigma * z).softmax(-1)


def build_policy(cfg: SFTConfig):
    """A fresh tiny ``LlamaForCausalLM`` over the task vocabulary (~100k parameters at d=64, 2 layers)."""
    return tiny_llama(VOCAB, hidden_size=cfg.hidden, num_layers=cfg.layers, num_heads=cfg.heads,
                      max_positions=128, pad_token_id=PAD, seed=cfg.seed)


def sft_batch(n: int, guide_frac: float, g: torch.Generator, answer_sigma: float = 0.0
              ) -> tuple[Tensor, Tensor, Tensor]:
    """``(input_ids, attention_mask, loss_mask)`` left-padded: diffuse answers (uniform at ``answer_sigma`` = 0,
    else drawn from :func:`answer_table`, after every other draw) and constraint-following examples."""
    answer_sigma = v.non_negative("answer_sigma", answer_sigma)
    seqs, targets = [], []
    n_guide = int(round(n * guide_frac))
    types = torch.randint(0, N_TYPES_MAX, (n,), generator=g)
    prompts = make_prompts(types, g)
    drafts = torch.randint(0, N_CONTENT, (n, RESP_LEN), generator=g)
    answers = torch.randint(0, N_CONTENT, (n, RESP_LEN), generator=g)
    for i in range(n):
        if i < n_guide:
            k = int(torch.randint(1, RESP_LEN + 1, (1,), generator=g))
            pos = torch.randperm(RESP_LEN, generator=g)[:k].tolist()
            vals = torch.randint(0, N_CONTENT, (k,), generator=g).tolist()
            keep = torch.rand(k, generator=g) < 0.5
            vals = [int(drafts[i, p]) if kp else v for p, v, kp in zip(pos, vals, keep.tolist())]
            cons = list(zip(pos, vals))
            split = torch.rand(k, generator=g) < 0.5  # which constraints are listed as satisfied
            met = [c for c, s in zip(cons, split.tolist()) if s and drafts[i, c[0]] == c[1]]
            unmet = [c for c in cons if c not in met]
            ans = drafts[i].clone()
            for p, tok in cons:
                ans[p] = tok
            seqs.append(guidance_ids(prompts[i], drafts[i], met, unmet))
            targets.append(ans)
        else:
            seqs.append(prompts[i])
            targets.append(answers[i])
    full = [torch.cat([s, t]) for s, t in zip(seqs, targets)]
    L = max(int(f.numel()) for f in full)
    ids = torch.full((n, L), PAD, dtype=torch.long)
    attn = torch.zeros(n, L, dtype=torch.long)
    lm = torch.zeros(n, L - 1)
    for i, f in enumerate(full):
        ids[i, L - f.numel():] = f
        attn[i, L - f.numel():] = 1
        lm[i, L - 1 - RESP_LEN:] = 1  # predict the RESP_LEN answer tokens
    if answer_sigma > 0 and n_guide < n:    # type-dependent diffuse answers (drawn last: same stream before)
        table = answer_table(answer_sigma)[types[n_guide:]]                   # [n - n_guide, RESP_LEN, N_CONTENT]
        ids[n_guide:, -RESP_LEN:] = torch.multinomial(table.reshape(-1, N_CONTENT), 1,
                                                      generator=g).view(-1, RESP_LEN)
    return ids, attn, lm


def train_sft(cfg: SFTConfig):
    """Stage 0 from scratch (deterministic in ``cfg.seed``: one thread, deterministic algorithms, so the cached
    policy does not depend on the builder's thread count)."""
    from icml26.testbeds.grpo import token_logprobs
    from icml26.testbeds.training import pinned_training

    model = build_policy(cfg)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    model.train()
    with pinned_training(1), BuildProgress(log, "herl-sft", cfg.steps) as prog:
        for step in range(cfg.steps):
            ids, attn, lm = sft_batch(cfg.batch, cfg.guide_frac, g, cfg.answer_sigma)
            loss = -(token_logprobs(model, ids, attn) * lm).sum() / lm.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            prog.update(step + 1, loss.detach())
    return model.eval()


def load_sft_policy(cfg: SFTConfig = SFTConfig()):
    """The cached stage-0 policy (built once, ~1 min on one idle core)."""
    if not isinstance(cfg, SFTConfig):
        raise TypeError(f"cfg must be an SFTConfig, got {v.describe(cfg)}")
    from transformers import LlamaForCausalLM

    return load_cached("herl_sft", asdict(cfg), lambda d: train_sft(cfg).save_pretrained(Path(d)),
                       lambda d: LlamaForCausalLM.from_pretrained(d).eval())


__all__ = ["ANS", "ANSWER_TABLE_SEED", "DRAFT", "GUIDE", "MET", "N_CONTENT", "NONE", "PAD", "POS0", "RESP_LEN", "SFTConfig", "TYPE0", "TaskConfig",
           "UNMET", "VOCAB", "answer_table", "build_policy", "guidance_ids", "load_sft_policy", "make_guide", "make_prompts",
           "make_rubrics", "sft_batch", "train_sft", "verifier"]
