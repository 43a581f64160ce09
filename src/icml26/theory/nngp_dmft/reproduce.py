"""Reproduction of [A02]: DMFT of the generalisation dynamics vs exact simulation of kernel regression.

Task: N eigenmodes, lambda_k ∝ k^-1.5 (a = 1.5), teacher lambda_k w*_k^2 ∝ k^-2 (b = 2), label noise 0.05, P
samples, gradient flow from w = 0; times log-spaced in [1, 3e4]. Everything below is computed in this run:

1. Learning curve (gamma = 0): DMFT E_g(t) vs the mean of the exact simulation over independent data sets;
   relative error before / after the simulated early-stopping optimum; t_opt and E_opt of both curves; simulated
   error at the DMFT-predicted t_opt vs at the end of training (early stopping, paired over data sets).
2. Time exponent: slope of log E_g vs log t on t in [3, 30] (our window) vs -(b-1)/a.
3. Weight decay gamma = 3e-4 (our choice) on the same data sets: the weight-decay effect E_g(0) - E_g(gamma),
   DMFT vs simulation (paired); late-time error and t_opt vs gamma = 0; t -> infinity vs the ridge deterministic
   equivalent.
4. Langevin (T = 5e-5, gamma = 3e-4; our choices) on the same data sets: the thermal term E_g(T) - E_g(0), DMFT vs
   simulation (averaged exactly over the Brownian noise given each data set; paired); t -> infinity vs the
   Bayesian GP-posterior closed form;
   the simulated posterior vs scikit-learn's GaussianProcessRegressor.
5. A real NNGP spectrum: depth-2 ReLU NNGP kernel on the 1797 digits, parity target, no label noise; DMFT with
   the kernel's eigenvalues vs gradient flow on P digits sampled without replacement (real, non-Gaussian features).
6. Sample-size exponent: E_opt vs P on a larger task, DMFT vs simulation; solver vs simulation wall time at the
   largest P (both run back to back in this run).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from threadpoolctl import threadpool_limits

from icml26.harness import Budget, Claim, Outcome, compare_times, seed_everything
from icml26.testbeds.ntk import fit_power_law

from .nngp_features import digits_nngp_features
from .simulate import draw_problem, gp_posterior_error, simulate_generalization_curve, simulate_run
from .theory import (
    PowerLawTask,
    bayes_limit,
    dmft_generalization_curve,
    gradient_flow_infinite_data,
    optimal_stopping_time,
    ridge_equivalent,
)


@dataclass(frozen=True)
class Sizes:
    N: int                   # eigenmodes of the learning-curve task
    P: int                   # samples of the learning-curve task
    draws: int               # simulated data sets averaged
    n_t: int                 # log-spaced times in [T_MIN, T_MAX]
    scale_N: int             # eigenmodes of the sample-size task
    scale_P: tuple           # sample sizes
    scale_draws: int
    digits_P: int            # sampled digits for the real-kernel check
    digits_draws: int


SIZES = {
    Budget.QUICK: Sizes(400, 100, 6, 17, 600, (40, 80, 160), 4, 100, 6),
    Budget.STANDARD: Sizes(1000, 200, 40, 25, 2000, (50, 100, 200, 400), 12, 300, 20),
    Budget.FULL: Sizes(2000, 400, 40, 33, 4000, (100, 200, 400, 800), 24, 300, 60),
}

A, B, SIGMA2 = 1.5, 2.0, 0.05
T_MIN, T_MAX = 1.0, 3e4
FIT_WINDOW = (3.0, 30.0)      # power-law window in t (our choice: after lambda_1 t ~ 1, before t ~ P^a / 10)
GAMMA = 3e-4                  # weight decay for claim 3 (our choice, ~ 0.2 / t_opt)
TEMP = 5e-5                   # Langevin temperature (our choice: thermal error ~ the gradient-flow error)
TOL_BEFORE, TOL_AFTER = 0.05, 0.10
T_OPT_FACTOR = 1.5
EXP_TOL = 0.1
TIMING_REPEATS = 3
WD_EFFECT_FLOOR = 0.05        # the weight-decay effect is compared where it exceeds 5% of its peak (fresh-eyes review)
CONTROL_ARM = ("the same theory with the collective response switched off (kappa(z) = z, D12 = 1: population "
               "eigenvalues, label noise at rate 1/P, no renormalisation), same run")


# helper functions

def _slope(t: np.ndarray, e: np.ndarray) -> float:
    m = (t >= FIT_WINDOW[0]) & (t <= FIT_WINDOW[1])
    return fit_power_law(e[m], t[m])[0]


def _figure(t, th, sim, se, th_wd, sim_wd, th_lv, sim_lv, scale_rows) -> Figure:
    fig = Figure(figsize=(10, 4))
    a1, a2 = fig.subplots(1, 2)
    a1.loglog(t, th, "k-", label="DMFT, gamma = 0")
    a1.errorbar(t, sim, yerr=2 * se, fmt="o", ms=3, label="simulation, gamma = 0")
    a1.loglog(t, th_wd, "r--", label=f"DMFT, gamma = {GAMMA:g}")
    a1.loglog(t, sim_wd, "rs", ms=3, label=f"simulation, gamma = {GAMMA:g}")
    a1.loglog(t, th_lv, "g:", label=f"DMFT, Langevin T = {TEMP:g}")
    a1.loglog(t, sim_lv, "g^", ms=3, label="simulation, Langevin")
    a1.set_xlabel("training time t")
    a1.set_ylabel("excess test error E_g")
    a1.set_title("[A02] learning curve")
    a1.legend(fontsize=7)
    Ps = [r["P"] for r in scale_rows]
    a2.loglog(Ps, [r["E_opt_dmft"] for r in scale_rows], "k-", label="DMFT")
    a2.loglog(Ps, [r["E_opt_sim"] for r in scale_rows], "o", label="simulation")
    a2.set_xlabel("samples P")
    a2.set_ylabel("early-stopped error E_opt")
    a2.set_title("sample-size scaling")
    a2.legend(fontsize=7)
    fig.tight_layout()
    return fig


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    s_curve, s_scale, s_check = (int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(3))
    task = PowerLawTask(sz.N, A, B, SIGMA2)
    lam, w2 = task.lam, task.w2
    t = np.logspace(np.log10(T_MIN), np.log10(T_MAX), sz.n_t)

    with threadpool_limits(1):
        # 1. learning curve, gamma = 0
        th = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2)
        t_opt_th, e_opt_th = optimal_stopping_time(t, th)
        # the control: the same theory with the collective response switched off (kappa = z, D12 = 1)
        nv = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2, self_consistent=False)
        t_opt_nv, e_opt_nv = optimal_stopping_time(t, nv)
        t_sim = np.r_[t, t_opt_th, t_opt_nv]
        runs = simulate_generalization_curve(t_sim, lam, w2, sz.P, sigma2=SIGMA2, n_draws=sz.draws, seed=s_curve)
        runs_gf = runs[:, :-2]                                # (draws, n_t): the t grid
        sim, at_topt_th, at_topt_nv = runs_gf.mean(0), runs[:, -2], runs[:, -1]
        runs = runs[:, :-1]                                   # columns: t grid, DMFT t_opt (as before)
        se = runs[:, :-1].std(0, ddof=1) / np.sqrt(sz.draws)
        t_opt_sim, e_opt_sim = optimal_stopping_time(t, sim)
        rel = th / sim - 1
        before, after = t <= t_opt_sim, t > t_opt_sim
        err_before, err_after = float(np.abs(rel[before]).max()), float(np.abs(rel[after]).max())
        i_before = int(np.flatnonzero(before)[np.abs(rel[before]).argmax()])   # where the error before t_opt peaks
        se_rel_before = float(se[i_before] / sim[i_before])   # the simulation's relative SE there
        rel_nv = nv / sim - 1
        nv_before, nv_after = float(np.abs(rel_nv[before]).max()), float(np.abs(rel_nv[after]).max())
        slope_sim, slope_th = _slope(t, sim), _slope(t, th)

        # 3. weight decay on the same data sets (same seed), with t = infinity (ridge)
        th_wd = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2, weight_decay=GAMMA)
        runs_wd = simulate_generalization_curve(np.r_[t, np.inf], lam, w2, sz.P, sigma2=SIGMA2,
                                                weight_decay=GAMMA, n_draws=sz.draws, seed=s_curve)
        sim_wd, ridge_sim = runs_wd[:, :-1].mean(0), runs_wd[:, -1]
        t_opt_wd, _ = optimal_stopping_time(t, sim_wd)
        err_wd = float(np.abs(th_wd / sim_wd - 1).max())
        nv_wd_curve = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2, weight_decay=GAMMA,
                                                self_consistent=False)
        nv_wd = float(np.abs(nv_wd_curve / sim_wd - 1).max())
        # the weight-decay effect itself, E_g(gamma = 0) - E_g(gamma), on the same data sets (paired): the full-curve
        # error above peaks at t ~ 5, before weight decay acts, so it repeats claim 1 (fresh-eyes review)
        wd_sim = (runs_gf - runs_wd[:, :-1]).mean(0)
        wd_mask = np.abs(wd_sim) > WD_EFFECT_FLOOR * np.abs(wd_sim).max()
        err_wd_effect = float(np.abs((th - th_wd)[wd_mask] / wd_sim[wd_mask] - 1).max())
        nv_wd_effect = float(np.abs((nv - nv_wd_curve)[wd_mask] / wd_sim[wd_mask] - 1).max())
        ridge_th = ridge_equivalent(lam, w2, sz.P, GAMMA, SIGMA2)
        ridge_nv = ridge_equivalent(lam, w2, sz.P, GAMMA, SIGMA2, self_consistent=False)
        ridge_dmft = float(dmft_generalization_curve(np.array([1e9]), lam, w2, sz.P, sigma2=SIGMA2,
                                                     weight_decay=GAMMA)[0])

        # 4. Langevin and the Bayesian limit, same data sets
        th_lv = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2, weight_decay=GAMMA, temperature=TEMP)
        runs_lv = simulate_generalization_curve(np.r_[t, np.inf], lam, w2, sz.P, sigma2=SIGMA2, weight_decay=GAMMA,
                                                temperature=TEMP, n_draws=sz.draws, seed=s_curve)
        sim_lv, bayes_sim = runs_lv[:, :-1].mean(0), runs_lv[:, -1]
        err_lv = float(np.abs(th_lv / sim_lv - 1).max())
        nv_lv_curve = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2, weight_decay=GAMMA, temperature=TEMP,
                                                self_consistent=False)
        nv_lv = float(np.abs(nv_lv_curve / sim_lv - 1).max())
        # the thermal term itself, E_g(T) - E_g(T = 0), on the same data sets (paired)
        th_sim = (runs_lv[:, :-1] - runs_wd[:, :-1]).mean(0)
        err_thermal = float(np.abs((th_lv - th_wd) / th_sim - 1).max())
        nv_thermal = float(np.abs((nv_lv_curve - nv_wd_curve) / th_sim - 1).max())
        bayes_th = bayes_limit(lam, w2, sz.P, GAMMA, TEMP, SIGMA2)
        bayes_nv = bayes_limit(lam, w2, sz.P, GAMMA, TEMP, SIGMA2, self_consistent=False)
        bayes_dmft = float(dmft_generalization_curve(np.array([1e9]), lam, w2, sz.P, sigma2=SIGMA2,
                                                     weight_decay=GAMMA, temperature=TEMP)[0])
        cold = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2, weight_decay=GAMMA, temperature=1e-14)
        cold_err = float(np.abs(cold / th_wd - 1).max())

        # 5. real NNGP kernel on digits
        dlam, dfeat, dw, dy = digits_nngp_features(depth=2)
        t_dig = np.logspace(0, 5, sz.n_t)
        th_dig = dmft_generalization_curve(t_dig, dlam, dw ** 2, sz.digits_P)
        rng_d = np.random.default_rng(s_check + 1)
        sim_dig = np.mean([simulate_run(t_dig, dlam, dfeat[idx], dy[idx], dw)
                           for idx in (rng_d.choice(len(dy), sz.digits_P, replace=False)
                                       for _ in range(sz.digits_draws))], axis=0)
        err_dig = float(np.abs(th_dig / sim_dig - 1).max())
        nv_dig = float(np.abs(dmft_generalization_curve(t_dig, dlam, dw ** 2, sz.digits_P, self_consistent=False)
                              / sim_dig - 1).max())
        a_dig = fit_power_law(dlam, lo=5, hi=300)[0]

        # 6. sample-size scaling and solver vs simulation time
        stask = PowerLawTask(sz.scale_N, A, B, SIGMA2)
        slam, sw2 = stask.lam, stask.w2
        scale_rows = []
        for P in sz.scale_P:
            th_P = dmft_generalization_curve(t, slam, sw2, P, sigma2=SIGMA2)
            nv_P = dmft_generalization_curve(t, slam, sw2, P, sigma2=SIGMA2, self_consistent=False)
            sim_P = simulate_generalization_curve(t, slam, sw2, P, sigma2=SIGMA2, n_draws=sz.scale_draws,
                                                  seed=s_scale + P).mean(0)
            to_th, eo_th = optimal_stopping_time(t, th_P)
            to_sim, eo_sim = optimal_stopping_time(t, sim_P)
            scale_rows.append({"P": P, "t_opt_dmft": to_th, "t_opt_sim": to_sim, "E_opt_dmft": eo_th,
                               "E_opt_sim": eo_sim, "E_opt_control": optimal_stopping_time(t, nv_P)[1],
                               "max_rel_err": float(np.abs(th_P / sim_P - 1).max())})
        Ps = np.array(sz.scale_P, dtype=float)
        alpha_sim = fit_power_law(np.array([r["E_opt_sim"] for r in scale_rows]), Ps)[0]
        alpha_th = fit_power_law(np.array([r["E_opt_dmft"] for r in scale_rows]), Ps)[0]
        alpha_nv = fit_power_law(np.array([r["E_opt_control"] for r in scale_rows]), Ps)[0]
        # solver vs the simulation it predicts at the largest P: interleaved, CPU time, same-work control
        P_big = sz.scale_P[-1]
        tc = compare_times(lambda: dmft_generalization_curve(t, slam, sw2, P_big, sigma2=SIGMA2),
                           lambda: simulate_generalization_curve(t, slam, sw2, P_big, sigma2=SIGMA2,
                                                                 n_draws=sz.scale_draws, seed=s_scale + P_big),
                           repeats=TIMING_REPEATS, warmup=1, clock="cpu")

        # checks: Talbot convergence, limits, simulation vs scikit-learn ridge
        th24 = dmft_generalization_curve(t, lam, w2, sz.P, sigma2=SIGMA2, n_talbot=24)
        talbot = float(np.abs(th24 / th - 1).max())
        big_P = dmft_generalization_curve(t[:5], lam, w2, 10 ** 9)
        inf_data = float(np.abs(big_P / gradient_flow_infinite_data(t[:5], lam, w2) - 1).max())
        from sklearn.linear_model import Ridge
        rng = np.random.default_rng(s_check)
        Psi, y, w_star = draw_problem(lam, w2, sz.P, SIGMA2, rng)
        w_sk = Ridge(alpha=sz.P * GAMMA, fit_intercept=False, solver="svd").fit(Psi, y).coef_
        e_sk = float((lam * (w_sk - w_star) ** 2).sum())
        e_gf = float(simulate_run(np.array([np.inf]), lam, Psi, y, w_star, weight_decay=GAMMA)[0])
        sk_err = abs(e_gf / e_sk - 1)
        e_gp = gp_posterior_error(lam, Psi, y, w_star, weight_decay=GAMMA, temperature=TEMP)
        e_post = float(simulate_run(np.array([np.inf]), lam, Psi, y, w_star, weight_decay=GAMMA,
                                    temperature=TEMP)[0])
        gp_err = abs(e_post / e_gp - 1)

    pred_slope = (B - 1) / A
    metrics = {
        "max_rel_err_before_topt": err_before, "max_rel_err_after_topt": err_after,
        "t_opt_dmft": t_opt_th, "t_opt_sim": t_opt_sim, "E_opt_dmft": e_opt_th, "E_opt_sim": e_opt_sim,
        "E_sim_at_dmft_topt": float(at_topt_th.mean()), "E_sim_end": float(runs[:, -2].mean()),
        "time_exponent_sim": slope_sim, "time_exponent_dmft": slope_th, "time_exponent_pred": pred_slope,
        "max_rel_err_weight_decay": err_wd, "t_opt_sim_weight_decay": t_opt_wd,
        "E_end_sim_weight_decay": float(runs_wd[:, -2].mean()), "ridge_sim": float(ridge_sim.mean()),
        "ridge_equivalent": ridge_th, "ridge_dmft_t1e9": ridge_dmft,
        "max_rel_err_langevin": err_lv, "bayes_sim": float(bayes_sim.mean()), "bayes_closed_form": bayes_th,
        "bayes_dmft_t1e9": bayes_dmft, "langevin_thermal_share_end": float(1 - th_wd[-1] / th_lv[-1]),
        "langevin_cold_limit_err": cold_err, "max_rel_err_digits_nngp": err_dig,
        "digits_nngp_spectrum_exponent": a_dig, "digits_E_end_sim": float(sim_dig[-1]), "sklearn_gp_rel_err": gp_err,
        "P_exponent_sim": alpha_sim, "P_exponent_dmft": alpha_th, "P_exponent_control": alpha_nv,
        "speed_ratio_sim_over_dmft": tc.speedup, "timing_same_work_ratio": tc.control_ratio,
        "control_max_rel_err_before_topt": nv_before, "control_max_rel_err_after_topt": nv_after,
        "control_t_opt": t_opt_nv, "control_E_opt": e_opt_nv, "E_sim_at_control_topt": float(at_topt_nv.mean()),
        "control_max_rel_err_weight_decay": nv_wd, "control_ridge": ridge_nv,
        "control_max_rel_err_langevin": nv_lv, "control_bayes": bayes_nv, "control_max_rel_err_digits": nv_dig,
        "sim_rel_se_at_max_err_before": se_rel_before, "t_at_max_err_before": float(t[i_before]),
        "t_at_max_rel_err_weight_decay": float(t[np.abs(th_wd / sim_wd - 1).argmax()]),
        "t_at_max_rel_err_langevin": float(t[np.abs(th_lv / sim_lv - 1).argmax()]),
        "max_rel_err_weight_decay_effect": err_wd_effect, "control_max_rel_err_weight_decay_effect": nv_wd_effect,
        "max_rel_err_thermal_term": err_thermal, "control_max_rel_err_thermal_term": nv_thermal,
        "talbot_16_vs_24": talbot, "infinite_data_limit_err": inf_data, "sklearn_ridge_rel_err": sk_err,
    }
    setting = (f"N={sz.N}, P={sz.P}, a={A}, b={B}, sigma2={SIGMA2}, {sz.draws} simulated data sets, "
               f"{sz.n_t} log-spaced t in [{T_MIN:g}, {T_MAX:g}]")
    lp = f"P={sz.scale_P[-1]}, N={sz.scale_N}"
    lt = np.log(T_OPT_FACTOR)
    ridge_m = float(ridge_sim.mean())
    bayes_m = float(bayes_sim.mean())
    claims = [
        Claim("The DMFT predicts the typical generalisation error over training time (before the optimum)",
              err_before, "<=", TOL_BEFORE, baseline="tolerance 5%", metric="max |DMFT / simulation - 1|, t <= t_opt",
              paper="quantitative agreement", bar=True, control=nv_before, control_arm=CONTROL_ARM,
              note=f"{setting}. The largest error sits at t = {t[i_before]:.3g}, where the simulated mean's relative "
                   f"standard error is {se_rel_before:.2%} ({sz.draws} data sets): part of the measured error there is "
                   "sampling noise of the simulation, not the theory",
              falsifier="DMFT off the simulated mean by more than 5% at some t before the simulated optimum"),
        Claim("The DMFT predicts the generalisation error late in training (noise-fitting phase)",
              err_after, "<=", TOL_AFTER, baseline="tolerance 10%", metric="max |DMFT / simulation - 1|, t > t_opt",
              note=setting + ". Finite-P edge effects grow late (spec pilot: ~5%).", bar=True,
              control=nv_after, control_arm=CONTROL_ARM,
              falsifier="DMFT off the simulated mean by more than 10% at some t after the optimum"),
        Claim("The DMFT places the early-stopping optimum", abs(np.log(t_opt_th / t_opt_sim)), "<=", lt, bar=True,
              baseline="simulated t_opt, within a factor 1.5", control=abs(np.log(t_opt_nv / t_opt_sim)),
              control_arm=CONTROL_ARM, metric="|log(t_opt(DMFT) / t_opt(simulation))|",
              note=f"parabola in log t through the grid minimum; ratio {t_opt_th / t_opt_sim:.3f} (control "
                   f"{t_opt_nv / t_opt_sim:.3f})",
              falsifier="predicted optimal stopping time off by more than a factor 1.5"),
        Claim("The DMFT predicts the early-stopped (optimal) error", abs(e_opt_th / e_opt_sim - 1), "<=", TOL_BEFORE,
              baseline="tolerance 5%", metric="|E_opt(DMFT) / E_opt(simulation) - 1|", bar=True,
              control=abs(e_opt_nv / e_opt_sim - 1), control_arm=CONTROL_ARM,
              falsifier="predicted optimal error off by more than 5%"),
        Claim("Stopping at the DMFT-predicted t_opt beats the strongest stopping rule without it",
              float(at_topt_th.mean()), "<",
              baselines={f"training to the end (t = {T_MAX:g})": float(runs[:, -2].mean()),
                         "stopping at the control theory's t_opt": float(at_topt_nv.mean())},
              paired={f"training to the end (t = {T_MAX:g})": list(at_topt_th - runs[:, -2]),
                      "stopping at the control theory's t_opt": list(at_topt_th - at_topt_nv)},
              metric="simulated error at the DMFT t_opt (mean over data sets)",
              baseline="strongest of: no stopping; stopping where the theory without collective response says",
              falsifier="the simulated error at the predicted t_opt not below the best alternative's, or the "
                        "per-data-set difference not separable from 0"),
        Claim("The DMFT predicts the sample-size scaling exponent of the early-stopped error",
              abs(alpha_sim - alpha_th), "<=", EXP_TOL, bar=True, baseline=f"within {EXP_TOL} of the simulation's",
              control=abs(alpha_sim - alpha_nv), control_arm=CONTROL_ARM,
              metric="|exponent of E_opt vs P: simulation - DMFT|",
              note=f"simulation {alpha_sim:.3f}, DMFT {alpha_th:.3f}, control {alpha_nv:.3f}; N={sz.scale_N}, "
                   f"P in {sz.scale_P}, {sz.scale_draws} data sets per P",
              falsifier="simulated exponent more than 0.1 from the DMFT's"),
        Claim("The DMFT predicts the effect of weight decay on the dynamics", err_wd_effect, "<=", TOL_AFTER, bar=True,
              baseline="tolerance 10%",
              metric=f"max |DMFT / simulation - 1| of E_g(gamma = 0) - E_g(gamma = {GAMMA:g}), same data sets, where the "
                     f"simulated effect exceeds {WD_EFFECT_FLOOR:.0%} of its peak",
              control=nv_wd_effect, control_arm=CONTROL_ARM,
              note=f"the full curve with weight decay is off by at most {err_wd:.2%} (control {nv_wd:.2%}), but that "
                   f"maximum sits at t = {t[np.abs(th_wd / sim_wd - 1).argmax()]:.3g}, before weight decay acts, so it "
                   "repeats the gamma = 0 claim; this claim tests the weight-decay term alone",
              falsifier="the DMFT's weight-decay effect off the simulated one by more than 10% at some t"),
        Claim("Weight decay lowers the late-time rise", float(runs_wd[:, -2].mean()), "<", float(runs[:, -2].mean()),
              baseline=f"gamma = 0 on the same data sets, t = {T_MAX:g}", metric=f"simulated E_g(t = {T_MAX:g}), "
              f"gamma = {GAMMA:g}", paired=list(runs_wd[:, -2] - runs[:, -2]),
              falsifier="late-time error with weight decay not below that without, or not separable from 0"),
        Claim("The ridge deterministic equivalent gives the converged error with weight decay",
              abs(ridge_th / ridge_m - 1), "<=", TOL_BEFORE, baseline="tolerance 5%", bar=True,
              control=abs(ridge_nv / ridge_m - 1), control_arm=CONTROL_ARM + " (kappa = gamma)",
              metric="|E_ridge(closed form) / simulated E_g(t = inf) - 1|",
              falsifier="closed-form limit off the simulated converged error by more than 5%"),
        Claim("The DMFT predicts the thermal (Langevin) term of the dynamics", err_thermal, "<=", TOL_AFTER,
              baseline="tolerance 10%",
              metric=f"max |DMFT / simulation - 1| of E_g(T = {TEMP:g}) - E_g(T = 0) over t, gamma = {GAMMA:g}, same "
                     "data sets", bar=True, control=nv_thermal, control_arm=CONTROL_ARM,
              note="simulation averaged exactly over the Brownian noise given each data set (OU covariance); "
                   f"thermal share of the late-time error {1 - th_wd[-1] / th_lv[-1]:.0%}. The full Langevin curve is "
                   f"off by at most {err_lv:.2%} (control {nv_lv:.2%}), with its maximum at t = "
                   f"{t[np.abs(th_lv / sim_lv - 1).argmax()]:.3g}, before the thermal term matters: that repeats the "
                   "gamma = 0 claim. The spec called this term 'our derivation, not yet validated'",
              falsifier="the DMFT's thermal term off the simulated one by more than 10% at some t"),
        Claim("t -> infinity of Langevin gives the Bayesian GP posterior error", abs(bayes_th / bayes_m - 1),
              "<=", TOL_BEFORE, baseline="tolerance 5%", bar=True,
              control=abs(bayes_nv / bayes_m - 1), control_arm=CONTROL_ARM + " (kappa = gamma)",
              metric="|E_Bayes(closed form) / simulated posterior error - 1|",
              note="posterior with likelihood variance P T and prior variance T / gamma",
              falsifier="closed-form Bayesian error off the simulated posterior error by more than 5%"),
        Claim("The DMFT predicts gradient flow on a real NNGP kernel (digits, ReLU depth 2)", err_dig, "<=", TOL_AFTER,
              baseline="tolerance 10%", metric="max |DMFT / simulation - 1| over t in [1, 1e5]", bar=True,
              control=nv_dig, control_arm=CONTROL_ARM,
              note=f"N = {len(dlam)} eigenmodes (spectrum exponent {a_dig:.2f} on ranks 5-300), parity target, "
                   f"P = {sz.digits_P} digits sampled without replacement, {sz.digits_draws} draws; test error over "
                   "all 1797 digits. Real, non-Gaussian features: the DMFT assumes Gaussian ones",
              falsifier="DMFT off the simulation on the real kernel by more than 10% at some t"),
        tc.claim("The DMFT solver is >= 10x faster than the simulation it predicts (largest size)", ">=", 10.0,
                 as_="speedup", bar=True, baseline="10x",
                 control_arm="none: a cost ratio of two different computations; the timing carries its same-work "
                             "control (the simulation timed against itself)",
                 note=f"simulation = {sz.scale_draws} exact data sets (SVD + closed-form dynamics) on the same t grid, "
                      f"{lp}; process CPU time, {TIMING_REPEATS} interleaved repeats, one thread",
                 falsifier="speed-up below 10"),
        # checks
        Claim("Power-law decay of E_g in t at the spectral exponent -(b-1)/a", slope_sim, "in",
              (pred_slope - EXP_TOL, pred_slope + EXP_TOL), baseline=f"(b-1)/a = {pred_slope:.3f} ± {EXP_TOL}",
              metric=f"fitted decay exponent of the simulated curve, t in {FIT_WINDOW}", kind="check",
              note=f"a property of the task (population gradient flow on the power-law spectrum decays as "
                   f"t^-(b-1)/a), not of the DMFT: the control theory's curve has it too; DMFT's exponent on the "
                   f"same window {slope_th:.3f}"),
        Claim("Weight decay does not move the optimal stopping time much", t_opt_wd / t_opt_sim, "in",
              (1 / T_OPT_FACTOR, T_OPT_FACTOR), baseline="gamma = 0, factor 1.5 band", kind="check",
              metric="simulated t_opt(gamma) / t_opt(0)",
              note="our statement about the chosen gamma (~0.2 / t_opt), not the abstract's; reported"),
        Claim("t -> infinity of the DMFT with weight decay equals the ridge deterministic equivalent",
              abs(ridge_dmft / ridge_th - 1), "<=", 1e-6, kind="check", baseline="1e-6",
              metric="|E_DMFT(t = 1e9) / E_ridge - 1|", note="final-value theorem; exact identity"),
        Claim("t -> infinity of the Langevin DMFT equals the Bayesian closed form", abs(bayes_dmft / bayes_th - 1),
              "<=", 1e-6, kind="check", baseline="1e-6", metric="|E_DMFT(t = 1e9, T) / E_Bayes - 1|"),
        Claim("Langevin at T -> 0 recovers gradient flow with weight decay", cold_err, "<=", 1e-8, kind="check",
              baseline="1e-8", metric="max relative difference over t, T = 1e-14",
              note="the thermal term is additive and linear in T, so this holds by construction"),
        Claim("The simulated Bayesian posterior error equals scikit-learn's GaussianProcessRegressor (linear kernel)",
              gp_err, "<=", 1e-6, kind="check", baseline="1e-6", metric="relative difference, one data set"),
        Claim("Talbot inversion converged: M = 16 vs M = 24 nodes", talbot, "<=", 1e-5, kind="check",
              baseline="1e-5", metric="max relative difference over t"),
        Claim("P -> infinity recovers population gradient flow sum lambda w^2 exp(-2 lambda t)", inf_data, "<=",
              1e-4, kind="check", baseline="1e-4", metric="max relative difference, P = 1e9, first 5 times"),
        Claim("The exact simulation at t = infinity with weight decay is scikit-learn's Ridge (alpha = P gamma)",
              sk_err, "<=", 1e-8, kind="check", baseline="1e-8", metric="relative difference of the test error"),
    ]
    tables = {
        "learning_curve": [{"t": float(t[i]), "dmft": float(th[i]), "sim": float(sim[i]), "sim_se": float(se[i]),
                            "rel_err": float(rel[i]), "dmft_wd": float(th_wd[i]), "sim_wd": float(sim_wd[i]),
                            "dmft_langevin": float(th_lv[i]), "sim_langevin": float(sim_lv[i]),
                            "t_digits": float(t_dig[i]), "dmft_digits": float(th_dig[i]), "sim_digits": float(sim_dig[i])}
                           for i in range(len(t))],
        "sample_size_scaling": scale_rows,
    }
    figures = {"learning_curve": _figure(t, th, sim, se, th_wd, sim_wd, th_lv, sim_lv, scale_rows)}
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures)
