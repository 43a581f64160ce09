"""Reproduction of [A16]: successive halving with learning-curve surrogates vs uniform allocation, random search,
SH-only, ASHA and optuna's pruners, on pools of real and synthetic learning curves.

Pools (``testbeds.learning_curves``): synthetic Chinchilla-form curves with known parameters (8 sizes x 4 learning
rates, new noise per instance); MLPs on digits (5 widths x 2 depths x 4 lrs; instances = random subsets of 32);
tiny Llama LMs on the stdlib code corpus (4 widths x 2 depths x 3 lrs; instances = random subsets of 16).

For each instance and budget fraction f of the exhaustive sweep's compute, every strategy runs on its own
replay of the same pool with the same budget B = f x exhaustive; the outcome is the lowest loss it observed
(the best point of its loss-compute frontier), as the gap to the exhaustive sweep's best,
gap = 100 (L / L_exhaustive - 1) %. At the headline f = 0.2 the peers (our ASHA, Ray Tune's ASHAScheduler driven
without starting Ray, optuna's SuccessiveHalvingPruner and HyperbandPruner; each when installed) run too, and each
strategy's observed frontier F(C) is fitted with L*(C) = E + A C^-alpha on C <= C_top / 4 and extrapolated to the
exhaustive frontier on (C_top / 4, C_top].

SH uses the spec's absolute rungs (the same compute c_r for every survivor) with a plan that always fits B; SH with
fraction rungs (each configuration's own training) is reported next to it at the headline budget.

Claims (per pool group and surrogate): SH + surrogate finds a lower loss than the strongest of uniform allocation
(leftovers redistributed), SH-only and random search (configurations trained to completion), paired per instance;
control: SH with a random ranking (the criterion switched off). Ceiling: SH ranked by the true final loss (oracle);
when it does not pass the same test, no ranking can, and the claim is reported as untestable (NaN, inconclusive).
The scaling law from SH + GP extrapolates no worse than the strongest baseline's. Checks: spend <= B, uniform and
every SH variant spend B, survivor counts ceil(n / eta), compute saved >= 80% at the headline budget (B = 20%), SH
exact on noise-free non-crossing curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from icml26.harness import Budget, Claim, Outcome, seed_everything
from icml26.testbeds.learning_curves import (
    CurveTable,
    DigitsCurvePoolConfig,
    LMCurvePoolConfig,
    SyntheticCurveConfig,
    digits_curve_pool,
    lm_curve_pool,
    synthetic_curve_pool,
)

from .allocation import ASHA, RandomSearch, SuccessiveHalving, UniformAllocation
from .peers import optuna_allocation, ray_asha_allocation, ray_tune_available
from .pool import TablePool
from .surrogates import fit_scaling_law, loss_compute_frontier


@dataclass(frozen=True)
class Sizes:
    pools: tuple            # which pools: "synthetic", "digits", "lm"
    instances: int          # instances per pool
    fractions: tuple        # budget fractions of the exhaustive sweep (anytime curve)
    lm: LMCurvePoolConfig
    digits: DigitsCurvePoolConfig


_LM_FULL = LMCurvePoolConfig(widths=(16, 24, 32, 48, 64, 96, 128), depths=(1, 2, 3), lrs=(1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2),
                             steps=384)
SIZES = {
    Budget.QUICK: Sizes(("synthetic",), 5, (0.2,), LMCurvePoolConfig(), DigitsCurvePoolConfig()),
    Budget.STANDARD: Sizes(("synthetic", "digits", "lm"), 8, (0.1, 0.2, 0.4), LMCurvePoolConfig(),
                           DigitsCurvePoolConfig()),
    Budget.FULL: Sizes(("synthetic", "digits", "lm"), 20, (0.05, 0.1, 0.2, 0.4), _LM_FULL,
                       DigitsCurvePoolConfig(widths=(8, 16, 32, 64, 128, 256), depths=(1, 2, 3))),
}
HEADLINE = 0.2          # budget fraction of the claims (spec: B around 15-25% of exhaustive)
SUBSET = {"digits": 32, "lm": 16}
EQUAL_TOL = 0.005       # "equal best loss": within 0.5% of the exhaustive sweep's best
MAIN = ("uniform", "random search", "SH", "SH+power-law", "SH+GP", "SH+random-rank", "SH+oracle")
BASELINES = ("uniform", "random search", "SH")     # the paper's two baselines and random search
CONTROL = "SH+random-rank"                         # SH with the ranking switched off
ORACLE = "SH+oracle"                               # SH ranked by the true final loss: the ceiling of any ranking
#: the old rungs (fractions of each configuration's own training), reported at the headline budget only
FRACTION_ARMS = ("SH (fraction rungs)", "SH+power-law (fraction rungs)", "SH+GP (fraction rungs)",
                 "SH+oracle (fraction rungs)")
OLD_UNIFORM = "uniform-no-redistribution"          # the earlier, wasteful uniform (B / K each), reported only
PEERS = ("ASHA", "ray-tune-ASHA", "optuna-sh", "optuna-hyperband")
OPTUNA_PEERS = ("optuna-sh", "optuna-hyperband")  # run when optuna is installed (`pip install optuna`)
RAY_PEERS = ("ray-tune-ASHA",)  # Ray Tune's ASHAScheduler, run when ray.tune imports (Ray + pyarrow)


def _optuna_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("optuna") is not None


# helper functions

class _OracleSH(SuccessiveHalving):
    """SH ranked by each survivor's true lowest loss over its whole recorded curve (read from the table): no
    surrogate can rank better, so when this arm does not beat the strongest baseline no ranking can (the ceiling
    of the claims; an evaluation device, not a method)."""

    def scores(self, pool: TablePool, survivors: list[int]) -> np.ndarray:
        return np.array([pool.table.loss[k].min() for k in survivors])

    @property
    def name(self) -> str:
        return ORACLE


def _strategies(seed: int) -> dict:
    return {"uniform": UniformAllocation(), "random search": RandomSearch(seed=seed),
            "SH": SuccessiveHalving(criterion="current"),
            "SH+power-law": SuccessiveHalving(criterion="power_law"),
            "SH+GP": SuccessiveHalving(criterion="gp", seed=seed),
            "SH+random-rank": SuccessiveHalving(criterion="random", seed=seed),
            ORACLE: _OracleSH()}


def _fraction_arms(seed: int) -> dict:
    return dict(zip(FRACTION_ARMS, (SuccessiveHalving(criterion="current", rungs="fraction"),
                                    SuccessiveHalving(criterion="power_law", rungs="fraction"),
                                    SuccessiveHalving(criterion="gp", seed=seed, rungs="fraction"),
                                    _OracleSH(rungs="fraction"))))


def _instances(sz: Sizes, seed: int, rng: np.random.Generator) -> list[tuple[str, CurveTable]]:
    out = []
    for name in sz.pools:
        if name == "synthetic":
            out += [(name, synthetic_curve_pool(SyntheticCurveConfig(), seed=seed * 1000 + i)) for i in range(sz.instances)]
            continue
        full = lm_curve_pool(sz.lm) if name == "lm" else digits_curve_pool(sz.digits)
        K = min(SUBSET[name], full.n_curves)
        out += [(name, full.subset(np.sort(rng.choice(full.n_curves, K, replace=False)))) for _ in range(sz.instances)]
    return out


def extrapolation_error(curves: list[tuple[np.ndarray, np.ndarray]], table: CurveTable) -> float:
    """Fit L*(C) to the frontier of ``curves`` on C <= C_top/4; mean |pred / truth - 1| against the exhaustive
    frontier on (C_top/4, C_top] (6 log-spaced points); NaN when fewer than 3 frontier points exist."""
    c_top = table.compute[:, -1].max()
    split = c_top / 4
    lo = 2 * table.compute[:, 0].min()
    fit_grid = np.geomspace(lo, split, 12)
    F = loss_compute_frontier(curves, fit_grid)
    ok = np.isfinite(F)
    if ok.sum() < 3:
        return float("nan")
    law = fit_scaling_law(fit_grid[ok], F[ok])
    test = np.geomspace(split * 1.5, c_top, 6)
    truth = loss_compute_frontier([(table.compute[k], table.loss[k]) for k in range(table.n_curves)], test)
    return float(np.mean(np.abs(law.predict(test) / truth - 1)))


def _non_crossing_check(seed: int) -> float:
    """Noise-free curves of one learning rate (bigger N lower at every step): 1 when SH-only picks the true best."""
    cfg = SyntheticCurveConfig(lrs=(3e-3,), warmup_bump=0.0)
    tab = synthetic_curve_pool(cfg, seed=seed, noise=0.0)
    pool = TablePool(tab)
    res = SuccessiveHalving(criterion="current", n_rungs=4).run(pool, pool.exhaustive_compute)  # cap not binding
    return float(res.best_config == int(np.argmin(tab.loss[:, -1])) and res.best_loss == tab.loss[:, -1].min())


def _rel_improvement(ref: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per-instance relative improvement (ref - new) / ref in percent (positive: ``new`` found a lower loss)."""
    return 100.0 * (ref - new) / ref


# figure

def _figure(anytime: dict, pools: tuple, fractions: tuple) -> Figure:
    fig = Figure(figsize=(4.2 * len(pools), 3.6))
    for i, p in enumerate(pools):
        ax = fig.add_subplot(1, len(pools), i + 1)
        for m in MAIN:
            ys = [np.mean(anytime[p, m, f]) for f in fractions]
            ax.plot(fractions, ys, "o-", label=m)
        ax.set_xscale("log")
        ax.set_xlabel("budget / exhaustive compute")
        ax.set_ylabel("mean relative gap to exhaustive best (%)")
        ax.set_title(p)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = budget.pick(SIZES)
    rng = seed_everything(seed)
    inst = _instances(sz, seed, rng)
    best: dict = {}          # (method, fraction) -> per-instance best loss
    used: dict = {}          # (method, fraction) -> per-instance compute used / budget
    anytime: dict = {}       # (pool, method, fraction) -> per-instance gap to exhaustive (%)
    skip = (() if _optuna_installed() else OPTUNA_PEERS) + (() if ray_tune_available() else RAY_PEERS)
    peers = tuple(m for m in PEERS if m not in skip) + (OLD_UNIFORM,) + FRACTION_ARMS
    extrap: dict = {m: [] for m in MAIN + peers + ("exhaustive",)}
    anytime_all: dict = {m: [] for m in MAIN + peers}   # headline budget, per instance in order
    rung_ok, saved, reach = [], [], {m: [] for m in MAIN}
    for i, (pname, tab) in enumerate(inst):
        exh_best = float(tab.loss.min())
        total = float(tab.compute[:, -1].sum())
        extrap["exhaustive"].append(extrapolation_error([(tab.compute[k], tab.loss[k]) for k in range(tab.n_curves)], tab))
        first_hit = {m: math.nan for m in MAIN}
        for f in sz.fractions:
            B = f * total
            runs = dict(_strategies(seed * 100 + i))
            if f == HEADLINE:
                runs.update({"ASHA": ASHA(seed=seed * 100 + i),
                             OLD_UNIFORM: UniformAllocation(redistribute=False)})
                runs.update(_fraction_arms(seed * 100 + i))
            for m, strat in runs.items():
                res = strat.run(TablePool(tab), B)
                best.setdefault((m, f), []).append(res.best_loss)
                used.setdefault((m, f), []).append(res.compute_used / B)
                anytime.setdefault((pname, m, f), []).append(100 * (res.best_loss / exh_best - 1))
                if f == HEADLINE:
                    anytime_all[m].append(100 * (res.best_loss / exh_best - 1))
                if m in MAIN and math.isnan(first_hit[m]) and res.best_loss <= exh_best * (1 + EQUAL_TOL):
                    first_hit[m] = res.compute_used / total
                if isinstance(strat, SuccessiveHalving) and len(res.rung_sizes) > 1:
                    rung_ok.append(all(b == math.ceil(a / strat.eta) for a, b in zip(res.rung_sizes, res.rung_sizes[1:])))
                if f == HEADLINE:
                    extrap[m].append(extrapolation_error(res.curves, tab))
                    if m in MAIN:
                        saved.append(1 - res.compute_used / total)
            n_r = SuccessiveHalving(rungs="fraction").plan(TablePool(tab), B)   # the peers' resource is steps
            if f == HEADLINE and "ray-tune-ASHA" in peers:
                res = ray_asha_allocation(TablePool(tab), B, n_rungs=n_r, seed=seed * 100 + i)
                best.setdefault(("ray-tune-ASHA", f), []).append(res.best_loss)
                anytime_all["ray-tune-ASHA"].append(100 * (res.best_loss / exh_best - 1))
                anytime.setdefault((pname, "ray-tune-ASHA", f), []).append(100 * (res.best_loss / exh_best - 1))
                used.setdefault(("ray-tune-ASHA", f), []).append(res.compute_used / B)
                extrap["ray-tune-ASHA"].append(extrapolation_error(res.curves, tab))
            if f == HEADLINE and "optuna-sh" in peers:
                for pr in ("sh", "hyperband"):
                    res = optuna_allocation(TablePool(tab), B, pruner=pr, n_rungs=n_r, seed=seed * 100 + i)
                    best.setdefault((f"optuna-{pr}", f), []).append(res.best_loss)
                    anytime_all[f"optuna-{pr}"].append(100 * (res.best_loss / exh_best - 1))
                    anytime.setdefault((pname, f"optuna-{pr}", f), []).append(100 * (res.best_loss / exh_best - 1))
                    used.setdefault((f"optuna-{pr}", f), []).append(res.compute_used / B)
                    extrap[f"optuna-{pr}"].append(extrapolation_error(res.curves, tab))
        for m in MAIN:
            reach[m].append(first_hit[m])

    pools = np.array([p for p, _ in inst])
    H = HEADLINE
    b = {m: np.asarray(best[m, H]) for m in MAIN + peers}
    syn, real = pools == "synthetic", pools != "synthetic"
    metrics: dict[str, float] = {"instances": float(len(inst)), "headline_budget_fraction": H}
    for m in MAIN + peers:
        metrics[f"best_loss_mean[{m}]"] = float(b[m].mean())
        metrics[f"compute_used_over_budget_mean[{m}]"] = float(np.mean(used[m, H]))
        metrics[f"extrapolation_error_mean[{m}]"] = float(np.nanmean(extrap[m]))
        metrics[f"gap_to_exhaustive_pct_mean[{m}]"] = float(np.mean(anytime_all[m]))
        for p in sz.pools:
            for n, tag in (("SH", "SH"), ("random search", "random"), ("uniform", "uniform")):
                metrics[f"rel_improvement_vs_{tag}_pct[{m},{p}]"] = float(
                    _rel_improvement(b[n][pools == p], b[m][pools == p]).mean())
    metrics["extrapolation_error_mean[exhaustive]"] = float(np.nanmean(extrap["exhaustive"]))
    for m in MAIN:
        r = np.asarray(reach[m])
        metrics[f"share_reaching_exhaustive_best[{m}]"] = float(np.isfinite(r).mean())
        if np.isfinite(r).any():
            metrics[f"compute_saved_at_equal_best_loss[{m}]"] = float(1 - np.nanmean(r))

    gap = {m: np.asarray(anytime_all[m]) for m in MAIN + peers}   # per instance, % above exhaustive best
    claims = []
    groups = [("synthetic curves", syn)] + ([("real curves (digits MLPs + code LMs)", real)] if real.any() else [])
    for gname, mask in groups:
        bl = {n: float(gap[n][mask].mean()) for n in BASELINES}
        strongest = min(bl, key=bl.get)
        # the ceiling: the same test passed by SH ranked with the true final loss? If not, no ranking can pass it
        # here and the claim cannot be decided by the surrogate (it is reported as untestable: NaN)
        ceiling = Claim(statement=f"{gname}: ceiling", measured=float(gap[ORACLE][mask].mean()), op="<",
                        baselines=dict(bl), paired={n: (gap[ORACLE][mask] - gap[n][mask]).tolist() for n in BASELINES},
                        falsifier="the oracle-ranked SH not below the strongest baseline")
        testable = ceiling.holds is True
        tag = "synthetic" if gname.startswith("synthetic") else "real"
        metrics[f"ceiling_gap_pct[{tag}]"] = float(gap[ORACLE][mask].mean())
        metrics[f"ceiling_passes[{tag}]"] = float(testable)
        ceiling_text = (f"ceiling (SH ranked by the true final loss): gap {gap[ORACLE][mask].mean():.3f}% vs the "
                        f"strongest baseline's {bl[strongest]:.3f}% ({strongest}), {ceiling.verdict}")
        for m in ("SH+GP", "SH+power-law"):
            rel = {n: float(_rel_improvement(b[n][mask], b[m][mask]).mean()) for n in BASELINES}
            metrics[f"claim_gap_pct[{m},{tag}]"] = float(gap[m][mask].mean())
            claims.append(Claim(
                statement=f"{gname}: {m} finds a lower loss than uniform allocation, SH-only and random search "
                          "at equal budget",
                measured=float(gap[m][mask].mean()) if testable else float("nan"), op="<",
                baselines={n: bl[n] for n in BASELINES},
                paired={n: (gap[m][mask] - gap[n][mask]).tolist() for n in BASELINES},
                control=float(gap[CONTROL][mask].mean()),
                control_arm="SH with a random ranking (criterion switched off), same rungs and budget",
                control_paired=(gap[CONTROL][mask] - gap[strongest][mask]).tolist(),
                metric=f"mean gap (%) of the lowest loss found to the exhaustive sweep's best, {mask.sum()} instances "
                       f"(budget 20% of exhaustive)",
                baseline="strongest of uniform (leftovers redistributed), SH-only (rank by current loss) and random "
                         "search (random configurations trained to completion), same pools and budget",
                paper="up to 2.84% (real), 5.47% (synthetic) mean relative improvement",
                falsifier=f"{m}'s gap not below the strongest baseline's, or the per-instance interval containing 0",
                note=("" if testable else f"NaN: untestable here, no ranking beats the strongest baseline "
                      f"(measured {m} gap {gap[m][mask].mean():.3f}%). ") + ceiling_text
                     + "; relative improvement (L_b - L) / L_b of the lowest loss: "
                     + ", ".join(f"{n} {rel[n]:+.2f}%" for n in BASELINES)))
    e = {m: np.asarray(extrap[m]) for m in BASELINES + ("SH+GP", CONTROL)}
    ok = np.all([np.isfinite(e[m]) for m in e], axis=0)
    if ok.any():
        bl = {n: float(e[n][ok].mean()) for n in BASELINES}
        strongest = min(bl, key=bl.get)
        claims.append(Claim(
            statement="the scaling law fitted from SH+GP's curves extrapolates no worse than the baselines'",
            measured=float(e["SH+GP"][ok].mean()), op="<=", baselines=bl,
            paired={n: (e["SH+GP"][ok] - e[n][ok]).tolist() for n in BASELINES} if ok.sum() > 1 else None,
            control=float(e[CONTROL][ok].mean()),
            control_arm="SH with a random ranking (criterion switched off), same budget",
            control_paired=(e[CONTROL][ok] - e[strongest][ok]).tolist() if ok.sum() > 1 else None,
            metric="mean |L*_pred / L_exhaustive - 1| on (C_top/4, C_top], law fitted on C <= C_top/4",
            baseline="the same fit from the strongest baseline's curves (uniform, SH-only, random search; same budget)",
            paper="accurate scaling laws at up to 98.7% saving",
            falsifier="SH+GP's extrapolation error above the strongest baseline's, or the paired interval containing 0",
            note=f"exhaustive sweep's own fit: {np.nanmean(extrap['exhaustive']):.3f}"))
    all_used = [u for (m, f), us in used.items() for u in us]
    metrics["max_used_over_budget"] = float(max(all_used))
    sh_used = [u for m in ("SH", "SH+power-law", "SH+GP", CONTROL, ORACLE) for u in used[m, H]]
    uni_used = [u for f in sz.fractions for u in used["uniform", f]]
    claims += [
        # bounds as shares of runs that meet them (1 on every seed), not as min / max values, which sit within 1e-4
        # of their bound so that a t-interval over seeds straddles it; the min / max go into the metrics
        Claim(statement="no strategy spends more than its budget B",
              measured=float(np.mean(np.asarray(all_used) <= 1 + 1e-9)), op=">=", reference=1.0, kind="check",
              metric="share of all runs with compute used <= B", baseline="the budget",
              note=f"max used / B {max(all_used):.6f}"),
        Claim(statement="uniform allocation spends its budget (leftovers redistributed)",
              measured=float(np.mean(np.asarray(uni_used) >= 0.99)), op=">=", reference=1.0, kind="check",
              metric="share of uniform's runs with compute used >= 0.99 B", baseline="the budget",
              note=f"min used / B {min(uni_used):.4f}"),
        Claim(statement="every SH variant spends its budget (the same leftover rule for every criterion)",
              measured=float(np.mean(np.asarray(sh_used) >= 0.98)), op=">=", reference=1.0, kind="check",
              metric="share of SH runs (SH-only, surrogates, control, oracle; headline budget) with used >= 0.98 B",
              baseline="the budget, up to one recorded step of one curve", note=f"min used / B {min(sh_used):.4f}"),
        Claim(statement="SH keeps ceil(n / eta) configurations per rung", measured=float(np.mean(rung_ok)), op=">=",
              reference=1.0, kind="check", metric="share of SH runs whose rung sizes follow ceil(n/eta)"),
        Claim(statement="compute saved vs the exhaustive sweep at the headline budget",
              measured=float(np.mean(np.asarray(saved) >= 0.8 - 1e-9)), op=">=", reference=1.0, kind="check",
              metric="share of the main strategies' headline runs saving >= 80% of the exhaustive compute",
              paper="up to 98.7%", note=f"follows from B = 20% of exhaustive; min saved {min(saved):.6f}"),
        Claim(statement="SH-only returns the true best on noise-free non-crossing curves",
              measured=_non_crossing_check(seed), op=">=", reference=1.0, kind="check",
              metric="1 if SH's best equals the pool's best final loss"),
    ]
    rows = []
    for m in MAIN + peers:
        for f in sz.fractions:
            if (m, f) in best:
                rows.append({"method": m, "budget_fraction": f, "best_loss_mean": float(np.mean(best[m, f])),
                             "used_over_budget": float(np.mean(used[m, f])),
                             "gap_to_exhaustive_pct": float(np.mean([np.mean(anytime.get((p, m, f), [np.nan])) for p in sz.pools])),
                             "extrapolation_error": float(np.nanmean(extrap[m])) if f == H else None})
    return Outcome(metrics=metrics, claims=claims, tables={"strategies": rows},
                   figures={"anytime": _figure(anytime, sz.pools, sz.fractions)})
