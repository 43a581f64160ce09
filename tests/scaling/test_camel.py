"""Tests for [A18] CAMEL: recovery of a known capacity-aware law, the s = 0 special case, the optimal mixture's
shift with size, the loss-to-benchmark law, compute allocation, baselines, bad input, determinism, and the quick
reproduction."""

import math
import re

import numpy as np
import pytest

from icml26.harness import Budget, Outcome
from icml26.scaling.camel import (
    CAMELLaw,
    DataMixingLaw,
    LossToBenchmark,
    PowerMixtureLaw,
    RegMixBaseline,
    SyntheticMixtureLaw,
    allocate_compute,
    check_mixtures,
    minimize_on_simplex,
)
from icml26.testbeds.learning_curves import mixture_design

SIZES = np.array([1e6, 2e6, 4e6, 8e6])


@pytest.fixture(scope="module")
def data():
    truth = SyntheticMixtureLaw(noise=0.001)
    mixes = mixture_design(3, 12, seed=0)
    N = np.repeat(SIZES, len(mixes))
    R = np.tile(mixes, (len(SIZES), 1))
    return truth, N, R, truth.losses(N, R, np.random.default_rng(0))


@pytest.fixture(scope="module")
def fitted(data):
    truth, N, R, L = data
    return CAMELLaw().fit(N, R, L)


def test_camel_recovers_known_law(data, fitted):
    truth, N, R, L = data
    tl = truth.law()
    # predictions at 10x the largest fitted size within 1% (README tolerance; noise 0.1%) ...
    test = np.random.default_rng(1).dirichlet(np.ones(3), 200)
    rel = np.abs(fitted.predict(8e7, test) / tl.predict(8e7, test) - 1)
    assert rel.max() < 0.01
    # ... and the identified exponents / interactions within 3 standard errors (+0.01)
    for i in range(3):
        for k in (2, 6 + 2):   # alpha_i and s_i3
            assert abs(fitted.params_[i, k] - truth.params[i, k]) <= 3 * fitted.stderr_[i, k] + 0.01, (i, k)
    assert np.isfinite(fitted.stderr_).all() and (fitted.stderr_ >= 0).all()
    r_hat, r_true = fitted.optimal_mixture(8e7), tl.optimal_mixture(8e7)
    regret = tl.predict_target(8e7, r_hat[None])[0] - tl.predict_target(8e7, r_true[None])[0]
    assert 0 <= regret < 1e-3


def test_fit_is_deterministic(data, fitted):
    truth, N, R, L = data
    again = CAMELLaw().fit(N, R, L)
    assert np.array_equal(again.params_, fitted.params_)


def test_s_zero_optimum_does_not_move_with_size(data):
    truth, N, R, L = data
    law = CAMELLaw(capacity_aware=False).fit(N, R, L)
    assert np.allclose(law.optimal_mixture(1e6), law.optimal_mixture(1e9), atol=1e-4)


def test_negative_s_moves_optimum_toward_that_source():
    tl = SyntheticMixtureLaw().law()
    r = [tl.optimal_mixture(n)[2] for n in (1e6, 1e7, 1e8)]
    assert r[0] < r[1] < r[2]
    flipped = SyntheticMixtureLaw()
    flipped.params = flipped.params.copy()
    flipped.params[2, 8] = +0.2
    r2 = [flipped.law().optimal_mixture(n)[2] for n in (1e6, 1e8)]
    assert r2[1] <= r2[0] + 1e-6


def test_minimize_on_simplex_matches_closed_form():
    target = np.array([0.2, 0.5, 0.3])
    r = minimize_on_simplex(lambda R: ((R - target) ** 2).sum(1), 3)
    assert np.allclose(r, target, atol=1e-4) and math.isclose(r.sum(), 1.0)


def test_loss_to_benchmark_law():
    L = np.linspace(1.0, 4.0, 30)
    b, k, L0 = 0.8, 3.0, 2.5
    acc = b / (1 + np.exp(k * (L - L0)))
    law = LossToBenchmark(chance=0.0).fit(L, acc)
    assert np.allclose(law.params_, [b, k, L0], rtol=1e-3)
    grid = np.linspace(-5, 10, 200)
    p = law.predict(grid)
    assert (np.diff(p) <= 1e-12).all() and p.min() >= 0.0 and p.max() <= b + 1e-9
    noisy = LossToBenchmark(chance=None).fit(L, acc + 0.002 * np.random.default_rng(0).standard_normal(30))
    assert np.isfinite(noisy.stderr_).all()


def test_allocation_respects_budget_and_strategies():
    costs = SIZES / SIZES[0]
    B = 10 * costs.sum()
    for s in ("smallest", "uniform_count", "uniform_compute"):
        n = allocate_compute(SIZES, costs, B, strategy=s)
        assert (n * costs).sum() <= B and (n >= 0).all()
    assert allocate_compute(SIZES, costs, B, strategy="smallest").tolist() == [150, 0, 0, 0]
    assert allocate_compute(SIZES, costs, B, strategy="uniform_count").tolist() == [10] * 4
    # greedy with a variance that only falls with runs at the largest size
    var = lambda c: 1.0 / (1 + c[3]) + 0.001 / (1 + c.sum())  # noqa: E731
    n = allocate_compute(SIZES, costs, B, strategy="greedy_variance", variance=var)
    assert (n * costs).sum() <= B and n[3] == n.max()


def test_baselines_fit_and_predict(data):
    truth, N, R, L = data
    dml = DataMixingLaw().fit(N, R, L)
    rm = RegMixBaseline(n_candidates=500).fit(N, R, L)
    test = mixture_design(3, 4, seed=3)
    for law in (dml, rm):
        assert law.predict(8e7, test).shape == (len(test), 3)
        r = law.optimal_mixture(8e7)
        assert r.shape == (3,) and math.isclose(r.sum(), 1.0, rel_tol=1e-9)
    # per-size DML reproduces a fitted size closely
    assert np.abs(dml.predict(SIZES[-1], test) / truth.law().predict(SIZES[-1], test) - 1).max() < 0.01


# bad input: every public entry point refuses it before any work, naming the argument

_T = SyntheticMixtureLaw()
_MIX = mixture_design(3, 2, seed=0)                          # vertices, centroid, 2 Dirichlet mixtures
_N = np.repeat(SIZES, len(_MIX))
_R = np.tile(_MIX, (len(SIZES), 1))
_L = _T.losses(_N, _R)
_L0 = _L.copy()
_L0[0, 0] = 0.0
_LNAN = _L.copy()
_LNAN[1, 2] = np.nan
_COSTS = SIZES / SIZES[0]
_LB = np.linspace(1.0, 4.0, 8)


def _fitted(kind):
    if kind == "camel":
        return CAMELLaw().fit(_N, _R, _L)
    if kind == "dml":
        return DataMixingLaw().fit(_N, _R, _L)
    if kind == "regmix":
        return RegMixBaseline(regressor="linear", n_candidates=100, top_k=5).fit(_N, _R, _L)
    return LossToBenchmark().fit(_LB, 0.5 / (1 + np.exp(2 * (_LB - 2.5))))


# (callable or "fitted-kind.method", kwargs, error, message fragment); each case returned a number or failed with a
# low-level error (IndexError, AttributeError, a scipy bounds error, ...) before the checks
BAD_INPUTS = [
    (CAMELLaw, dict(huber=0.0), ValueError, "huber must be > 0"),
    (CAMELLaw, dict(n_starts=1.5), TypeError, "n_starts must be an integer"),
    (CAMELLaw, dict(capacity_aware="yes"), TypeError, "capacity_aware must be True or False"),
    ("camel.__init__", dict(random_state=-1), ValueError, "random_state must be an integer >= 0"),
    ("new-camel.fit", dict(N=_N, R=_R * 1.1, L=_L), ValueError, "R must sum to 1"),
    ("new-camel.fit", dict(N=_N[:-1], R=_R, L=_L), ValueError, "one model size per run"),
    ("new-camel.fit", dict(N=-_N, R=_R, L=_L), ValueError, "model sizes N must be positive"),
    ("new-camel.fit", dict(N=_N[:5], R=_R[:5], L=_L[:5]), ValueError, "cannot determine"),
    ("new-camel.fit", dict(N=_N, R=_R, L=_LNAN), ValueError, "L has 1 NaN or infinite"),
    ("new-camel.fit", dict(N=_N, R=_R, L=_L, domain_weights=[0.5, 0.5]), ValueError, "one weight per validation"),
    ("new-camel.fit", dict(N=_N, R=_R, L=_L, N0=-1.0), ValueError, "N0 must be > 0"),
    ("new-camel.predict", dict(N=8e7, R=_MIX), ValueError, "not fitted yet"),
    ("camel.predict", dict(N=8e7, R=[[0.5, 0.5], [1.0, 0.0]]), ValueError, "must have 3 columns"),
    ("camel.predict", dict(N=_N[:3], R=_MIX), ValueError, "scalar or one size per mixture"),
    ("camel.predict_target", dict(N=[np.inf], R=_MIX), ValueError, "N has 1 NaN or infinite"),
    ("camel.optimal_mixture", dict(N_target=-1.0), ValueError, "N_target must be > 0"),
    ("camel.prediction_variance", dict(N=_N, R=_R, N_target=8e7, r_target=_MIX[:2]), ValueError, "one mixture"),
    ("camel.prediction_variance", dict(N=_N, R=_R, N_target=8e7, r_target=_MIX[3], noise=-0.1), ValueError,
     "noise must be > 0"),
    ("new-dml.fit", dict(N=_N, R=_R, L=_L0), ValueError, "L must hold positive losses"),
    ("new-dml.fit", dict(N=_N, R=_R, L=_L, domain_weights=[5.0, -1.0, 0.0]), ValueError, "probability vector"),
    ("new-dml.fit", dict(N=_N, R=_R, L=_L[:-1]), ValueError, "one row per run"),
    ("new-dml.predict", dict(N=8e7, R=_MIX), ValueError, "not fitted yet"),
    ("dml.predict", dict(N=8e7, R=np.zeros((0, 3))), ValueError, "R is empty"),
    ("dml.optimal_mixture", dict(N_target=0.0), ValueError, "N_target must be > 0"),
    (RegMixBaseline, dict(n_candidates=1000.5), TypeError, "n_candidates must be an integer"),
    (RegMixBaseline, dict(valid_frac="0.2"), TypeError, "valid_frac must be a real number"),
    (RegMixBaseline, dict(prior=[1.0, -1.0, 1.0]), ValueError, "positive Dirichlet parameters"),
    (RegMixBaseline, dict(regressor="xgboost"), ValueError, "regressor must be one of"),
    (RegMixBaseline, dict(n_candidates=10, top_k=20), ValueError, "top_k <= n_candidates"),
    ("new-regmix.fit", dict(N=_N, R=_R, L=_L0), ValueError, "L must hold positive losses"),
    ("new-regmix.predict", dict(N=8e7, R=_MIX), ValueError, "not fitted yet"),
    ("regmix.optimal_mixture", dict(N_target=float("nan")), ValueError, "N_target must be finite"),
    (LossToBenchmark, dict(chance="0.25"), TypeError, "chance must be a real number"),
    ("new-ltb.fit", dict(L=[1.0, 2.0], acc=[0.1, 0.2]), ValueError, "pairs"),
    ("new-ltb.fit", dict(L=[1.0, 2.0, 3.0, 4.0], acc=[0.1, 0.2, 0.3, "x"]), TypeError, "acc must be an array of numbers"),
    ("new-ltb.fit", dict(L=[1.0, 2.0, 3.0, 4.0], acc=[0.1, 0.2, 0.3, 1.5]), ValueError, "acc must hold accuracies"),
    ("new-ltb.predict", dict(L=2.0), ValueError, "not fitted yet"),
    ("ltb.predict", dict(L=float("nan")), ValueError, "L must be finite"),
    (allocate_compute, dict(sizes=SIZES, costs=SIZES, budget=-1.0, strategy="smallest"), ValueError, "budget must be >= 0"),
    (allocate_compute, dict(sizes=SIZES, costs=-SIZES, budget=10.0, strategy="smallest"), ValueError, "costs must be positive"),
    (allocate_compute, dict(sizes=SIZES, costs=SIZES, budget=10.0, strategy="random"), ValueError, "strategy"),
    (allocate_compute, dict(sizes=-SIZES, costs=_COSTS, budget=10.0, strategy="smallest"), ValueError,
     "sizes must be positive"),
    (allocate_compute, dict(sizes=SIZES, costs=_COSTS, budget=100.0, variance=0.5), TypeError, "a callable"),
    (allocate_compute, dict(sizes=SIZES, costs=_COSTS, budget=100.0, variance=lambda c: 1.0, pilot=[1, 1]), ValueError,
     "pilot must be one non-negative integer count per size"),
    (SyntheticMixtureLaw, dict(noise=-0.01), ValueError, "noise must be >= 0"),
    (SyntheticMixtureLaw, dict(weights=np.array([0.5, 0.5, 0.5])), ValueError, "weights must be a probability vector"),
    (SyntheticMixtureLaw, dict(params=np.zeros((3, 7))), ValueError, "params must be a (3, 9) array"),
    (_T.losses, dict(N=_N, R=_R, rng=0), TypeError, "rng must be a numpy Generator"),
    (_T.losses, dict(N=_N, R=_R, z=np.zeros((2, 3))), ValueError, "z must hold one standard-normal draw per loss"),
    (_T.optimal_mixture, dict(N_target=-5.0), ValueError, "N_target must be > 0"),
    (PowerMixtureLaw, dict(eps=0.0), ValueError, "eps must be > 0"),
    (PowerMixtureLaw, dict(a=np.zeros(3)), ValueError, "a must have shape (3, 3)"),
    (PowerMixtureLaw().predict, dict(N=1e6, R=[[0.5, 0.5]]), ValueError, "must have 3 columns"),
    (check_mixtures, dict(R=[[0.5, 0.3, 0.1]]), ValueError, "sum to 1"),
    (check_mixtures, dict(R=[[1.2, -0.2, 0.0]]), ValueError, "non-negative"),
    (check_mixtures, dict(R=np.zeros((0, 3))), ValueError, "mixtures is empty"),
    (check_mixtures, dict(R=[[0.5, np.nan, 0.5]]), ValueError, "mixtures has 1 NaN or infinite"),
    (minimize_on_simplex, dict(f="f", J=3), TypeError, "f must be a callable"),
    (minimize_on_simplex, dict(f=lambda R: R.sum(1), J=0), ValueError, "J must be an integer >= 1"),
    (minimize_on_simplex, dict(f=lambda R: R, J=3), ValueError, "f must map an (M, 3) array"),
]


@pytest.mark.parametrize("fn, kwargs, error, fragment", BAD_INPUTS,
                         ids=[f"{i}-{c[0] if isinstance(c[0], str) else getattr(c[0], '__qualname__', '?')}"
                              for i, c in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise(fn, kwargs, error, fragment):
    if isinstance(fn, str):
        kind, method = fn.split(".")
        if kind.startswith("new-"):
            obj = {"camel": CAMELLaw, "dml": DataMixingLaw, "ltb": LossToBenchmark,
                   "regmix": lambda: RegMixBaseline(regressor="linear")}[kind[4:]]()
        else:
            obj = _fitted(kind)
        fn = (lambda **kw: CAMELLaw(**kw)) if method == "__init__" else getattr(obj, method)
    with pytest.raises(error, match=re.escape(fragment)):
        fn(**kwargs)


def test_data_mixing_law_takes_one_size_per_mixture_like_camel():
    """Review: DataMixingLaw.predict(N_array, R) raised a TypeError where CAMELLaw accepts one size per mixture."""
    dml = DataMixingLaw().fit(_N, _R, _L)
    per_run = dml.predict(_N, _R)
    by_size = np.vstack([dml.predict(float(n), _R[_N == n]) for n in SIZES])
    assert per_run.shape == _L.shape and np.allclose(per_run, by_size)
    mixed = dml.predict(np.array([1e6, 8e7]), _MIX[:2])
    assert np.allclose(mixed[1], dml.predict(8e7, _MIX[1:2])[0])
    rm = RegMixBaseline(regressor="linear").fit(_N, _R, _L)
    assert rm.predict(_N, _R).shape == _L.shape


def test_power_truth_is_another_family_whose_optimum_moves():
    """The second ground truth is not a CAMEL law: CAMEL fitted to it noise-free leaves a clear residual (a CAMEL
    truth is fitted to ~0), and its optimum moves toward source 3 with N (a capacity effect CAMEL must capture)."""
    truth = PowerMixtureLaw()
    mixes = mixture_design(3, 12, seed=0)
    N, R = np.repeat(SIZES, len(mixes)), np.tile(mixes, (len(SIZES), 1))
    res = {}
    for name, t in (("power", truth), ("camel", SyntheticMixtureLaw())):
        L = t.losses(N, R)
        law = CAMELLaw().fit(N, R, L)
        res[name] = float(np.abs(law.predict(N, R) / L - 1).max())
    assert res["camel"] < 1e-3 < res["power"]
    r = [truth.optimal_mixture(n)[2] for n in (1e6, 8e6, 8e7)]
    assert r[0] + 0.1 < r[1] < r[2]
    noisy = truth.losses(N, R, np.random.default_rng(0))
    assert noisy.shape == (len(N), 3) and np.abs(noisy / truth.losses(N, R) - 1).max() < 0.05


def test_regmix_uses_gradient_boosting_and_finds_an_interior_optimum():
    """RegMix's own regressor is LightGBM; on a bowl with an interior optimum its top-k simulation lands near it,
    where a linear regression can only pick a vertex."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    target = np.array([0.5, 0.3, 0.2])
    R = np.vstack([np.eye(3), rng.dirichlet(np.ones(3), 60)])
    N = np.full(len(R), 1e6)
    L = (2.0 + 3.0 * ((R - target) ** 2).sum(1))[:, None]
    gb = RegMixBaseline(n_candidates=20_000, top_k=26, random_state=0).fit(N, R, L)
    assert isinstance(gb.models_[0], lgb.Booster)
    assert np.abs(gb.optimal_mixture(1e6) - target).max() < 0.1
    lin = RegMixBaseline(regressor="linear", n_candidates=20_000, top_k=1).fit(N, R, L)
    assert np.abs(lin.optimal_mixture(1e6) - target).max() > 0.2
    with pytest.raises(ValueError, match="regressor"):
        RegMixBaseline(regressor="xgboost")
    with pytest.raises(ValueError, match="top_k"):
        RegMixBaseline(n_candidates=10, top_k=20)


def test_tiny_arm_trains_fresh_models_per_seed(monkeypatch):
    """The tiny arm's seed is the model seed: two seeds fit on different trained runs (the earlier arm reused one
    cached set, so its comparisons were identical on every seed)."""
    from icml26.scaling.camel import reproduce as rp
    from icml26.testbeds.learning_curves import MixtureRuns, MixtureRunsConfig

    seen = []

    def fake_runs(cfg):
        seen.append(cfg.seed)
        g = np.random.default_rng(cfg.seed)
        mixes = mixture_design(3, cfg.n_random, cfg.seed)
        rows = [(w, m) for w in cfg.widths for m in mixes]
        n = np.array([1e4 * w for w, _ in rows])
        base = 5.0 - 0.3 * np.log(n / 1e5)
        val = base[:, None] + 0.1 * g.standard_normal((len(rows), 3)) ** 2
        return MixtureRuns(widths=np.array([w for w, _ in rows], dtype=float), n_params=n,
                           mixtures=np.array([m for _, m in rows]), val_loss=val,
                           bench_loss=base + 0.2 * np.array([(m ** 2).sum() for _, m in rows]),
                           bench_acc=np.clip(0.5 - 0.05 * base, 0, 1), cost=6 * n)

    def fake_run(cfg, width, mix):
        return MixtureRuns(widths=np.array([width], float), n_params=np.array([1e4 * width]),
                           mixtures=np.asarray(mix)[None], val_loss=np.ones((1, 3)),
                           bench_loss=np.array([4.0 + float((np.asarray(mix) ** 2).sum())]),
                           bench_acc=np.array([0.1]), cost=np.array([1.0]))

    monkeypatch.setattr(rp, "mixture_runs", fake_runs)
    monkeypatch.setattr(rp, "mixture_run", fake_run)
    a, b = rp.tiny_arm(MixtureRunsConfig(), 1), rp.tiny_arm(MixtureRunsConfig(), 2)
    assert seen == [1, 2]
    assert a["mae"]["CAMEL"] != b["mae"]["CAMEL"]
    assert {"best small run", "centroid", "RegMix"} <= set(a["realised"])


def test_quick_reproduction_structure():
    from icml26.scaling.camel.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    assert {c.kind for c in out.claims} == {"claim", "check"}
    for c in out.claims:
        assert math.isfinite(c.measured), c.statement
        assert c.verdict in ("holds", "does not hold", "inconclusive")
    assert out.tables["synthetic"] and out.tables["allocation"] and "regret" in out.figures


def test_quick_claims_use_the_strongest_baseline_and_controls():
    """Review findings (issues 30, fresh-eyes): the allocation claim is decided by the best fixed allocation, not
    all-smallest; the law claims are decided against the strongest prior law on all three truths, the regret claims
    also against the law-free centroid and best 8M run; the 1e-3 regret bars carry the centroid as control."""
    from icml26.scaling.camel.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=1)
    by = {c.statement: c for c in out.claims}
    alloc = next(c for s, c in by.items() if "allocation" in s)
    assert set(alloc.baselines) == {"smallest", "uniform_count", "uniform_compute"}
    assert alloc.strongest_baseline != "smallest"
    bars = [c for s, c in by.items() if "1e-3" in s]
    assert len(bars) == 2 and all(c.bar and c.control is not None and "centroid" in c.control_arm for c in bars)
    regret = [c for s, c in by.items() if "regret at N* is below" in s]
    pred = [c for s, c in by.items() if "predicts the N* loss better than the strongest prior law" in s]
    assert len(regret) == len(pred) == 3
    assert all(set(c.baselines) == {"capacity-agnostic", "per-size DML", "RegMix", "centroid", "best 8M run"}
               for c in regret)
    assert all(set(c.baselines) == {"capacity-agnostic", "per-size DML", "RegMix"} for c in pred)
    assert any("different family" in s for s in by) and any("unequal target weights" in s for s in by)
    # the skewed truth's optimum is far from the centroid (a centroid control fails the bar there)
    skew = next(c for c in bars if "unequal" in c.statement)
    assert skew.control_verdict == "does not hold"


def test_allocation_uses_common_random_numbers(monkeypatch):
    """Review: the strategies drew their runs' noise from one shared stream, so the same design got different noise
    under different strategies. With common random numbers, equal designs give equal errors."""
    from icml26.scaling.camel import reproduce as rp

    monkeypatch.setattr(rp, "allocate_compute", lambda *a, **k: np.array([3, 3, 3, 3]))
    out = rp.allocation_arm(rp.Sizes(1, 2, 4, None), seed=0)
    errs = [v[0] for v in out["err"].values()]
    assert len(errs) == 4 and max(errs) - min(errs) == 0.0


def test_realised_mixture_claim_is_inconclusive_when_the_capacity_term_changes_no_decision(monkeypatch):
    """Review: on the tiny arm CAMEL, the s = 0 law and per-size DML recommended the same vertex; the realised-loss
    claim then carries the s = 0 law's mixture as control, which passes too, so the claim cannot hold."""
    from icml26.scaling.camel import reproduce as rp

    syn = {"regret": {m: [1e-3, 2e-3] for m in rp.METHODS + rp.LAW_FREE},
           "pred_err": {m: [0.01, 0.02] for m in rp.METHODS}, "r_star": np.array([0.3, 0.3, 0.4]),
           "r_small": np.array([0.4, 0.4, 0.2])}
    alloc = {"err": {k: [0.01, 0.02] for k in ("greedy_variance",) + rp.ALLOC_BASELINES},
             "counts": {k: [1, 1, 1, 1] for k in ("greedy_variance",) + rp.ALLOC_BASELINES}}
    vertex = [1.0, 0.0, 0.0]

    def tiny(cfg, seed, same=True):
        realised = {"CAMEL": 4.8, "capacity-agnostic": 4.8 if same else 4.95, "per-size DML": 4.8, "RegMix": 4.9,
                    "best small run": 4.85, "centroid": 4.9}
        mixture = {m: vertex for m in realised} | {"capacity-agnostic": vertex if same else [0.5, 0.5, 0.0]}
        return {"mae": {m: 0.1 for m in rp.METHODS}, "realised": realised, "mixture": mixture, "fit_compute": 1.0,
                "fit_params": (1.4e4, 4e4), "target_params": 8e4, "best_grid_loss": 4.8, "acc_pred_err": 0.02,
                "acc_pred_err_const": 0.01, "camel_pred_at_r": 4.8, "bench_params": [0.3, 0.4, 1.2]}

    monkeypatch.setattr(rp, "synthetic_arm", lambda *a, **k: syn)
    monkeypatch.setattr(rp, "allocation_arm", lambda *a, **k: alloc)
    monkeypatch.setattr(rp, "_figure", lambda s: None)
    for same, verdict in ((True, "inconclusive"), (False, "holds")):
        monkeypatch.setattr(rp, "tiny_arm", lambda cfg, seed, same=same: tiny(cfg, seed, same))
        out = rp.reproduce(Budget.STANDARD, seed=0)
        c = next(c for c in out.claims if "recommended mixture trains" in c.statement)
        assert c.control is not None and c.verdict == verdict, (same, c.verdict, c.reason)
        assert out.metrics["tiny_camel_mixture_equals_s0"] == float(same)
