"""Reproduction of [B12] OCMB: precision and conditioning-set size on hub-dominated graphs, vs PC and GES.

All methods run side by side on the same data in one run:
- (a) a hub-dominated Barabasi-Albert DAG (m = 2, old -> new, so early nodes are hubs with many children),
  linear-Gaussian with equal noise variances and weights +-U[0.5, 2]: OCMB (EqVar order, Fisher-z, K = 10)
  vs causal-learn PC (Fisher-z, alpha = 0.01; default depth and depth 3); OCMB with the oracle and with a
  random order as ablations;
- (b) ecoli70, a linear-Gaussian network bundled in the pgmpy wheel (its own coefficients and unequal
  variances, so the EqVar order is only approximately right);
- (c) GES (causal-learn, BIC) on a smaller hub graph beside OCMB and PC (GES is too slow on 2 cores at
  d >= 50; skipped at the quick budget);
- (d) scaling: OCMB vs PC CI-test count and runtime at two graph sizes (d = 50 and d = 100 at standard).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from icml26.harness import Budget, Claim, Outcome, interleaved_times, median_ratio, seed_everything

from .ocmb import OCMB
from .simulate import graph_metrics, load_bundled_bn, scale_free_dag, simulate_sem


@dataclass(frozen=True)
class Sizes:
    d_hub: int  # nodes of the hub-dominated graph (a)
    n: int  # samples for every data set
    bench: str  # bundled pgmpy network for (b)
    ges_d: int  # nodes of the graph on which GES also runs (0 = skip GES)
    perf_d: tuple[int, ...]  # graph sizes of the scaling comparison (d)
    m: int = 2  # Barabasi-Albert attachment
    max_parents: int = 10  # K
    alpha: float = 0.01


SIZES = {
    Budget.QUICK: Sizes(d_hub=30, n=300, bench="ecoli70", ges_d=0, perf_d=(20, 30)),
    Budget.STANDARD: Sizes(d_hub=50, n=500, bench="ecoli70", ges_d=20, perf_d=(50, 100)),
    Budget.FULL: Sizes(d_hub=100, n=1000, bench="arth150", ges_d=50, perf_d=(50, 100, 200)),
}


# helper functions


def _cpdag_to_adj(graph: np.ndarray) -> np.ndarray:
    """causal-learn's G.graph (graph[i, j] = -1 and graph[j, i] = 1 for i -> j) as a 0/1 matrix;
    an undirected i - j (-1, -1) becomes 1 in both directions."""
    tail = graph == -1
    return ((tail & (graph.T == 1)) | (tail & tail.T)).astype(int)


def run_pc(X: np.ndarray, alpha: float, depth: int | None) -> dict:
    """causal-learn PC with Fisher-z; CI tests measured from its p-value cache ('x;y|S' keys)."""
    from causallearn.search.ConstraintBased.PC import pc

    t0 = time.perf_counter()
    cg = pc(X, alpha, "fisherz", show_progress=False, max_k=depth)
    runtime = time.perf_counter() - t0
    keys = list(cg.test.pvalue_cache)
    max_cond = max((len(k.split("|")[1].split(".")) if "|" in k else 0) for k in keys) if keys else 0
    return {"adj": _cpdag_to_adj(cg.G.graph), "n_ci_tests": len(keys), "max_cond_set": max_cond,
            "runtime_s": runtime}


def run_ges(X: np.ndarray) -> dict:
    from causallearn.search.ScoreBased.GES import ges

    t0 = time.perf_counter()
    rec = ges(X, "local_score_BIC")
    return {"adj": _cpdag_to_adj(rec["G"].graph), "n_ci_tests": float("nan"), "max_cond_set": float("nan"),
            "runtime_s": time.perf_counter() - t0}


def run_ocmb(X: np.ndarray, A: np.ndarray, orderer: str, sizes: Sizes, seed: int) -> dict:
    t0 = time.perf_counter()
    m = OCMB(orderer=orderer, max_parents=sizes.max_parents, alpha=sizes.alpha, random_state=seed)
    m.fit(X, true_adj=A if orderer == "oracle" else None)
    runtime = time.perf_counter() - t0
    true_pa = A != 0
    pa = np.zeros_like(true_pa)
    for j, c in enumerate(m.cand_parents_):
        pa[c, j] = True
    return {"adj": m.adjacency_, "n_ci_tests": m.n_ci_tests_, "max_cond_set": m.max_cond_set_,
            "runtime_s": runtime, "cand_bound": m.max_candidate_size_ - 1,
            "cand_pa_coverage": float((pa & true_pa).sum() / max(true_pa.sum(), 1))}


def compare_methods(X: np.ndarray, A: np.ndarray, sizes: Sizes, seed: int, dataset: str,
                    with_ges: bool = False) -> list[dict]:
    runs = {"OCMB (eqvar)": lambda: run_ocmb(X, A, "eqvar", sizes, seed),
            "OCMB (oracle order)": lambda: run_ocmb(X, A, "oracle", sizes, seed),
            "OCMB (random order)": lambda: run_ocmb(X, A, "random", sizes, seed),
            "PC (default depth)": lambda: run_pc(X, sizes.alpha, None),
            "PC (depth 3)": lambda: run_pc(X, sizes.alpha, 3)}
    if with_ges:
        runs["GES (BIC)"] = lambda: run_ges(X)
    rows = []
    for name, fn in runs.items():
        r = fn()
        met = graph_metrics(A, r.pop("adj"))
        rows.append({"dataset": dataset, "method": name, **{k: float(v) for k, v in met.items()},
                     **{k: float(v) for k, v in r.items()}})
    return rows


def _row(rows: list[dict], method: str) -> dict:
    return next(r for r in rows if r["method"] == method)


# main function


def reproduce(budget: Budget, seed: int) -> Outcome:
    sizes = budget.pick(SIZES)
    rng = seed_everything(seed)

    # (a) hub-dominated scale-free SEM
    A = scale_free_dag(sizes.d_hub, sizes.m, random_state=rng)
    X, _ = simulate_sem(A, sizes.n, random_state=rng)
    hub = compare_methods(X, A, sizes, seed, f"hub BA d={sizes.d_hub}")
    hub_degree = int(((A + A.T) != 0).sum(1).max())

    # (b) bundled benchmark network (pgmpy wheel, offline)
    net = load_bundled_bn(sizes.bench)
    Xb = net.sample(sizes.n, random_state=rng)
    bench = compare_methods(Xb, net.adjacency, sizes, seed, f"{sizes.bench} (pgmpy bundled)")

    # (c) GES on a smaller hub graph, beside OCMB and PC
    ges_rows: list[dict] = []
    if sizes.ges_d:
        Ag = scale_free_dag(sizes.ges_d, sizes.m, random_state=rng)
        Xg, _ = simulate_sem(Ag, sizes.n, random_state=rng)
        ges_rows = compare_methods(Xg, Ag, sizes, seed, f"hub BA d={sizes.ges_d}", with_ges=True)

    # (d) scaling: CI tests and runtime of OCMB vs PC, timed interleaved in this run
    perf = []
    for d in sizes.perf_d:
        Ad = scale_free_dag(d, sizes.m, random_state=rng)
        Xd, _ = simulate_sem(Ad, sizes.n, random_state=rng)
        out: dict[str, dict] = {}
        times = interleaved_times({
            "ocmb": lambda: out.__setitem__("ocmb", run_ocmb(Xd, Ad, "eqvar", sizes, seed)),
            "pc": lambda: out.__setitem__("pc", run_pc(Xd, sizes.alpha, None)),
        }, n_iter=1, warmup=0)
        perf.append({"d": d, "hub_degree": int(((Ad + Ad.T) != 0).sum(1).max()),
                     "ocmb_ci_tests": out["ocmb"]["n_ci_tests"], "pc_ci_tests": out["pc"]["n_ci_tests"],
                     "ocmb_max_cond_set": out["ocmb"]["max_cond_set"], "pc_max_cond_set": out["pc"]["max_cond_set"],
                     "ocmb_runtime_s": times["ocmb"][0], "pc_runtime_s": times["pc"][0],
                     "runtime_ratio_ocmb_over_pc": median_ratio(times, "ocmb", "pc"),
                     "ocmb_f1": graph_metrics(Ad, out["ocmb"]["adj"])["f1"],
                     "pc_f1": graph_metrics(Ad, out["pc"]["adj"])["f1"]})

    o, pc_, pc3 = (_row(hub, m) for m in ("OCMB (eqvar)", "PC (default depth)", "PC (depth 3)"))
    orc, rnd = _row(hub, "OCMB (oracle order)"), _row(hub, "OCMB (random order)")
    ob, pcb = _row(bench, "OCMB (eqvar)"), _row(bench, "PC (default depth)")
    big = perf[-1]

    claims = [
        Claim("On hub-dominated graphs OCMB's precision exceeds PC's", o["precision"], ">", pc_["precision"],
              baseline="causal-learn PC (fisherz, alpha 0.01, default depth), same data",
              metric=f"directed precision, BA d={sizes.d_hub}, n={sizes.n}",
              note="PC's undirected CPDAG edges are counted as correctly oriented when the true edge exists."),
        Claim("OCMB's precision exceeds PC's on a bundled benchmark network", ob["precision"], ">",
              pcb["precision"], baseline="causal-learn PC (default depth), same data",
              metric=f"directed precision, {sizes.bench}",
              note="Unequal noise variances: the EqVar order is only approximately right here."),
        Claim("OCMB's conditioning sets stay bounded by its candidate-set size", o["max_cond_set"], "<=",
              o["cand_bound"], baseline="max_T |CandNei[T]| - 1 (the paper's bound)",
              metric="largest conditioning set OCMB used (measured)",
              note="A guarantee of the construction; it bounds |S| by candidate size, not by a constant: "
                   "around a hub with many candidate children the blanket itself is large."),
        Claim("OCMB's largest conditioning set is smaller than PC's on hub graphs", o["max_cond_set"], "<",
              pc_["max_cond_set"], baseline="PC's largest conditioning set (measured from its test cache)",
              metric=f"largest |S|, BA d={sizes.d_hub} (max node degree {hub_degree})",
              note="PC's depth is capped by the degree of its *estimated* skeleton, which here stays small "
                   "because PC removes many hub edges early; OCMB conditions on a hub's whole blanket."),
        Claim("A random ordering collapses OCMB's performance", rnd["f1"], "<", o["f1"],
              baseline="OCMB with the EqVar order", metric="directed F1 of OCMB with a random order"),
        Claim("An oracle ordering is near-perfect", orc["f1"], "in", (0.9, 1.0),
              baseline="'near-perfect' read as F1 >= 0.9 (fixed before running)",
              metric="directed F1 of OCMB with the oracle order",
              note="Oracle CandPa = true parents padded to K with zero-score predecessors (tau = 0); "
                   "misses come from the CI tests, not the order."),
        Claim(f"OCMB needs fewer CI tests than PC (d={big['d']})", big["ocmb_ci_tests"], "<",
              big["pc_ci_tests"], baseline="PC (default depth), distinct tests", metric="distinct CI tests"),
        Claim(f"OCMB is faster than PC (d={big['d']})", big["runtime_ratio_ocmb_over_pc"], "<", 1.0,
              baseline="PC's runtime in the same run (ratio 1)", metric="runtime OCMB / PC",
              note="Both are Python; OCMB batches Fisher-z over candidates, causal-learn tests one by one."),
    ]
    metrics = {
        "ocmb_precision": o["precision"], "pc_precision": pc_["precision"], "pc3_precision": pc3["precision"],
        "ocmb_f1": o["f1"], "pc_f1": pc_["f1"], "pc3_f1": pc3["f1"], "ocmb_shd": o["shd"], "pc_shd": pc_["shd"],
        "oracle_f1": orc["f1"], "random_f1": rnd["f1"],
        "ocmb_max_cond_set": o["max_cond_set"], "pc_max_cond_set": pc_["max_cond_set"],
        "ocmb_cand_bound": o["cand_bound"], "hub_degree": float(hub_degree),
        "ocmb_cand_pa_coverage": o["cand_pa_coverage"],
        "bench_ocmb_precision": ob["precision"], "bench_pc_precision": pcb["precision"],
        "bench_ocmb_f1": ob["f1"], "bench_pc_f1": pcb["f1"], "bench_cand_pa_coverage": ob["cand_pa_coverage"],
        **{f"d{r['d']}_{k}": float(r[k]) for r in perf for k in
           ("ocmb_ci_tests", "pc_ci_tests", "runtime_ratio_ocmb_over_pc")},
    }
    if ges_rows:
        metrics["ges_f1"] = _row(ges_rows, "GES (BIC)")["f1"]
        metrics["ges_small_ocmb_f1"] = _row(ges_rows, "OCMB (eqvar)")["f1"]
    tables = {"hub_graph": hub, "benchmark": bench, "scaling": perf}
    if ges_rows:
        tables["with_ges"] = ges_rows
    notes = "" if sizes.ges_d else "GES skipped at this budget (too slow on 2 cores)."
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=_figures(hub, bench, perf),
                   notes=notes)


def _figures(hub: list[dict], bench: list[dict], perf: list[dict]) -> dict:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6))
    for ax, rows in zip(fig.subplots(1, 2), (hub, bench)):
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
