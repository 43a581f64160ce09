"""Reproduction of [B06] Retro-Expert on template-generated reactions (RDKit's NCI building blocks).

Data: forward templates (amide coupling, esterification, reductive amination, N-alkylation, Williamson ether,
SNAr) applied to real NCI molecules, split by Bemis-Murcko scaffold (cached). Specialist: pointwise MLP on
Morgan fingerprints -> decision space D(P) = top-k retro outcomes (training decision spaces cross-fitted).
Arms, all on the same test products:

1. specialist top-1 (D's order);
2. stock re-ranker (diagnostic, no learning): the candidate of D(P) with the most reactants in stock, ties by the
   specialist's order -- whether the stock, a signal the specialist does not see, could overrule it at all;
3. SFT re-ranker: the same tiny Llama policy trained by cross-entropy on the grounded rationale of the truth;
4. "no decision space" generators (LLM-only analogues): read the product SMILES, state (class, centre) themselves;
   one trained by SFT on the true (class, centre) (same labelled examples as arm 3), one by KGPO (full reward);
5. KGPO with r_fmt + r_ans only; KGPO without r_ground (r_center + r_type kept: the grounding claim's control);
6. full KGPO (r_fmt + r_ans + 0.25 r_center + 0.25 r_type + 0.25 r_ground);
7. the policy untrained (random init) on the same decision spaces (the LLM-only claim's control).

RL arms get equal samples (steps x prompts x G); SFT arms see ``sft_steps x 32`` labelled examples.
Claims: full KGPO top-1 beats the specialist and the strongest no-decision-space generator (control: the
untrained policy on D(P)); its top-3 beats the specialist's; its executability is near 100% (>= 0.95, control:
the r_ans-only arm) and >= 0.10 above the r_ans-only arm (control: the arm without r_ground); it beats the SFT
re-ranker.
Checks: forward round trip, every D candidate verifies and a perturbed centre does not, forcing candidate 1
reproduces the specialist, rdchiral agrees with our template application.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
from matplotlib.figure import Figure

from icml26.harness import Budget, Claim, Outcome, seed_everything

from .chemistry import TEMPLATES, Rationale, verify_rationale
from .data import load_reaction_set
from .kgpo import Example, KGPOConfig, KGPOTrainer, RewardWeights, evaluate_policy, judge, sft_train
from .peers import rdchiral_agreement, rdchiral_available
from .reasoner import (
    GrammarConstrainedLM,
    Vocab,
    build_tokenizer,
    ds_prompt,
    grammar_bias,
    grounded_completion,
    make_policy,
    product_prompt,
)
from .specialist import SpecialistModel, cross_fitted_decision_spaces


@dataclass(frozen=True)
class Sizes:
    n_reactions: int        # train + test (test = 1/6, whole scaffolds)
    k: int                  # decision-space size
    mlp_iter: int           # specialist MLP epochs
    rl_steps: int           # GRPO steps per RL arm
    prompts_per_step: int   # prompts per GRPO step (x G = 8 samples each)
    sft_steps: int          # SFT re-ranker steps (batch 32)
    peer_products: int      # test products checked against rdchiral


SIZES = {
    Budget.QUICK: Sizes(200, 5, 15, 5, 4, 12, 4),
    Budget.STANDARD: Sizes(1200, 5, 40, 80, 8, 150, 60),
    Budget.FULL: Sizes(3000, 5, 80, 400, 16, 600, 200),
}
DATA_SEED = 0      # the reaction set is fixed (cached once per size); seeds vary models, sampling and training
ARMS = ("specialist", "stock_rank", "untrained", "sft", "no_ds_sft", "no_ds", "kgpo_ans", "kgpo_noground",
        "kgpo_full")
NAMES = {"specialist": "specialist top-1", "stock_rank": "stock re-ranker (rule)",
         "untrained": "untrained policy on D(P) (control)", "sft": "SFT re-ranker",
         "no_ds_sft": "no decision space (SFT)", "no_ds": "no decision space (KGPO)",
         "kgpo_ans": "KGPO, r_ans only", "kgpo_noground": "KGPO, no r_ground (control)",
         "kgpo_full": "KGPO (full reward)"}


def _policy(tok, seed: int, decision_space: bool) -> GrammarConstrainedLM:
    return GrammarConstrainedLM(make_policy(tok, seed=seed), grammar_bias(tok, decision_space=decision_space), tok)


def _figure(res: dict[str, dict[str, float]], curves: dict[str, list[float]]) -> Figure:
    fig = Figure(figsize=(10, 3.8))
    a1, a2 = fig.subplots(1, 2)
    x = np.arange(len(ARMS))
    for j, (m, lbl) in enumerate((("top1", "top-1"), ("top3", "top-3"), ("executable", "executability"))):
        a1.bar(x + (j - 1) * 0.27, [res[a][m] for a in ARMS], 0.27, label=lbl)
    a1.set_xticks(x, [NAMES[a].replace(" (", "\n(").replace(", ", ",\n") for a in ARMS], fontsize=7, rotation=15)
    a1.set_ylim(0, 1.05)
    a1.set_title("[B06] test products")
    a1.legend(fontsize=7)
    for a, c in curves.items():
        a2.plot(np.convolve(c, np.ones(5) / 5, mode="valid"), label=NAMES[a])
    a2.set_xlabel("GRPO step")
    a2.set_ylabel("mean training reward (5-step average)")
    a2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)  # seeds torch too
    t0 = time.perf_counter()
    data = load_reaction_set(sz.n_reactions, seed=DATA_SEED)
    train, test = data.train, data.test
    vocab = Vocab(k=sz.k, n_templates=len(TEMPLATES))
    tok = build_tokenizer(vocab)

    # 1. specialist and decision spaces (training spaces out-of-fold)
    spec = SpecialistModel(k=sz.k, max_iter=sz.mlp_iter, random_state=seed).fit(train)
    d_test = spec.decision_spaces([r.product for r in test])
    d_train = cross_fitted_decision_spaces(train, seed=seed, k=sz.k, max_iter=sz.mlp_iter)
    ex_tr = [Example(r, d, ds_prompt(d, data.stock, vocab)) for r, d in zip(train, d_train)]
    ex_te = [Example(r, d, ds_prompt(d, data.stock, vocab)) for r, d in zip(test, d_test)]
    nd_tr = [Example(r, [], product_prompt(r.product, vocab)) for r in train]
    nd_te = [Example(r, [], product_prompt(r.product, vocab)) for r in test]
    spec_lists = [[c.reactants for c in d] for d in d_test]
    truth = [r.reactants for r in test]
    per = {"specialist": {
        "top1": np.array([float(bool(s) and s[0] == t) for s, t in zip(spec_lists, truth)]),
        "top3": np.array([float(t in s[:3]) for s, t in zip(spec_lists, truth)]),
        "executable": np.array([float(bool(d) and verify_rationale(r.product, Rationale(
            d[0].template_id, d[0].centre, d[0].reactants))) for r, d in zip(test, d_test)]),
        "centre": np.array([float(bool(d) and d[0].centre in r.centres) for r, d in zip(test, d_test)])}}
    t_spec = time.perf_counter() - t0
    # the stock rule: most reactants in stock first, the specialist's order within ties (stable sort)
    stock_lists = [sorted(s, key=lambda rs: -sum(m in data.stock for m in rs)) for s in spec_lists]
    per["stock_rank"] = {"top1": np.array([float(bool(s) and s[0] == t) for s, t in zip(stock_lists, truth)]),
                         "top3": np.array([float(t in s[:3]) for s, t in zip(stock_lists, truth)]),
                         "executable": np.ones(len(test)),    # a (template, centre) of D(P): executes by construction
                         "centre": np.array([float(bool(d) and next(c.centre for c in d if c.reactants == s[0])
                                                   in r.centres) for r, d, s in zip(test, d_test, stock_lists)])}

    # 2-5. policies
    budget_rows, curves, times, well_formed = {}, {}, {"specialist": t_spec}, {}
    answers = {}
    # control: the same constrained policy, untrained (random init), reading the same decision spaces
    t = time.perf_counter()
    r = evaluate_policy(_policy(tok, seed, True), tok, ex_te, seed=seed)
    per["untrained"] = {"top1": r.top1, "top3": r.top3, "executable": r.executable, "centre": r.centre}
    answers["untrained"] = r.answers
    times["untrained"] = time.perf_counter() - t
    t = time.perf_counter()
    m = _policy(tok, seed, True)
    sft_losses = sft_train(m, tok, ex_tr, steps=sz.sft_steps, seed=seed)
    r = evaluate_policy(m, tok, ex_te, seed=seed)
    per["sft"] = {"top1": r.top1, "top3": r.top3, "executable": r.executable, "centre": r.centre}
    budget_rows["sft"] = {"labelled_examples": sz.sft_steps * 32, "samples": 0, "verifier_calls": 0}
    times["sft"] = time.perf_counter() - t
    t = time.perf_counter()
    m = _policy(tok, seed, False)
    sft_train(m, tok, nd_tr, steps=sz.sft_steps, seed=seed, decision_space=False)
    r = evaluate_policy(m, tok, nd_te, decision_space=False, seed=seed)
    per["no_ds_sft"] = {"top1": r.top1, "top3": r.top3, "executable": r.executable, "centre": r.centre}
    well_formed["no_ds_sft"] = float(r.well_formed.mean())
    budget_rows["no_ds_sft"] = {"labelled_examples": sz.sft_steps * 32, "samples": 0, "verifier_calls": 0}
    times["no_ds_sft"] = time.perf_counter() - t
    base = KGPOConfig(steps=sz.rl_steps, prompts_per_step=sz.prompts_per_step)
    arms = {"no_ds": (replace(base, decision_space=False, grpo=replace(base.grpo, max_new_tokens=4)), nd_tr, nd_te),
            "kgpo_ans": (replace(base, weights=RewardWeights.answer_only()), ex_tr, ex_te),
            "kgpo_noground": (replace(base, weights=RewardWeights(ground=0.0)), ex_tr, ex_te),
            "kgpo_full": (base, ex_tr, ex_te)}
    for name, (cfg, tr, te) in arms.items():
        t = time.perf_counter()
        m = _policy(tok, seed, cfg.decision_space)
        trainer = KGPOTrainer(m, tok, cfg, seed=seed).train(tr)
        r = evaluate_policy(m, tok, te, decision_space=cfg.decision_space, seed=seed)
        per[name] = {"top1": r.top1, "top3": r.top3, "executable": r.executable, "centre": r.centre}
        well_formed[name] = float(r.well_formed.mean())
        answers[name] = r.answers
        curves[name] = [h["reward"] for h in trainer.history]
        budget_rows[name] = {"labelled_examples": 0, "samples": trainer.samples,
                             "verifier_calls": trainer.verifier_calls}
        times[name] = time.perf_counter() - t

    # checks
    roundtrip = float(np.mean([r.product in TEMPLATES[r.template_id].run_forward(r.reactants) for r in test]))
    cand_ok, perturbed = [], []
    for r, d in zip(test, d_test):
        for c in d:
            cand_ok.append(verify_rationale(r.product, Rationale(c.template_id, c.centre, c.reactants)))
            bad = (c.centre[0], c.centre[1] + 1)      # shift the second atom: a different bond (or none)
            same = {cc for cc, rr in TEMPLATES[c.template_id].apply(r.product) if rr == c.reactants}
            if bad not in same:                       # skip a symmetry-equivalent centre
                perturbed.append(verify_rationale(r.product, Rationale(c.template_id, bad, c.reactants)))
    forced = np.array([judge(e, grounded_completion(e.cands[0], 0)).ans if e.cands else 0.0 for e in ex_te])
    forced_diff = float(np.abs(forced - per["specialist"]["top1"]).max())
    peer = rdchiral_agreement([r.product for r in test[:sz.peer_products]]) if rdchiral_available() else None

    res = {a: {k: float(v.mean()) for k, v in per[a].items()} for a in ARMS}
    in_ds = float(np.mean([t in s for s, t in zip(spec_lists, truth)]))
    metrics = {f"{k}_{a}": v for a in ARMS for k, v in res[a].items()}
    metrics |= {f"well_formed_{a}": v for a, v in well_formed.items()}
    metrics |= {f"samples_{a}": float(b["samples"]) for a, b in budget_rows.items()}
    metrics |= {f"verifier_calls_{a}": float(b["verifier_calls"]) for a, b in budget_rows.items()}
    metrics |= {f"seconds_{a}": v for a, v in times.items()}
    metrics |= {"truth_in_decision_space": in_ds, "n_train": float(len(train)), "n_test": float(len(test)),
                "retro_recall_of_generation": float(data.stats["retro_recall"]), "roundtrip": roundtrip,
                "candidates_verify": float(np.mean(cand_ok)), "perturbed_centre_verifies": float(np.mean(perturbed)),
                "forced_candidate1_max_diff": forced_diff, "sft_final_loss": float(np.mean(sft_losses[-10:])),
                "test_truth_in_stock": float(data.stats.get("test_truth_in_stock", float("nan"))),
                "test_other_in_stock": float(data.stats.get("test_other_in_stock", float("nan")))}
    # how often each RL arm's greedy answer is the specialist's first candidate (1.0 = it never overrules it)
    metrics |= {f"agrees_with_specialist_{a}": float(np.mean([bool(s) and x == s[0] for x, s in
                                                              zip(answers[a], spec_lists)]))
                for a in ("untrained", "kgpo_ans", "kgpo_noground", "kgpo_full")}
    if peer is not None:
        metrics["rdchiral_agreement"] = peer

    F, S, U = per["kgpo_full"], per["specialist"], per["untrained"]
    n = len(test)
    scale = (f"{n} test products (scaffold split), {len(train)} training; truth in D(P) for {in_ds:.2f} of test "
             f"products (the ceiling of every decision-space arm); RL arms: {sz.rl_steps} GRPO steps x "
             f"{sz.prompts_per_step} prompts x G=8. Paired = per-product differences.")
    agree = metrics["agrees_with_specialist_kgpo_full"]
    collapse = (" KGPO never overrules the specialist here (identical answers on every product), so the top-1 "
                "values are equal by construction of the policy it learnt: we read this as not holding (the harness "
                "reports equal values as inconclusive)." if agree >= 1.0 else "")
    no_ds = {"no decision space, SFT on the true (class, centre)": "no_ds_sft",
             "no decision space, KGPO (same samples)": "no_ds"}
    strongest = max(no_ds, key=lambda k: res[no_ds[k]]["top1"])           # the harness picks the same one
    claims = [
        Claim("Retro-Expert surpasses the specialist model (top-1 exact match)", res["kgpo_full"]["top1"], ">",
              res["specialist"]["top1"], baseline="specialist top-1, same test products", paired=list(F["top1"] - S["top1"]),
              metric="top-1 exact match, full KGPO (greedy)",
              note=scale + f" KGPO's greedy answer is the specialist's first candidate on {agree:.3f} of products; "
              f"the stock rule (a signal the specialist does not see) reaches {res['stock_rank']['top1']:.3f} top-1."
              + collapse,
              falsifier="full-KGPO top-1 at or below the specialist's, or the per-product difference not separable "
                        "from 0"),
        Claim("Retro-Expert surpasses the specialist model (top-3 exact match)", res["kgpo_full"]["top3"], ">",
              res["specialist"]["top3"], baseline="specialist top-3", paired=list(F["top3"] - S["top3"]),
              metric="top-3 exact match, full KGPO", note=scale,
              falsifier="full-KGPO top-3 at or below the specialist's (paired interval not above 0)"),
        Claim("Retro-Expert surpasses an LLM-only policy (no decision space), top-1", res["kgpo_full"]["top1"], ">",
              baselines={k: res[a]["top1"] for k, a in no_ds.items()},
              paired={k: list(F["top1"] - per[a]["top1"]) for k, a in no_ds.items()},
              control=res["untrained"]["top1"], control_paired=list(U["top1"] - per[no_ds[strongest]]["top1"]),
              control_arm="the same policy untrained (random init) reading the same decision space, greedy",
              metric="top-1 exact match, full KGPO", note=scale + " The strongest no-decision-space generator "
              f"decides: SFT-trained on {sz.sft_steps} x 32 labelled examples, or KGPO-trained on the RL arms' samples. "
              "The control tells whether KGPO is needed to beat it, or the decision space alone does.",
              falsifier="full-KGPO top-1 at or below the strongest no-decision-space generator's, or the untrained "
                        "policy on the same decision space beating it too"),
        Claim("Explanations are chemically grounded: stated rationales execute (near 100%)",
              res["kgpo_full"]["executable"], ">=", 0.95, baseline="0.95 (our reading of 'close to 100%')",
              paired=list(F["executable"] - 0.95), metric="rationale executability, full KGPO (greedy)",
              control=res["kgpo_ans"]["executable"], control_paired=list(per["kgpo_ans"]["executable"] - 0.95),
              control_arm="KGPO with r_fmt + r_ans only (r_center, r_type, r_ground removed), same samples",
              note="RDKit re-executes the stated (template, centre) and must give exactly the answered reactants.",
              falsifier="fewer than 95% of greedy rationales execute to their answer"),
        Claim("The grounding reward is what makes rationales executable (vs r_ans only, margin 0.10)",
              res["kgpo_full"]["executable"], ">", res["kgpo_ans"]["executable"] + 0.10,
              baseline="KGPO with r_fmt + r_ans only, + 0.10", metric="rationale executability, full KGPO",
              paired=list(F["executable"] - per["kgpo_ans"]["executable"] - 0.10),
              control=res["kgpo_noground"]["executable"],
              control_paired=list(per["kgpo_noground"]["executable"] - per["kgpo_ans"]["executable"] - 0.10),
              control_arm="KGPO with r_center + r_type but r_ground removed (same samples): passes when the centre "
                          "and class terms, not r_ground, make rationales executable",
              note=f"Executability: full {res['kgpo_full']['executable']:.3f}, no r_ground "
                   f"{res['kgpo_noground']['executable']:.3f}, r_ans only {res['kgpo_ans']['executable']:.3f}.",
              falsifier="executability with r_ground not at least 0.10 above the r_ans-only arm's, or the arm "
                        "without r_ground reaching that too"),
        Claim("Pure-RL KGPO beats an SFT re-ranker on the same decision space (top-1)", res["kgpo_full"]["top1"], ">",
              res["sft"]["top1"], baseline=f"SFT re-ranker ({sz.sft_steps} x 32 labelled examples)",
              paired=list(F["top1"] - per["sft"]["top1"]), metric="top-1 exact match, full KGPO",
              note="Not stated in the abstract; the spec asks for this comparison to be reported honestly.",
              falsifier="full-KGPO top-1 at or below the SFT re-ranker's"),
        # checks
        Claim("Forward template on the true reactants reproduces the product (every test reaction)", roundtrip, ">=",
              1.0, kind="check", metric="round-trip rate", baseline="1.0 (by construction of the data)"),
        Claim("verify_rationale accepts every decision-space candidate", float(np.mean(cand_ok)), ">=", 1.0,
              kind="check", metric="fraction of D(P) candidates that execute", baseline="1.0"),
        Claim("verify_rationale rejects a perturbed centre", float(np.mean(perturbed)), "<=", 0.0, kind="check",
              metric="fraction of centre-perturbed rationales that execute", baseline="0"),
        Claim("A policy forced to pick candidate 1 reproduces the specialist's top-1 exactly", forced_diff, "<=", 0.0,
              kind="check", metric="max |forced - specialist| per product", baseline="0"),
    ]
    if peer is not None:
        claims.append(Claim("rdchiral gives the same outcomes as our RDKit template application", peer, ">=", 1.0,
                            kind="check", metric="fraction of (product, template) pairs with equal outcome sets",
                            baseline="1.0 (no stereochemistry in these products)"))
    tables = {
        "arms": [{"arm": NAMES[a], **{k: round(v, 4) for k, v in res[a].items()},
                  **budget_rows.get(a, {"labelled_examples": 0, "samples": 0, "verifier_calls": 0}),
                  "seconds": round(times.get(a, 0.0), 1)} for a in ARMS],
    }
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures={"arms": _figure(res, curves)})
