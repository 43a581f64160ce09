"""[B01] Reproduction: bits-to-rounds, and ETE's rounds against the confidence-only decoder at equal quality.

Settings (each decodes the same prompts with every decoder):
- ``sudoku-oracle``: 4x4 Sudoku with k in {2, 4, 6, 8, 10} givens, exact posterior marginals (no training), one
  16-cell block, greedy. A puzzle's information is exactly log #completions.
- ``t1-oracle``: T1 free generation from the phrase grammar, exact marginals, blocks of 8, temperature 1 (one BOS
  prompt). A sample's information is its exact -log p(x); quality = DFA validity and how close the samples'
  NLL distribution is to real data (two-sample KS distance).
- ``t1c-trained`` (standard): T1c translation with the testbed's stronger masked diffusion LM (``DLM_T1C_STRONG``,
  ``dlm-t1c-strong``, the model A15 uses, cached), greedy, prefix KV cache on; tokens/s ratios from interleaved
  timing.

Decoders: Fast-dLLM confidence threshold (the confidence-only baseline, tau=0.9), LLaDA low-confidence remasking
(one token per round), ETE without cross-block, ETE, ETE with K=4 candidate scoring, ETE with random (not
max-entropy) exploration, and ETE with its adaptive parts off (must equal the baseline token for token).
Every decode is checked against R >= ceil(sum_r I_r / max_r I_r); that inequality is a tautology (a sum of R
terms is at most R times the largest), so it is reported as a *check*. The bits-to-rounds claims that could fail:
(i) rounds grow linearly with a sample's exact information -log p(x) (Pearson r, 95% Fisher lower bound, and an
OLS slope with its interval); (ii) on Sudoku, R >= I(x) / B with B fixed *before* the test decodes, as the largest
per-round information seen on separate calibration puzzles. On Sudoku the information is recomputed in float64 by
replaying each decode against an exact counting oracle (``replay_surprisal``), so sum_r I_r matches
log #completions to 1e-9 nats. Round and validity claims carry per-instance paired differences (``paired``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import ks_2samp, linregress, norm, pearsonr

from icml26.harness import Budget, Claim, Outcome, compare_times, seed_everything
from icml26.testbeds.diffusion_lm import (
    COMMIT_CROSS,
    COMMIT_EXPLORE,
    COMMIT_FALLBACK,
    DLM_T1C_STRONG,
    ConfidenceThresholdDecoder,
    LowConfidenceRemasking,
    PFSAOracleMLM,
    PhraseGrammar,
    SudokuOracleMLM,
    SudokuTask,
    TranslationTask,
    check_invariants,
    decode,
    load_masked_diffusion_lm,
    sudoku_grids,
)

from .ete import ExploreThenExploitDecoder, bits_to_rounds_report, check_ete_invariants, replay_surprisal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sizes:
    n_sudoku: int  # puzzles per number of givens
    n_grammar: int
    n_trained: int  # 0: skip the trained setting
    n_timing: int  # prompts per timed decode (trained model)
    timing_iters: int


SIZES = {
    Budget.QUICK: Sizes(n_sudoku=200, n_grammar=128, n_trained=0, n_timing=0, timing_iters=0),
    Budget.STANDARD: Sizes(n_sudoku=600, n_grammar=512, n_trained=512, n_timing=128, timing_iters=5),
    Budget.FULL: Sizes(n_sudoku=2000, n_grammar=2048, n_trained=2048, n_timing=256, timing_iters=10),
}

GIVENS = (2, 4, 6, 8, 10)
TAU = 0.9
BASE, ETE, ETE_NOCROSS, ETE_OFF = "confidence-only (Fast-dLLM)", "ETE", "ETE, no cross-block", "ETE adaptive off"


def decoders(block: int) -> dict[str, object]:
    return {
        BASE: ConfidenceThresholdDecoder(block, TAU),
        f"LLaDA 1 tok/round (b={block})": LowConfidenceRemasking(block, block),
        ETE_NOCROSS: ExploreThenExploitDecoder(TAU, cross_block_window=0, block_length=block),
        ETE: ExploreThenExploitDecoder(TAU, block_length=block),
        "ETE + K=4 candidates": ExploreThenExploitDecoder(TAU, explore_candidates=4, block_length=block),
        "ETE, random exploration": ExploreThenExploitDecoder(TAU, explore_select="random", block_length=block),
        ETE_OFF: ExploreThenExploitDecoder(TAU, explore_k=0, cross_block_window=0, block_length=block),
    }


# helper functions

def _invariants_ok(res, dec, mask_id: int) -> bool:
    try:
        check_invariants(res, mask_id)
        if isinstance(dec, ExploreThenExploitDecoder):
            check_ete_invariants(res, mask_id, dec)
    except AssertionError:
        return False
    return True


def _row(name: str, res, valid: np.ndarray, wall: float, ok: bool) -> dict:
    rep = bits_to_rounds_report(res)
    kind = res.commit_kind
    return {"decoder": name, "valid": float(valid.mean()), "rounds": float(res.rounds.float().mean()),
            "extra_rounds": float(res.extra_rounds.float().mean()), "nfe": float(res.nfe.float().mean()),
            "tokens_per_round": res.tokens_per_round, "tokens_per_s": res.tokens.numel() / max(wall, 1e-9),
            "info_nats": float(rep["total_info"].mean()), "info_per_round": float(rep["info_rate"].mean()),
            "max_round_info": float(rep["budget"].mean()), "bound_violations": int((~rep["holds"]).sum()),
            "invariants_ok": ok,
            "explore_per_seq": float((kind == COMMIT_EXPLORE).sum(1).float().mean()),
            "cross_per_seq": float((kind == COMMIT_CROSS).sum(1).float().mean()),
            "fallback_per_seq": float((kind == COMMIT_FALLBACK).sum(1).float().mean()),
            "kv_cache": bool(res.used_cache), "wall_s": wall}


def _run_all(model, prompts, gen_length, block, valid_fn, seed, temperature):
    rows, results, valid = [], {}, {}
    for name, dec in decoders(block).items():
        t0 = time.perf_counter()
        res = decode(model, prompts, gen_length, dec, seed=seed, temperature=temperature)
        wall = time.perf_counter() - t0
        results[name], valid[name] = res, np.asarray(valid_fn(res))
        rows.append(_row(name, res, valid[name], wall, _invariants_ok(res, dec, model.mask_token_id)))
    return rows, results, valid


def _identical(a, b) -> float:
    return float(torch.equal(a.tokens, b.tokens) and torch.equal(a.rounds, b.rounds))


def _failures(rows: list[dict]) -> float:
    """Decoders (of this setting's table) whose decode broke an invariant (see ``check_ete_invariants``)."""
    return float(sum(not r["invariants_ok"] for r in rows if "invariants_ok" in r))


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    return float(pearsonr(x, y)[0]) if np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")


def pearson_lower(x: np.ndarray, y: np.ndarray, level: float = 0.95) -> float:
    """Lower end of the two-sided ``level`` Fisher-z interval of Pearson's r (NaN when undefined)."""
    r, n = _pearson(x, y), len(x)
    if not np.isfinite(r) or n < 4:
        return float("nan")
    z = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15)) - norm.ppf(0.5 + level / 2) / np.sqrt(n - 3)
    return float(np.tanh(z))


def slope_ci(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """OLS slope of y on x and its 95% t-interval."""
    if np.ptp(x) == 0:
        return float("nan"), float("nan"), float("nan")
    fit = linregress(x, y)
    from scipy.stats import t as _t

    half = float(_t.ppf(0.975, len(x) - 2) * fit.stderr)
    return float(fit.slope), float(fit.slope - half), float(fit.slope + half)


def sudoku_marginals64(task: SudokuTask, prompts: torch.Tensor):
    """Exact float64 marginals of the 4x4 Sudoku for :func:`replay_surprisal`: p(cell = d | givens, committed)
    = #{grids consistent with both and cell = d} / #{consistent grids} (an evaluator independent of the oracle
    the decoders use, which emits float32 logits)."""
    grids = torch.from_numpy(sudoku_grids())  # (288, 16)
    onehot = torch.nn.functional.one_hot(grids, task.vocab_size + 1).double()  # (288, 16, V)
    prior = torch.from_numpy(task.consistent(prompts))  # (B, 288)

    def marginals(rows: torch.Tensor, resp: torch.Tensor) -> torch.Tensor:
        fit = prior[rows] & ((resp[:, None] < 0) | (resp[:, None] == grids[None])).all(2)
        w = fit.double() / fit.sum(1, keepdim=True).clamp_min(1)
        return torch.einsum("bg,gcv->bcv", w, onehot)

    return marginals


LLADA = "LLaDA 1 tok/round"


def _llada(res: dict) -> str:
    return next(d for d in res if d.startswith(LLADA))


def _common_claims(name: str, by: dict, res: dict, valid: dict, note: str) -> list[Claim]:
    """Rounds, the 20% margin, validity and information per round, each with per-instance paired differences.

    Rounds and information per round are compared with the strongest of the two confidence-only decoders the run
    has (Fast-dLLM's threshold at the same tau and LLaDA's one-token-per-round remasking); quality keeps the
    decoder ETE replaces at equal tau (LLaDA spends one round per token, not an equal budget)."""
    ll = _llada(res)
    b, e, l_ = by[BASE], by[ETE], by[ll]
    rb, re_, rl = (res[d].rounds.numpy().astype(float) for d in (BASE, ETE, ll))
    vb, ve = valid[BASE].astype(float), valid[ETE].astype(float)
    ib, ie, il = (bits_to_rounds_report(res[d])["info_rate"].numpy() for d in (BASE, ETE, ll))
    return [
        Claim(statement=f"[{name}] ETE needs fewer decoding rounds than confidence-only decoding at equal tau",
              measured=e["rounds"], op="<", baselines={BASE: b["rounds"], ll: l_["rounds"]},
              paired={BASE: list(re_ - rb), ll: list(re_ - rl)},
              metric="ETE's mean rounds",
              paper="abstract: consistently reduces the number of decoding rounds",
              falsifier="ETE's mean rounds at or above the strongest confidence-only decoder's (or the per-instance "
                        "paired interval containing 0)",
              note=f"Fast-dLLM confidence threshold tau={TAU} and LLaDA remasking, same prompts"),
        Claim(statement=f"[{name}] ETE cuts mean decoding rounds by >= 20% vs confidence-only at equal tau",
              measured=e["rounds"], op="<=", baselines={f"0.8 x {BASE}": 0.8 * b["rounds"], f"0.8 x {ll}": 0.8 * l_["rounds"]},
              paired={f"0.8 x {BASE}": list(re_ - 0.8 * rb), f"0.8 x {ll}": list(re_ - 0.8 * rl)},
              metric="ETE's mean rounds", paper="spec pilot: Sudoku k=2 9.26 -> 5.90",
              falsifier="ETE's mean rounds above 0.8 x the strongest confidence-only decoder's (a cut under 20%)",
              note=f"cut = {1 - e['rounds'] / b['rounds']:.1%} vs Fast-dLLM ({b['rounds']:.2f} rounds). {note}"),
        Claim(statement=f"[{name}] ... without compromising quality: validity within 2 points of confidence-only",
              measured=e["valid"], op=">=", reference=b["valid"] - 0.02, paired=list(ve - vb + 0.02),
              baseline=f"confidence-only validity {b['valid']:.3f} minus 2 points", metric="ETE's validity",
              falsifier="ETE's validity more than 2 points below the confidence-only decoder's",
              note=f"the decoder ETE replaces, at equal tau; LLaDA one-token-per-round {l_['valid']:.3f} (not an equal "
                   "budget: one round per token)"),
        Claim(statement=f"[{name}] ETE commits more information per round than confidence-only (the mechanism)",
              measured=e["info_per_round"], op=">", baselines={BASE: b["info_per_round"], ll: l_["info_per_round"]},
              paired={BASE: list(ie - ib), ll: list(ie - il)},
              metric="ETE's mean nats per round",
              falsifier="ETE's mean nats per round at or below the strongest confidence-only decoder's",
              note="I_r = sum of commit-time surprisals of the round's commits"),
    ]


def _identity_check(name: str, same: float) -> Claim:
    return Claim(statement=f"[{name}] ETE with exploration and cross-block off equals confidence-only token for token",
                 measured=same, op=">=", reference=1.0, kind="check", baseline="ConfidenceThresholdDecoder, same prompts",
                 metric="1 if tokens and rounds are identical")


def _tautology_check(name: str, violations: float) -> Claim:
    return Claim(statement=f"[{name}] R >= ceil(sum_r I_r / max_r I_r) on every decode (accounting)",
                 measured=violations, op="<=", reference=0.0, kind="check", baseline="no violation allowed",
                 metric="violations over all decoders and samples",
                 note="a tautology (a sum of R terms is at most R times its largest): checks the bookkeeping only")


# settings

def _sudoku(sizes: Sizes, seed: int, metrics: dict, tables: dict, figures: dict) -> list[Claim]:
    task = SudokuTask()
    oracle = SudokuOracleMLM(task)
    rng = np.random.default_rng(seed)
    prompts = torch.cat([task.sample(sizes.n_sudoku, seed=rng, n_givens=k)[0] for k in GIVENS])
    cal = torch.cat([task.sample(sizes.n_sudoku, seed=rng, n_givens=k)[0] for k in GIVENS])  # calibration only
    k_of = np.repeat(GIVENS, sizes.n_sudoku)
    info = np.log(task.n_completions(prompts))  # exact information of each puzzle (nats)
    rows, res, valid = _run_all(oracle, prompts, 16, 16, lambda r: task.is_valid(prompts, r.tokens), seed, 0.0)
    by = {r["decoder"]: r for r in rows}
    tables["sudoku-oracle"] = rows
    per_k = []
    for k in GIVENS:
        m = torch.from_numpy(k_of == k)
        per_k.append({"givens": k, "info_nats": float(info[k_of == k].mean()),
                      **{f"rounds {d}": float(res[d].rounds[m].float().mean()) for d in (BASE, ETE)},
                      **{f"valid {d}": float(task.is_valid(prompts[m], res[d].tokens[m]).mean()) for d in (BASE, ETE)}})
    tables["sudoku-oracle by givens"] = per_k
    # float64 information accounting by replay against an exact counting evaluator
    marg = sudoku_marginals64(task, prompts)
    s64 = {d: replay_surprisal(res[d], marg) for d in (BASE, ETE)}
    one = decode(oracle, prompts, 16, LowConfidenceRemasking(16, 16), seed=seed)  # one commit per round
    chain64 = float(np.abs(replay_surprisal(one, marg).sum(1).numpy() - info).max())
    chain32 = float(np.abs(one.surprisal.double().sum(1).numpy() - info).max())
    # (i) linear growth: baseline rounds vs exact information
    r_base = res[BASE].rounds.numpy().astype(float)
    corr, corr_lo = _pearson(r_base, info), pearson_lower(r_base, info)
    slope, s_lo, s_hi = slope_ci(info, r_base)
    # control: the same correlation with the number of blank cells, a predictor without the information content
    blanks = 16.0 - k_of.astype(float)
    corr_blank, corr_blank_lo = _pearson(r_base, blanks), pearson_lower(r_base, blanks)
    # (ii) a per-round budget fixed before the test decodes: the largest round on separate calibration puzzles
    cal_marg = sudoku_marginals64(task, cal)
    viol, budgets, slack = 0, {}, []
    pos = info > 1e-12
    for d in (BASE, ETE):
        rc = decode(oracle, cal, 16, decoders(16)[d], seed=seed + 1)
        budgets[d] = float(bits_to_rounds_report(rc, surprisal=replay_surprisal(rc, cal_marg))["budget"].max())
        rounds_d = res[d].rounds.numpy().astype(float)
        viol += int((rounds_d < np.ceil(info / budgets[d] - 1e-9)).sum())
        slack.append(float((rounds_d[pos] * budgets[d] / info[pos]).min()))  # R / (I / B) per puzzle
    min_ratio = min(slack)
    tautology = sum(r["bound_violations"] for r in rows)
    metrics.update({"sudoku/rounds_baseline": by[BASE]["rounds"], "sudoku/rounds_ete": by[ETE]["rounds"],
                    "sudoku/valid_baseline": by[BASE]["valid"], "sudoku/valid_ete": by[ETE]["valid"],
                    "sudoku/info_per_round_baseline": by[BASE]["info_per_round"],
                    "sudoku/info_per_round_ete": by[ETE]["info_per_round"],
                    "sudoku/pearson_rounds_info_baseline": corr, "sudoku/pearson_lower95_baseline": corr_lo,
                    "sudoku/slope_rounds_per_nat_baseline": slope, "sudoku/slope_lo": s_lo, "sudoku/slope_hi": s_hi,
                    "sudoku/pearson_rounds_blanks_baseline": corr_blank, "sudoku/pearson_lower95_blanks": corr_blank_lo,
                    "sudoku/pearson_rounds_info_ete": _pearson(res[ETE].rounds.numpy().astype(float), info),
                    "sudoku/max_abs_sum_info_minus_log_completions": chain64,
                    "sudoku/max_abs_sum_info_minus_log_completions_float32": chain32,
                    "sudoku/max_abs_replay_minus_float32_surprisal":
                        float(max((s64[d] - res[d].surprisal.double()).abs().max() for d in (BASE, ETE))),
                    "sudoku/calibrated_budget_baseline": budgets[BASE], "sudoku/calibrated_budget_ete": budgets[ETE],
                    "sudoku/calibrated_bound_violations": float(viol), "sudoku/calibrated_min_ratio": min_ratio,
                    "sudoku/bound_violations": float(tautology),
                    "sudoku/invariant_failures": _failures(rows),
                    "sudoku/adaptive_off_identical": _identical(res[ETE_OFF], res[BASE])})
    figures["sudoku_bits_to_rounds"] = _figure_bits(
        "Sudoku (exact oracle)", info, {d: res[d] for d in (BASE, ETE)}, "log #completions (nats)",
        bars=(list(GIVENS), {d: [row[f"rounds {d}"] for row in per_k] for d in (BASE, ETE)}))
    claims = [
        Claim(statement="[sudoku-oracle] Rounds of the confidence-only decoder grow linearly with a sample's information",
              measured=corr_lo, op=">=", reference=0.8, baseline="spec: pooled Pearson r >= 0.8",
              metric="lower 95% Fisher bound of Pearson r(rounds, log #completions), pooled over k in {2,4,6,8,10}",
              paper="spec pilot: r = 0.95 at k = 4", bar=True, control=corr_blank_lo,
              control_arm="the same bound with the number of blank cells (16 - k) in place of the information",
              falsifier="the 95% lower bound of the correlation of rounds with exact information below 0.8, or the "
                        "blank count (no information content) correlating as well",
              note=f"r = {corr:.3f} (with the blank count: r = {corr_blank:.3f}); OLS slope {slope:.2f} rounds per "
                   f"nat, 95% CI [{s_lo:.2f}, {s_hi:.2f}]"),
        Claim(statement="[sudoku-oracle] Bits-to-rounds: R >= I(x) / B with the per-round budget B fixed before decoding",
              measured=min_ratio, op=">=", reference=1.0,
              baseline="B = the largest per-round information each decoder committed on separate calibration puzzles",
              metric="min over test puzzles (confidence-only and ETE, I(x) > 0) of R / (log #completions / B)",
              bar=True, control_arm="none: a lower bound every decoder obeys when its per-round budget is calibrated "
                                    "(one token per round obeys it trivially); no decoder lacks what is tested, only "
                                    "the calibrated budget can fail to carry over to the test puzzles",
              falsifier="any test decode finishing in fewer rounds than its exact information over the calibrated "
                        "per-round budget (a ratio below 1)",
              note=f"{viol} test decodes with R < ceil(I/B). "
                   f"B = {budgets[BASE]:.3f} nats (confidence-only), {budgets[ETE]:.3f} (ETE); information recomputed in "
                   f"float64 (sum_r I_r = log #completions to {chain64:.1e} nats; float32 accounting: {chain32:.1e})"),
        _tautology_check("sudoku-oracle", tautology),
        _identity_check("sudoku-oracle", _identical(res[ETE_OFF], res[BASE])),
    ]
    return claims + _common_claims("sudoku-oracle", by, res, valid, "Pooled over k in {2,4,6,8,10} givens.")


def _grammar(sizes: Sizes, seed: int, metrics: dict, tables: dict, figures: dict) -> list[Claim]:
    g = PhraseGrammar()
    prompts, real = g.sample(sizes.n_grammar, seed=seed)
    nll_real = -g.log_prob(real)
    rows, res, valid = _run_all(PFSAOracleMLM(g), prompts, g.response_length, 8, lambda r: g.is_valid(r.tokens),
                                seed, 1.0)
    for r in rows:
        lp = g.log_prob(res[r["decoder"]].tokens)
        ok = np.isfinite(lp)
        r["nll_mean"] = float(-lp[ok].mean()) if ok.any() else float("nan")
        r["ks_vs_real_nll"] = float(ks_2samp(-lp[ok], nll_real).statistic) if ok.any() else float("nan")
    rows.append({"decoder": "real data", "valid": 1.0, "nll_mean": float(nll_real.mean()), "ks_vs_real_nll": 0.0})
    tables["t1-oracle"] = rows
    by = {r["decoder"]: r for r in rows}
    info = {d: bits_to_rounds_report(res[d])["total_info"].numpy() for d in (BASE, ETE)}
    nll = {d: -g.log_prob(res[d].tokens) for d in (BASE, ETE)}  # exact information of each sample
    fin = {d: np.isfinite(nll[d]) for d in (BASE, ETE)}
    r_of = {d: res[d].rounds.numpy().astype(float) for d in (BASE, ETE)}
    corr = {d: _pearson(r_of[d][fin[d]], nll[d][fin[d]]) for d in (BASE, ETE)}
    corr_lo = pearson_lower(r_of[BASE][fin[BASE]], nll[BASE][fin[BASE]])
    slope, s_lo, s_hi = slope_ci(nll[BASE][fin[BASE]], r_of[BASE][fin[BASE]])
    # control: the same bound with the samples' information shuffled across samples (any pairing)
    shuffled = np.random.default_rng(seed + 7).permutation(nll[BASE][fin[BASE]])
    corr_shuf_lo = pearson_lower(r_of[BASE][fin[BASE]], shuffled)
    violations = sum(r.get("bound_violations", 0) for r in rows)
    metrics.update({"t1/rounds_baseline": by[BASE]["rounds"], "t1/rounds_ete": by[ETE]["rounds"],
                    "t1/rounds_ete_nocross": by[ETE_NOCROSS]["rounds"],
                    "t1/valid_baseline": by[BASE]["valid"], "t1/valid_ete": by[ETE]["valid"],
                    "t1/ks_baseline": by[BASE]["ks_vs_real_nll"], "t1/ks_ete": by[ETE]["ks_vs_real_nll"],
                    "t1/info_per_round_baseline": by[BASE]["info_per_round"],
                    "t1/info_per_round_ete": by[ETE]["info_per_round"],
                    "t1/pearson_rounds_info_baseline": corr[BASE], "t1/pearson_lower95_baseline": corr_lo,
                    "t1/pearson_rounds_info_ete": corr[ETE], "t1/pearson_lower95_shuffled": corr_shuf_lo,
                    "t1/slope_rounds_per_nat_baseline": slope, "t1/slope_lo": s_lo, "t1/slope_hi": s_hi,
                    "t1/bound_violations": float(violations),
                    "t1/invariant_failures": _failures(rows),
                    "t1/adaptive_off_identical": _identical(res[ETE_OFF], res[BASE])})
    figures["t1_bits_to_rounds"] = _figure_bits("T1 grammar (exact oracle, T=1)", None, {d: res[d] for d in (BASE, ETE)},
                                                "sample information sum_r I_r (nats)",
                                                hist=(nll_real, {d: info[d] for d in (BASE, ETE)}))
    claims = [
        Claim(statement="[t1-oracle] Rounds of the confidence-only decoder grow linearly with a sample's information",
              measured=corr_lo, op=">=", reference=0.8, baseline="spec: pooled Pearson r >= 0.8",
              metric="lower 95% Fisher bound of Pearson r(rounds, exact -log p(x)) of the confidence-only decoder",
              bar=True, control=corr_shuf_lo,
              control_arm="the same bound with the samples' information shuffled across samples (the response length "
                          "is fixed, so no blank-count control exists here)",
              falsifier="the 95% lower bound of the correlation of rounds with exact information below 0.8, or the "
                        "shuffled pairing passing it too",
              note=f"r = {corr[BASE]:.2f}, slope {slope:.2f} rounds per nat [{s_lo:.2f}, {s_hi:.2f}]; ETE's r = "
                   f"{corr[ETE]:.2f}. Confidence-only decoding at T=1 is mode-seeking here: its samples carry little "
                   "information and its rounds are set by the 4 blocks and stalls, not by I(x)"),
        _tautology_check("t1-oracle", violations),
        _identity_check("t1-oracle", _identical(res[ETE_OFF], res[BASE])),
        Claim(statement="[t1-oracle] ETE's samples match the data's NLL distribution at least as well as confidence-only",
              measured=by[ETE]["ks_vs_real_nll"], op="<=", reference=by[BASE]["ks_vs_real_nll"],
              baseline="KS distance of the confidence-only samples' true NLL to real data's",
              metric="two-sample KS distance, ETE samples' true NLL vs real data",
              falsifier="ETE's KS distance to the real NLL distribution above the confidence-only decoder's"),
    ]
    return claims + _common_claims("t1-oracle", by, res, valid, "Blocks of 8, one BOS prompt, temperature 1.")


def _trained(sizes: Sizes, seed: int, metrics: dict, tables: dict) -> list[Claim]:
    task = TranslationTask()
    model = load_masked_diffusion_lm(DLM_T1C_STRONG)
    prompts, _ = task.sample(sizes.n_trained, seed=seed)
    G = task.response_length
    rows, res, valid = _run_all(model, prompts, G, 8, lambda r: task.is_valid(prompts, r.tokens), seed, 0.0)
    by = {r["decoder"]: r for r in rows}
    few = prompts[: sizes.n_timing]
    fns = {"base": lambda: decode(model, few, G, ConfidenceThresholdDecoder(8, TAU), seed=seed),
           "ete": lambda: decode(model, few, G, ExploreThenExploitDecoder(TAU), seed=seed),
           "ete_nocache": lambda: decode(model, few, G, ExploreThenExploitDecoder(TAU, use_cache=False), seed=seed)}
    # tokens/s(ETE) / tokens/s(base) = time(base) / time(ETE): the same tokens per call; interleaved CPU time, paired
    # over repeats, with the confidence-only decoder timed against itself as the same-work control
    timing = compare_times(fns["ete"], fns["base"], repeats=max(3, sizes.timing_iters), warmup=1, clock="cpu")
    cache_timing = compare_times(fns["ete"], fns["ete_nocache"], repeats=max(3, sizes.timing_iters), warmup=0,
                                 clock="cpu")
    speed, cache_speed = timing.speedup, cache_timing.speedup
    rows.append({"decoder": "timing: tokens/s ratio ETE / confidence-only (both KV cache)", "ratio": speed})
    rows.append({"decoder": "timing: tokens/s ratio ETE with / without KV cache", "ratio": cache_speed})
    tables["t1c-trained"] = rows
    metrics.update({"t1c_trained/rounds_baseline": by[BASE]["rounds"], "t1c_trained/rounds_ete": by[ETE]["rounds"],
                    "t1c_trained/valid_baseline": by[BASE]["valid"], "t1c_trained/valid_ete": by[ETE]["valid"],
                    "t1c_trained/tokens_per_s_ratio_ete_vs_base": speed,
                    "t1c_trained/tokens_per_s_ratio_cache": cache_speed,
                    "t1c_trained/bound_violations": float(sum(r.get("bound_violations", 0) for r in rows)),
                    "t1c_trained/invariant_failures": _failures(rows),
                    "t1c_trained/adaptive_off_identical": _identical(res[ETE_OFF], res[BASE])})
    claims = _common_claims("t1c-trained", by, res, valid, "Trained MDLM dlm-t1c-strong (A15's model), greedy, KV cache on.")
    claims.append(_identity_check("t1c-trained", _identical(res[ETE_OFF], res[BASE])))
    claims.append(timing.claim(
        "[t1c-trained] With the KV cache, ETE's fewer rounds give higher tokens/s than confidence-only", ">", 1.0,
        baseline="confidence-only decoder with the same prefix KV cache",
        metric=f"median tokens/s ratio (CPU time, {len(timing.method)} interleaved repeats; same-work ratio "
               f"{timing.control_ratio:.3f})", paper="abstract: improved tokens/s with KV caching",
        falsifier="ETE's tokens/s at or below the confidence-only decoder's (median ratio <= 1)",
        note="at L = 38 on CPU a forward pass costs little, so decoder overhead weighs more than on an 8B model"))
    return claims


# main function

def reproduce(budget: Budget, seed: int) -> Outcome:
    sizes = budget.pick(SIZES)
    seed_everything(seed)
    metrics: dict[str, float] = {}
    tables: dict[str, list[dict]] = {}
    figures: dict[str, object] = {}
    claims = _sudoku(sizes, seed, metrics, tables, figures)
    claims += _grammar(sizes, seed, metrics, tables, figures)
    if sizes.n_trained:
        claims += _trained(sizes, seed, metrics, tables)
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures)


def _figure_bits(title: str, info, results: dict, xlabel: str, bars=None, hist=None):
    """Left: rounds vs information per sample, with a least-squares line and the bits-to-rounds bound
    R = I / B (B = the decoder's largest per-round information in this run). Right: rounds per number of givens
    (Sudoku) or the information of the samples vs real data (grammar)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    ax, ax2 = fig.subplots(1, 2)
    rng = np.random.default_rng(0)
    for (name, res), color in zip(results.items(), ("tab:blue", "tab:red")):
        rep = bits_to_rounds_report(res)
        x = rep["total_info"].numpy() if info is None else info
        y = res.rounds.numpy().astype(float)
        ax.scatter(x, y + rng.uniform(-0.15, 0.15, len(y)), s=4, alpha=0.3, color=color)
        if np.ptp(x) > 0:
            a, b = np.polyfit(x, y, 1)
            xs = np.linspace(0, x.max(), 50)
            ax.plot(xs, a * xs + b, color=color, label=f"{name}: R ≈ {a:.2f}·I + {b:.2f}")
            B = float(rep["budget"].max())
            ax.plot(xs, xs / B, color=color, ls=":", label=f"bound I/B, B = {B:.2f} nats")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("rounds")
    ax.set_title(f"[B01] {title}: bits-to-rounds")
    ax.legend(fontsize=7)
    if bars is not None:
        ks, vals = bars
        w = 0.4
        for i, ((name, v), color) in enumerate(zip(vals.items(), ("tab:blue", "tab:red"))):
            ax2.bar(np.arange(len(ks)) + (i - 0.5) * w, v, w, label=name, color=color)
        ax2.set_xticks(np.arange(len(ks)), [str(k) for k in ks])
        ax2.set_xlabel("givens")
        ax2.set_ylabel("mean rounds")
    if hist is not None:
        real, vals = hist
        bins = np.linspace(0, max(real.max(), *(v.max() for v in vals.values())), 30)
        ax2.hist(real, bins, histtype="step", color="black", label="real data -log p(x)")
        for (name, v), color in zip(vals.items(), ("tab:blue", "tab:red")):
            ax2.hist(v, bins, histtype="step", color=color, label=name)
        ax2.set_xlabel("information of a sample (nats)")
        ax2.set_ylabel("count")
    ax2.legend(fontsize=7)
    return fig
