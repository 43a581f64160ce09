"""Tests for [A16] successive halving with learning-curve surrogates: compute accounting, SH rungs, surrogate
fits (recovery of known parameters), GP behaviour, peers, bad input, determinism, and the quick reproduction."""

import math

import numpy as np
import pytest

from icml26.harness import Budget, Outcome
from icml26.scaling.successive_halving import (
    ASHA,
    CurveTable,
    GPCurveSurrogate,
    PowerLawCurveSurrogate,
    RandomSearch,
    SuccessiveHalving,
    SyntheticCurveConfig,
    TablePool,
    UniformAllocation,
    fit_power_law,
    fit_scaling_law,
    loss_compute_frontier,
    optuna_allocation,
    synthetic_curve_pool,
)


@pytest.fixture(scope="module")
def table():
    return synthetic_curve_pool(seed=3)


# pool accounting

def test_pool_charges_only_increments(table):
    pool = TablePool(table)
    c = table.compute[5]
    pts = pool.advance(5, c[3])
    assert len(pts) == 4 and pool.spent == pytest.approx(c[3])
    assert pool.cost_to(5, c[9]) == pytest.approx(c[9] - c[3])
    pool.advance(5, c[9])
    assert pool.spent == pytest.approx(c[9]) and pool.revealed[5] == 10
    assert pool.advance(5, c[2]) == [] and pool.spent == pytest.approx(c[9])   # never un-trains
    pool.advance(5, 10 * c[-1])                                                  # capped at the full curve
    assert pool.spent == pytest.approx(c[-1])


def test_affordable_never_exceeds_budget(table):
    pool = TablePool(table)
    for b in np.geomspace(1e10, 1e18, 9):
        reach = pool.affordable(7, b)
        assert pool.cost_to(7, reach) <= b * (1 + 1e-12) if reach > 0 else True


@pytest.mark.parametrize("make", [lambda: UniformAllocation(), lambda: SuccessiveHalving(),
                                  lambda: SuccessiveHalving(criterion="power_law"), lambda: ASHA(seed=1),
                                  lambda: RandomSearch(seed=2), lambda: SuccessiveHalving(criterion="random"),
                                  lambda: UniformAllocation(redistribute=False)])
@pytest.mark.parametrize("frac", [0.03, 0.2, 0.5])
def test_spend_never_exceeds_budget(table, make, frac):
    pool = TablePool(table)
    B = frac * pool.exhaustive_compute
    res = make().run(pool, B)
    assert res.compute_used <= B * (1 + 1e-9)
    assert res.compute_used == pytest.approx(pool.spent) == pytest.approx(res.compute_per_config.sum())
    assert res.best_loss == pytest.approx(min(L.min() for _, L in res.curves if len(L)))


@pytest.mark.parametrize("frac", [0.05, 0.2, 0.5])
def test_uniform_passes_unused_compute_on(table, frac):
    """Regression (issue 30): uniform gave each configuration B / K and left the rest unspent (50% of B at
    B = exhaustive, 76% at 20%). With leftovers redistributed it spends B up to one recorded step of one curve,
    and every configuration gets at least the compute of the old share."""
    B = frac * table.compute[:, -1].sum()
    res = UniformAllocation().run(TablePool(table), B)
    step = np.diff(table.compute, axis=1).max()
    assert B - step <= res.compute_used <= B * (1 + 1e-9)
    old = UniformAllocation(redistribute=False).run(TablePool(table), B)
    assert np.all(res.compute_per_config >= old.compute_per_config - 1e-6 * B)
    assert res.best_loss <= old.best_loss


def test_uniform_at_the_exhaustive_budget_finishes_every_curve(table):
    res = UniformAllocation().run(TablePool(table), table.compute[:, -1].sum())
    assert all(len(c) == table.n_points for c, _ in res.curves)
    assert res.best_loss == table.loss.min()


def test_random_search_trains_configurations_to_completion(table):
    pool = TablePool(table)
    B = 0.2 * pool.exhaustive_compute
    res = RandomSearch(seed=4).run(pool, B)
    full = [len(c) == table.n_points for c, _ in res.curves]
    partial = [0 < len(c) < table.n_points for c, _ in res.curves]
    assert sum(full) >= 1 and sum(partial) <= 1          # at most the last one is cut by the budget
    again = RandomSearch(seed=4).run(TablePool(table), B)
    assert again.best_loss == res.best_loss


def test_random_ranking_control_differs_from_current_loss_ranking(table):
    B = 0.2 * table.compute[:, -1].sum()
    a = SuccessiveHalving(criterion="random", seed=0).run(TablePool(table), B)
    b = SuccessiveHalving(criterion="random", seed=0).run(TablePool(table), B)
    assert a.best_loss == b.best_loss and a.rung_sizes == b.rung_sizes
    sh = SuccessiveHalving(criterion="current").run(TablePool(table), B)
    assert a.rung_sizes[:2] == sh.rung_sizes[:2] == [32, 16]            # same halving schedule
    assert not np.array_equal(a.compute_per_config > 0.3 * table.compute[:, -1],
                              sh.compute_per_config > 0.3 * table.compute[:, -1])  # other survivors


def test_sh_rungs_follow_ceil_n_over_eta(table):
    for eta in (2, 3):
        res = SuccessiveHalving(eta=eta, n_rungs=4).run(TablePool(table), 10 * table.compute[:, -1].sum())
        assert res.rung_sizes == [32, math.ceil(32 / eta), math.ceil(math.ceil(32 / eta) / eta),
                                  math.ceil(math.ceil(math.ceil(32 / eta) / eta) / eta)]
        # survivors of the last rung reach their full curve
        assert sum(len(c) == table.n_points for c, _ in res.curves) == res.rung_sizes[-1]


def test_sh_exact_on_noise_free_non_crossing_curves():
    tab = synthetic_curve_pool(SyntheticCurveConfig(lrs=(3e-3,), warmup_bump=0.0), noise=0.0)
    res = SuccessiveHalving(n_rungs=4).run(TablePool(tab), tab.compute[:, -1].sum())
    assert res.best_config == int(np.argmin(tab.loss[:, -1]))


def test_auto_rungs_plan_fits_the_budget_at_mean_cost(table):
    sh = SuccessiveHalving()
    pool = TablePool(table)
    B = 0.2 * pool.exhaustive_compute
    n = sh.plan(pool, B)
    assert sh.plan_cost(table.compute[:, -1], n) <= B < sh.plan_cost(table.compute[:, -1], n - 1)


# surrogates

def test_power_law_recovers_known_parameters():
    c = np.linspace(1e15, 6.4e16, 64)
    E, A, alpha = 1.9, 3.0, 0.4
    L = E + A * (c / c[0]) ** -alpha
    f = fit_power_law(c, L)
    assert f.E == pytest.approx(E, rel=0.01) and f.A == pytest.approx(A, rel=0.02)
    assert f.alpha == pytest.approx(alpha, rel=0.02)
    rng = np.random.default_rng(0)
    noisy = fit_power_law(c, L * np.exp(0.002 * rng.standard_normal(c.size)))
    # within 3 standard errors of the truth (README: tolerance)
    for est, se, true in zip((noisy.E, noisy.A, noisy.alpha), noisy.stderr, (E, A, alpha)):
        assert abs(est - true) <= 3 * se + 1e-9
    assert all(np.isfinite(noisy.stderr)) and all(s > 0 for s in noisy.stderr)


def test_scaling_law_fit_is_deterministic_and_reports_uncertainty():
    C = np.geomspace(1e15, 1e19, 20)
    L = 1.7 + 50.0 * (C / 1e15) ** -0.3 * np.exp(0.003 * np.random.default_rng(1).standard_normal(20))
    a, b = fit_scaling_law(C, L), fit_scaling_law(C, L)
    assert (a.E, a.A, a.alpha) == (b.E, b.A, b.alpha)
    assert a.alpha == pytest.approx(0.3, rel=0.05) and a.E == pytest.approx(1.7, rel=0.05)
    assert a.predict_std(C).shape == C.shape and np.all(np.isfinite(a.predict_std(C)))


def test_power_law_surrogate_default_is_the_least_squares_fit_on_short_prefixes():
    """Regression (issue 30): the default surrogate kept the 64-point alpha grid (alpha off by 1e-2 to 7e-2,
    L(c_max) by ~1e-2 on a noise-free prefix). The default now refines by least squares."""
    c = np.geomspace(1e15, 1.6e16, 32)
    for E, A, alpha in ((1.9, 3.0, 0.4), (2.5, 1.2, 0.77), (0.5, 4.0, 0.23)):
        L = E + A * (c / c[0]) ** -alpha
        for n in (4, 6, 8):
            s = PowerLawCurveSurrogate().fit(c[:n], L[:n])
            assert s.fit_.alpha == pytest.approx(alpha, abs=1e-4)
            assert s.predict(c[-1])[0] == pytest.approx(L[-1], rel=1e-5)
    assert SuccessiveHalving(criterion="power_law")  # SH's scores use this default


def test_power_law_surrogate_few_points_falls_back_to_last_loss():
    s = PowerLawCurveSurrogate().fit([1.0, 2.0], [3.0, 2.5])
    m, sd = s.predict(100.0)
    assert m == 2.5 and np.isnan(sd)


def test_gp_interpolates_and_grows_uncertain_away_from_data():
    c = np.geomspace(1e14, 1e16, 20)
    curves = [(c, 2 + 5 * (c / 1e14) ** -0.3), (c[:5], 2.5 + 5 * (c[:5] / 1e14) ** -0.3)]
    gp = GPCurveSurrogate(max_points=40).fit(np.array([[0.0], [1.0]]), curves)
    m, s = gp.predict(np.zeros((20, 1)), c)
    assert np.max(np.abs(np.exp(m) / curves[0][1] - 1)) < 0.01
    _, s_near = gp.predict(np.array([[1.0]]), c[:1])
    _, s_far = gp.predict(np.array([[1.0]]), c[-1:])
    assert s_far[0] > 3 * s_near[0]


def test_frontier_is_the_running_minimum():
    pts = [(np.array([1.0, 2.0, 4.0]), np.array([5.0, 4.0, 3.0])), (np.array([3.0, 6.0]), np.array([3.5, 2.0]))]
    F = loss_compute_frontier(pts, np.array([0.5, 1.0, 3.0, 5.0, 10.0]))
    assert np.isnan(F[0]) and list(F[1:]) == [5.0, 3.5, 3.0, 2.0]


# peers

@pytest.mark.parametrize("pruner", ["sh", "hyperband"])
def test_optuna_peers_respect_budget(table, pruner):
    pool = TablePool(table)
    B = 0.2 * pool.exhaustive_compute
    res = optuna_allocation(pool, B, pruner=pruner, n_rungs=5)
    assert 0 < res.compute_used <= B * (1 + 1e-9) and np.isfinite(res.best_loss)


def test_ray_tune_asha_scheduler_respects_budget_and_stops_like_optunas_sh(table):
    pytest.importorskip("ray.tune.schedulers", exc_type=ImportError)
    from icml26.scaling.successive_halving.peers import ray_asha_allocation

    pool = TablePool(table)
    B = 0.2 * pool.exhaustive_compute
    res = ray_asha_allocation(pool, B, n_rungs=5, seed=3)
    assert 0 < res.compute_used <= B * (1 + 1e-9) and np.isfinite(res.best_loss)
    again = ray_asha_allocation(TablePool(table), B, n_rungs=5, seed=3)
    assert again.best_loss == res.best_loss and again.compute_used == res.compute_used  # deterministic
    with pytest.raises(TypeError, match="TablePool"):
        ray_asha_allocation(object(), B)


# bad input and determinism

def test_bad_input():
    c = np.array([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="unequal length"):
        CurveTable.from_curves([[1, 2, 3], [1, 2]], [[3, 2, 1], [3, 2]], [10, 20])
    with pytest.raises(ValueError, match="finite"):
        CurveTable.from_curves([[1, 2, 3]], [[3, np.nan, 1]], [10])
    with pytest.raises(ValueError, match="positive"):
        CurveTable.from_curves([[-1, 2, 3]], [[3, 2, 1]], [10])
    tab = CurveTable.from_curves(c, [[3.0, 2.0, 1.5]], [10])
    pool = TablePool(tab)
    with pytest.raises(ValueError, match="non-negative"):
        pool.advance(0, -1.0)
    with pytest.raises(ValueError, match="budget"):
        SuccessiveHalving().run(pool, -5.0)
    with pytest.raises(ValueError, match="criterion"):
        SuccessiveHalving(criterion="oracle")
    with pytest.raises(ValueError, match="eta"):
        SuccessiveHalving(eta=1)
    with pytest.raises(ValueError, match="index"):
        pool.advance(3, 1.0)
    with pytest.raises(TypeError):
        TablePool(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="at least 3"):
        fit_power_law([1.0, 2.0], [2.0, 1.0])


def test_deterministic(table):
    runs = [SuccessiveHalving(criterion="gp", seed=0).run(TablePool(table), 0.2 * table.compute[:, -1].sum())
            for _ in range(2)]
    assert runs[0].best_loss == runs[1].best_loss and runs[0].compute_used == runs[1].compute_used
    assert np.array_equal(synthetic_curve_pool(seed=5).loss, synthetic_curve_pool(seed=5).loss)


# quick reproduction

def test_quick_reproduction_structure():
    from icml26.scaling.successive_halving.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    kinds = {c.kind for c in out.claims}
    assert kinds == {"claim", "check"}
    for c in out.claims:
        assert math.isfinite(c.measured), c.statement
        assert c.verdict in ("holds", "does not hold", "inconclusive")
        if c.kind == "claim":
            assert c.falsifier
    assert out.tables["strategies"] and "anytime" in out.figures
