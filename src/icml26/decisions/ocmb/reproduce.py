"""Reproduction of [B12] OCMB: precision and conditioning-set size on hub-dominated graphs, vs PC, a hybrid
and score-based search (BOSS; GES at the full budget).

All methods run side by side on the same data in one run:
- (a) a hub-dominated Barabasi-Albert DAG (m = 2, old -> new, so early nodes are hubs with many children),
  linear-Gaussian with unit noise variances and weights +-U[0.5, 2]: OCMB (EqVar order, Fisher-z, K = 10)
  vs causal-learn PC (Fisher-z, alpha = 0.01; default depth and depth 3), vs the hybrid "same order and
  candidates + one CI test per candidate parent" (``baselines.ordered_regression``), and vs causal-learn's
  score-based BOSS (linear-Gaussian BIC) at the same d; causal-learn GES (same BIC) joins at the full budget
  only (at d = 50 one fit used more than 70 CPU seconds, unfinished, beyond the standard budget); OCMB with
  the oracle order, a random order and without spouse pruning as ablations. These data are varsortable (a
  child's marginal variance usually exceeds its parent's), which the EqVar order exploits, so (a) is
  repeated on the *standardised* data (varsortability 1/2), where PC and BOSS are unchanged
  (scale-invariant) and the order has to come from the data's structure;
- (b) ecoli70, a linear-Gaussian network bundled in the pgmpy wheel (its own coefficients and unequal
  variances, so the EqVar order is only approximately right);
- (c) checks with a d-separation oracle: OCMB with exact CI answers and a random topological order of the
  hub graph must return that graph exactly;
- (d) scaling: OCMB vs PC CI-test count and runtime at two graph sizes (d = 50 and d = 100 at standard).

The peers (causal-learn, pgmpy's bundled files) are the ``causal`` extra, imported only here, lazily.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import average_precision_score

from icml26.harness import Budget, Claim, Outcome, compare_times, interleaved_times, median_ratio, seed_everything

from ._extras import require
from .baselines import ordered_regression
from .ocmb import OCMB
from .simulate import graph_metrics, load_bundled_bn, scale_free_dag, simulate_sem, varsortability


@dataclass(frozen=True)
class Sizes:
    d_hub: int  # nodes of the hub-dominated graph (a)
    n: int  # samples for every data set
    bench: str  # bundled pgmpy network for (b)
    ges: bool  # also run GES on the hub graph (a) at the same d (BOSS always runs)
    perf_d: tuple[int, ...]  # graph sizes of the scaling comparison (d)
    n_dsep_orders: int = 2  # random topological orders tried with the d-separation oracle (c)
    m: int = 2  # Barabasi-Albert attachment
    max_parents: int = 10  # K
    alpha: float = 0.01
    knn_row: bool = True  # also run the official pipeline (Stein/CaPS order + kNN-CMI) on the hub graph


SIZES = {
    Budget.QUICK: Sizes(d_hub=30, n=300, bench="ecoli70", ges=False, perf_d=(20, 30), knn_row=False),
    Budget.STANDARD: Sizes(d_hub=50, n=500, bench="ecoli70", ges=False, perf_d=(50, 100)),
    Budget.FULL: Sizes(d_hub=100, n=1000, bench="arth150", ges=True, perf_d=(50, 100, 200), n_dsep_orders=5),
}


# helper functions


def _cpdag_to_adj(graph: np.ndarray) -> np.ndarray:
    """causal-learn's G.graph (graph[i, j] = -1 and graph[j, i] = 1 for i -> j) as a 0/1 matrix;
    an undirected i - j (-1, -1) becomes 1 in both directions."""
    tail = graph == -1
    return ((tail & (graph.T == 1)) | (tail & tail.T)).astype(int)


def run_pc(X: np.ndarray, alpha: float, depth: int | None) -> dict:
    """causal-learn PC with Fisher-z; CI tests measured from its p-value cache ('x;y|S' keys)."""
    pc = require("causallearn.search.ConstraintBased.PC", "the PC baseline (causal-learn)").pc

    t0 = time.perf_counter()
    cg = pc(X, alpha, "fisherz", show_progress=False, max_k=depth)
    runtime = time.perf_counter() - t0
    keys = list(cg.test.pvalue_cache)
    max_cond = max((len(k.split("|")[1].split(".")) if "|" in k else 0) for k in keys) if keys else 0
    return {"adj": _cpdag_to_adj(cg.G.graph), "n_ci_tests": len(keys), "max_cond_set": max_cond,
            "runtime_s": runtime}


def run_ges(X: np.ndarray) -> dict:
    """causal-learn GES with the linear-Gaussian BIC score (no CI tests)."""
    ges = require("causallearn.search.ScoreBased.GES", "the GES baseline (causal-learn)").ges

    t0 = time.perf_counter()
    rec = ges(X, "local_score_BIC")
    return {"adj": _cpdag_to_adj(rec["G"].graph), "n_ci_tests": float("nan"), "max_cond_set": float("nan"),
            "runtime_s": time.perf_counter() - t0}


def run_boss(X: np.ndarray, seed: int = 0) -> dict:
    """causal-learn BOSS (best-order score search, linear-Gaussian BIC), returned as a CPDAG like GES. BOSS
    shuffles with Python's global ``random``: it is seeded here with ``seed`` (and the global state restored), so its
    result does not depend on how much randomness other code drew before it (it moved 0.917 -> 0.920 in [B12]'s
    table when an earlier check started drawing from the global generator)."""
    import random

    boss = require("causallearn.search.PermutationBased.BOSS", "the BOSS baseline (causal-learn)").boss

    t0 = time.perf_counter()
    state = random.getstate()
    random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "using local_score_BIC_from_cov for efficiency"
            g = boss(X, score_func="local_score_BIC_from_cov", verbose=False)
    finally:
        random.setstate(state)
    return {"adj": _cpdag_to_adj(g.graph), "n_ci_tests": float("nan"), "max_cond_set": float("nan"),
            "runtime_s": time.perf_counter() - t0}


def fit_ocmb(X: np.ndarray, A: np.ndarray, orderer: str, sizes: Sizes, seed: int, **kw) -> tuple[OCMB, float]:
    t0 = time.perf_counter()
    m = OCMB(orderer=orderer, max_parents=sizes.max_parents, alpha=sizes.alpha, random_state=seed, **kw)
    m.fit(X, true_adj=A if orderer == "oracle" else None)
    return m, time.perf_counter() - t0


def _ocmb_row(m: OCMB, A: np.ndarray, runtime: float) -> dict:
    true_pa = A != 0
    pa = np.zeros_like(true_pa)
    for j, c in enumerate(m.cand_parents_):
        pa[c, j] = True
    iu = np.triu_indices(A.shape[0], k=1)
    skeleton = ((A + A.T) != 0)[iu]
    return {"adj": m.adjacency_, "n_ci_tests": m.n_ci_tests_, "max_cond_set": m.max_cond_set_,
            "runtime_s": runtime, "cand_bound": m.max_candidate_size_ - 1,
            "cand_pa_coverage": float((pa & true_pa).sum() / max(true_pa.sum(), 1)),
            # skeleton AUPR of the CI-score matrix (largest test strength per pair), as the official code ranks
            "aupr_skeleton_ci_scores": float(average_precision_score(skeleton, m.ci_scores_[iu]))}


def run_ocmb(X: np.ndarray, A: np.ndarray, orderer: str, sizes: Sizes, seed: int, **kw) -> dict:
    m, runtime = fit_ocmb(X, A, orderer, sizes, seed, **kw)
    return _ocmb_row(m, A, runtime)


def run_ocmb_and_hybrid(X: np.ndarray, A: np.ndarray, sizes: Sizes, seed: int) -> tuple[dict, dict]:
    """OCMB (EqVar) and the hybrid on OCMB's own order and candidate parents (same stage 1)."""
    m, rt = fit_ocmb(X, A, "eqvar", sizes, seed)
    t0 = time.perf_counter()
    hyb = ordered_regression(X, m.cand_parents_, sizes.alpha)
    hyb["runtime_s"] = m.timings_["ordering"] + m.timings_["candidates"] + time.perf_counter() - t0
    return _ocmb_row(m, A, rt), hyb


OFFICIAL_PIPELINE = "OCMB (Stein/CaPS order + kNN-CMI, the official pipeline)"


def compare_methods(X: np.ndarray, A: np.ndarray, sizes: Sizes, seed: int, dataset: str,
                    ablations: bool = True, pc_depth3: bool = True, with_boss: bool = False,
                    with_ges: bool = False, with_knn: bool = False) -> list[dict]:
    """Every method on the same (X, A); one row of metrics per method."""
    ocmb, hyb = run_ocmb_and_hybrid(X, A, sizes, seed)
    results = {"OCMB (eqvar)": ocmb, "hybrid (eqvar order + 1 test per candidate parent)": hyb}
    if with_knn:  # the official defaults: ordering backbone + kNN-CMI with the CMI threshold alpha_mb = 0.01
        results[OFFICIAL_PIPELINE] = run_ocmb(X, A, "caps", sizes, seed, ci_test="knn_cmi")
    if ablations:
        results["OCMB (oracle order)"] = run_ocmb(X, A, "oracle", sizes, seed)
        results["OCMB (random order)"] = run_ocmb(X, A, "random", sizes, seed)
        results["OCMB (eqvar, no spouse pruning)"] = run_ocmb(X, A, "eqvar", sizes, seed, prune_spouses=False)
    results["PC (default depth)"] = run_pc(X, sizes.alpha, None)
    if pc_depth3:
        results["PC (depth 3)"] = run_pc(X, sizes.alpha, 3)
    if with_boss:
        results["BOSS (BIC)"] = run_boss(X, seed)
    if with_ges:
        results["GES (BIC)"] = run_ges(X)
    rows = []
    for name, r in results.items():
        r = dict(r)
        met = graph_metrics(A, r.pop("adj"))
        rows.append({"dataset": dataset, "method": name, **{k: float(v) for k, v in met.items()},
                     **{k: float(v) for k, v in r.items()}})
    return rows


def random_topological_order(A: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly chosen next source at every step: a random topological order of the DAG ``A``."""
    indeg = (A != 0).sum(0)
    ready = list(np.flatnonzero(indeg == 0))
    order = []
    while ready:
        k = ready.pop(int(rng.integers(len(ready))))
        order.append(k)
        for c in np.flatnonzero(A[k]):
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    return np.array(order, dtype=int)


def dsep_recovery(A: np.ndarray, sizes: Sizes, rng: np.random.Generator) -> dict:
    """OCMB with the d-separation oracle on random topological orders of ``A`` (parent scores = A, padded to
    K with zero-score predecessors): worst SHD over the orders, with and without spouse pruning."""
    d = A.shape[0]
    X = rng.standard_normal((d + 2, d))  # never read by the oracle; only shapes the estimator's input checks
    worst = {True: 0.0, False: 0.0}
    for _ in range(sizes.n_dsep_orders):
        order = random_topological_order(A, rng)
        tie_seed = int(rng.integers(2**31))  # OCMB breaks score ties at random: seeded, so reruns agree
        for prune in (True, False):
            m = OCMB(orderer=lambda Z, o=order: (o, A.astype(float)), ci_test="dsep", random_state=tie_seed,
                     max_parents=sizes.max_parents, prune_spouses=prune).fit(X, true_adj=A)
            worst[prune] = max(worst[prune], graph_metrics(A, m.adjacency_)["shd"])
    return {"dsep_shd_pruned": worst[True], "dsep_shd_unpruned": worst[False],
            "max_in_degree": float((A != 0).sum(0).max())}


def _row(rows: list[dict], method: str) -> dict:
    return next(r for r in rows if r["method"] == method)


# main function


def reproduce(budget: Budget, seed: int) -> Outcome:
    sizes = budget.pick(SIZES)
    rng = seed_everything(seed)

    # (a) hub-dominated scale-free SEM, raw and standardised
    A = scale_free_dag(sizes.d_hub, sizes.m, random_state=rng)
    X, _ = simulate_sem(A, sizes.n, random_state=rng)
    Xs = (X - X.mean(0)) / X.std(0)
    hub = compare_methods(X, A, sizes, seed, f"hub BA d={sizes.d_hub}", with_boss=True, with_ges=sizes.ges,
                          with_knn=sizes.knn_row)
    hub_std = compare_methods(Xs, A, sizes, seed, f"hub BA d={sizes.d_hub}, standardised", ablations=False,
                              pc_depth3=False)
    hub_degree = int(((A + A.T) != 0).sum(1).max())

    # (b) bundled benchmark network (pgmpy wheel, offline)
    net = load_bundled_bn(sizes.bench)
    Xb = net.sample(sizes.n, random_state=rng)
    bench = compare_methods(Xb, net.adjacency, sizes, seed, f"{sizes.bench} (pgmpy bundled)", pc_depth3=False)

    # (c) exact CI answers: OCMB must return the hub graph itself
    dsep = dsep_recovery(A, sizes, rng)

    # (d) scaling: CI tests and runtime of OCMB vs PC, timed interleaved in this run
    perf, speed_timing = [], None
    for d in sizes.perf_d:
        Ad = scale_free_dag(d, sizes.m, random_state=rng)
        Xd, _ = simulate_sem(Ad, sizes.n, random_state=rng)
        out: dict[str, dict] = {}
        # interleaved CPU time; at the largest d, repeated with PC timed against itself (same-work control)
        timing = compare_times(lambda: out.__setitem__("ocmb", run_ocmb(Xd, Ad, "eqvar", sizes, seed)),
                               lambda: out.__setitem__("pc", run_pc(Xd, sizes.alpha, None)),
                               repeats=3, warmup=0, clock="cpu") if d == max(sizes.perf_d) else None
        if timing is None:
            times = interleaved_times({
                "ocmb": lambda: out.__setitem__("ocmb", run_ocmb(Xd, Ad, "eqvar", sizes, seed)),
                "pc": lambda: out.__setitem__("pc", run_pc(Xd, sizes.alpha, None)),
            }, n_iter=1, warmup=0, clock="cpu")
        else:
            times = {"ocmb": timing.method, "pc": timing.baseline}
            speed_timing = timing
        perf.append({"d": d, "hub_degree": int(((Ad + Ad.T) != 0).sum(1).max()),
                     "ocmb_ci_tests": out["ocmb"]["n_ci_tests"], "pc_ci_tests": out["pc"]["n_ci_tests"],
                     "ocmb_max_cond_set": out["ocmb"]["max_cond_set"], "pc_max_cond_set": out["pc"]["max_cond_set"],
                     "ocmb_runtime_s": times["ocmb"][0], "pc_runtime_s": times["pc"][0],
                     "runtime_ratio_ocmb_over_pc": median_ratio(times, "ocmb", "pc"),
                     "ocmb_f1": graph_metrics(Ad, out["ocmb"]["adj"])["f1"],
                     "pc_f1": graph_metrics(Ad, out["pc"]["adj"])["f1"]})

    hyb_name = "hybrid (eqvar order + 1 test per candidate parent)"
    # every baseline run on the hub graph (the strongest decides the precision claim)
    hub_rivals = {m: _row(hub, m) for m in ("PC (default depth)", "PC (depth 3)", "BOSS (BIC)", "GES (BIC)", hyb_name)
                  if any(r["method"] == m for r in hub)}
    o, pc_, pc3, hy = (_row(hub, m) for m in ("OCMB (eqvar)", "PC (default depth)", "PC (depth 3)", hyb_name))
    orc, rnd = _row(hub, "OCMB (oracle order)"), _row(hub, "OCMB (random order)")
    nop = _row(hub, "OCMB (eqvar, no spouse pruning)")
    os_, pcs, hys = (_row(hub_std, m) for m in ("OCMB (eqvar)", "PC (default depth)", hyb_name))
    ob, pcb, hyb = (_row(bench, m) for m in ("OCMB (eqvar)", "PC (default depth)", hyb_name))
    big = perf[-1]
    vs_raw, vs_std = varsortability(X, A), varsortability(Xs, A)
    where = f"BA d={sizes.d_hub}, n={sizes.n}"
    cpdag_note = "PC's undirected CPDAG edges count as correctly oriented when the true edge exists."

    claims = [
        Claim("Hub graph: OCMB's precision exceeds the strongest constraint-based, score-based or hybrid "
              "baseline's", o["precision"], ">", baselines={k: v["precision"] for k, v in hub_rivals.items()},
              metric=f"directed precision, {where}",
              falsifier="OCMB's directed precision at or below the strongest baseline's (PC at default depth or depth "
                        "3, BOSS, GES, the order + one-test hybrid) on the same hub-graph data",
              note=f"{cpdag_note} Raw data, varsortability {vs_raw:.2f}: the EqVar order can sort by variance. "
                   "causal-learn PC (fisherz, alpha 0.01), BOSS/GES (linear-Gaussian BIC, scale-invariant); the "
                   "hybrid shares OCMB's stage 1 (order, candidates) and isolates its Markov-blanket stage. "
                   + ", ".join(f"{k} {v['precision']:.3f}" for k, v in hub_rivals.items())),
        Claim("Hub graph, standardised: OCMB's precision exceeds the strongest baseline's", os_["precision"], ">",
              baselines={"PC (default depth)": pcs["precision"], hyb_name: hys["precision"]},
              metric=f"directed precision, {where}, each column scaled to unit variance",
              falsifier="on standardised data (varsortability 1/2) OCMB's precision at or below PC's or the hybrid's",
              note="Standardising removes the variance signal the EqVar order exploits; PC is scale-invariant "
                   f"(PC {pcs['precision']:.3f}, hybrid {hys['precision']:.3f}); BOSS and GES are not rerun "
                   "(scale-invariant scores)."),
        Claim("ecoli70: OCMB's precision exceeds the strongest baseline's", ob["precision"], ">",
              baselines={"PC (default depth)": pcb["precision"], hyb_name: hyb["precision"]},
              metric=f"directed precision, {sizes.bench}",
              falsifier=f"OCMB's precision at or below PC's or the hybrid's on data sampled from {sizes.bench}",
              note=f"Unequal noise variances: the EqVar order is only approximately right here (PC "
                   f"{pcb['precision']:.3f}, hybrid {hyb['precision']:.3f})."),
        Claim("OCMB's largest conditioning set is smaller than PC's on hub graphs", o["max_cond_set"], "<",
              pc_["max_cond_set"], baseline="PC's largest conditioning set (measured from its test cache)",
              metric=f"largest |S|, {where} (max node degree {hub_degree})",
              falsifier="OCMB's largest conditioning set at least as large as PC's on the same hub graph",
              note="PC's depth is capped by the degree of its *estimated* skeleton, which stays small because "
                   "PC removes hub edges early; OCMB conditions on a hub's whole blanket."),
        Claim("A random ordering collapses OCMB's performance", rnd["f1"], "<", o["f1"],
              baseline="OCMB with the EqVar order, same data", metric="directed F1 of OCMB with a random order",
              falsifier="OCMB's F1 with a random order at or above its F1 with the EqVar order"),
        Claim("An oracle ordering is near-perfect", orc["f1"], "in", (0.9, 1.0),
              baseline="'near-perfect' read as F1 >= 0.9 (fixed before running)",
              control=rnd["f1"], control_arm="OCMB with a random order (the ordering's information removed), same data",
              metric="directed F1 of OCMB with the oracle order (Fisher-z, finite n)",
              falsifier="OCMB with the true order below directed F1 0.9, or a random order reaching 0.9 too",
              note="Misses come from the finite-sample CI tests; with exact tests see the d-separation check."),
        Claim(f"OCMB needs fewer CI tests than PC (d={big['d']})", big["ocmb_ci_tests"], "<",
              big["pc_ci_tests"], baseline="PC (default depth), distinct tests, same data",
              metric="distinct CI tests", falsifier="OCMB running at least as many distinct CI tests as PC"),
        speed_timing.claim(f"OCMB is faster than PC (d={big['d']})", "<", 1.0, as_="ratio",
              baseline="PC's runtime in the same run (ratio 1)",
              metric=f"CPU time OCMB / PC, median of {len(speed_timing.method)} interleaved repeats (same-work ratio "
                     f"{speed_timing.control_ratio:.3f})",
              falsifier="OCMB's CPU time at or above PC's on the same data",
              note="Both are Python; OCMB batches Fisher-z over candidates, causal-learn tests one by one."),
    ]
    claims += [
        Claim("OCMB's conditioning sets stay bounded by its candidate-set size", o["max_cond_set"], "<=",
              o["cand_bound"], kind="check", baseline="max_T |CandNei[T]| - 1 (the construction's bound)",
              metric="largest conditioning set OCMB used (measured)",
              note="True by construction: every test conditions on a subset of CandNei[T]. The bound is the "
                   "candidate size, not a constant: around a hub the blanket itself is large."),
        Claim("With a d-separation oracle and a random topological order OCMB recovers the DAG exactly",
              dsep["dsep_shd_pruned"], "<=", 0.0, kind="check",
              baseline="SHD 0 (exact recovery), as the high-recall guarantee implies",
              metric=f"worst SHD over {sizes.n_dsep_orders} random topological orders of the hub graph",
              note=f"Without spouse pruning the worst SHD was {dsep['dsep_shd_unpruned']:.0f}: spouses padded "
                   "into CandPa get oriented as parents."),
    ]
    metrics = {
        "varsortability_raw": vs_raw, "varsortability_standardised": vs_std,
        "ocmb_precision": o["precision"], "pc_precision": pc_["precision"], "pc3_precision": pc3["precision"],
        "hybrid_precision": hy["precision"], "ocmb_f1": o["f1"], "pc_f1": pc_["f1"], "pc3_f1": pc3["f1"],
        "hybrid_f1": hy["f1"], "ocmb_shd": o["shd"], "pc_shd": pc_["shd"], "hybrid_shd": hy["shd"],
        "ocmb_no_pruning_precision": nop["precision"], "ocmb_no_pruning_f1": nop["f1"],
        "std_ocmb_precision": os_["precision"], "std_pc_precision": pcs["precision"],
        "std_hybrid_precision": hys["precision"], "std_ocmb_f1": os_["f1"], "std_pc_f1": pcs["f1"],
        "std_hybrid_f1": hys["f1"], "std_ocmb_cand_pa_coverage": os_["cand_pa_coverage"],
        "oracle_f1": orc["f1"], "oracle_precision": orc["precision"], "random_f1": rnd["f1"],
        "ocmb_max_cond_set": o["max_cond_set"], "pc_max_cond_set": pc_["max_cond_set"],
        "hybrid_max_cond_set": hy["max_cond_set"],
        "ocmb_cand_bound": o["cand_bound"], "hub_degree": float(hub_degree),
        "ocmb_cand_pa_coverage": o["cand_pa_coverage"],
        "bench_ocmb_precision": ob["precision"], "bench_pc_precision": pcb["precision"],
        "bench_hybrid_precision": hyb["precision"], "bench_ocmb_f1": ob["f1"], "bench_pc_f1": pcb["f1"],
        "bench_cand_pa_coverage": ob["cand_pa_coverage"], "bench_oracle_precision":
            _row(bench, "OCMB (oracle order)")["precision"],
        **dsep,
        **{f"d{r['d']}_{k}": float(r[k]) for r in perf for k in
           ("ocmb_ci_tests", "pc_ci_tests", "runtime_ratio_ocmb_over_pc")},
    }
    boss = hub_rivals["BOSS (BIC)"]
    metrics["boss_precision"], metrics["boss_f1"] = boss["precision"], boss["f1"]
    if sizes.ges:
        ges = hub_rivals["GES (BIC)"]
        metrics["ges_precision"], metrics["ges_f1"] = ges["precision"], ges["f1"]
        metrics["ges_runtime_s"] = ges["runtime_s"]
    tables = {"hub_graph": hub, "hub_graph_standardised": hub_std, "benchmark": bench, "scaling": perf}
    notes = "" if sizes.ges else ("GES runs at the full budget only (a d = 50 fit ran over 70 CPU s "
                                  "unfinished); BOSS, with the same BIC score, stands in at the same d.")
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=_figures(hub, hub_std, bench, perf),
                   notes=notes)


def _figures(hub: list[dict], hub_std: list[dict], bench: list[dict], perf: list[dict]) -> dict:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.2))
    for ax, rows in zip(fig.subplots(1, 3), (hub, hub_std, bench)):
        names = [r["method"] for r in rows]
        x = np.arange(len(rows))
        for k, key in enumerate(("precision", "recall", "f1")):
            ax.bar(x + (k - 1) * 0.27, [r[key] for r in rows], 0.27, label=key)
        ax.set_xticks(x, names, rotation=25, ha="right", fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_title(rows[0]["dataset"], fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()

    fig2 = Figure(figsize=(11, 3.4))
    a1, a2, a3 = fig2.subplots(1, 3)
    ds = [r["d"] for r in perf]
    for who in ("ocmb", "pc"):
        a1.plot(ds, [r[f"{who}_ci_tests"] for r in perf], "o-", label=who.upper())
        a2.plot(ds, [r[f"{who}_runtime_s"] for r in perf], "o-", label=who.upper())
        a3.plot(ds, [r[f"{who}_max_cond_set"] for r in perf], "o-", label=who.upper())
    a1.set_yscale("log"), a2.set_yscale("log")
    for ax, t in zip((a1, a2, a3), ("distinct CI tests", "runtime (s)", "largest conditioning set")):
        ax.set_xlabel("d"), ax.set_title(t, fontsize=9), ax.legend(fontsize=7)
    fig2.tight_layout()
    return {"accuracy": fig, "scaling": fig2}
