"""Tests for [B10] QuantumBoost, classically: KL projections, lazy/greedy BHK boosting, the sklearn classifier."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from icml26.decisions.quantumboost import (
    DecisionStump,
    LazyProjectionBoost,
    QueryCounter,
    approx_kl_project_dense,
    bhk_rounds,
    boost,
    classical_estimate_queries,
    generalized_kl,
    kl_project_dense,
    quantum_estimate_queries,
    quantum_sample_queries,
)
from icml26.harness import Budget, Outcome


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X, y


def _sub_dense(rng, m=200, delta=0.3):
    """A random measure in (0, 1]^m with density well below delta, with a few large entries."""
    N = rng.uniform(0.001, 0.2, size=m) ** 2
    N[:5] = rng.uniform(0.5, 1.0, size=5)
    return N


# exact projection

@pytest.mark.parametrize("seed", range(5))
def test_exact_projection_closed_form_and_mean_exactly_delta(seed):
    rng = np.random.default_rng(seed)
    delta = 0.3
    N = _sub_dense(rng, delta=delta)
    assert N.mean() < delta
    M, c = kl_project_dense(N, delta, return_scale=True)
    assert c > 1
    assert np.all((M >= 0) & (M <= 1))
    assert M.mean() == pytest.approx(delta, rel=1e-13, abs=0)
    np.testing.assert_array_equal(M, np.minimum(1.0, c * N))
    assert np.any(M == 1.0)  # the big entries are capped: a genuine water-filling case


def test_exact_projection_matches_bisection_on_c_and_is_identity_when_dense():
    rng = np.random.default_rng(1)
    N = _sub_dense(rng)
    lo, hi = 1.0, 1e6
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if np.minimum(1, mid * N).mean() < 0.3 else (lo, mid)
    _, c = kl_project_dense(N, 0.3, return_scale=True)
    assert c == pytest.approx(lo, rel=1e-9)
    dense = rng.uniform(0.2, 1.0, size=50)
    np.testing.assert_array_equal(kl_project_dense(dense, 0.1), dense)
    assert kl_project_dense(dense, 0.1, return_scale=True)[1] == 1.0
    # entries above 1 are cut to the box; delta = 1 forces the all-ones measure
    np.testing.assert_array_equal(kl_project_dense(np.array([3.0, 0.5]), 0.5), [1.0, 0.5])
    np.testing.assert_array_equal(kl_project_dense(np.array([0.1, 0.2, 0.01]), 1.0), [1.0, 1.0, 1.0])


def test_exact_projection_is_the_kl_minimiser_cvxpy_peer():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(2)
    N = _sub_dense(rng, m=40)
    M = kl_project_dense(N, 0.3)
    x = cp.Variable(N.size)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.kl_div(x, N))), [x >= 0, x <= 1, cp.sum(x) >= 0.3 * N.size])
    prob.solve()
    assert generalized_kl(M, N) <= prob.value + 1e-6
    np.testing.assert_allclose(M, x.value, atol=2e-3)


def test_bregman_pythagorean_inequality():
    # KL(P||N) >= KL(P||Pi(N)) + KL(Pi(N)||N) for every delta-dense P (projection onto a convex set)
    rng = np.random.default_rng(3)
    N = _sub_dense(rng)
    M = kl_project_dense(N, 0.3)
    for _ in range(20):
        P = kl_project_dense(rng.uniform(0, 1, N.size) ** 3, 0.3 + 0.5 * rng.random())
        assert generalized_kl(P, N) >= generalized_kl(P, M) + generalized_kl(M, N) - 1e-9


def test_generalized_kl_values():
    assert generalized_kl(np.array([0.5, 0.2]), np.array([0.5, 0.2])) == 0.0
    assert generalized_kl(np.array([1.0]), np.array([0.5])) == pytest.approx(math.log(2) - 0.5)
    assert generalized_kl(np.array([0.0, 1.0]), np.array([0.3, 1.0])) == pytest.approx(0.3)
    assert generalized_kl(np.array([0.5]), np.array([0.0])) == math.inf


@pytest.mark.parametrize("delta", [0.0, -0.1, 1.5, float("nan")])
def test_projection_rejects_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        kl_project_dense(np.array([0.1, 0.2]), delta)
    with pytest.raises(ValueError, match="delta"):
        approx_kl_project_dense(np.array([0.1, 0.2]), delta)


def test_projection_rejects_bad_weights():
    with pytest.raises(ValueError, match="NaN"):
        kl_project_dense(np.array([0.1, np.nan]), 0.1)
    with pytest.raises(ValueError, match="negative"):
        kl_project_dense(np.array([0.1, -0.2]), 0.1)
    with pytest.raises(ValueError, match="positive"):
        kl_project_dense(np.array([0.1, 0.0, 0.0, 0.0]), 0.5)
    with pytest.raises(TypeError):
        kl_project_dense(np.array([0.1]), "0.1")


# approximate projection and query model

def test_approx_projection_within_kappa_in_1_minus_eta_of_200_trials():
    rng = np.random.default_rng(4)
    N = _sub_dense(rng, m=1000, delta=0.2)
    kappa, eta, delta = 0.2, 0.1, 0.2
    counter = QueryCounter()
    ok = 0
    for trial in range(200):
        res = approx_kl_project_dense(N, delta, kappa=kappa, eta=eta, rng=trial, counter=counter)
        assert np.all((res.measure >= 0) & (res.measure <= 1))
        np.testing.assert_allclose(res.measure, np.minimum(1, res.scale * N), rtol=1e-12)
        ok += abs(res.measure.mean() - delta) <= kappa * delta
    assert ok >= (1 - eta) * 200
    assert counter.density_estimates >= 200
    assert 0 < counter.quantum_model_density < counter.classical_density


def test_approx_projection_deterministic_per_seed():
    N = _sub_dense(np.random.default_rng(5))
    a = approx_kl_project_dense(N, 0.3, rng=7)
    b = approx_kl_project_dense(N, 0.3, rng=7)
    np.testing.assert_array_equal(a.measure, b.measure)


def test_query_model_scaling():
    # classical ~ 1/(kappa^2 delta), quantum model ~ 1/(kappa sqrt(delta)), sampling 1/mu vs 1/sqrt(mu)
    c1, c2 = classical_estimate_queries(0.04, 0.1, 0.05), classical_estimate_queries(0.01, 0.1, 0.05)
    q1, q2 = quantum_estimate_queries(0.04, 0.1, 0.05), quantum_estimate_queries(0.01, 0.1, 0.05)
    assert c2 / c1 == pytest.approx(4, rel=1e-3)
    assert q2 / q1 == pytest.approx(2, rel=1e-2)
    assert quantum_estimate_queries(0.01, 0.05, 0.05) / q2 == pytest.approx(2, rel=1e-2)
    assert c1 == math.ceil(2.1 * math.log(40) / (0.01 * 0.04))
    assert quantum_sample_queries(0.01) == math.ceil(math.pi / 4 / 0.1)
    with pytest.raises(ValueError):
        classical_estimate_queries(0.1, 1.5, 0.05)


# boosting

def test_lazy_equals_greedy_when_no_capping(cancer):
    X, y = cancer
    y = np.where(y == 1, 1, -1)
    kw = dict(gamma=0.1, delta=0.1, n_rounds=12, approx=False, record_measures=True, random_state=0)
    g = boost(X, y, projection="greedy", **kw)
    lazy = boost(X, y, projection="lazy", project_every=1, **kw)
    assert not g.capped.any() and not lazy.capped.any()
    assert g.measures.max() < 1.0
    np.testing.assert_allclose(lazy.measures, g.measures, rtol=1e-10, atol=0)
    np.testing.assert_allclose(g.density, 0.1, rtol=1e-12)
    np.testing.assert_array_equal(lazy.votes(X), g.votes(X))


def test_lazy_and_greedy_differ_once_capping_occurs(cancer):
    X, y = cancer
    y = np.where(y == 1, 1, -1)
    kw = dict(gamma=0.3, delta=0.5, n_rounds=40, approx=False, record_measures=True, random_state=0)
    g = boost(X, y, projection="greedy", **kw)
    lazy = boost(X, y, projection="lazy", project_every=1, **kw)
    assert g.capped.any() and lazy.capped.any()
    assert not np.allclose(lazy.measures, g.measures)
    np.testing.assert_allclose(lazy.density[1:], 0.5, rtol=1e-12)  # both are exactly delta-dense
    np.testing.assert_allclose(g.density[1:], 0.5, rtol=1e-12)


def test_smoothness_bounds_every_round(cancer):
    X, y = cancer
    delta = 0.1
    greedy = LazyProjectionBoost(epsilon=delta, n_estimators=200, projection="greedy", approx=False).fit(X, y)
    lazy = LazyProjectionBoost(epsilon=delta, n_estimators=200, approx=False).fit(X, y)
    none = LazyProjectionBoost(epsilon=delta, n_estimators=200, projection="none").fit(X, y)
    assert greedy.smoothness_history_.max() <= 1 / delta * (1 + 1e-9)
    assert lazy.smoothness_history_.max() <= 2 / delta * (1 + 1e-9)  # exact: the density bound is a true bound
    assert none.smoothness_history_.max() > 2 / delta  # without projection the bound fails
    assert greedy.n_projections_ == 199 and 5 < lazy.n_projections_ < 40
    assert lazy.query_counts_["exact_reads"] == lazy.n_projections_ * X.shape[0]


def test_bhk_rounds():
    assert bhk_rounds(0.1, 0.1) == math.ceil(400 * math.log(10))
    assert bhk_rounds(0.5, 1.0) == 1


def test_stump_is_exact_weighted_error_minimiser():
    rng = np.random.default_rng(6)
    X = rng.integers(0, 6, size=(40, 3)).astype(float)
    y = rng.integers(0, 2, size=40)
    w = rng.random(40)
    s = DecisionStump().fit(X, y, sample_weight=w)
    y_pm, wn = np.where(y == 1, 1, -1), w / w.sum()
    best = min(wn[y_pm == -1].sum(), wn[y_pm == 1].sum())
    for f in range(3):
        for thr in np.unique(X[:, f]):
            for pol in (1, -1):
                pred = np.where(X[:, f] > thr, pol, -pol)
                best = min(best, wn[pred != y_pm].sum())
    assert wn[s.predict(X) != y].sum() == pytest.approx(best, abs=1e-12)
    assert s.weighted_error_ == pytest.approx(best, abs=1e-12)


# the classifier

def test_classifier_api_and_determinism(cancer):
    X, y = cancer
    clf = LazyProjectionBoost(n_estimators=60, random_state=3).fit(X, y)
    d = clf.decision_function(X)
    assert d.shape == (X.shape[0],) and np.all(np.abs(d) <= 1)
    staged = list(clf.staged_predict(X))
    assert len(staged) == clf.n_estimators_ == 60
    np.testing.assert_array_equal(staged[-1], clf.predict(X))
    assert clf.score(X, y) > 0.9
    assert len(clf.smoothness_history_) == 60 and clf.n_projections_ >= 1
    q = clf.query_counts_
    assert q["classical_density"] > q["quantum_model_density"] > 0 and "model" in q["note"]
    clf2 = LazyProjectionBoost(n_estimators=60, random_state=3).fit(X, y)
    np.testing.assert_array_equal(clf2.decision_function(X), d)
    assert clf2.query_counts_ == q
    # string labels round-trip
    ys = np.array(["benign", "malignant"])[y]
    np.testing.assert_array_equal(LazyProjectionBoost(n_estimators=5, random_state=0).fit(X, ys).classes_,
                                  ["benign", "malignant"])


def test_weak_sample_size_and_custom_weak_learner():
    X, y = make_classification(300, 5, random_state=0)
    clf = LazyProjectionBoost(n_estimators=30, weak_sample_size=50, random_state=0).fit(X, y)
    q = clf.query_counts_
    assert q["samples_drawn"] == 30 * 50 and q["classical_sampling"] >= q["samples_drawn"]
    assert 0 < q["quantum_model_sampling"]
    lr = LazyProjectionBoost(LogisticRegression(max_iter=200), n_estimators=10, random_state=0).fit(X, y)
    assert lr.score(X, y) > 0.7
    with pytest.raises(TypeError, match="sample_weight"):
        LazyProjectionBoost(KNeighborsClassifier(), n_estimators=3).fit(X, y)
    LazyProjectionBoost(KNeighborsClassifier(), n_estimators=3, weak_sample_size=40, random_state=0).fit(X, y)


@pytest.mark.parametrize("params, err, match", [
    (dict(epsilon=0.0), ValueError, "delta"), (dict(epsilon=1.2), ValueError, "delta"),
    (dict(epsilon=-0.5), ValueError, "delta"), (dict(n_estimators=0), ValueError, "n_estimators"),
    (dict(n_estimators=-4), ValueError, "n_estimators"), (dict(n_estimators=2.5), TypeError, "n_estimators"),
    (dict(gamma=1.0), ValueError, "gamma"), (dict(projection="eager"), ValueError, "projection"),
    (dict(trigger=0.0), ValueError, "trigger"), (dict(kappa=1.0), ValueError, "kappa"),
    (dict(weak_sample_size=0), ValueError, "weak_sample_size"), (dict(project_every=0), ValueError, "project_every"),
])
def test_classifier_rejects_bad_params(params, err, match):
    X, y = make_classification(40, 4, random_state=0)
    with pytest.raises(err, match=match):
        LazyProjectionBoost(**params).fit(X, y)


def test_classifier_rejects_bad_data():
    X, y = make_classification(60, 5, n_informative=3, n_classes=3, random_state=0)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        LazyProjectionBoost(n_estimators=3).fit(X, y)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        LazyProjectionBoost(n_estimators=3).fit(Xn, y % 2)
    with pytest.raises(ValueError, match="Unknown label type"):
        LazyProjectionBoost(n_estimators=3).fit(X, np.linspace(0, 1, 60))
    with pytest.raises(ValueError, match="class"):
        LazyProjectionBoost(n_estimators=3).fit(X, np.ones(60))


# check_estimator: multi_class=False tag => the checks feed binary targets and expect the
# "Only binary classification is supported" error on multiclass ones.
@parametrize_with_checks([LazyProjectionBoost(n_estimators=15, random_state=0),
                          LazyProjectionBoost(n_estimators=15, projection="greedy", approx=False, random_state=0),
                          DecisionStump()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# the reproduction

def test_reproduce_quick_is_well_formed():
    from icml26.decisions.quantumboost.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) == 4 and len(out.checks) == 5
    for c in out.claims:
        assert math.isfinite(c.measured) and c.verdict in ("holds", "does not hold", "inconclusive")
    assert all(c.falsifier.strip() for c in claims)
    # checks hold by construction or by a theorem: lazy == greedy before any cap, min(1, cN) is the KL
    # projection, the trigger bounds smoothness and projection frequency, the query model has slope -1/2
    assert all(c.verdict == "holds" for c in out.checks), [(c.statement, c.measured) for c in out.checks]
    assert all(math.isfinite(v) for v in out.metrics.values())
    assert set(out.figures) == {"training_error", "smoothness", "query_model"}
    assert out.tables["runs"] and out.tables["query_model"]
    # robust at any budget: the greedy measure is delta-dense, the query model has its constructed slopes
    assert out.metrics["max_smoothness_greedy"] <= 1 + 1e-9
    assert out.metrics["query_slope_classical"] == pytest.approx(-1, abs=0.02)
    assert out.metrics["projection_ratio_greedy_over_quantumboost"] > 1
    # issue 29: the strong-learner bar (error < eps) carries the one-stump control from the same runs
    strong = next(c for c in claims if "strong learner" in c.statement)
    assert strong.bar and strong.control == out.metrics["max_first_round_error_over_eps_clean"]
    assert strong.control > strong.measured


_X = np.random.default_rng(0).normal(size=(20, 3))
_Y = np.array([0, 1] * 10)
_NAN = float("nan")


@pytest.mark.parametrize("call, error, fragment", [
    (lambda: bhk_rounds(0.0, 0.1), ValueError, "gamma must be in (0.0, 1.0)"),     # was a ZeroDivisionError
    (lambda: bhk_rounds(0.1, 0.0), ValueError, "delta must be in (0.0, 1.0]"),     # was a ZeroDivisionError
    (lambda: bhk_rounds(0.1, 1.5), ValueError, "delta must be in"),                # returned 1 round
    (lambda: bhk_rounds(_NAN, 0.1), ValueError, "gamma must be finite"),
    (lambda: boost(np.full((20, 3), _NAN), _Y), ValueError, "NaN"),
    (lambda: boost(_X, _Y[:5]), ValueError, "shape"),
    (lambda: LazyProjectionBoost(gamma=2.0).fit(_X, _Y), ValueError, "gamma"),
    (lambda: LazyProjectionBoost().predict(_X), ValueError, "not fitted"),
    (lambda: kl_project_dense(np.array([-1.0, 2.0]), 0.5), ValueError, "negative"),
    (lambda: kl_project_dense(np.array([_NAN, 2.0]), 0.5), ValueError, "NaN"),
    (lambda: kl_project_dense(np.array([1.0, 2.0]), 0.0), ValueError, "delta"),
    (lambda: approx_kl_project_dense(np.array([1.0, 2.0]), 0.5, kappa=-1), ValueError, "kappa"),
    (lambda: generalized_kl(np.ones(3), np.ones(4)), ValueError, "same shape"),
    (lambda: generalized_kl(-np.ones(3), np.ones(3)), ValueError, "negative"),
    (lambda: classical_estimate_queries(0.0, 0.1, 0.1), ValueError, "mu_lo"),
    (lambda: quantum_estimate_queries(0.5, 0.0, 0.1), ValueError, "kappa"),
    (lambda: quantum_sample_queries(_NAN), ValueError, "mu"),
    (lambda: DecisionStump().fit(np.full((20, 3), _NAN), _Y), ValueError, "NaN"),
    (lambda: DecisionStump().fit(_X, _Y, sample_weight=-np.ones(20)), ValueError, "Negative"),
    (lambda: DecisionStump().predict(_X), ValueError, "not fitted"),
])
def test_public_entry_points_refuse_bad_input(call, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        call()
