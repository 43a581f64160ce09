"""Reproduction of [A03]: SRK-LMC vs SRK-LD (Li et al. 2019) vs ULA.

1. Strong order. 1-D double well U = x^4/4 - x^2/2, T = 1, x0 ~ U(-2, 2). One fine Brownian path (dW, dZ) at
   h_f, aggregated exactly to coarser h; reference = SRK-LD on the fine grid; RMS error at T; least-squares
   slope of log error vs log h over the 4 finest h. Control: SRK-LMC with dZ replaced by h dW / 2 (drops the
   part of dZ independent of dW), which should fall back to order 1.
2. W2 at equal gradient evaluations, Gaussian (closed form, no Monte Carlo). d = 100, H = diag(linspace(1, 10)),
   g gradients per unit time: ULA at h = 1/g, SRK-LMC at 2/g, SRK-LD at 3/g; W2 of each stationary law to pi.
3. W2 at equal gradient evaluations, non-log-concave mixture pi = prod (N(a,1) + N(-a,1))/2, a = 2. Chains start
   at exact draws from pi and run for time T; W2 of the pooled 1-D coordinates against exact quantiles
   (W2 in R^d = sqrt(d) W2_1D). The noise floor is W2 of the same number of exact draws. The claims use the W2
   of each coordinate separately: the d coordinates are independent replicates, so their paired differences
   give a per-run interval.

Claims (refutable): strong order 1.5; SRK-LMC below ULA (Gaussian) and below SRK-LD and ULA (mixture) in W2 at
equal gradient evaluations. Checks (true by construction or theorem): 2 vs 3 gradients per step; SRK-LMC below
SRK-LD on the Gaussian (same map there, smaller step); ULA's strong order 1; the no-dZ control's order 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from threadpoolctl import threadpool_limits

from icml26.harness import Budget, Claim, Outcome, seed_everything

from .metrics import w2_1d, w2_gaussian
from .peers import torchsde_available, torchsde_srk
from .samplers import METHODS, TABLEAUS, aggregate_increments, brownian_increments, sample, step_fn
from .targets import Gaussian, SymmetricMixture


@dataclass(frozen=True)
class Sizes:
    strong_paths: int            # Brownian paths for the strong-error study
    strong_fine_log2: int        # reference step h_f = 2^-strong_fine_log2
    strong_levels: tuple         # coarse steps h = 2^-l
    mix_chains: int              # chains for the mixture target (samples pooled over chains x coordinates)
    mix_d: int
    mix_T: float                 # simulated time (a multiple of 0.9 so every step size divides it)


SIZES = {
    Budget.QUICK: Sizes(1000, 11, (3, 4, 5, 6, 7, 8), 10_000, 10, 18.0),
    Budget.STANDARD: Sizes(4000, 13, (4, 5, 6, 7, 8, 9, 10), 100_000, 10, 18.0),
    Budget.FULL: Sizes(20000, 14, (4, 5, 6, 7, 8, 9, 10, 11), 400_000, 10, 36.0),
}

GAUSS_D = 100
GAUSS_BUDGETS = (25.0, 50.0, 100.0, 200.0, 400.0)   # gradient evaluations per unit time
GAUSS_HEADLINE = 100.0                              # ULA at h = 0.01
MIX_A = 2.0
MIX_BUDGETS = (10 / 3, 20 / 3)                      # gradient evaluations per unit time
MIX_HEADLINE = 10 / 3                               # coarse: biases far above the Monte Carlo floor
NAMES = {"ula": "ULA", "srk_lmc": "SRK-LMC", "srk_ld": "SRK-LD", "no_levy": "SRK-LMC, dZ -> h dW/2",
         "torchsde_srk": "torchsde SRK (SRA1)"}


# helper functions

def _double_well_grad(x: np.ndarray) -> np.ndarray:
    return x ** 3 - x


def _slope(hs: np.ndarray, errs: np.ndarray) -> float:
    return float(np.polyfit(np.log(hs), np.log(errs), 1)[0])


# 1. strong order

def strong_errors(sz: Sizes, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """RMS error at T = 1 against the fine SRK-LD reference, per method and coarse level; with torchsde
    installed also its SRK (Rößler's SRA1) on the same coarse increments, and the peer's bookkeeping."""
    fine, levels = sz.strong_fine_log2, sz.strong_levels
    h_f, block = 2.0 ** -fine, 2 ** (fine - min(levels))       # one block = one step at the coarsest level
    x0 = rng.uniform(-2.0, 2.0, size=(sz.strong_paths, 1))
    ref = x0.copy()
    runs = ("ula", "srk_lmc", "srk_ld", "no_levy")
    xs = {(m, level): x0.copy() for m in runs for level in levels}
    srk_ld, srk_lmc = step_fn("srk_ld"), step_fn("srk_lmc")
    coarse: dict[int, list] = {level: [] for level in levels}  # the coarse increments, for the torchsde peer
    for _ in range(2 ** min(levels)):
        dW, dZ = brownian_increments(rng, block, x0.shape, h_f)
        for j in range(block):
            ref = srk_ld(ref, _double_well_grad, h_f, dW[j], dZ[j])
        for level in levels:
            h = 2.0 ** -level
            cW, cZ = aggregate_increments(dW, dZ, h_f, 2 ** (fine - level))
            coarse[level].append((cW, cZ))
            for m in runs:
                step = srk_lmc if m == "no_levy" else step_fn(m)
                for j in range(cW.shape[0]):
                    z = 0.5 * h * cW[j] if m == "no_levy" else cZ[j]
                    xs[m, level] = step(xs[m, level], _double_well_grad, h, cW[j], z)
    errs = {m: np.array([np.sqrt(np.mean((xs[m, level] - ref) ** 2)) for level in levels]) for m in runs}
    peer: dict[str, float] = {}
    if torchsde_available():
        finals, calls, steps = [], 0, 0
        for level in levels:
            cW = np.concatenate([w for w, _ in coarse[level]])
            cZ = np.concatenate([z for _, z in coarse[level]])
            x_peer, n_calls = torchsde_srk(_double_well_grad, x0, 2.0 ** -level, cW, cZ)
            finals.append(x_peer)
            calls, steps = calls + n_calls, steps + len(cW)
        errs["torchsde_srk"] = np.array([np.sqrt(np.mean((x - ref) ** 2)) for x in finals])
        peer = {"torchsde_max_abs_diff_vs_srk_lmc": float(max(np.abs(x - xs["srk_lmc", level]).max()
                                                           for x, level in zip(finals, levels))),
                "torchsde_drift_evals_per_step": calls / steps}
    return errs, peer


# 2. Gaussian, closed form

def gaussian_w2() -> dict[str, np.ndarray]:
    """Stationary W2 to pi per method and gradient budget (closed form)."""
    target = Gaussian(np.diag(np.linspace(1.0, 10.0, GAUSS_D)))
    out = {}
    with threadpool_limits(1):   # 100 x 100 matrices: BLAS threads only add contention
        for m in METHODS:
            hs = [TABLEAUS[m].n_grad / g for g in GAUSS_BUDGETS]
            out[m] = np.array([w2_gaussian(*target.chain_law(m, h, np.inf), target.mean, target.cov) for h in hs])
    return out


# 3. non-log-concave mixture, Monte Carlo

def mixture_w2(sz: Sizes, rng: np.random.Generator
               ) -> tuple[dict[str, np.ndarray], float, dict[str, float], dict[str, np.ndarray]]:
    """W2 of the chain law at time T per method and budget.

    Returns the pooled W2_1D (all chains x coordinates against exact quantiles), its Monte Carlo floor, gradient
    calls per step, and at the headline budget the W2_1D of each coordinate separately (shape ``(d,)``). The
    target is a product and the potential separable, so the d coordinates are d independent replicates of the
    same 1-D chain: their spread is the Monte Carlo uncertainty of one run.
    """
    target = SymmetricMixture(MIX_A, sz.mix_d)
    n = sz.mix_chains * sz.mix_d
    q = target.ppf((np.arange(n) + 0.5) / n)                  # exact quantiles, shared by every estimate
    q1 = target.ppf((np.arange(sz.mix_chains) + 0.5) / sz.mix_chains)
    floor = w2_1d(target.sample(sz.mix_chains, rng).ravel(), lambda u: q)
    w2 = {m: np.zeros(len(MIX_BUDGETS)) for m in METHODS}
    per_coord, per_step = {}, {}
    for i, g in enumerate(MIX_BUDGETS):
        for m in METHODS:
            h = TABLEAUS[m].n_grad / g
            n_steps = int(round(sz.mix_T / h))
            x0 = target.sample(sz.mix_chains, rng)
            xs, calls = sample(target.grad_U, x0, h, n_steps, m, rng=rng, thin=n_steps)
            w2[m][i] = w2_1d(xs[-1].ravel(), lambda u: q)
            if g == MIX_HEADLINE:
                per_coord[m] = np.array([w2_1d(xs[-1][:, j], lambda u: q1) for j in range(sz.mix_d)])
            per_step[m] = calls / n_steps
    return w2, floor, per_step, per_coord


# figures

def _figure_strong(hs: np.ndarray, errs: dict[str, np.ndarray], slopes: dict[str, float]) -> Figure:
    fig = Figure(figsize=(5.5, 4.2))
    ax = fig.add_subplot()
    for m, e in errs.items():
        ax.loglog(hs, e, "o-", label=f"{NAMES[m]} (slope {slopes[m]:.2f})")
    for p, style in ((1.0, ":"), (1.5, "--")):
        ax.loglog(hs, errs["srk_lmc"][-1] * (hs / hs[-1]) ** p, "k" + style, lw=0.8, label=f"h^{p:g}")
    ax.set_xlabel("step size h")
    ax.set_ylabel("RMS error at T = 1")
    ax.set_title("[A03] strong error, double well")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _figure_w2(gauss: dict[str, np.ndarray], mix: dict[str, np.ndarray], floor: float) -> Figure:
    fig = Figure(figsize=(9.0, 3.8))
    a1, a2 = fig.subplots(1, 2)
    for m in METHODS:
        a1.loglog(GAUSS_BUDGETS, gauss[m], "o-", label=NAMES[m])
        a2.loglog(MIX_BUDGETS, mix[m], "o-", label=NAMES[m])
    a2.axhline(floor, color="k", ls=":", lw=0.8, label="Monte Carlo floor")
    a1.set_title(f"Gaussian d={GAUSS_D}, stationary (closed form)")
    a2.set_title(f"mixture a={MIX_A:g}, time T (Monte Carlo)")
    for ax, ticks in ((a1, GAUSS_BUDGETS), (a2, MIX_BUDGETS)):
        ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("gradient evaluations per unit time")
        ax.set_ylabel("W2 to target" if ax is a1 else "W2 per coordinate")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    rng_strong, rng_mix = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))

    errs, peer = strong_errors(sz, rng_strong)
    hs = 2.0 ** -np.array(sz.strong_levels, dtype=float)
    slopes = {m: _slope(hs[-4:], e[-4:]) for m, e in errs.items()}
    gauss = gaussian_w2()
    mix, floor, per_step, coord = mixture_w2(sz, rng_mix)
    ig = GAUSS_BUDGETS.index(GAUSS_HEADLINE)

    metrics = {f"strong_slope_{m}": s for m, s in slopes.items()}
    metrics |= {f"grads_per_step_{m}": v for m, v in per_step.items()}
    metrics |= {f"gauss_w2_{m}_g{g:g}": float(gauss[m][i]) for m in METHODS for i, g in enumerate(GAUSS_BUDGETS)}
    metrics |= {f"mix_w2_{m}_g{g:.3g}": float(mix[m][i]) for m in METHODS for i, g in enumerate(MIX_BUDGETS)}
    metrics |= {f"mix_w2_coord_mean_{m}": float(coord[m].mean()) for m in METHODS}
    metrics["mix_w2_floor"] = floor
    metrics |= peer

    gauss_note = ("Closed-form stationary law (no Monte Carlo, identical for every seed). d=100, "
                  "H=diag(linspace(1,10)); ULA at h=1/g, SRK-LMC at h=2/g.")
    same_map = ("On a quadratic U both SRK schemes are the same linear map (tested), and the stationary bias "
                "grows with h, so SRK-LMC's lower W2 at equal gradients follows from taking 1.5x more, smaller "
                "steps: it cannot fail, hence a check. The real 2-vs-3-gradient comparison is on the mixture.")
    mix_note = (f"T={sz.mix_T:g}, {sz.mix_chains} chains x {sz.mix_d} coordinates started at exact draws of pi. "
                f"Measured: mean over the {sz.mix_d} coordinates of each coordinate's W2_1D against exact "
                f"quantiles; paired = per-coordinate differences (independent replicates of one 1-D chain). "
                f"Pooled W2 and the Monte Carlo floor ({floor:.2g}) are in the mixture_w2 table.")
    band_note = ("Least-squares slope of log RMS error vs log h over the 4 finest h; reference SRK-LD at "
                 f"h_f=2^-{sz.strong_fine_log2} on the same Brownian path. Band = nearest half-integer order.")
    g_lbl, m_lbl = f"{GAUSS_HEADLINE:g} grads/unit time", f"{MIX_HEADLINE:.3g} grads/unit time"
    claims = [
        # claims: refutable by this run
        Claim("SRK-LMC has strong order 1.5", slopes["srk_lmc"], "in", (1.25, 1.75), baseline="order 1.5 band",
              control=slopes["no_levy"], control_arm="SRK-LMC with dZ replaced by h dW / 2 (its Levy-area term removed)",
              metric="empirical strong-order slope, SRK-LMC", paper="1.5", note=band_note,
              falsifier="fitted slope of SRK-LMC's RMS strong error outside [1.25, 1.75] (e.g. ~1, as the "
                        "no-dZ control gives)"),
        Claim("Non-log-concave target: SRK-LMC has lower W2 than the stronger of SRK-LD and ULA at equal "
              "gradient evaluations",
              coord["srk_lmc"].mean(), "<",
              baselines={f"SRK-LD at {m_lbl}": coord["srk_ld"].mean(), f"ULA at {m_lbl}": coord["ula"].mean()},
              metric="W2 per coordinate, SRK-LMC (mean over coordinates)", note=mix_note,
              paired={f"SRK-LD at {m_lbl}": list(coord["srk_lmc"] - coord["srk_ld"]),
                      f"ULA at {m_lbl}": list(coord["srk_lmc"] - coord["ula"])},
              falsifier="SRK-LMC's W2 at or above the stronger baseline's (SRK-LD or ULA) at equal gradient "
                        "evaluations, or their per-coordinate difference not separable from 0"),
        # checks: true by construction or by a theorem; reported, not counted
        Claim("SRK-LMC needs two gradient evaluations per iteration, SRK-LD (Li et al. 2019) three",
              per_step["srk_lmc"], "<", per_step["srk_ld"], baseline="SRK-LD, counted in the same run",
              metric="grad_U calls per step (counting wrapper)", paper="2 vs 3", kind="check",
              note="By construction of the tableaux; counted by a wrapper around grad_U."),
        Claim("Gaussian target: SRK-LMC has lower W2 than ULA at equal gradient evaluations",
              gauss["srk_lmc"][ig], "<", gauss["ula"][ig], baseline=f"ULA at {g_lbl}",
              metric=f"stationary W2, SRK-LMC at {g_lbl}", kind="check",
              note=gauss_note + " Deterministic numerics of the two maps' stationary laws, the same on every seed: "
                                "a check (issue 29), not evidence over seeds."),
        Claim("Gaussian target: SRK-LMC has lower W2 than SRK-LD at equal gradient evaluations",
              gauss["srk_lmc"][ig], "<", gauss["srk_ld"][ig], baseline=f"SRK-LD at {g_lbl}",
              metric=f"stationary W2, SRK-LMC at {g_lbl}", note=same_map, kind="check"),
        Claim("ULA (the baseline) has strong order 1 for additive noise", slopes["ula"], "in", (0.75, 1.25),
              baseline="order 1 band", metric="empirical strong-order slope, ULA", kind="check",
              note="Euler-Maruyama has strong order 1 for additive noise (theorem). " + band_note),
        Claim("Control: SRK-LMC with dZ replaced by h dW / 2 falls back to strong order 1", slopes["no_levy"], "in",
              (0.75, 1.25), baseline="order 1 band", metric="empirical strong-order slope, no-dZ control",
              kind="check", note="Dropping the part of dZ independent of dW breaks the order-1.5 conditions "
                                 "(theorem); shows the slope estimate can tell 1 from 1.5. " + band_note),
    ]
    if peer:
        claims.append(Claim(
            "torchsde's SRK (Rößler's SRA1) is the SRK-LMC map: same iterates on the same Brownian path",
            peer["torchsde_max_abs_diff_vs_srk_lmc"], "<", 1e-10, kind="check",
            baseline="float64 round-off", metric="max |x_torchsde - x_SRK-LMC| at T = 1, every level and path",
            note=f"torchsde evaluates the drift {peer['torchsde_drift_evals_per_step']:.2f} times per step "
                 "(it recomputes f(x) for the second stage); SRK-LMC needs 2. Its strong slope is "
                 f"{slopes['torchsde_srk']:.3f}."))

    tables = {
        "strong_order": [{"h": float(h), **{NAMES[m]: float(e[i]) for m, e in errs.items()}} for i, h in enumerate(hs)],
        "gaussian_w2": [{"grads_per_unit_time": g, **{NAMES[m]: float(gauss[m][i]) for m in METHODS}}
                        for i, g in enumerate(GAUSS_BUDGETS)],
        "mixture_w2": [{"grads_per_unit_time": round(g, 3), **{NAMES[m]: float(mix[m][i]) for m in METHODS},
                        "floor": floor} for i, g in enumerate(MIX_BUDGETS)],
    }
    figures = {"strong_order": _figure_strong(hs, errs, slopes), "w2_vs_gradients": _figure_w2(gauss, mix, floor)}
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures)
