"""Tests for [A02] NNGP / random-feature DMFT (theory/nngp_dmft)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml26.harness import Budget, Outcome
from icml26.theory.nngp_dmft import (
    PowerLawTask,
    bayes_limit,
    dmft_generalization_curve,
    draw_problem,
    gp_posterior_error,
    gradient_flow_infinite_data,
    optimal_stopping_time,
    renormalized_ridge,
    ridge_equivalent,
    ridge_weights,
    sample_langevin_error,
    simulate_generalization_curve,
    simulate_run,
)


@pytest.fixture(scope="module")
def task():
    t = PowerLawTask(200, 1.5, 2.0, 0.05)
    return t.lam, t.w2


def test_power_law_task_normalisation(task):
    lam, w2 = task
    assert lam.sum() == pytest.approx(1.0)
    assert (lam * w2).sum() == pytest.approx(1.0)
    k = np.arange(1, 201)
    assert np.allclose(lam * w2 * k ** 2.0, (lam * w2)[0])


def test_renormalized_ridge_solves_its_equation(task):
    lam, _ = task
    z = np.array([1e-3, 0.1, 2.0 + 0.5j, -0.01 + 0.02j, -5.0 - 3.0j])
    k = renormalized_ridge(z, lam, 50)
    resid = k * (1 - (lam / (lam + k[:, None])).sum(1) / 50) - z
    assert np.abs(resid).max() < 1e-12
    assert np.all(np.sign(k.imag[2:]) == np.sign(z.imag[2:]))        # physical branch
    kr = renormalized_ridge(np.array([0.1]), lam, 50)
    assert kr.dtype == float and kr[0] > 0.1                          # kappa > z for real z > 0


def test_one_point_equivalent_matches_brute_force_resolvent(task):
    # E Tr[(Sigma_hat + z)^-1 Sigma] ~ (kappa/z) sum lam / (lam + kappa), checked by averaging real draws
    lam, w2 = task
    P, z = 100, 0.01 + 0.005j
    rng = np.random.default_rng(0)
    vals = []
    for _ in range(30):
        Psi, _, _ = draw_problem(lam, w2, P, 0.0, rng)
        S = Psi.T @ Psi / P
        vals.append(np.trace(np.linalg.solve(S + z * np.eye(len(lam)), np.diag(lam))))
    k = renormalized_ridge(np.array([z]), lam, P)[0]
    pred = k / z * (lam / (lam + k)).sum()
    assert abs(np.mean(vals) / pred - 1) < 0.02


def test_ridge_limit_is_exact(task):
    lam, w2 = task
    for P, gamma, s2 in ((50, 1e-2, 0.05), (300, 1e-3, 0.0)):
        closed = ridge_equivalent(lam, w2, P, gamma, s2)
        dmft = dmft_generalization_curve(np.array([1e10]), lam, w2, P, sigma2=s2, weight_decay=gamma)[0]
        assert dmft == pytest.approx(closed, rel=1e-7)
        assert ridge_equivalent(lam, w2, P, gamma, s2, per_mode=True).sum() == pytest.approx(closed)


def test_t_zero_and_infinite_data_limits(task):
    lam, w2 = task
    e0 = dmft_generalization_curve(np.array([1e-7]), lam, w2, 50, sigma2=0.05)[0]
    assert e0 == pytest.approx((lam * w2).sum(), rel=1e-5)
    t = np.array([0.5, 5.0, 50.0])
    big = dmft_generalization_curve(t, lam, w2, 10 ** 9)
    assert np.allclose(big, gradient_flow_infinite_data(t, lam, w2), rtol=1e-6)


def test_talbot_converged_and_per_mode_sums(task):
    lam, w2 = task
    t = np.logspace(0, 4, 6)
    a = dmft_generalization_curve(t, lam, w2, 60, sigma2=0.05, weight_decay=1e-4)
    b = dmft_generalization_curve(t, lam, w2, 60, sigma2=0.05, weight_decay=1e-4, n_talbot=24)
    assert np.abs(a / b - 1).max() < 1e-6
    pm = dmft_generalization_curve(t, lam, w2, 60, sigma2=0.05, weight_decay=1e-4, per_mode=True)
    assert pm.shape == (6, len(lam))
    assert np.allclose(pm.sum(1), a, rtol=1e-8)


def test_per_mode_split_matches_the_simulated_modes():
    """Fresh-eyes review: per_mode=True must give each mode's error, not only the right total. The collective part
    of the two-point equivalent lands on mode k in proportion to lambda_k^2 / ((lambda_k + k1)(lambda_k + k2)); the
    old split spread it with each mode's own signal (off by up to 130% on these rank bands, with negative mode
    terms; the corrected split by at most 5%)."""
    task = PowerLawTask(200, 1.5, 2.0, 0.05)
    lam, w2 = task.lam, task.w2
    P, gamma, R = 50, 1e-3, 400
    t = np.array([10.0, 100.0, 1000.0])
    rng = np.random.default_rng(0)
    sim = np.zeros((len(t) + 1, len(lam)))
    for _ in range(R):
        Psi, y, w = draw_problem(lam, w2, P, 0.05, rng)
        sim += simulate_run(np.r_[t, np.inf], lam, Psi, y, w, weight_decay=gamma, per_mode=True) / R
    theory = np.vstack([dmft_generalization_curve(t, lam, w2, P, sigma2=0.05, weight_decay=gamma, per_mode=True),
                        ridge_equivalent(lam, w2, P, gamma, 0.05, per_mode=True)[None]])
    assert np.allclose(theory.sum(1), np.r_[dmft_generalization_curve(t, lam, w2, P, sigma2=0.05, weight_decay=gamma),
                                            ridge_equivalent(lam, w2, P, gamma, 0.05)], rtol=1e-8)
    assert (theory > 0).all()
    # rank bands below the top three modes (single modes fluctuate most at this small N)
    for lo, hi in ((3, 10), (10, 30), (30, 100), (100, 200)):
        rel = theory[:, lo:hi].sum(1) / sim[:, lo:hi].sum(1) - 1
        assert np.abs(rel).max() < 0.08, (lo, hi, rel)
    # the simulation's own per-mode terms sum to its total, with and without temperature
    Psi, y, w = draw_problem(lam, w2, P, 0.05, rng)
    for temp in (0.0, 1e-4):
        pm = simulate_run(t, lam, Psi, y, w, weight_decay=gamma, temperature=temp, per_mode=True)
        assert np.allclose(pm.sum(1), simulate_run(t, lam, Psi, y, w, weight_decay=gamma, temperature=temp))


def test_simulation_matches_time_stepping_and_ridge(task):
    lam, w2 = task
    rng = np.random.default_rng(1)
    Psi, y, w = draw_problem(lam, w2, 40, 0.05, rng)
    gamma, P = 1e-2, 40
    # brute force: the affine ODE dv/dt = -(S + gamma) v + b as one augmented matrix exponential
    from scipy.linalg import expm
    S, bvec = Psi.T @ Psi / P, Psi.T @ y / P
    n = len(w)
    Aug = np.zeros((n + 1, n + 1))
    Aug[:n, :n], Aug[:n, n] = -(S + gamma * np.eye(n)), bvec
    v = (expm(2.0 * Aug) @ np.r_[np.zeros(n), 1.0])[:n]
    e_brute = (lam * (v - w) ** 2).sum()
    e_exact = simulate_run(np.array([2.0]), lam, Psi, y, w, weight_decay=gamma)[0]
    assert e_exact == pytest.approx(e_brute, rel=1e-8)
    w_r = ridge_weights(Psi, y, gamma)
    e_inf = simulate_run(np.array([np.inf]), lam, Psi, y, w, weight_decay=gamma)[0]
    assert e_inf == pytest.approx((lam * (w_r - w) ** 2).sum(), rel=1e-9)
    from sklearn.linear_model import Ridge
    w_sk = Ridge(alpha=P * gamma, fit_intercept=False, solver="svd").fit(Psi, y).coef_
    assert np.allclose(w_sk, w_r, atol=1e-10)
    # t = 0: w = 0, E_g = sum lam w*^2
    assert simulate_run(np.array([0.0]), lam, Psi, y, w)[0] == pytest.approx((lam * w ** 2).sum())


def test_dmft_tracks_simulation_small(task):
    lam, w2 = task
    t = np.logspace(0, 3.5, 8)
    th = dmft_generalization_curve(t, lam, w2, 80, sigma2=0.05)
    sim = simulate_generalization_curve(t, lam, w2, 80, sigma2=0.05, n_draws=24, seed=3).mean(0)
    assert np.abs(th / sim - 1).max() < 0.12


def test_control_theory_without_collective_response(task):
    """The reproduction's control (self_consistent=False: kappa = z, D12 = 1) is a known closed form, and it is
    measurably worse than the DMFT against the simulation, so the agreement claims can tell the two apart."""
    lam, w2 = task
    t = np.logspace(0, 3.5, 8)
    # noise-free, gamma = 0: the control is population gradient flow
    assert np.allclose(dmft_generalization_curve(t, lam, w2, 80, self_consistent=False),
                       gradient_flow_infinite_data(t, lam, w2), rtol=1e-7)
    g, s2 = 1e-3, 0.05
    q = lam / (lam + g)
    closed = g * g * (lam * w2 / (lam + g) ** 2).sum() + s2 * (q * q).sum() / 80
    assert ridge_equivalent(lam, w2, 80, g, s2, self_consistent=False) == pytest.approx(closed, rel=1e-12)
    assert float(dmft_generalization_curve(np.array([1e9]), lam, w2, 80, sigma2=s2, weight_decay=g,
                                           self_consistent=False)[0]) == pytest.approx(closed, rel=1e-6)
    sim = simulate_generalization_curve(t, lam, w2, 80, sigma2=s2, n_draws=24, seed=3).mean(0)
    err = np.abs(dmft_generalization_curve(t, lam, w2, 80, sigma2=s2) / sim - 1).max()
    err_ctrl = np.abs(dmft_generalization_curve(t, lam, w2, 80, sigma2=s2, self_consistent=False) / sim - 1).max()
    assert err < 0.12 < err_ctrl


def test_langevin_expectation_matches_sampled_trajectories(task):
    lam, w2 = task
    lam, w2 = lam[:60], w2[:60]
    rng = np.random.default_rng(2)
    Psi, y, w = draw_problem(lam, w2, 25, 0.05, rng)
    for gamma in (1e-3, 0.0):
        e = sample_langevin_error(40.0, lam, Psi, y, w, weight_decay=gamma, temperature=1e-3, n_samples=20000,
                                  rng=rng)
        exact = simulate_run(np.array([40.0]), lam, Psi, y, w, weight_decay=gamma, temperature=1e-3)[0]
        assert abs(e.mean() - exact) < 4 * e.std() / np.sqrt(len(e))


def test_langevin_limits_and_bayes_peer(task):
    lam, w2 = task
    t = np.logspace(0, 4, 5)
    gf = dmft_generalization_curve(t, lam, w2, 50, sigma2=0.05, weight_decay=1e-3)
    lv = dmft_generalization_curve(t, lam, w2, 50, sigma2=0.05, weight_decay=1e-3, temperature=1e-4)
    assert (lv > gf).all()
    pm = dmft_generalization_curve(t, lam, w2, 50, sigma2=0.05, weight_decay=1e-3, temperature=1e-4, per_mode=True)
    assert np.allclose(pm.sum(1), lv, rtol=1e-8)
    inf = dmft_generalization_curve(np.array([1e10]), lam, w2, 50, sigma2=0.05, weight_decay=1e-3, temperature=1e-4)
    assert inf[0] == pytest.approx(bayes_limit(lam, w2, 50, 1e-3, 1e-4, 0.05), rel=1e-7)
    rng = np.random.default_rng(4)
    Psi, y, w = draw_problem(lam, w2, 50, 0.05, rng)
    post = simulate_run(np.array([np.inf]), lam, Psi, y, w, weight_decay=1e-3, temperature=1e-4)[0]
    assert post == pytest.approx(gp_posterior_error(lam, Psi, y, w, weight_decay=1e-3, temperature=1e-4), rel=1e-8)
    with pytest.raises(ValueError, match="stationary"):
        simulate_run(np.array([np.inf]), lam, Psi, y, w, weight_decay=0.0, temperature=1e-4)
    with pytest.raises(ValueError, match="temperature"):
        dmft_generalization_curve(t, lam, w2, 50, temperature=-1.0)


def test_digits_nngp_features_reconstruct_target():
    from icml26.theory.nngp_dmft.nngp_features import digits_nngp_features
    lam, feats, w, y = digits_nngp_features(depth=1, target="zero")
    assert lam.sum() == pytest.approx(1.0) and (np.diff(lam) <= 1e-15).all()
    assert np.abs(feats @ w - y).max() < 1e-8
    assert np.allclose(feats.T @ feats / len(y), np.diag(lam), atol=1e-10)
    with pytest.raises(ValueError, match="target"):
        digits_nngp_features(target="bad")


def test_determinism(task):
    lam, w2 = task
    t = np.array([1.0, 10.0])
    a = simulate_generalization_curve(t, lam, w2, 30, sigma2=0.05, n_draws=2, seed=7)
    b = simulate_generalization_curve(t, lam, w2, 30, sigma2=0.05, n_draws=2, seed=7)
    assert np.array_equal(a, b)


def test_optimal_stopping_time():
    t = np.logspace(0, 4, 41)
    e = (np.log(t) - np.log(300.0)) ** 2 + 0.1
    to, eo = optimal_stopping_time(t, e)
    assert to == pytest.approx(300.0, rel=1e-6) and eo == pytest.approx(0.1, abs=1e-9)
    assert optimal_stopping_time(t, 1 / t)[0] == t[-1]          # monotone: no interior optimum


_TASK = PowerLawTask(20, 1.5, 2.0, 0.05)
_LAM, _W2 = _TASK.lam, _TASK.w2
_PSI, _Y, _WS = draw_problem(_LAM, _W2, 8, 0.05, np.random.default_rng(0))
_T = np.array([1.0, 10.0])
_NAN_PSI = _PSI.copy()
_NAN_PSI[0, 0] = np.nan

# (callable, kwargs, error, message fragment): every public entry point of the package with input it must refuse
# before any work; without the check each case returns a number (NaN, an empty array, a wrong value) or fails deep
# inside numpy / scikit-learn
BAD_INPUTS = [
    (PowerLawTask, dict(N=1), ValueError, "N"),
    (PowerLawTask, dict(N=10, a=-1.0), ValueError, "a must be > 0"),
    (PowerLawTask, dict(N=10, b=float("nan")), ValueError, "b must be finite"),
    (PowerLawTask, dict(N=10, sigma2=-0.1), ValueError, "sigma2"),
    (PowerLawTask, dict(N=10.5), TypeError, "N"),
    (renormalized_ridge, dict(z=np.array([-1.0]), lam=_LAM, P=10), ValueError, "real z"),
    (renormalized_ridge, dict(z=np.array([0.1]), lam=_LAM, P=10, max_iter=0), ValueError, "max_iter"),
    (renormalized_ridge, dict(z="0.1", lam=_LAM, P=10), TypeError, "z must be"),
    (renormalized_ridge, dict(z=np.array([0.1]), lam=-_LAM, P=10), ValueError, "lam"),
    (renormalized_ridge, dict(z=np.array([0.1]), lam=np.r_[_LAM[:-1], np.nan], P=10), ValueError, "lam has 1 NaN"),
    (ridge_equivalent, dict(lam=_LAM, w2=_W2, P=10, ridge=0.0), ValueError, "ridge must be > 0"),
    (ridge_equivalent, dict(lam=_LAM, w2=_W2[:-1], P=10, ridge=0.1), ValueError, "w2 must have shape"),
    (ridge_equivalent, dict(lam=_LAM, w2=-_W2, P=10, ridge=0.1), ValueError, "w2"),
    (ridge_equivalent, dict(lam=_LAM, w2=_W2, P=0, ridge=0.1), ValueError, "P"),
    (dmft_generalization_curve, dict(t=np.array([0.0]), lam=_LAM, w2=_W2, P=10), ValueError, "t must"),
    (dmft_generalization_curve, dict(t=np.array([np.nan]), lam=_LAM, w2=_W2, P=10), ValueError, "t must"),
    (dmft_generalization_curve, dict(t=_T, lam=_LAM, w2=_W2[:-1], P=10), ValueError, "w2"),
    (dmft_generalization_curve, dict(t=_T, lam=_LAM, w2=_W2, P=10, weight_decay=-1.0), ValueError, "weight_decay"),
    (dmft_generalization_curve, dict(t=_T, lam=_LAM, w2=_W2, P=10, temperature=-1.0), ValueError, "temperature"),
    (dmft_generalization_curve, dict(t=_T, lam=_LAM, w2=_W2, P=10, n_talbot=2), ValueError, "n_talbot"),
    (dmft_generalization_curve, dict(t=_T, lam=_LAM, w2=_W2, P=2.5), TypeError, "P"),
    (gradient_flow_infinite_data, dict(t=np.array([-1.0]), lam=_LAM, w2=_W2), ValueError, "t must"),
    (gradient_flow_infinite_data, dict(t=_T, lam=_LAM, w2=_W2[:3]), ValueError, "w2"),
    (optimal_stopping_time, dict(t=np.logspace(0, 1, 5), errors=np.r_[1.0, np.nan, 1, 1, 1]), ValueError, "errors"),
    (optimal_stopping_time, dict(t=np.logspace(0, 1, 5), errors=np.ones(4)), ValueError, "errors must have shape"),
    (optimal_stopping_time, dict(t=np.array([1.0, 2.0]), errors=np.ones(2)), ValueError, "at least 3"),
    (draw_problem, dict(lam=_LAM, w2=_W2, P=5, sigma2=0.05, rng="seed"), TypeError, "rng"),
    (draw_problem, dict(lam=_LAM, w2=_W2, P=5, sigma2=-1.0, rng=np.random.default_rng(0)), ValueError, "sigma2"),
    (simulate_run, dict(t=_T, lam=_LAM[:-1], Psi=_PSI, y=_Y, w_star=_WS), ValueError, "Psi must have shape"),
    (simulate_run, dict(t=_T, lam=_LAM, Psi=_NAN_PSI, y=_Y, w_star=_WS), ValueError, "Psi has 1 NaN"),
    (simulate_run, dict(t=_T, lam=_LAM, Psi=_PSI, y=_Y[:-1], w_star=_WS), ValueError, "y must have shape"),
    (simulate_run, dict(t=_T, lam=_LAM, Psi=_PSI, y=_Y, w_star=_WS[:-1]), ValueError, "w_star must have shape"),
    (simulate_run, dict(t=np.array([-1.0]), lam=_LAM, Psi=_PSI, y=_Y, w_star=_WS), ValueError, "t must"),
    (simulate_run, dict(t=np.array([np.inf]), lam=_LAM, Psi=_PSI, y=_Y, w_star=_WS, temperature=1e-3),
     ValueError, "stationary"),
    (simulate_generalization_curve, dict(t=_T, lam=_LAM, w2=_W2, P=5, n_draws=0), ValueError, "n_draws"),
    (simulate_generalization_curve, dict(t=_T, lam=_LAM, w2=_W2, P=5, seed=-1), ValueError, "seed"),
    (simulate_generalization_curve, dict(t=np.array([-2.0]), lam=_LAM, w2=_W2, P=5), ValueError, "t must"),
    (ridge_weights, dict(Psi=_PSI, y=_Y, ridge=-1.0), ValueError, "ridge"),
    (ridge_weights, dict(Psi=_PSI, y=_Y[:3], ridge=0.1), ValueError, "y must have shape"),
    (bayes_limit, dict(lam=_LAM, w2=_W2, P=10, weight_decay=0.0, temperature=1e-3), ValueError, "weight_decay"),
    (bayes_limit, dict(lam=_LAM, w2=_W2, P=10, weight_decay=1e-3, temperature=-1.0), ValueError, "temperature"),
    (sample_langevin_error, dict(t=-1.0, lam=_LAM, Psi=_PSI, y=_Y, w_star=_WS, weight_decay=0.0, temperature=1e-3,
                                 n_samples=4, rng=np.random.default_rng(0)), ValueError, "t must be >= 0"),
    (sample_langevin_error, dict(t=1.0, lam=_LAM, Psi=_PSI, y=_Y, w_star=_WS, weight_decay=0.0, temperature=1e-3,
                                 n_samples=0, rng=np.random.default_rng(0)), ValueError, "n_samples"),
    (sample_langevin_error, dict(t=1.0, lam=_LAM, Psi=_PSI[:, :-1], y=_Y, w_star=_WS, weight_decay=0.0,
                                 temperature=1e-3, n_samples=4, rng=np.random.default_rng(0)), ValueError, "Psi"),
    (gp_posterior_error, dict(lam=_LAM, Psi=_PSI, y=_Y, w_star=_WS, weight_decay=0.0, temperature=1e-3),
     ValueError, "weight_decay"),
    (gp_posterior_error, dict(lam=_LAM, Psi=_PSI, y=_Y, w_star=_WS, weight_decay=1e-3, temperature=0.0),
     ValueError, "temperature"),
]


@pytest.mark.parametrize("fn, kwargs, err, msg", BAD_INPUTS,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(BAD_INPUTS)])
def test_bad_inputs(fn, kwargs, err, msg):
    with pytest.raises(err, match=msg):
        fn(**kwargs)


def test_every_public_entry_point_has_a_bad_input_case():
    import icml26.theory.nngp_dmft as pkg

    assert set(pkg.__all__) == {c[0].__name__ for c in BAD_INPUTS}


def test_reproduce_quick_is_well_formed():
    from icml26.theory.nngp_dmft.reproduce import reproduce
    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    assert all(math.isfinite(c.measured) for c in out.claims)
    assert all(c.verdict in ("holds", "does not hold", "inconclusive") for c in out.claims)
    assert all(math.isfinite(v) for v in out.metrics.values())
    claims = [c for c in out.claims if c.kind == "claim"]
    checks = [c for c in out.claims if c.kind == "check"]
    assert len(claims) == 13 and len(checks) == 9
    assert all(c.falsifier for c in claims)
    # every fixed-tolerance agreement claim carries the control theory; the timing carries its same-work control
    for c in claims:
        if c.bar and "faster" not in c.statement:
            assert c.control is not None and "collective response" in c.control_arm, c.statement
    speed = next(c for c in claims if "faster" in c.statement)
    assert speed.timing_control is not None and speed.control_arm.startswith("none:")
    stop = next(c for c in claims if "Stopping" in c.statement)
    assert len(stop.baselines) == 2
    assert {"learning_curve", "sample_size_scaling"} <= set(out.tables)
    assert "learning_curve" in out.figures
