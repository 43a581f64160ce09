"""Reproduction of [B09]: SE-kernel spectrum on S^d, maximum information gain vs the paper's rate, GP-bandit
regret curves vs the lower-bound rates, and the cost of our incremental GP-UCB.

1. Spectrum. Closed-form eigenvalues vs Funk-Hecke quadrature and the trace identity, d = 1, 2, 3 (checks);
   Gram-matrix eigenvalues of uniform points (metric).
2. Information gain. l in {0.3, 0.5, 1.0}, sigma^2 = 0.01, d = 1, 2, 3. Greedy maximum-variance gamma~_T over N
   uniform candidates (fixed per d, independent of the seed; a (1 - 1/e) lower estimate of the MIG over them), the
   analytic upper bound up to T = 1e12, and the rates (ln T)^{d+1} (ln ln T)^{-d} (new), (ln T)^{d+1} (old) and
   ln T (finite rank: a levelled-off gain).
3. Regret. RKHS functions of norm B = 1 (random kernel expansions), noise sd 0.1; GP-UCB (Srinivas beta_t), MVR,
   uniform random and BoTorch's UCB on the same functions, candidates and noise; curves next to the paper's
   lower-bound rates (shapes only: a worst-case bound cannot be checked on typical functions).
4. Cost (process CPU time, harness ``compare_times``: interleaved, repeated, with a same-work control). The cost
   exponent of the incremental update from cost(2t) / cost(t) at t = 2000 -> 4000, next to the same exponent of
   a refit (the control), and one GP-UCB step (observe + the posterior over N candidates) incremental vs refit at
   t = 1000.

Claims (refutable): per (d, l) cell, gamma~_T's growth exponent is closer to the new rate's than to the old
rate's or to ln T's (control: the same greedy with an exponential-decay Poisson kernel with the same
lambda_1/lambda_0, whose MIG has the old rate; each cell is seed-invariant, one piece of evidence); the
incremental update costs ~t^2
(control: a refit's exponent) and a GP-UCB step is >= 5x faster than refitting at t = 1000 (claims about our
implementation, not the paper's). Checks (theorems, exactness, sanity): trace identity, quadrature, greedy =
log det, gamma~_T <= analytic bound, the analytic bound grows like the new rate and slower than the old one, GP
posteriors equal scikit-learn's and the refit, GP-UCB beats uniform random (a strawman: sanity only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from scipy.linalg import solve_triangular
from threadpoolctl import threadpool_limits

from icml26.harness import Budget, Claim, Outcome, compare_times, seed_everything

from .bandit import GPUCB, MaximumVarianceReduction, UniformRandom, beta_srinivas, rkhs_test_function, run_bandit
from .gp import IncrementalGP, refit_posterior
from .information_gain import (
    greedy_information_gain,
    information_gain,
    mig_rate_new,
    mig_rate_old,
    mig_upper_bound,
    regret_lower_rate,
)
from .peers import botorch_available, botorch_ucb_run, sklearn_posterior
from .spectrum import (
    funk_hecke_eigenvalues,
    harmonic_multiplicity,
    poisson_kernel,
    sample_sphere,
    se_kernel,
    se_sphere_eigenvalues,
)


@dataclass(frozen=True)
class Sizes:
    gram_n: int                  # uniform points for the Gram-spectrum comparison (d = 2)
    mig_candidates: int          # candidates for the greedy information gain
    mig_T: int                   # largest T for the greedy information gain
    bandit_dims: tuple           # sphere dimensions for the regret curves
    bandit_functions: int        # RKHS test functions per dimension
    bandit_candidates: int
    bandit_T: int
    botorch_T: int               # steps of BoTorch's UCB (it refits from scratch every step)
    botorch_functions: int       # of the test functions per dimension, how many BoTorch also runs
    timing_pair: tuple           # (t, 2t): the update cost exponent is log2(cost(2t) / cost(t)); both t beyond L3
    timing_candidates: int       # candidates tracked in the GP-UCB step timing
    timing_repeats: int          # interleaved repeats (compare_times) of the incremental timings
    timing_loops: int            # rounds of N_ADD updates per timed call (longer calls: less timer and cache noise)
    refit_repeats: int           # interleaved repeats of the refit (control) timing: a refit at 2t is seconds


SIZES = {
    Budget.QUICK: Sizes(600, 1000, 300, (1, 2), 3, 300, 60, 30, 1, (2000, 4000), 500, 40, 1, 3),
    Budget.STANDARD: Sizes(1500, 3000, 1200, (1, 2, 3), 5, 800, 200, 80, 1, (2000, 4000), 1000, 60, 1, 5),
    Budget.FULL: Sizes(3000, 8000, 4000, (1, 2, 3), 20, 3000, 1000, 500, 5, (4000, 8000), 2000, 60, 1, 5),
}

DIMS = (1, 2, 3)
LENGTHSCALE = 0.5
NOISE_VAR = 0.01                 # sigma^2; noise sd 0.1
NORM_B = 1.0
N_SPEC = 25                      # degrees compared with quadrature
T_BOUND = np.logspace(1, 12, 45)
SPEEDUP_T = 1000
N_ADD = 8                        # incremental updates per timed call (one call: 8 adds, then back to t)
T2_BAND = (1.5, 2.5)             # "~t^2": the cost exponent band (about 3 would mean a refactorisation per step)


MIG_LENGTHSCALES = (0.3, 0.5, 1.0)   # the information-gain claims are made at every one of these (review finding 1)
MIG_CANDIDATE_SEED = 9009            # the candidate sets of the information-gain study do not depend on the run's
                                     # seed (review finding 2): the exponents moved by < 2e-3 between seeds, so the
                                     # seed never resampled what matters; fixed candidates make every seed give the
                                     # same number and the harness counts each cell as one piece of evidence.


def control_r(d: int, lengthscale: float = LENGTHSCALE) -> float:
    """r of the Poisson-kernel control on S^d: its mu_1 / mu_0 = r equals the SE kernel's lambda_1 / lambda_0 at
    ``lengthscale``, so the two kernels share their leading spectrum and differ in the decay (exponential vs
    super-exponential). The rule was fixed after trying r in {0.3, 0.5, 0.7} by hand at l = 0.5 (see the README);
    the run reports the control at every lengthscale of the sweep, where r = lambda_1 / lambda_0 becomes small at
    l = 1 and the control stops discriminating."""
    lam = se_sphere_eigenvalues(d, lengthscale, 1)
    return float(lam[1] / lam[0])


def mig_rate_finite_rank(T: np.ndarray) -> np.ndarray:
    """ln T: the MIG rate of a finite-rank kernel (D features: gamma_T ~ D/2 ln T; Srinivas et al. 2010), the rate
    of a gain that has levelled off. The third comparator of the information-gain claims (review finding 1)."""
    return np.log(np.asarray(T, dtype=float))


# helper functions

def _slope(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _T_grid(T_max: int) -> np.ndarray:
    return np.unique(np.round(np.geomspace(5, T_max, 24)).astype(int))


# 1. spectrum

def spectrum(sz: Sizes, rng: np.random.Generator) -> dict:
    out: dict = {"closed": {}, "quad": {}, "trace_err": {}, "quad_err": {}}
    for d in DIMS:
        lam = se_sphere_eigenvalues(d, LENGTHSCALE, 200)
        out["closed"][d] = lam
        out["quad"][d] = funk_hecke_eigenvalues(d, LENGTHSCALE, N_SPEC)
        out["trace_err"][d] = abs(float(np.sum(harmonic_multiplicity(d, np.arange(201)) * lam)) - 1.0)
        out["quad_err"][d] = float(np.max(np.abs(out["quad"][d] - lam[: N_SPEC + 1])))
    # Gram eigenvalues / n of uniform points on S^2 vs the closed form repeated N(2, n) times
    X = sample_sphere(sz.gram_n, 2, rng)
    gram = np.sort(np.linalg.eigvalsh(se_kernel(LENGTHSCALE, check=False)(X, X)))[::-1] / sz.gram_n
    lam2 = out["closed"][2]
    rep = np.repeat(lam2[:30], harmonic_multiplicity(2, np.arange(30)).astype(int))
    k = 50
    out["gram"], out["gram_rep"] = gram[:k], rep[:k]
    out["gram_relerr_top50"] = float(np.mean(np.abs(gram[:k] - rep[:k]) / rep[:k]))
    return out


# 2. information gain

def information_gain_study(sz: Sizes, rng: np.random.Generator) -> dict:
    """Greedy gamma~_T of the SE kernel and of the Poisson-kernel control on the same candidates, per (d, l).

    The candidates are fixed per d (``MIG_CANDIDATE_SEED``); ``rng`` draws a second, seed-dependent candidate set
    on which the SE gain is recomputed at l = LENGTHSCALE, to report how much the candidates matter.
    """
    Ts = _T_grid(sz.mig_T)
    out: dict = {"T": Ts, "greedy": {}, "control": {}, "bound": {}, "logdet_err": {}, "bound_far": {},
                 "alt": {}}
    for d in DIMS:
        X = sample_sphere(sz.mig_candidates, d, np.random.default_rng([MIG_CANDIDATE_SEED, d]))
        for ls in MIG_LENGTHSCALES:
            kern = se_kernel(ls, check=False)
            gam, idx = greedy_information_gain(X, kern, sz.mig_T, NOISE_VAR)
            S = X[idx]
            out["logdet_err"][d, ls] = abs(information_gain(kern(S, S), NOISE_VAR) - gam[-1]) / gam[-1]
            out["greedy"][d, ls] = gam[Ts - 1]
            ctrl, _ = greedy_information_gain(X, poisson_kernel(control_r(d, ls), d, check=False), sz.mig_T,
                                              NOISE_VAR)
            out["control"][d, ls] = ctrl[Ts - 1]
            out["bound"][d, ls] = mig_upper_bound(Ts.astype(float), d, ls, NOISE_VAR)
        out["bound_far"][d] = mig_upper_bound(T_BOUND, d, LENGTHSCALE, NOISE_VAR)
        Xa = sample_sphere(sz.mig_candidates, d, rng)
        out["alt"][d] = greedy_information_gain(Xa, se_kernel(LENGTHSCALE, check=False), sz.mig_T, NOISE_VAR)[0][Ts - 1]
    return out


def _flatness(T: np.ndarray, g: np.ndarray, rate: np.ndarray, T_lo: float) -> float:
    """|log(g / rate)| change over T in [T_lo, T_max]: |slope of log(g/rate) vs log T| x log(T_max / T_lo)."""
    m = T >= T_lo
    return abs(_slope(T[m], g[m] / rate[m])) * math.log(T[m][-1] / T[m][0])


# 3. regret

def regret_study(sz: Sizes, rng: np.random.Generator) -> dict:
    kern = se_kernel(LENGTHSCALE, check=False)
    runs: dict = {}
    for d in sz.bandit_dims:
        X = sample_sphere(sz.bandit_candidates, d, rng)
        for j in range(sz.bandit_functions):
            f = rkhs_test_function(d, NORM_B, LENGTHSCALE, rng)
            fv = f(X)
            noise = math.sqrt(NOISE_VAR) * rng.standard_normal(sz.bandit_T)
            pol_rng = int(rng.integers(2 ** 31))
            policies = {
                "GP-UCB": GPUCB(kern, X, NOISE_VAR, beta="srinivas"),
                "MVR": MaximumVarianceReduction(kern, X, NOISE_VAR),
                "uniform random": UniformRandom(kern, X, NOISE_VAR, rng=pol_rng),
            }
            for name, pol in policies.items():
                runs[d, j, name] = run_bandit(pol, fv, sz.bandit_T, noise)
            if botorch_available() and j < sz.botorch_functions:
                n = len(X)
                runs[d, j, "BoTorch UCB"] = botorch_ucb_run(
                    X, fv, min(sz.botorch_T, sz.bandit_T), noise, LENGTHSCALE, NOISE_VAR,
                    lambda t: beta_srinivas(t, n), first=int(runs[d, j, "GP-UCB"]["indices"][0]))
    return runs


# 4. cost of the incremental update

def _adds(gp: IncrementalGP, X: np.ndarray, y: np.ndarray, loops: int):
    """One timed unit: ``loops`` times (N_ADD incremental updates from state t, then back to t; going back is O(1):
    the rows past t are unused)."""
    t = gp.t

    def run() -> None:
        for _ in range(loops):
            for i in range(N_ADD):
                gp.add(X[t + i], y[t + i])
            gp.t = t
    return run


def _refit(K: np.ndarray, y: np.ndarray):
    """The control unit: what a refit does per step, a new Cholesky of K_t + sigma^2 I and one solve (O(t^3))."""
    def run() -> None:
        L = np.linalg.cholesky(K)
        solve_triangular(L, y, lower=True, check_finite=False)
    return run


def timing_study(sz: Sizes, rng: np.random.Generator) -> dict:
    """Process-CPU-time comparisons (compare_times: interleaved, repeated, with a same-work control).

    Exponent: cost(2t) / cost(t) of N_ADD incremental updates (t^2 gives 4, t^3 gives 8), and the same for a refit
    (the control: the incremental update removed). Speed-up: one GP-UCB step (observe + posterior over the
    candidates + argmax) incremental vs refit at t = 1000.
    """
    kern = se_kernel(LENGTHSCALE, check=False)
    t1, t2 = sz.timing_pair
    X = sample_sphere(t2 + N_ADD + 2, 2, rng)
    y = rng.standard_normal(len(X))
    Q = sample_sphere(sz.timing_candidates, 2, rng)
    ones = np.ones(len(Q))
    gps = {t: IncrementalGP.fit(kern, NOISE_VAR, X[:t], y[:t], capacity=t + N_ADD + 1) for t in (t1, t2)}
    inc = compare_times(_adds(gps[t2], X, y, sz.timing_loops), _adds(gps[t1], X, y, sz.timing_loops),
                        repeats=sz.timing_repeats, warmup=1)
    del gps
    Ks = {t: kern(X[:t], X[:t]) + NOISE_VAR * np.eye(t) for t in (t1, t2)}
    ref = compare_times(_refit(Ks[t2], y[:t2]), _refit(Ks[t1], y[:t1]), repeats=sz.refit_repeats, warmup=0)
    del Ks
    # one GP-UCB step at t = 1000: observe + posterior over the candidates, incremental vs refit
    t = SPEEDUP_T
    gp = IncrementalGP.fit(kern, NOISE_VAR, X[:t], y[:t], queries=Q, capacity=t + 2)
    m0, v0 = gp.query_mean.copy(), gp.query_var.copy()

    def inc_step() -> None:
        gp.add(X[t], y[t])
        int(np.argmax(gp.query_mean + 2.0 * np.sqrt(np.maximum(gp.query_var, 0))))
        gp.t = t                                        # back to the state before the step (O(N) copies)
        np.copyto(gp.query_mean, m0)
        np.copyto(gp.query_var, v0)

    def refit_step() -> None:
        m, v = refit_posterior(kern, NOISE_VAR, X[: t + 1], y[: t + 1], Q, prior_var=ones)
        int(np.argmax(m + 2.0 * np.sqrt(np.maximum(v, 0))))

    step = compare_times(inc_step, refit_step, repeats=sz.timing_repeats, warmup=1)
    # exactness: the incremental posterior equals the refit one on the same data
    gp.add(X[t], y[t])
    m_ref, v_ref = refit_posterior(kern, NOISE_VAR, X[: t + 1], y[: t + 1], Q, prior_var=ones)
    err = max(float(np.abs(gp.query_mean - m_ref).max()), float(np.abs(gp.query_var - v_ref).max()))
    return {"inc": inc, "refit": ref, "step": step, "t1": t1, "t2": t2, "loops": sz.timing_loops,
            "inc_vs_refit_err": err}


def sklearn_agreement(rng: np.random.Generator) -> float:
    """max |ours - scikit-learn| over posterior means and variances, d = 2, 200 points, 300 queries."""
    kern = se_kernel(LENGTHSCALE, check=False)
    X, Q = sample_sphere(200, 2, rng), sample_sphere(300, 2, rng)
    y = rng.standard_normal(200)
    gp = IncrementalGP(kern, NOISE_VAR, queries=Q)
    for x, yy in zip(X, y):
        gp.add(x, yy)
    m, v = gp.predict(Q)
    ms, vs = sklearn_posterior(X, y, Q, LENGTHSCALE, NOISE_VAR)
    return max(float(np.abs(m - ms).max()), float(np.abs(v - vs).max()),
               float(np.abs(gp.query_mean - ms).max()), float(np.abs(gp.query_var - vs).max()))


# figures

def _figure_spectrum(spec: dict) -> Figure:
    fig = Figure(figsize=(9.0, 3.8))
    a1, a2 = fig.subplots(1, 2)
    for d in DIMS:
        a1.semilogy(np.arange(N_SPEC + 1), spec["closed"][d][: N_SPEC + 1], "-", label=f"closed form, S^{d}")
        a1.semilogy(np.arange(N_SPEC + 1), np.abs(spec["quad"][d]), "k.", ms=3)
    a1.set_xlabel("degree n")
    a1.set_ylabel("lambda_n (dots: quadrature)")
    a1.legend(fontsize=7)
    k = np.arange(1, len(spec["gram"]) + 1)
    a2.semilogy(k, spec["gram_rep"], "o-", ms=3, label="closed form (with multiplicity)")
    a2.semilogy(k, spec["gram"], "x", ms=4, label="Gram eigenvalues / n")
    a2.set_xlabel("rank")
    a2.set_ylabel("eigenvalue")
    a2.set_title("S^2: Gram vs Mercer", fontsize=9)
    a2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _figure_mig(ig: dict, cells: dict) -> Figure:
    fig = Figure(figsize=(17.0, 3.8))
    a1, a2, a3, a4 = fig.subplots(1, 4)
    T = ig["T"]
    for d in DIMS:
        line, = a1.loglog(T, ig["greedy"][d, LENGTHSCALE], "o-", ms=3, label=f"greedy, S^{d}")
        a1.loglog(T, ig["bound"][d, LENGTHSCALE], "--", color=line.get_color(), lw=0.8)
        m = T >= 10
        a2.semilogx(T[m], ig["greedy"][d, LENGTHSCALE][m] / mig_rate_new(T[m], d), "o-", ms=3, color=line.get_color(),
                    label=f"/ new rate, S^{d}")
        a2.semilogx(T[m], ig["greedy"][d, LENGTHSCALE][m] / mig_rate_old(T[m], d), "x:", ms=3, color=line.get_color(),
                    label=f"/ old rate, S^{d}")
        a3.loglog(T_BOUND, ig["bound_far"][d] / mig_rate_new(T_BOUND, d), "-", color=line.get_color(),
                  label=f"bound / new, S^{d}")
        a3.loglog(T_BOUND, ig["bound_far"][d] / mig_rate_old(T_BOUND, d), ":", color=line.get_color(),
                  label=f"bound / old, S^{d}")
    keys = sorted(cells)
    x = np.arange(len(keys))
    a4.bar(x - 0.2, [cells[k]["se"] for k in keys], 0.4, label="SE kernel")
    a4.bar(x + 0.2, [cells[k]["control"] for k in keys], 0.4, label="Poisson control")
    for i, k in enumerate(keys):
        a4.plot([i - 0.45, i + 0.45], [cells[k]["lo"]] * 2, "k-", lw=0.8)
        a4.plot([i - 0.45, i + 0.45], [cells[k]["hi"]] * 2, "k-", lw=0.8)
    a4.set_xticks(x, [f"S^{d}\nl={ls}" for d, ls in keys], fontsize=6)
    a4.set_title("growth exponent vs the new-rate band (black)", fontsize=9)
    a4.legend(fontsize=6)
    a1.set_title(f"information gain, l = {LENGTHSCALE} (dashed: analytic bound)", fontsize=9)
    a2.set_title(f"greedy gamma_T / rate, l = {LENGTHSCALE}", fontsize=9)
    a3.set_title(f"analytic bound / rate, T to 1e12, l = {LENGTHSCALE}", fontsize=9)
    a1.set_ylabel("information gain gamma_T [nats]")
    a2.set_ylabel("greedy gamma_T / rate")
    a3.set_ylabel("bound / rate")
    a4.set_ylabel("growth exponent of gamma_T")
    for ax in (a1, a2, a3):
        ax.set_xlabel("T")
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _figure_regret(runs: dict, dims: tuple) -> Figure:
    fig = Figure(figsize=(4.2 * len(dims), 7.0))
    axes = fig.subplots(2, len(dims), squeeze=False)
    names = sorted({k[2] for k in runs}, key=["GP-UCB", "BoTorch UCB", "MVR", "uniform random"].index)
    for c, d in enumerate(dims):
        for name in names:
            curves = [v["cumulative"] for k, v in runs.items() if k[0] == d and k[2] == name]
            simple = [v["simple"] for k, v in runs.items() if k[0] == d and k[2] == name]
            n = min(len(x) for x in curves)
            t = np.arange(1, n + 1)
            style = "--" if name == "BoTorch UCB" else "-"
            axes[0, c].loglog(t, np.mean([x[:n] for x in curves], 0), style, label=name)
            axes[1, c].loglog(t, np.mean([x[:n] for x in simple], 0) + 1e-6, style, label=name)
        ref = [v["cumulative"] for k, v in runs.items() if k[0] == d and k[2] == "GP-UCB"]
        n = len(ref[0])
        t = np.arange(16, n + 1, dtype=float)        # ln ln T >= 1: the rate's shape is meaningless near T = e
        lower = regret_lower_rate(t, d)
        scale = np.mean([x[-1] for x in ref]) / lower[-1]
        axes[0, c].loglog(t, scale * lower, "k:", lw=1, label="sqrt(T (ln T)^d (ln ln T)^-d), scaled")
        axes[1, c].loglog(t, scale * lower / t, "k:", lw=1, label="lower rate / T, scaled")
        axes[0, c].set_title(f"S^{d}: cumulative regret (mean over functions)", fontsize=8)
        axes[1, c].set_title(f"S^{d}: simple regret", fontsize=8)
        axes[1, c].set_xlabel("T")
        axes[0, c].set_ylabel("cumulative regret R_T")
        axes[1, c].set_ylabel("simple regret")
        axes[0, c].legend(fontsize=6)
    fig.tight_layout()
    return fig


def _figure_timing(tm: dict) -> Figure:
    fig = Figure(figsize=(5.0, 3.8))
    ax = fig.add_subplot()
    ts = np.array([tm["t1"], tm["t2"]], dtype=float)
    inc = np.array([np.median(tm["inc"].baseline), np.median(tm["inc"].method)]) / (N_ADD * tm["loops"])
    ref = np.array([np.median(tm["refit"].baseline), np.median(tm["refit"].method)])
    ax.loglog(ts, inc, "o-", label=f"incremental update (exponent {math.log2(inc[1] / inc[0]):.2f})")
    ax.loglog(ts, ref, "s-", label=f"refit: Cholesky + solve (exponent {math.log2(ref[1] / ref[0]):.2f})")
    for p, style in ((2, "k:"), (3, "k--")):
        ax.loglog(ts, inc[0] * (ts / ts[0]) ** p, style, lw=0.8, label=f"t^{p} from the first point")
    ax.set_xlabel("t (observations)")
    ax.set_ylabel("CPU seconds per step (median of interleaved repeats)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)]
    with threadpool_limits(1):
        spec = spectrum(sz, rngs[0])
        ig = information_gain_study(sz, rngs[1])
        runs = regret_study(sz, rngs[2])
        tm = timing_study(sz, rngs[3])
        sk_err = sklearn_agreement(rngs[4])

    T = ig["T"].astype(float)
    T_lo = sz.mig_T / 8
    L0 = LENGTHSCALE
    flat_new = {d: _flatness(T, ig["greedy"][d, L0], mig_rate_new(T, d), T_lo) for d in DIMS}
    flat_old = {d: _flatness(T, ig["greedy"][d, L0], mig_rate_old(T, d), T_lo) for d in DIMS}
    far = T_BOUND >= 1e6
    bound_vs_new = {d: _slope(mig_rate_new(T_BOUND[far], d), ig["bound_far"][d][far]) for d in DIMS}
    bound_vs_old = {d: _slope(mig_rate_old(T_BOUND[far], d), ig["bound_far"][d][far]) for d in DIMS}
    greedy_over_bound = max(float(np.max(ig["greedy"][k] / ig["bound"][k])) for k in ig["greedy"])
    win = T >= T_lo
    rate_new_exp = {d: _slope(T[win], mig_rate_new(T[win], d)) for d in DIMS}
    rate_old_exp = {d: _slope(T[win], mig_rate_old(T[win], d)) for d in DIMS}
    rate_fin_exp = _slope(T[win], mig_rate_finite_rank(T[win]))
    # the band of exponents closer to the new rate's than to the old rate's or to a levelled-off (ln T) gain's
    band = {d: (0.5 * (rate_fin_exp + rate_new_exp[d]), 0.5 * (rate_new_exp[d] + rate_old_exp[d])) for d in DIMS}
    cells = {(d, ls): {"se": _slope(T[win], ig["greedy"][d, ls][win]),
                       "control": _slope(T[win], ig["control"][d, ls][win]), "r": control_r(d, ls),
                       "lo": band[d][0], "hi": band[d][1]} for d in DIMS for ls in MIG_LENGTHSCALES}
    alt_diff = max(abs(_slope(T[win], ig["alt"][d][win]) - cells[d, L0]["se"]) for d in DIMS)

    keys = sorted({(k[0], k[1]) for k in runs})
    R_ucb = np.array([runs[d, j, "GP-UCB"]["cumulative"][-1] for d, j in keys])
    R_rand = np.array([runs[d, j, "uniform random"]["cumulative"][-1] for d, j in keys])
    inc, ref, step = tm["inc"], tm["refit"], tm["step"]
    log_pair = math.log2(tm["t2"] / tm["t1"])
    cost_slope = math.log2(inc.ratio) / log_pair              # exponent p in cost ~ t^p
    refit_slope = math.log2(ref.ratio) / log_pair

    metrics: dict[str, float] = {}
    for d in DIMS:
        metrics[f"trace_err_d{d}"] = spec["trace_err"][d]
        metrics[f"quad_abs_err_d{d}"] = spec["quad_err"][d]
        metrics[f"greedy_gamma_T{sz.mig_T}_d{d}"] = float(ig["greedy"][d, L0][-1])
        metrics[f"bound_T{sz.mig_T}_d{d}"] = float(ig["bound"][d, L0][-1])
        metrics[f"greedy_over_new_rate_T{sz.mig_T}_d{d}"] = float(ig["greedy"][d, L0][-1] / mig_rate_new(T[-1], d))
        metrics[f"greedy_over_old_rate_T{sz.mig_T}_d{d}"] = float(ig["greedy"][d, L0][-1] / mig_rate_old(T[-1], d))
        metrics[f"flatness_new_d{d}"], metrics[f"flatness_old_d{d}"] = flat_new[d], flat_old[d]
        metrics[f"bound_slope_vs_new_rate_d{d}"], metrics[f"bound_slope_vs_old_rate_d{d}"] = bound_vs_new[d], bound_vs_old[d]
        metrics[f"bound_over_new_rate_T1e12_d{d}"] = float(ig["bound_far"][d][-1] / mig_rate_new(1e12, d))
        metrics[f"bound_over_old_rate_T1e12_d{d}"] = float(ig["bound_far"][d][-1] / mig_rate_old(1e12, d))
    metrics["gram_relerr_top50_d2"] = spec["gram_relerr_top50"]
    for d in sz.bandit_dims:
        for name in ("GP-UCB", "MVR", "uniform random", "BoTorch UCB"):
            vals = [runs[k]["cumulative"][-1] for k in runs if k[0] == d and k[2] == name]
            simp = [runs[k]["simple"][-1] for k in runs if k[0] == d and k[2] == name]
            if vals and name != "BoTorch UCB":
                tag = name.replace(" ", "_").replace("-", "").lower()
                metrics[f"cum_regret_{tag}_d{d}"] = float(np.mean(vals))
                metrics[f"simple_regret_{tag}_d{d}"] = float(np.mean(simp))
    bt = [(k, runs[k]) for k in runs if k[2] == "BoTorch UCB"]
    if bt:
        n = len(bt[0][1]["indices"])
        metrics["botorch_same_picks_fraction"] = float(np.mean(
            [np.mean(v["indices"] == runs[k[0], k[1], "GP-UCB"]["indices"][:n]) for k, v in bt]))
        for d in sz.bandit_dims:
            ours = [runs[k[0], k[1], "GP-UCB"]["cumulative"][n - 1] for k, _ in bt if k[0] == d]
            theirs = [v["cumulative"][n - 1] for k, v in bt if k[0] == d]
            metrics[f"cum_regret_T{n}_gpucb_d{d}"] = float(np.mean(ours))
            metrics[f"cum_regret_T{n}_botorch_ucb_d{d}"] = float(np.mean(theirs))
    for d in DIMS:
        metrics[f"new_rate_exponent_d{d}"], metrics[f"old_rate_exponent_d{d}"] = rate_new_exp[d], rate_old_exp[d]
        for ls in MIG_LENGTHSCALES:
            c, tag = cells[d, ls], f"d{d}_l{ls:g}"
            metrics[f"control_r_{tag}"] = c["r"]
            metrics[f"greedy_gamma_T{sz.mig_T}_{tag}"] = float(ig["greedy"][d, ls][-1])
            metrics[f"control_greedy_gamma_T{sz.mig_T}_{tag}"] = float(ig["control"][d, ls][-1])
            metrics[f"growth_exponent_{tag}"], metrics[f"control_growth_exponent_{tag}"] = c["se"], c["control"]
    metrics["finite_rank_rate_exponent"] = rate_fin_exp
    metrics["growth_exponent_max_change_other_candidates"] = alt_diff
    per_add = N_ADD * tm["loops"]
    metrics |= {f"update_cpu_seconds_t{tm['t1']}": float(np.median(inc.baseline)) / per_add,
                f"update_cpu_seconds_t{tm['t2']}": float(np.median(inc.method)) / per_add,
                f"refit_cpu_seconds_t{tm['t1']}": float(np.median(ref.baseline)),
                f"refit_cpu_seconds_t{tm['t2']}": float(np.median(ref.method)),
                "update_cost_slope": cost_slope, "refit_cost_slope": refit_slope,
                "update_timing_same_work_ratio": inc.control_ratio, "refit_timing_same_work_ratio": ref.control_ratio,
                "ucb_step_cpu_seconds_incremental_t1000": float(np.median(step.method)),
                "ucb_step_cpu_seconds_refit_t1000": float(np.median(step.baseline)), "speedup_t1000": step.speedup,
                "ucb_step_timing_same_work_ratio": step.control_ratio,
                "sklearn_max_abs_diff": sk_err, "incremental_vs_refit_max_abs_diff": tm["inc_vs_refit_err"],
                "greedy_logdet_rel_err": max(ig["logdet_err"].values()), "greedy_over_bound_max": greedy_over_bound}

    mig_note = (f"sigma^2={NOISE_VAR}, greedy max-variance over {sz.mig_candidates} uniform candidates (within 1-1/e "
                "of their MIG), fixed across seeds: the exponent moves by "
                f"{alt_diff:.1e} on an independent candidate set, so every seed gives one and the same piece of "
                "evidence. Band: the exponent is closer to the new rate's than to the old rate's (upper edge) and "
                "than to a levelled-off gain's ln T (lower edge: a finite-rank kernel), so an early plateau fails "
                "too. ln ln T moves only from ~1.5 to ~2.0 over the window: a weak test, hence the exponential-decay "
                "control. The theorem is an upper bound: failing here does not refute it; it says this window and "
                "lengthscale cannot show the new rate.")
    claims = []
    for d in DIMS:
        for ls in MIG_LENGTHSCALES:
            c = cells[d, ls]
            claims.append(Claim(
                f"S^{d}, l = {ls:g}: measured information gain grows closer to (ln T)^{d + 1} (ln ln T)^-{d} than to "
                f"(ln T)^{d + 1} or to ln T",
                c["se"], "in", (c["lo"], c["hi"]),
                baseline=f"band between the midpoints of the rates' exponents over the same T (ln T {rate_fin_exp:.3f}, "
                         f"new {rate_new_exp[d]:.3f}, old {rate_old_exp[d]:.3f})",
                metric=f"local growth exponent d log gamma~_T / d log T over T in [{T_lo:g}, {sz.mig_T}]",
                paper="O((ln T)^(d+1) (ln ln T)^-d)", note=mig_note,
                control=c["control"],
                control_arm=f"Poisson kernel on S^{d}, r = {c['r']:.3f} (same lambda_1/lambda_0 as the SE kernel at "
                            f"l = {ls:g}, exponential eigen-decay: MIG ~ (ln T)^(d+1), the old rate), same candidates "
                            "and greedy",
                falsifier="growth exponent outside the band (closer to (ln T)^(d+1), or levelled off like ln T), or "
                          "the exponential-decay control landing inside the band too"))
    claims += [
        Claim("Our incremental GP update costs ~t^2 per step (not t^3)", cost_slope, "in", T2_BAND,
              baseline="t^2 band", timing_control=inc.control_ratio, timing_tolerance=inc.tolerance,
              metric=f"exponent log2(cost(t={tm['t2']}) / cost(t={tm['t1']})) of {per_add} updates, process CPU time, "
                     f"median of {len(inc.method)} interleaved repeats",
              control=refit_slope,
              control_arm="refit per step (new Cholesky + solve: the incremental update removed), same t, same clock",
              note="One blocked forward solve per observation. Both t are past the 32 MB L3 cache (the factor is "
                   "16 and 64 MB), so both sizes are in the same memory regime. Timed with compare_times (process "
                   "CPU time, interleaved, the t-cost timed twice as a same-work control).",
              falsifier=f"exponent outside [{T2_BAND[0]}, {T2_BAND[1]}] (about 3 would mean a refactorisation per "
                        "step), or the refit control landing inside the band"),
        step.claim("Our incremental GP-UCB step is >= 5x faster than refitting at t = 1000", ">=", 5.0,
                   as_="speedup", baseline="5x (issue's margin) over a refit step timed in the same run",
                   note=f"One GP-UCB step = observe + posterior over {sz.timing_candidates} candidates + argmax; "
                        "refit = new Cholesky + solves for all candidates. compare_times: process CPU time, "
                        "interleaved, the refit timed twice as the same-work control.",
                   falsifier="speed-up below 5x"),
        # checks
        Claim("Sanity (not the paper's claim): GP-UCB has lower cumulative regret than uniform random",
              float(R_ucb.mean()), "<", float(R_rand.mean()), baseline="uniform random on the same functions/noise",
              metric=f"cumulative regret at T={sz.bandit_T}, mean over {len(keys)} RKHS functions (norm {NORM_B})",
              paired=list(R_ucb - R_rand), kind="check",
              note="A sanity check of the bandit loop against a strawman (uniform random), not evidence for the "
                   "paper: typical RKHS functions, not the paper's worst-case ones; the lower bound itself cannot "
                   "be checked by simulation."),
        Claim("Trace identity: sum_n N(d,n) lambda_n = 1 (d = 1, 2, 3)", max(spec["trace_err"].values()), "<=",
              1e-12, baseline="1e-12", metric="max |sum - 1|", kind="check",
              note="Addition theorem; closed-form eigenvalues and multiplicities."),
        Claim("Closed-form eigenvalues equal Funk-Hecke quadrature (d = 1, 2, 3)", max(spec["quad_err"].values()),
              "<=", 1e-12, baseline="1e-12", metric=f"max |closed - quadrature|, n <= {N_SPEC}", kind="check",
              note="Gauss-Jacobi quadrature of the Funk-Hecke integral with normalised Gegenbauer polynomials."),
        Claim("Greedy information gain equals 1/2 log det(I + K_S / sigma^2) recomputed from scratch",
              max(ig["logdet_err"].values()), "<=", 1e-8, baseline="1e-8", metric="max relative difference",
              kind="check", note="Chain rule of the log determinant."),
        Claim("Greedy gamma~_T never exceeds the analytic MIG upper bound", greedy_over_bound, "<=", 1.0,
              baseline="1 (bound)", metric="max over d, l, T of gamma~_T / bound", kind="check",
              note="A theorem (Vakili-style bound with the exact spectrum); a violation would be a bug."),
        Claim("Analytic MIG bound grows no faster than the new rate (T in [1e6, 1e12])", max(bound_vs_new.values()),
              "<=", 1.0, baseline="slope 1", metric="max over d of the log-log slope of bound vs new rate",
              kind="check", note="The paper's theorem, evaluated numerically (not reproduced)."),
        Claim("Analytic MIG bound grows slower than the old rate (T in [1e6, 1e12])", max(bound_vs_old.values()),
              "<", 1.0, baseline="slope 1", metric="max over d of the log-log slope of bound vs old rate",
              kind="check", note="The (ln ln T)^-d improvement, visible in the exact bound."),
        Claim("GP posterior equals scikit-learn's GaussianProcessRegressor (fixed kernel)", sk_err, "<=", 1e-8,
              baseline="1e-8", metric="max |difference| of mean and variance", kind="check",
              note="RBF(0.5), alpha = sigma^2, optimizer=None; batch predict and tracked candidates."),
        Claim("Incremental posterior equals the refit posterior at t = 1001", tm["inc_vs_refit_err"], "<=", 1e-8,
              baseline="1e-8", metric="max |difference| over candidates", kind="check",
              note="Same data, exact algebra."),
    ]

    tables = {
        "information_gain": [{"T": int(t), **{f"greedy S^{d} l={ls:g}": float(ig["greedy"][d, ls][i])
                                              for d in DIMS for ls in MIG_LENGTHSCALES},
                              **{f"bound S^{d} l={ls:g}": float(ig["bound"][d, ls][i]) for d in DIMS
                                 for ls in MIG_LENGTHSCALES}} for i, t in enumerate(ig["T"])],
        "growth_exponents": [{"d": d, "l": ls, "SE": round(c["se"], 4), "Poisson control": round(c["control"], 4),
                              "r": round(c["r"], 3), "band lo": round(c["lo"], 4), "band hi": round(c["hi"], 4),
                              "new rate": round(rate_new_exp[d], 4), "old rate": round(rate_old_exp[d], 4),
                              "SE in band": bool(c["lo"] <= c["se"] <= c["hi"]),
                              "control in band": bool(c["lo"] <= c["control"] <= c["hi"])}
                             for (d, ls), c in sorted(cells.items())],
        "regret": [{"d": d, "policy": name, "cumulative": float(np.mean(
            [runs[k]["cumulative"][-1] for k in runs if k[0] == d and k[2] == name])), "simple": float(np.mean(
            [runs[k]["simple"][-1] for k in runs if k[0] == d and k[2] == name]))}
            for d in sz.bandit_dims for name in sorted({k[2] for k in runs})],
        "timing": [{"t": t, "incremental update (CPU s)": float(np.median(a.method if t == tm["t2"] else a.baseline))
                    / per_add, "refit (CPU s)": float(np.median(r.method if t == tm["t2"] else r.baseline))}
                   for t in (tm["t1"], tm["t2"]) for a, r in [(inc, ref)]],
        "information_gain_control": [{"T": int(t), **{f"greedy Poisson S^{d} l={ls:g}": float(ig["control"][d, ls][i])
                                                     for d in DIMS for ls in MIG_LENGTHSCALES}}
                                     for i, t in enumerate(ig["T"])],
    }
    figures = {"spectrum": _figure_spectrum(spec), "information_gain": _figure_mig(ig, cells),
               "regret": _figure_regret(runs, sz.bandit_dims), "timing": _figure_timing(tm)}
    notes = "" if botorch_available() else "BoTorch is not installed: its UCB peer was skipped."
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures, notes=notes)
