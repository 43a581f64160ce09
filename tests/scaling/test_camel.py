"""Tests for [A18] CAMEL: recovery of a known capacity-aware law, the s = 0 special case, the optimal mixture's
shift with size, the loss-to-benchmark law, compute allocation, baselines, bad input, determinism, and the quick
reproduction."""

import math

import numpy as np
import pytest

from icml26.harness import Budget, Outcome
from icml26.scaling.camel import (CAMELLaw, DataMixingLaw, LossToBenchmark, RegMixBaseline, SyntheticMixtureLaw,
                                  allocate_compute, check_mixtures, minimize_on_simplex)
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


def test_bad_input(data):
    truth, N, R, L = data
    with pytest.raises(ValueError, match="sum to 1"):
        check_mixtures([[0.5, 0.3, 0.1]])
    with pytest.raises(ValueError, match="non-negative"):
        check_mixtures([[1.2, -0.2, 0.0]])
    with pytest.raises(ValueError, match="sum to 1"):
        CAMELLaw().fit(N, R * 1.1, L)
    with pytest.raises(ValueError, match="one model size per run"):
        CAMELLaw().fit(N[:-1], R, L)
    with pytest.raises(ValueError, match="positive"):
        CAMELLaw().fit(-N, R, L)
    with pytest.raises(ValueError, match="cannot determine"):
        CAMELLaw().fit(N[:5], R[:5], L[:5])
    with pytest.raises(ValueError, match="budget"):
        allocate_compute(SIZES, SIZES, -1.0, strategy="smallest")
    with pytest.raises(ValueError, match="costs"):
        allocate_compute(SIZES, -SIZES, 10.0, strategy="smallest")
    with pytest.raises(ValueError, match="strategy"):
        allocate_compute(SIZES, SIZES, 10.0, strategy="random")
    with pytest.raises(ValueError, match="pairs"):
        LossToBenchmark().fit([1.0, 2.0], [0.1, 0.2])


def test_quick_reproduction_structure():
    from icml26.scaling.camel.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    assert {c.kind for c in out.claims} == {"claim", "check"}
    for c in out.claims:
        assert math.isfinite(c.measured), c.statement
        assert c.verdict in ("holds", "does not hold", "inconclusive")
    assert out.tables["synthetic"] and out.tables["allocation"] and "regret" in out.figures
