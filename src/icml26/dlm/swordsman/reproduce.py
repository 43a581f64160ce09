"""[A15] Reproduction: do Swordsman's entropy-shift blocks align with constituents, and is it on the front?

Settings (each decodes the same prompts with every decoder):
- ``t1c-oracle``: T1c translation, exact posterior marginals (``TranslationOracleMLM``), no training;
- ``t1-oracle``: T1 free generation from the phrase grammar (``PFSAOracleMLM``);
- ``t1c-trained``: T1c with the tiny masked diffusion LM (trained once, cached on disk).

Decoders: Fast-dLLM ``ConfidenceThresholdDecoder`` for b in {4, 8, 16} x tau in {0.7, 0.9} (the fixed-block
Pareto front); LLaDA low-confidence remasking (vanilla: 1 token per round; and 2 per round); fixed blocks with
Swordsman's dynamic threshold (ablation); Swordsman (largest shift, and ``select="first"``); Swordsman with its
adaptive parts off (must equal ``ConfidenceThresholdDecoder(8, 0.9)`` token for token).

Metrics: validity (T1c: exact match up to the free marker choice; T1: the DFA check), mean rounds, forward passes,
tokens/round, tokens/s, and the F1 of block ends against the true constituent boundaries (micro-averaged), with a
random partition that has as many blocks as there are true constituents.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from icml26.harness import Budget, Claim, Outcome, limit_threads, seed_everything
from icml26.testbeds.diffusion_lm import (
    ConfidenceThresholdDecoder,
    DLMTrainConfig,
    LowConfidenceRemasking,
    PFSAOracleMLM,
    PhraseGrammar,
    TranslationOracleMLM,
    TranslationTask,
    decode,
    load_masked_diffusion_lm,
)

from .swordsman import SwordsmanDecoder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sizes:
    n_prompts: int
    settings: tuple[str, ...]


SIZES = {
    Budget.QUICK: Sizes(n_prompts=128, settings=("t1c-oracle", "t1-oracle")),
    Budget.STANDARD: Sizes(n_prompts=512, settings=("t1c-oracle", "t1-oracle", "t1c-trained")),
    Budget.FULL: Sizes(n_prompts=2048, settings=("t1c-oracle", "t1-oracle", "t1c-trained")),
}

FIXED = [(b, tau) for b in (4, 8, 16) for tau in (0.7, 0.9)]
SWORDSMAN = "Swordsman"


def decoders() -> dict[str, object]:
    d = {f"Fast-dLLM b={b} tau={tau}": ConfidenceThresholdDecoder(b, tau) for b, tau in FIXED}
    d["LLaDA b=8, 1 tok/round"] = LowConfidenceRemasking(8, 8)
    d["LLaDA b=8, 2 tok/round"] = LowConfidenceRemasking(8, 4)
    d["fixed b=8 + dynamic tau"] = SwordsmanDecoder(b_min=2, b_max=16, b_default=8, delta=float("inf"))
    d[SWORDSMAN] = SwordsmanDecoder()
    d["Swordsman (first rise)"] = SwordsmanDecoder(select="first")
    d["Swordsman adaptive off"] = SwordsmanDecoder(b_default=8, delta=float("inf"), tau_hi=0.9, tau_lo=0.9)
    return d


# helper functions

def boundary_counts(blocks: list[list[tuple[int, int]]], gold: list[list[int]]) -> tuple[int, int, int]:
    """(TP, FP, FN) of block ends against gold boundaries; ends past the last gold boundary are ignored."""
    tp = fp = fn = 0
    for bl, g in zip(blocks, gold):
        pred = {e for _, e in bl if e <= g[-1]}
        gs = set(g)
        tp, fp, fn = tp + len(pred & gs), fp + len(pred - gs), fn + len(gs - pred)
    return tp, fp, fn


def f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / max(2 * tp + fp + fn, 1)


def random_partition(gold: list[list[int]], rng: np.random.Generator) -> list[list[tuple[int, int]]]:
    """As many blocks as true constituents, uniform random cut points over [0, last boundary]."""
    out = []
    for g in gold:
        end, k = g[-1], len(g)
        cuts = sorted(rng.choice(np.arange(1, end), size=min(k - 1, end - 1), replace=False).tolist()) if end > 1 else []
        edges = [0, *cuts, end]
        out.append(list(zip(edges[:-1], edges[1:])))
    return out


def _setting(name: str, n: int, seed: int):
    if name.startswith("t1c"):
        task = TranslationTask()
        prompts, _ = task.sample(n, seed=seed)
        model = TranslationOracleMLM(task) if name == "t1c-oracle" else load_masked_diffusion_lm(DLMTrainConfig(task="t1c"))
        gold = task.boundaries(prompts)
        return task, model, prompts, (lambda res: task.is_valid(prompts, res.tokens)), (lambda res: gold)
    task = PhraseGrammar()  # free generation: one BOS prompt, so tokens are sampled (temperature 1)
    prompts, _ = task.sample(n, seed=seed)
    return (task, PFSAOracleMLM(task), prompts, (lambda res: task.is_valid(res.tokens)),
            (lambda res: task.boundaries(res.tokens)))


def _front_rounds(rows: list[dict], valid: float) -> float:
    """Fewest mean rounds of a fixed-block configuration whose validity is at least ``valid`` (if none reaches
    it, Swordsman is above the whole front: return the most rounds any fixed configuration used)."""
    fixed = [r for r in rows if r["decoder"].startswith("Fast-dLLM")]
    ok = [r["rounds"] for r in fixed if r["valid"] >= valid - 1e-12]
    return min(ok) if ok else max(r["rounds"] for r in fixed)


# main function

def reproduce(budget: Budget, seed: int) -> Outcome:
    sizes = budget.pick(SIZES)
    seed_everything(seed)
    rng = np.random.default_rng(seed)
    metrics, claims, tables, figures = {}, [], {}, {}
    with limit_threads(2):
        for name in sizes.settings:
            task, model, prompts, valid_fn, gold_fn = _setting(name, sizes.n_prompts, seed)
            rows, results = [], {}
            for dname, dec in decoders().items():
                t0 = time.perf_counter()
                res = decode(model, prompts, task.response_length, dec, seed=seed,
                             temperature=1.0 if name == "t1-oracle" else 0.0)
                wall = time.perf_counter() - t0
                results[dname] = res
                gold = gold_fn(res)
                rows.append({"decoder": dname, "valid": float(valid_fn(res).mean()),
                             "rounds": float(res.rounds.float().mean()), "nfe": float(res.nfe.float().mean()),
                             "tokens_per_round": res.tokens_per_round,
                             "tokens_per_s": res.tokens.numel() / max(wall, 1e-9),
                             "blocks": float(np.mean([len(b) for b in res.blocks])),
                             "boundary_f1": f1(*boundary_counts(res.blocks, gold)), "wall_s": wall})
            gold = gold_fn(results[SWORDSMAN])
            f1_random = f1(*boundary_counts(random_partition(gold, rng), gold))
            rows.append({"decoder": "random partition (#blocks = #constituents)", "boundary_f1": f1_random})
            tables[name] = rows
            by = {r["decoder"]: r for r in rows}
            sw = by[SWORDSMAN]
            f1_fixed = max(by[f"Fast-dLLM b={b} tau=0.9"]["boundary_f1"] for b in (4, 8, 16))
            off, ct = results["Swordsman adaptive off"], results["Fast-dLLM b=8 tau=0.9"]
            same = bool(torch.equal(off.tokens, ct.tokens) and torch.equal(off.rounds, ct.rounds))
            front = _front_rounds(rows, sw["valid"])
            vanilla = by["LLaDA b=8, 1 tok/round"]["rounds"]
            metrics.update({f"{name}/f1_swordsman": sw["boundary_f1"], f"{name}/f1_best_fixed": f1_fixed,
                            f"{name}/f1_random": f1_random,
                            f"{name}/f1_swordsman_first": by["Swordsman (first rise)"]["boundary_f1"],
                            f"{name}/valid_swordsman": sw["valid"], f"{name}/rounds_swordsman": sw["rounds"],
                            f"{name}/front_rounds_at_swordsman_validity": front,
                            f"{name}/adaptive_off_identical": float(same),
                            f"{name}/rounds_speedup_vs_llada": vanilla / sw["rounds"]})
            claims.append(Claim(
                statement=f"[{name}] Swordsman's block ends align with constituent boundaries better than fixed or random blocks",
                measured=sw["boundary_f1"], op=">", reference=max(f1_fixed, f1_random),
                baseline="best of fixed blocks b in {4,8,16} and a random partition with #constituents blocks",
                metric="F1 of block ends vs true phrase boundaries", paper="spec: F1 >= 0.8 vs <= 0.4",
                note="largest entropy rise in [s+2, s+16] with delta=0.5 nats; ends past EOS ignored"))
            claims.append(Claim(
                statement=f"[{name}] Swordsman matches the best fixed-block accuracy at fewer or equal rounds (on the Pareto front)",
                measured=sw["rounds"], op="<=", reference=front,
                baseline="fewest mean rounds of Fast-dLLM b in {4,8,16} x tau in {0.7,0.9} reaching Swordsman's validity",
                metric="Swordsman's mean rounds",
                note=f"Swordsman validity {sw['valid']:.3f}; if no fixed configuration reaches it the reference is the "
                     "slowest fixed configuration"))
            claims.append(Claim(
                statement=f"[{name}] Swordsman needs fewer rounds than vanilla LLaDA (speed-up in rounds)",
                measured=vanilla / sw["rounds"], op=">", reference=1.0,
                baseline="LLaDA low-confidence remasking, b=8, one token per round, same run",
                metric="rounds(LLaDA) / rounds(Swordsman)", paper="8.8x wall-clock on LLaDA-8B (GSM8K)",
                note="rounds, not wall-clock: KV-cache speed-ups are invisible at L<=40 on CPU"))
            figures[f"{name}_pareto"] = _figure(rows, name)
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures)


def _figure(rows: list[dict], name: str):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 4))
    ax = fig.add_subplot()
    for r in rows:
        if "rounds" not in r:
            continue
        fixed = r["decoder"].startswith("Fast-dLLM")
        ax.scatter(r["rounds"], r["valid"], marker="o" if fixed else "*", s=30 if fixed else 90,
                   color="tab:blue" if fixed else ("tab:red" if r["decoder"].startswith("Swordsman") else "tab:gray"))
        ax.annotate(r["decoder"].replace("Fast-dLLM ", ""), (r["rounds"], r["valid"]), fontsize=6)
    ax.set_xlabel("mean rounds (sequential forward passes)")
    ax.set_ylabel("validity")
    ax.set_title(f"[A15] {name}: accuracy vs rounds")
    return fig
