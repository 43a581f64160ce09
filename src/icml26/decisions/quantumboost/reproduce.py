"""Reproduction of [B10]: lazy vs greedy KL projections in Barak-Hardt-Kale boosting, and vs AdaBoost.

Measured on bundled data (breast_cancer, digits odd-vs-even, make_classification 2000x20) with 0/10/20% of the
training labels flipped (test labels clean), gamma = 0.1, exact weighted-error stumps, T = ceil(4 ln(1/eps)/gamma^2):
  greedy        BHK, exact projection every round
  lazy_every    lazy (cumulative weights), exact projection every round
  lazy_trigger  lazy, exact projection when the density bound < delta/2
  quantumboost  lazy, approximate (sampled) projection when the density bound < delta/2 (QuantumBoost, classically)
  unprojected   multiplicative weights without projection (ablation: how smooth D_t is without it)
  adaboost      sklearn AdaBoostClassifier (SAMME), same T, sklearn depth-1 trees
The quantum part of [B10] is not simulated: the quantum query counts are an analytic cost model (queries.py).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from scipy.optimize import minimize
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.ensemble import AdaBoostClassifier
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

from icml26.harness import Budget, Claim, Outcome, seed_everything

from .boost import LazyProjectionBoost, bhk_rounds, boost
from .projection import generalized_kl, kl_project_dense
from .queries import classical_estimate_queries, quantum_estimate_queries


@dataclass(frozen=True)
class Sizes:
    datasets: tuple[str, ...]
    noise: tuple[float, ...]             # fraction of training labels flipped
    epsilons: tuple[float, ...]          # target error = density delta (0.3: the cap min(1, .) binds, our choice)
    max_rounds: int | None               # cap on T (None: the BHK T)


SIZES = {
    Budget.QUICK: Sizes(("breast_cancer",), (0.0, 0.2), (0.1, 0.3), 100),
    Budget.STANDARD: Sizes(("breast_cancer", "digits_parity", "make_classification"), (0.0, 0.1, 0.2), (0.1, 0.3),
                           None),
    Budget.FULL: Sizes(("breast_cancer", "digits_parity", "make_classification"), (0.0, 0.1, 0.2),
                       (0.05, 0.1, 0.3), None),
}
GAMMA = 0.1
KAPPA, ETA = 0.1, 0.05
TEST_FRACTION = 0.3
EPS_GRID = (0.01, 0.02, 0.05, 0.1, 0.2)   # for the query-count model
METHODS = {  # name -> LazyProjectionBoost keyword arguments
    "greedy": dict(projection="greedy", approx=False),
    "lazy_every": dict(projection="lazy", project_every=1, approx=False),
    "lazy_trigger": dict(projection="lazy", approx=False),
    "quantumboost": dict(projection="lazy", approx=True, kappa=KAPPA, eta=ETA),
    "unprojected": dict(projection="none"),
}


# helper functions

def _load(name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if name == "breast_cancer":
        return load_breast_cancer(return_X_y=True)
    if name == "digits_parity":
        X, y = load_digits(return_X_y=True)
        return X, y % 2
    if name == "make_classification":
        return make_classification(n_samples=2000, n_features=20, random_state=seed)
    raise ValueError(f"unknown dataset {name!r}")


def _flip(y: np.ndarray, frac: float, rng: np.random.Generator) -> np.ndarray:
    y = y.copy()
    idx = rng.choice(y.size, size=int(round(frac * y.size)), replace=False)
    y[idx] = 1 - y[idx]
    return y


def _staged_error(model, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array([np.mean(p != y) for p in model.staged_predict(X)])


def _slope(x, y) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _lazy_greedy_identity(X: np.ndarray, y: np.ndarray, eps: float, T: int, seed: int) -> tuple[float, int]:
    """max_i |M_t(i) greedy - M_t(i) lazy| over the rounds before min(1, .) first binds in either run, and
    that number of rounds. Without capping Pi is a pure rescaling, so the two must coincide there."""
    kw = dict(gamma=GAMMA, delta=eps, n_rounds=T, approx=False, random_state=seed, record_measures=True)
    g = boost(X, 2 * y - 1, projection="greedy", **kw)
    lz = boost(X, 2 * y - 1, projection="lazy", project_every=1, **kw)
    n = min(g.measures.shape[0], lz.measures.shape[0])
    capped = g.capped[:n] | lz.capped[:n]
    t_star = int(np.argmax(capped)) if capped.any() else n
    if t_star == 0:
        return 0.0, 0
    return float(np.abs(g.measures[:t_star] - lz.measures[:t_star]).max()), t_star


def _projection_optimality(seed: int, n_instances: int = 12, m: int = 25) -> float:
    """max over random instances of KL(Pi(N) || N) - KL(M* || N), M* from a numerical solver (SLSQP) of
    min_M KL(M || N) s.t. M in [0, 1]^m, mean(M) >= delta, started away from the closed form. <= 0 (up to
    solver tolerance) means the closed form min(1, cN) is the KL projection."""
    rng = np.random.default_rng(seed)
    worst = -math.inf
    for _ in range(n_instances):
        delta = rng.uniform(0.2, 0.6)
        N = rng.uniform(0.0, 1.0, m) ** 3 * rng.uniform(0.05, 0.5)  # sparse-ish, below delta on average
        M = kl_project_dense(N, delta)
        fun = lambda v: float(np.sum(v * np.log(v / N)) - v.sum() + N.sum())  # noqa: E731
        jac = lambda v: np.log(v / N)  # noqa: E731
        x0 = np.clip(rng.uniform(delta, 1.0, m), 1e-6, 1.0)
        with warnings.catch_warnings():  # SLSQP clips its trial steps to the bounds and says so
            warnings.simplefilter("ignore", RuntimeWarning)
            res = minimize(fun, x0, jac=jac, method="SLSQP", bounds=[(1e-12, 1.0)] * m,
                           constraints=[{"type": "ineq", "fun": lambda v: v.mean() - delta,
                                         "jac": lambda v: np.full(m, 1.0 / m)}],
                           options={"ftol": 1e-14, "maxiter": 1000})
        v = np.clip(res.x, 1e-12, 1.0)
        if v.mean() < delta:  # make the solver's point feasible before comparing
            v = np.minimum(1.0, v * delta / v.mean())
        worst = max(worst, generalized_kl(M, N) - generalized_kl(v, N))
    return worst


# the experiment

def reproduce(budget: Budget, seed: int) -> Outcome:
    sizes = budget.pick(SIZES)
    rng = seed_everything(seed)
    rows, curves, smooth_curves, identity = [], {}, {}, {}
    for name in sizes.datasets:
        X, y = _load(name, seed)
        Xtr, Xte, ytr_clean, yte = train_test_split(X, y, test_size=TEST_FRACTION, stratify=y, random_state=seed)
        for eps in sizes.epsilons:
            T = min(bhk_rounds(GAMMA, eps), sizes.max_rounds or math.inf)
            for noise in sizes.noise:
                ytr = _flip(ytr_clean, noise, rng)
                if name == sizes.datasets[0] and noise == max(sizes.noise):
                    identity[eps] = _lazy_greedy_identity(Xtr, ytr, eps, T, seed)
                models = {k: LazyProjectionBoost(gamma=GAMMA, epsilon=eps, n_estimators=T, random_state=seed, **kw)
                          for k, kw in METHODS.items()}
                models["adaboost"] = AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=T,
                                                        random_state=seed)
                for method, model in models.items():
                    model.fit(Xtr, ytr)
                    staged = _staged_error(model, Xtr, ytr)
                    row = dict(dataset=name, eps=eps, noise=noise, method=method, rounds=T,
                               train_error=float(staged[-1]), first_round_error=float(staged[0]),
                               test_accuracy=float(model.score(Xte, yte)))
                    if method != "adaboost":
                        q = model.query_counts_
                        row.update(n_projections=model.n_projections_,
                                   max_smoothness=float(model.smoothness_history_.max() * eps),  # max D m delta
                                   min_advantage=float(model.advantage_history_.min()),
                                   mean_advantage=float(model.advantage_history_.mean()),
                                   capped_fraction=float(model.trace_.capped.mean()),
                                   classical_queries=q["classical_total"],
                                   quantum_model_queries=q["quantum_model_total"])
                        if (name, eps) == (sizes.datasets[0], sizes.epsilons[0]):
                            smooth_curves[(noise, method)] = (model.smoothness_history_ * eps,
                                                              model.projection_rounds_)
                    rows.append(row)
                    if (name, eps) == (sizes.datasets[0], sizes.epsilons[0]):
                        curves[(noise, method)] = staged

    def pick(method: str, key: str, noise: float | None = None, eps: float | None = None) -> np.ndarray:
        return np.array([r[key] for r in rows if r["method"] == method and (noise is None or r["noise"] == noise)
                         and (eps is None or r["eps"] == eps)], dtype=float)

    # query-count model per density estimate (kappa' = kappa/3 as in the approximate projection)
    kp = KAPPA / 3
    qrows = [dict(eps=e, classical=classical_estimate_queries(e * (1 - kp), kp, ETA),
                  quantum_model=quantum_estimate_queries(e * (1 - kp), kp, ETA)) for e in EPS_GRID]
    slope_c = _slope(EPS_GRID, [r["classical"] for r in qrows])
    slope_q = _slope(EPS_GRID, [r["quantum_model"] for r in qrows])

    hi = max(sizes.noise)
    metrics: dict[str, float] = {}
    for method in [*METHODS, "adaboost"]:
        metrics[f"train_error_{method}"] = float(pick(method, "train_error").mean())
        for eps in sizes.epsilons:
            metrics[f"test_acc_{method}_noise{hi:g}_eps{eps:g}"] = float(pick(method, "test_accuracy", hi, eps).mean())
            metrics[f"test_acc_{method}_noise0_eps{eps:g}"] = float(pick(method, "test_accuracy", 0.0, eps).mean())
        if method != "adaboost":
            metrics[f"projections_{method}"] = float(pick(method, "n_projections").sum())
            metrics[f"max_smoothness_{method}"] = float(pick(method, "max_smoothness").max())
            metrics[f"classical_queries_{method}"] = float(pick(method, "classical_queries").sum())
            metrics[f"quantum_model_queries_{method}"] = float(pick(method, "quantum_model_queries").sum())
    metrics["min_advantage_quantumboost"] = float(pick("quantumboost", "min_advantage").min())
    for eps in sizes.epsilons:  # how often the cap min(1, .) is active; without it, Pi is a pure rescaling
        metrics[f"capped_fraction_greedy_eps{eps:g}"] = float(pick("greedy", "capped_fraction", eps=eps).mean())
    metrics["projection_ratio_greedy_over_quantumboost"] = (
        metrics["projections_greedy"] / max(metrics["projections_quantumboost"], 1.0))
    metrics["query_slope_classical"], metrics["query_slope_quantum_model"] = slope_c, slope_q

    def paired(method: str, key: str, ref: str, margin: float = 0.0, **where) -> list[float]:
        keep = lambda r: all(r[k] == v for k, v in where.items())  # noqa: E731
        a = [r for r in rows if r["method"] == method and keep(r)]
        b = [r for r in rows if r["method"] == ref and keep(r)]
        return [x[key] - z[key] - margin for x, z in zip(a, b)]

    kp = KAPPA / 3
    # after an approximate projection the bound restarts at >= delta (1 - k')/(1 + k') and loses at most a
    # factor (1 - gamma) per round, so at least this many rounds pass before it drops below delta/2
    min_gap = math.log(2 * (1 - kp) / (1 + kp)) / -math.log1p(-GAMMA)
    clean = [r for r in rows if r["method"] == "quantumboost" and r["noise"] == 0.0]
    strong = max(r["train_error"] / r["eps"] for r in clean)
    weak = max(r["first_round_error"] / r["eps"] for r in clean)  # control: one weak learner, no boosting
    ident_err = max(v[0] for v in identity.values())
    ident_rounds = ", ".join(f"eps={e:g}: {v[1]} rounds" for e, v in identity.items())
    kl_gap = _projection_optimality(seed)
    metrics["lazy_greedy_max_abs_diff_uncapped"], metrics["kl_projection_gap_vs_solver"] = ident_err, kl_gap
    metrics["max_train_error_over_eps_clean"] = strong
    metrics["max_first_round_error_over_eps_clean"] = weak

    claims = [
        Claim(statement="Lazy triggered (approximate) projections match greedy BHK's final training error "
                        "(within 1 percentage point)",
              measured=metrics["train_error_quantumboost"], op="<=",
              reference=metrics["train_error_greedy"] + 0.01,
              baseline="greedy BHK (exact projection every round) training error + 0.01, same data and T",
              metric="mean final training error (noisy training labels) of lazy-triggered approximate BHK",
              falsifier="lazy-triggered approximate BHK's mean training error more than 1 pp above greedy BHK's",
              paired=paired("quantumboost", "train_error", "greedy", 0.01),
              note="mean over datasets x eps x noise levels (paired over those runs); training error is measured "
                   "on the flipped labels"),
        Claim(statement="Boosting the weak learners gives a strong learner: lazy QuantumBoost's training error "
                        "< eps on clean labels",
              measured=strong, op="<", reference=1.0,
              baseline="eps (the target error = density delta of BHK's guarantee)",
              metric="max over clean-label runs of (final training error / eps)",
              falsifier="some clean-label run ends with training error >= eps, or the first round's single weak "
                        "learner already below eps",
              paper="boosting provably turns weak learners into a strong learner", bar=True, control=weak,
              control_arm="the first round alone: one weak learner (stump), no boosting, same runs",
              note=f"BHK's guarantee assumes advantage >= gamma = {GAMMA} on every round; the smallest measured "
                   f"advantage of exact stumps was {metrics['min_advantage_quantumboost']:.3f}; one stump: "
                   f"max error / eps {weak:.3f}"),
        *[Claim(statement=f"Under {hi:.0%} label noise, smooth boosting's test accuracy >= AdaBoost's (eps={eps:g})",
                measured=metrics[f"test_acc_quantumboost_noise{hi:g}_eps{eps:g}"], op=">=",
                reference=metrics[f"test_acc_adaboost_noise{hi:g}_eps{eps:g}"],
                baseline="sklearn AdaBoost (SAMME, depth-1 trees), same T, same noisy training labels",
                metric="mean clean-test accuracy of lazy-triggered approximate BHK",
                falsifier=f"lazy-triggered approximate BHK's mean clean-test accuracy below AdaBoost's at "
                          f"{hi:.0%} noise, eps={eps:g}",
                paired=paired("quantumboost", "test_accuracy", "adaboost", noise=hi, eps=eps),
                note=f"expected, not guaranteed (spec); paired over data sets; the cap min(1, .) is active in "
                     f"{metrics[f'capped_fraction_greedy_eps{eps:g}']:.0%} of greedy rounds (without it the "
                     "projection is a rescaling and smoothing does nothing); a delta below the noise rate lets "
                     "the measure sit on the flipped labels")
          for eps in sizes.epsilons],
        Claim(statement="Lazy projects at least 5x less often than greedy",
              measured=metrics["projection_ratio_greedy_over_quantumboost"], op=">=", reference=5.0, kind="check",
              baseline="the 5x asked for by the reproduction spec", metric="#projections greedy / #projections lazy",
              paper="lazy: projections performed infrequently rather than every iteration",
              note=f"by construction of the trigger rule: at gamma = {GAMMA} at least {min_gap:.1f} rounds pass "
                   "between projections (density bound restarts near delta, falls by <= (1 - gamma) per round), "
                   "so the ratio is ~>= 6 on any data"),
        Claim(statement="Every D_t of the lazy booster is 2/(delta m)-smooth",
              measured=metrics["max_smoothness_quantumboost"], op="<=", reference=2.0, kind="check",
              baseline="the bound 1/(trigger delta m) of the trigger rule, trigger = 1/2",
              metric="max over runs and rounds of max_i D_t(i) * m * delta",
              note=f"guaranteed by the trigger rule (up to the density-estimation error of approximate "
                   f"projections); greedy stays <= 1 (measured {metrics['max_smoothness_greedy']:.3f}); without "
                   f"projection it reaches {metrics['max_smoothness_unprojected']:.3f}"),
        Claim(statement="Lazy and greedy give identical measures while min(1, .) is not active",
              measured=ident_err, op="<=", reference=1e-9, kind="check",
              baseline="0 (up to float rounding)", metric="max_t max_i |M_t greedy - M_t lazy| before the first cap",
              note=f"{sizes.datasets[0]}, {hi:.0%} noise, exact projections every round; compared {ident_rounds}"),
        Claim(statement="The exact KL projection min(1, cN) is optimal",
              measured=kl_gap, op="<=", reference=1e-6, kind="check",
              baseline="a numerical solver (SLSQP) of min KL(M||N) over {M in [0,1]^m : mean(M) >= delta}",
              metric="max over 12 random instances of KL(closed form) - KL(solver)",
              note="BHK's closed form; negative means the closed form is below the solver's value"),
        Claim(statement="Modelled quantum density-estimation queries scale like 1/sqrt(eps) (classical: 1/eps)",
              measured=slope_q, op="in", reference=(-0.6, -0.4), kind="check",
              baseline="exponent -1/2 of amplitude estimation", metric="log-log slope of modelled queries vs eps",
              paper="O~(W / (sqrt(eps) gamma^4)) total cost",
              note=f"holds BY CONSTRUCTION of the analytic cost model (not a simulation); classical slope "
                   f"{slope_c:.3f}"),
    ]

    # figures
    first = sizes.datasets[0]
    fig_err = Figure(figsize=(10, 3.6))
    for ax, noise in zip(fig_err.subplots(1, len(sizes.noise), squeeze=False)[0], sizes.noise):
        for method in ("greedy", "lazy_every", "quantumboost", "adaboost"):
            ax.plot(np.arange(1, len(curves[(noise, method)]) + 1), curves[(noise, method)], label=method)
        ax.axhline(sizes.epsilons[0], color="grey", ls=":", label="eps")
        ax.set(title=f"{first}, noise {noise:.0%}", xlabel="round", ylabel="training error", yscale="log")
    ax.legend(fontsize=7)
    fig_smooth = Figure(figsize=(6, 3.6))
    ax = fig_smooth.subplots()
    for method in ("greedy", "quantumboost", "unprojected"):
        s, proj = smooth_curves[(0.0, method)]
        ax.plot(np.arange(1, s.size + 1), s, label=method)
    ax.axhline(2.0, color="k", ls="--", label="2 (lazy bound)")
    ax.set(title=f"smoothness, {first}, noise 0", xlabel="round", ylabel="max_i D_t(i) m delta", yscale="log")
    ax.legend(fontsize=7)
    fig_q = Figure(figsize=(5, 3.6))
    ax = fig_q.subplots()
    ax.loglog(EPS_GRID, [r["classical"] for r in qrows], "o-", label=f"classical sampling (slope {slope_c:.2f})")
    ax.loglog(EPS_GRID, [r["quantum_model"] for r in qrows], "s-",
              label=f"quantum MODEL, amplitude est. (slope {slope_q:.2f})")
    ax.set(xlabel="eps = delta", ylabel="queries per density estimate", title="query-count model")
    ax.legend(fontsize=7)

    return Outcome(metrics=metrics, claims=claims, tables={"runs": rows, "query_model": qrows},
                   figures={"training_error": fig_err, "smoothness": fig_smooth, "query_model": fig_q},
                   notes="quantum_model_* query counts are an analytic cost model, not a circuit simulation")
