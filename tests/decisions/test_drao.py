"""[A08] Tests for distributionally robust assortment optimization under the contextual MNL."""

from __future__ import annotations

import functools
import itertools
import math
import re

import numpy as np
import pytest
from sklearn.base import clone

from icml26.decisions.drao import (
    ContextualMNL,
    DRAssortment,
    brute_force_robust,
    chi2_robust_value,
    choice_probabilities,
    divergence_value,
    kl_robust_value,
    mnl_assortment,
    mnl_revenue,
    policy_robust_value,
    robust_value,
    solve_drao,
    transformed_revenues,
    tv_robust_value,
    worst_case_distribution,
)
from icml26.harness import Budget, Outcome

DIVS = ("tv", "kl", "chi2")


def random_law(rng, M):
    p = rng.dirichlet(np.ones(M))
    R = rng.uniform(0.0, 5.0, M)
    R[0] = 0.0
    return p, R


def synthetic_logs(rng, T, n=5, d=3, k=3):
    theta = rng.normal(0.0, 0.6, (n, d))
    b = rng.normal(0.0, 0.5, n)
    X = rng.normal(0.0, 1.0, (T, d))
    offered = np.zeros((T, n), dtype=bool)
    np.put_along_axis(offered, np.argsort(rng.random((T, n)), 1)[:, :k], True, 1)
    w = np.exp(X @ theta.T + b) * offered
    P = np.concatenate([np.ones((T, 1)), w], 1)
    P /= P.sum(1, keepdims=True)
    y = (P.cumsum(1) > rng.random((T, 1))).argmax(1)
    return X, y, offered, theta, b


# strong duals

@pytest.mark.parametrize("div", DIVS)
def test_dual_equals_primal_convex_program(div):
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(0)
    for _ in range(4):
        M = int(rng.integers(3, 9))
        p, R = random_law(rng, M)
        for rho in (0.01, 0.1, 0.5, 2.0):
            q = cp.Variable(M, nonneg=True)
            con = {"tv": 0.5 * cp.norm1(q - p) <= rho, "kl": cp.sum(cp.rel_entr(q, p)) <= rho,
                   "chi2": cp.sum(cp.square(q - p) / p) <= rho}[div]
            prob = cp.Problem(cp.Minimize(R @ q), [cp.sum(q) == 1, con])
            prob.solve(solver="CLARABEL")
            assert robust_value(p, R, rho, div) == pytest.approx(prob.value, abs=1e-5)


@pytest.mark.parametrize("div", DIVS)
def test_worst_case_distribution_is_feasible_and_attains_the_value(div):
    rng = np.random.default_rng(1)
    for rho in (0.02, 0.3, 3.0):
        p, R = random_law(rng, 7)
        q = worst_case_distribution(p, R, rho, div)
        assert q.min() >= 0 and q.sum() == pytest.approx(1.0)
        assert divergence_value(q, p, div) <= rho + 1e-7
        assert q @ R == pytest.approx(robust_value(p, R, rho, div), abs=1e-7)


def test_worst_case_distribution_keeps_the_joint_shape():
    rng = np.random.default_rng(2)
    v = np.exp(rng.normal(size=(4, 3)))
    P = choice_probabilities(v, np.ones((4, 3), bool)) / 4
    R = np.array([0.0, 1.0, 2.0, 3.0])
    for div in DIVS:
        q = worst_case_distribution(P, R, 0.1, div)
        assert q.shape == P.shape
        assert (q * R).sum() == pytest.approx(robust_value(P, R, 0.1, div), abs=1e-7)  # dual var to ~sqrt(eps)


@pytest.mark.parametrize("div", DIVS)
def test_dual_properties(div):
    rng = np.random.default_rng(3)
    p, R = random_law(rng, 6)
    mean = p @ R
    assert robust_value(p, R, 0.0, div) == pytest.approx(mean)
    assert robust_value(p, R, 1e-9, div) == pytest.approx(mean, abs=1e-3)
    vals = [robust_value(p, R, rho, div) for rho in (0.0, 0.01, 0.05, 0.2, 1.0, 5.0)]
    assert all(a >= b - 1e-9 for a, b in zip(vals, vals[1:]))          # nonincreasing in rho
    assert 0.0 <= vals[-1] and vals[0] <= mean + 1e-12               # 0 <= V <= E_P R
    assert robust_value(p, 3.0 * R, 0.2, div) == pytest.approx(3.0 * robust_value(p, R, 0.2, div))
    assert robust_value(p, R + 2.0, 0.2, div) == pytest.approx(robust_value(p, R, 0.2, div) + 2.0)


def test_dual_closed_forms():
    rng = np.random.default_rng(4)
    p, R = random_law(rng, 5)
    mu, var = p @ R, p @ (R - p @ R) ** 2
    # chi2 with small rho: eta* = mu + sigma/sqrt(rho) > max R, so V = mu - sqrt(rho var) exactly
    rho = 1e-3
    assert chi2_robust_value(p, R, rho) == pytest.approx(mu - math.sqrt(rho * var), abs=1e-9)
    # KL with small rho: V = mu - sqrt(2 rho var) + O(rho)
    assert kl_robust_value(p, R, 1e-6) == pytest.approx(mu - math.sqrt(2e-6 * var), abs=5e-5)
    # TV: remove rho of mass from the top rewards and put it on R = 0
    order = np.argsort(-R)
    take = np.clip(0.25 - np.concatenate([[0], np.cumsum(p[order])[:-1]]), 0, p[order])
    assert tv_robust_value(p, R, 0.25) == pytest.approx(mu - take @ R[order])
    # TV with rho >= 1 and KL with rho >= -log p(R=0): everything goes to R = 0
    assert tv_robust_value(p, R, 1.0) == pytest.approx(0.0, abs=1e-12)
    assert kl_robust_value(p, R, -math.log(p[0]) + 0.1) == pytest.approx(0.0, abs=1e-6)


# MNL assortment and model

def test_mnl_assortment_matches_enumeration():
    rng = np.random.default_rng(5)
    n = 6
    subsets = np.array(list(itertools.product((False, True), repeat=n)))
    for cap in (None, 1, 2, 4):
        v = np.exp(rng.normal(0.0, 1.0, (20, n)))
        r = rng.uniform(0.0, 10.0, n)
        S, val = mnl_assortment(v, r, cap)
        ok = subsets if cap is None else subsets[subsets.sum(1) <= cap]
        best = np.stack([mnl_revenue(v, r, s[None]) for s in ok], 1).max(1)
        np.testing.assert_allclose(val, best, atol=1e-12)
        np.testing.assert_allclose(mnl_revenue(v, r, S), best, atol=1e-12)
        if cap is not None:
            assert S.sum(1).max() <= cap


def test_unconstrained_assortment_is_revenue_ordered():
    rng = np.random.default_rng(6)
    v = np.exp(rng.normal(size=(50, 8)))
    r = rng.uniform(1, 10, 8)
    S, _ = mnl_assortment(v, r)
    for s in S:  # every offered item earns more than every item left out
        if s.any() and (~s).any():
            assert r[s].min() >= r[~s].max()


def test_transformed_revenues_are_increasing():
    r = np.linspace(0.5, 10, 30)
    for div in DIVS:
        for t in (0.3, 2.0, 15.0):
            rt = transformed_revenues(r, div, t)
            assert np.all(np.diff(rt) >= -1e-15) and rt.min() >= 0


def test_mle_recovers_theta():
    rng = np.random.default_rng(7)
    X, y, off, theta, b = synthetic_logs(rng, 30_000)
    m = ContextualMNL(alpha=0.0).fit(X, y, offered=off)
    assert np.abs(m.coef_ - theta).max() < 0.1
    assert np.abs(m.intercept_ - b).max() < 0.1
    P = m.choice_probs(X[:10], off[:10])
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert np.all(P[:, 1:][~off[:10]] == 0)


# DRAO algorithm

@pytest.mark.parametrize("div", DIVS)
@pytest.mark.parametrize("cap", [None, 2])
def test_drao_matches_brute_force(div, cap):
    rng = np.random.default_rng(8 + (cap or 0))
    for K, n in ((1, 7), (3, 4), (2, 5)):
        for _ in range(3):
            v = np.exp(rng.normal(0.0, 1.0, (K, n)))
            r = rng.uniform(1.0, 10.0, n)
            rho = float(rng.choice([0.02, 0.1, 0.3, 1.0]))
            res = solve_drao(v, r, divergence=div, rho=rho, capacity=cap)
            best, _ = brute_force_robust(v, r, divergence=div, rho=rho, capacity=cap)
            assert res.robust_value == pytest.approx(best, abs=1e-9)
            assert policy_robust_value(v, r, res.assortments, divergence=div, rho=rho) == \
                pytest.approx(res.robust_value, abs=1e-12)


def test_drao_limits_and_ordering():
    rng = np.random.default_rng(9)
    v = np.exp(rng.normal(-0.5, 1.0, (40, 8)))
    r = rng.uniform(1.0, 10.0, 8)
    nominal, _ = mnl_assortment(v, r)
    nominal_value = mnl_revenue(v, r, nominal).mean()
    res0 = solve_drao(v, r, divergence="kl", rho=0.0)
    np.testing.assert_array_equal(res0.assortments, nominal)
    assert res0.robust_value == pytest.approx(nominal_value)
    for div in DIVS:
        res = solve_drao(v, r, divergence=div, rho=0.2)
        assert res.robust_value >= policy_robust_value(v, r, nominal, divergence=div, rho=0.2) - 1e-12
        assert res.robust_value <= res.nominal_value <= nominal_value + 1e-12
        assert res.revenue_law.sum() == pytest.approx(1.0)


def test_drao_is_deterministic():
    rng = np.random.default_rng(10)
    v = np.exp(rng.normal(size=(30, 6)))
    r = rng.uniform(1, 10, 6)
    a, b = (solve_drao(v, r, divergence="chi2", rho=0.1, capacity=3) for _ in range(2))
    np.testing.assert_array_equal(a.assortments, b.assortments)
    assert a.robust_value == b.robust_value and a.dual_var == b.dual_var


# estimator

def test_estimator_api():
    rng = np.random.default_rng(11)
    X, y, off, _, _ = synthetic_logs(rng, 1000)
    r = rng.uniform(1.0, 10.0, off.shape[1])
    est = DRAssortment(divergence="kl", rho=0.1, capacity=3, random_state=0)
    assert clone(est).get_params() == est.get_params()
    assert est.set_params(rho=0.2).rho == 0.2
    est.fit(X, y, offered=off, revenues=r)
    for attr in ("model_", "dual_var_", "robust_value_", "nominal_value_", "assortments_", "transformed_revenues_"):
        assert hasattr(est, attr)
    S = est.predict(X[:25])
    assert S.shape == (25, off.shape[1]) and S.dtype == bool and S.sum(1).max() <= 3
    np.testing.assert_array_equal(est.predict(X), est.assortments_)
    assert est.robust_value(X) == pytest.approx(est.robust_value_, abs=1e-10)
    again = DRAssortment(divergence="kl", rho=0.2, capacity=3, random_state=0).fit(X, y, offered=off, revenues=r)
    np.testing.assert_array_equal(again.predict(X), est.predict(X))  # same seed, same result
    nominal = DRAssortment(rho=0.0).fit(X, y, offered=off, revenues=r)
    np.testing.assert_array_equal(nominal.predict(X), mnl_assortment(nominal.model_.attractions(X), r)[0])


def test_estimator_not_fitted():
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        DRAssortment().predict(np.zeros((2, 3)))


# bad input

def test_bad_input_raises_clear_errors():
    rng = np.random.default_rng(12)
    X, y, off, _, _ = synthetic_logs(rng, 200)
    r = rng.uniform(1.0, 10.0, off.shape[1])
    fit = lambda est, **kw: est.fit(kw.get("X", X), kw.get("y", y), offered=kw.get("off", off),  # noqa: E731
                                    revenues=kw.get("r", r))
    Xnan = X.copy()
    Xnan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit(DRAssortment(), X=Xnan)
    with pytest.raises(ValueError, match="revenues must be > 0"):
        fit(DRAssortment(), r=np.where(np.arange(r.size) == 0, 0.0, r))
    with pytest.raises(ValueError, match="NaN"):
        fit(DRAssortment(), r=np.where(np.arange(r.size) == 0, np.nan, r))
    with pytest.raises(ValueError, match="rho"):
        fit(DRAssortment(rho=-0.1))
    with pytest.raises(ValueError, match="unknown divergence"):
        fit(DRAssortment(divergence="wasserstein"))
    with pytest.raises(ValueError, match="capacity"):
        fit(DRAssortment(capacity=0))
    with pytest.raises(TypeError, match="capacity"):
        fit(DRAssortment(capacity=2.5))
    bad_y = y.copy()
    bad_y[~off[:, 0] & (bad_y == 0)] = 1
    with pytest.raises(ValueError, match="not in the offered set"):
        fit(DRAssortment(), y=bad_y)
    with pytest.raises(ValueError, match="choices must lie"):
        fit(DRAssortment(), y=np.full_like(y, off.shape[1] + 1))
    with pytest.raises(ValueError, match="revenues has"):
        fit(DRAssortment(), r=r[:-1])
    p, R = random_law(rng, 4)
    with pytest.raises(ValueError, match="probability vector"):
        robust_value(2 * p, R, 0.1, "kl")
    with pytest.raises(ValueError, match="rho"):
        robust_value(p, R, -1.0, "tv")
    with pytest.raises(ValueError, match="unknown divergence"):
        worst_case_distribution(p, R, 0.1, "hellinger")
    with pytest.raises(ValueError, match="max_policies"):
        brute_force_robust(np.ones((4, 10)), np.ones(10), divergence="tv", rho=0.1)
    with pytest.raises(ValueError, match="> 0"):
        solve_drao(-np.ones((2, 3)), np.ones(3))


# reproduction

def test_reproduce_quick_is_well_formed():
    from icml26.decisions.drao.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    assert all(np.isfinite(c.measured) for c in out.claims)
    assert all(np.isfinite(v) for v in out.metrics.values())
    assert {"suboptimality", "policies", "runtime"} <= set(out.figures)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) >= 5 and all(c.falsifier for c in claims)
    # exactness vs brute force is a check, scored by the independent primal evaluator
    exact = next(c for c in out.claims if "exact" in c.statement)
    assert exact.kind == "check" and "primal" in exact.note
    try:
        import cvxpy  # noqa: F401
    except ImportError:
        cvxpy = None
    if cvxpy is not None:
        assert out.metrics["bf_agreement"] == 1.0
        assert out.metrics["drao_vs_primal_max_abs"] < 1e-5
    # the shift claims compare absolute shifted revenue, paired over (environment, context) instances
    shift = [c for c in claims if "distribution shifts" in c.statement]
    assert len(shift) == 3
    for c in shift:
        assert c.paired is not None and len(c.paired) == 3 * 300
        assert np.mean(c.paired) == pytest.approx(c.measured - c.reference, abs=1e-9)
    # issue 29: fixed bars carry a control (the nominal policy's slope) or say why none exists
    rate = next(c for c in claims if "n^-1/2" in c.statement)
    assert rate.bar and rate.control == out.metrics["subopt_slope_nominal"]
    assert all(c.control is not None or c.control_arm.startswith("none:") for c in claims if c.bar)


def test_primal_evaluator_matches_duals_on_joint_laws():
    pytest.importorskip("cvxpy")
    from icml26.decisions.drao import primal_robust_value

    rng = np.random.default_rng(21)
    for div in DIVS:
        v = np.exp(rng.normal(size=(3, 4)))
        S = rng.random((3, 4)) < 0.6
        r = rng.uniform(1.0, 10.0, 4)
        P = choice_probabilities(v, S) / 3            # joint (context, choice) law; unoffered cells have p = 0
        R = np.broadcast_to(np.concatenate([[0.0], r]), P.shape)
        for rho in (0.02, 0.3):
            assert primal_robust_value(P, R, rho, div) == pytest.approx(
                policy_robust_value(v, r, S, divergence=div, rho=rho), abs=1e-6)


def test_fit_rejects_items_never_offered():
    rng = np.random.default_rng(22)
    X, y, off, _, _ = synthetic_logs(rng, 300)
    off = off.copy()
    y = y.copy()
    y[y == 3] = 0                                      # nobody buys item 3 ...
    off[:, 2] = False                                  # ... because it was never offered
    with pytest.raises(ValueError, match=r"item\(s\) 3 .* never offered"):
        ContextualMNL().fit(X, y, offered=off)
    with pytest.raises(ValueError, match="never offered"):
        DRAssortment().fit(X, y, offered=off, revenues=np.ones(off.shape[1]))


@functools.lru_cache(maxsize=1)
def _bad_input_cases():
    import icml26.decisions.drao as h

    rng = np.random.default_rng(0)
    v, r = rng.random((3, 4)) + 0.1, np.array([1.0, 2.0, 3.0, 4.0])
    S = v > 0.5
    p, R = np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 2.0])
    X = rng.standard_normal((60, 2))
    off = rng.random((60, 4)) < 0.7
    off[:4] = True
    y = np.array([rng.choice(np.r_[0, np.nonzero(o)[0] + 1]) for o in off])
    m = h.ContextualMNL().fit(X, y, offered=off)
    fit = dict(offered=off, revenues=r)
    return [
        (lambda: h.mnl_assortment(-v, r), ValueError, "attraction values) must be > 0"),                  # silent
        (lambda: h.mnl_assortment(v * np.nan, r), ValueError, "v has 12 NaN"),                           # silent
        (lambda: h.mnl_assortment(v, -r), ValueError, "r (revenues) must be >= 0"),                      # silent
        (lambda: h.mnl_assortment(v, r, 0), ValueError, "capacity must be >= 1"),                        # silent
        (lambda: h.mnl_assortment(v, r[:3]), ValueError, "does not broadcast"),
        (lambda: h.mnl_revenue(-v, r, S), ValueError, "must be > 0"),                                    # < 0 revenue
        (lambda: h.mnl_revenue(v, r, S * 3), ValueError, "0/1 or boolean mask"),                         # silent
        (lambda: h.choice_probabilities(-v, S), ValueError, "must be > 0"),                              # silent
        (lambda: h.choice_probabilities(v, S[:2]), ValueError, "does not broadcast"),
        (lambda: h.ContextualMNL(max_iter=0).fit(X, y, offered=off), ValueError, "max_iter must be"),     # silent
        (lambda: h.ContextualMNL(tol=-1).fit(X, y, offered=off), ValueError, "tol must be >= 0"),         # silent
        (lambda: h.ContextualMNL().fit(X, y + 9, offered=off), ValueError, "choices must lie"),
        (lambda: h.ContextualMNL().attractions(X), ValueError, "not fitted"),
        (lambda: m.attractions(X[:, :1]), ValueError, "must have 2 columns"),
        (lambda: m.choice_probs(X, off[:, :2]), ValueError, "boolean mask of shape (60, 4)"),
        (lambda: m.expected_revenue(X, off, -r), ValueError, "revenues must be > 0"),
        (lambda: h.DRAssortment(divergence="x").fit(X, y, **fit), ValueError, "unknown divergence"),
        (lambda: h.DRAssortment(grid=0).fit(X, y, **fit), ValueError, "grid must be an int >= 3"),
        (lambda: h.DRAssortment().predict(X), ValueError, "not fitted"),
        (lambda: h.solve_drao(-v, r), ValueError, "must be > 0"),
        (lambda: h.solve_drao(v, r, max_active=0), ValueError, "max_active must be"),                    # silent
        (lambda: h.solve_drao(v, r, tol=np.nan), ValueError, "tol must be finite"),                       # silent
        (lambda: h.policy_robust_value(v, r, S * np.nan, divergence="kl", rho=0.1), ValueError,
         "0/1 or boolean mask"),                                                                       # NaN -> True
        (lambda: h.brute_force_robust(v, r, max_policies=0), ValueError, "max_policies"),
        (lambda: h.transformed_revenues(r, "x", 1.0), ValueError, "unknown divergence"),                 # chi2 used
        (lambda: h.transformed_revenues(r, "kl", np.nan), ValueError, "dual_var must be > 0"),          # silent
        (lambda: h.transformed_revenues(r, "tv", -1.0), ValueError, "dual_var must be >= 0"),           # silent
        (lambda: h.transformed_revenues(r * np.nan, "tv", 1.0), ValueError, "revenues contain NaN"),    # silent
        (lambda: h.robust_value(p * 2, R, 0.1, "kl"), ValueError, "probability vector"),
        (lambda: h.tv_robust_value(p, R, -1), ValueError, "rho"),
        (lambda: h.kl_robust_value(p, R * np.nan, 0.1), ValueError, "finite"),
        (lambda: h.chi2_robust_value(np.array([-0.5, 1.5, 0.0]), R, 0.1), ValueError, "probability vector"),
        (lambda: h.worst_case_distribution(p, R, 0.1, "x"), ValueError, "unknown divergence"),
        (lambda: h.divergence_value(p * 2, p, "kl"), ValueError, "q must be a probability vector"),     # silent
        (lambda: h.divergence_value(p[:2], p, "kl"), ValueError, "same shape"),                          # silent
        (lambda: h.divergence_value(p * np.nan, p, "tv"), ValueError, "q has 3 NaN"),                   # was nan
        (lambda: h.primal_robust_value(p * 2, R, 0.1, "kl"), ValueError, "probability vector"),
    ]


@pytest.mark.parametrize("case", range(37))
def test_public_entry_points_refuse_bad_input(case):
    cases = _bad_input_cases()
    assert len(cases) == 37
    call, error, fragment = cases[case]
    with pytest.raises(error, match=re.escape(fragment)):
        call()
