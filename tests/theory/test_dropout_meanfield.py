"""Tests for [A06] dropout mean-field theory and dropout schedules."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml26.harness import Budget, Outcome
from icml26.theory.dropout_meanfield import (
    RELU_A,
    DropoutProfile,
    DropoutTimeScheduler,
    ScheduledDropout,
    c_fixed_point,
    c_map,
    c_trajectory,
    chi_c,
    critical_sigma_w,
    depth_scale,
    fit_depth_scale,
    fit_exponents,
    make_mlp,
    q_fixed_point,
    q_map,
    simulate_correlations,
)


def kappa1(c):
    return (np.sqrt(1 - c ** 2) + (np.pi - np.arccos(c)) * c) / np.pi


# maps: closed forms and Monte Carlo

@pytest.mark.parametrize("p", [0.0, 0.1, 0.3])
def test_relu_c_map_is_rho_kappa1_and_q_preserved(p):
    keep = 1 - p
    c = np.linspace(-1, 1, 101)
    np.testing.assert_allclose(c_map(c, 0.7, "relu", 2 * keep, 0.0, keep), keep * kappa1(c), atol=1e-13)
    assert abs(float(q_map(0.7, "relu", 2 * keep, 0.0, keep)) - 0.7) < 1e-14


@pytest.mark.parametrize("act,sb2", [("relu", 0.0), ("tanh", 0.05), ("erf", 0.05)])
def test_c_map_matches_monte_carlo(act, sb2):
    rng = np.random.default_rng(0)
    keep, sw2, q, c = 0.8, 1.7, 0.9, 0.4
    n = 2_000_000
    z1, z2 = rng.standard_normal((2, n))
    u1, u2 = math.sqrt(q) * z1, math.sqrt(q) * (c * z1 + math.sqrt(1 - c * c) * z2)
    from icml26.theory.dropout_meanfield.meanfield import get_activation
    phi = get_activation(act).phi
    q12 = sw2 * np.mean(phi(u1) * phi(u2)) + sb2
    qp = sw2 / keep * np.mean(phi(u1) ** 2) + sb2
    # Monte Carlo standard error ~ 1e-3; the maps are exact quadrature / closed form
    assert abs(float(c_map(c, q, act, sw2, sb2, keep)) - q12 / float(q_map(q, act, sw2, sb2, keep))) < 5e-3
    assert abs(float(q_map(q, act, sw2, sb2, keep)) - qp) < 5e-3


def test_quadrature_agrees_with_closed_form_for_erf():
    from icml26.theory.dropout_meanfield.meanfield import ACTIVATIONS, Activation
    erf = ACTIVATIONS["erf"]
    quad = Activation("erf_quad", erf.phi, erf.dphi)
    c = np.linspace(-0.95, 0.95, 11)
    np.testing.assert_allclose(quad.ephiphi(0.8, c), erf.ephiphi(0.8, c), atol=1e-10)
    np.testing.assert_allclose(quad.edphidphi(0.8, c), erf.edphidphi(0.8, c), atol=1e-8)


def test_chi_c_is_derivative_of_c_map():
    for act, sb2 in (("tanh", 0.05), ("erf", 0.1), ("relu", 0.0)):
        keep = 0.85
        sw2 = critical_sigma_w(act, sb2, keep)
        q = q_fixed_point(act, sw2, sb2, keep)
        c, h = 0.5, 1e-5
        fd = (c_map(c + h, q, act, sw2, sb2, keep) - c_map(c - h, q, act, sw2, sb2, keep)) / (2 * h)
        assert abs(float(fd) - float(chi_c(c, q, act, sw2, sb2, keep))) < 1e-6


# fixed points, depth scales, exponents

def test_no_dropout_restores_perfect_alignment_at_criticality():
    sw2 = critical_sigma_w("tanh", 0.05, 1.0)
    assert abs(sw2 - 1.7609) < 1e-3                       # Schoenholz et al. (2017) critical line at sb2 = 0.05
    q = q_fixed_point("tanh", sw2, 0.05)
    assert abs(float(chi_c(1.0, q, "tanh", sw2, 0.05)) - 1) < 1e-10
    assert c_fixed_point("tanh", sw2, 0.05, 1.0) == 1.0
    assert c_fixed_point("relu", 2.0, 0.0, 1.0) == 1.0
    assert depth_scale("relu", 2.0, 0.0, 1.0) == math.inf


@pytest.mark.parametrize("p", [1e-3, 0.05, 0.2])
def test_relu_fixed_point_solves_closed_form(p):
    keep = 1 - p
    cs = c_fixed_point("relu", 2 * keep, 0.0, keep)
    assert cs < 1 and abs(keep * kappa1(cs) - cs) < 1e-12
    xi = depth_scale("relu", 2 * keep, 0.0, keep)
    assert abs(xi + 1 / math.log(keep * (np.pi - np.arccos(cs)) / np.pi)) < 1e-9


def test_exponents_distinguish_universality_classes():
    ps = np.logspace(-6, -4, 3)
    relu, tanh = fit_exponents("relu", ps), fit_exponents("tanh", ps, sb2=0.05)
    assert abs(relu["beta"] - 2 / 3) < 0.02 and abs(relu["nu"] - 1 / 3) < 0.02
    assert abs(tanh["beta"] - 1 / 2) < 0.02 and abs(tanh["nu"] - 1 / 2) < 0.02
    gap = relu["gap"][0]
    assert abs(gap / (ps[0] / RELU_A) ** (2 / 3) - 1) < 0.02


def test_trajectory_iterates_the_map():
    keep = 0.9
    cs, qs = c_trajectory(0.3, 5, "relu", 2 * keep, 0.0, keep, q0=1.0)
    for layer in range(5):
        assert abs(cs[layer + 1] - keep * kappa1(cs[layer])) < 1e-13
    np.testing.assert_allclose(qs, 1.0)


def test_simulation_is_seeded_and_close_to_theory():
    keep = 0.9
    kw = dict(c0=(0.3, 0.99), q0=1.0, depth=6, width=256, n_nets=2, n_pairs=8)
    a = simulate_correlations("relu", 2 * keep, 0.0, keep, seed=3, **kw)
    b = simulate_correlations("relu", 2 * keep, 0.0, keep, seed=3, **kw)
    assert a.shape == (7, 2, 16) and np.array_equal(a, b)
    theo = c_trajectory(0.99, 6, "relu", 2 * keep, 0.0, keep, q0=1.0)[0]
    assert np.abs(a[:, 1].mean(-1) - theo).max() < 0.06


def test_fit_depth_scale_recovers_geometric_decay():
    layers = np.arange(20)
    c = 0.5 + 0.4 * np.exp(-layers / 3.0)
    assert abs(fit_depth_scale(c, 0.5, floor=1e-6) - 3.0) < 1e-9


# schedules

def test_profiles_hit_budget_and_are_monotone():
    for n in (1, 5, 6, 37):
        for kind in ("linear", "saturated"):
            f = DropoutProfile.front_loaded(n, 0.2, 0.4, kind=kind)
            b = DropoutProfile.back_loaded(n, 0.2, 0.4, kind=kind)
            assert abs(f.sum() - 0.2 * n) < 1e-12 and abs(b.sum() - 0.2 * n) < 1e-12
            assert (np.diff(f) <= 1e-15).all() and (np.diff(b) >= -1e-15).all()
            assert ((f >= 0) & (f < 1)).all()
        assert np.allclose(DropoutProfile.constant(n, 0.2), 0.2)
    sat = DropoutProfile.front_loaded(6, 0.2, 0.5, kind="saturated")
    np.testing.assert_allclose(sat, [0.5, 0.5, 0.2, 0, 0, 0])


def test_scheduled_dropout_identity_in_eval_and_unbiased_in_train():
    torch.manual_seed(0)
    d = ScheduledDropout(0.3)
    x = torch.randn(200_000)
    d.eval()
    assert torch.equal(d(x), x)
    d.train()
    y = d(torch.ones(200_000))
    assert abs(float(y.mean()) - 1) < 0.01 and abs(float((y == 0).float().mean()) - 0.3) < 0.01
    d.p = 0.0
    assert torch.equal(d(x), x)


def test_time_scheduler_follows_schedule_and_mlp_structure():
    model = make_mlp(8, 3, DropoutProfile.front_loaded(4, 0.2), width=16, act="tanh")
    assert [m.p for m in model.modules() if isinstance(m, ScheduledDropout)] == pytest.approx([0.4, 0.8 / 3, 0.4 / 3, 0])
    sched = DropoutTimeScheduler(model, DropoutProfile.front_loaded(3, 0.2))
    assert sched.current() == pytest.approx([0.4] * 4)
    sched.step()
    assert sched.current() == pytest.approx([0.2] * 4)
    sched.step()
    sched.step()
    assert sched.current() == pytest.approx([0.0] * 4)      # held at the last rate after the schedule ends
    out = model(torch.randn(5, 8))
    assert out.shape == (5, 3)


@pytest.mark.parametrize("p", [0.2, 0.4])
def test_critical_init_is_critical_with_dropout(p):
    """Regression (issue 30): init="critical" used He init (sw2 = 2) whatever the dropout, so in training mode
    the variance grew by 1/keep per layer (x1.67 per layer at p = 0.4). Dropout-aware: sw2 = 2 keep."""
    torch.manual_seed(0)
    x = torch.randn(64, 256)
    for init, ok in (("critical", True), ("critical_no_dropout", False)):
        model = make_mlp(256, 256, [p] * 8, width=1024, act="relu", init=init).train()
        with torch.no_grad():
            first = model[0](x)
            out = model[-1](model[:-1](x))
        ratio = float(out.pow(2).mean() / first.pow(2).mean())
        assert (0.75 < ratio < 1.33) == ok, (init, ratio)
    tanh = make_mlp(8, 3, [0.3, 0.0], width=256, act="tanh")
    from icml26.theory.dropout_meanfield import critical_sigma_w
    sw2 = float(tanh[3].weight.detach().var() * 256)                # reads ScheduledDropout(0.3)
    assert sw2 == pytest.approx(critical_sigma_w("tanh", 0.05, 0.7), rel=0.03)
    assert abs(sw2 - critical_sigma_w("tanh", 0.05, 1.0)) > 0.1


def test_schedule_claim_cell_is_where_constant_beats_none():
    from icml26.theory.dropout_meanfield.reproduce import best_constant_cell
    nll = {("mlp", 10, "none"): np.array([0.2, 0.2]), ("mlp", 10, "constant@0.05"): np.array([0.19, 0.19]),
           ("mlp", 10, "constant@0.2"): np.array([0.3, 0.3]), ("mlp", 40, "none"): np.array([0.25, 0.25]),
           ("mlp", 40, "constant@0.05"): np.array([0.2, 0.2]), ("mlp", 40, "constant@0.2"): np.array([0.22, 0.22])}
    E, pb, gain = best_constant_cell(nll, "mlp", (10, 40), (0.05, 0.2))
    assert (E, pb) == (40, 0.05) and gain == pytest.approx(0.05)


def test_critical_init_preserves_relu_variance():
    torch.manual_seed(0)
    model = make_mlp(256, 256, [0.0] * 8, width=1024, act="relu")
    x = torch.randn(64, 256)
    with torch.no_grad():
        first = model[0](x)                                  # q^1 = 2 E[x^2] = 2
        out = model[-1](model[:-1](x))                       # q^9, preserved by sw2 = 2 (He)
    ratio = float(out.pow(2).mean() / first.pow(2).mean())
    assert 0.75 < ratio < 1.33


# bad input

def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="dropout rate"):
        ScheduledDropout(-0.1)
    with pytest.raises(ValueError, match="dropout rate"):
        ScheduledDropout(1.0)
    with pytest.raises(TypeError):
        ScheduledDropout("0.1")
    with pytest.raises(ValueError, match="keep"):
        q_map(1.0, "tanh", 1.0, 0.0, keep=0.0)
    with pytest.raises(ValueError, match="sw2"):
        c_map(0.5, 1.0, "tanh", -1.0, 0.0)
    with pytest.raises(ValueError, match="unknown activation"):
        depth_scale("gelu", 1.0, 0.0)
    with pytest.raises(ValueError, match="width"):
        make_mlp(8, 2, [0.1], width=0)
    with pytest.raises(ValueError, match="positive integer"):
        simulate_correlations("relu", 2.0, 0.0, 1.0, c0=0.3, q0=1.0, depth=2, width=-4, n_nets=1)
    with pytest.raises(ValueError, match="p_max"):
        DropoutProfile.front_loaded(4, 0.6)
    with pytest.raises(ValueError, match="no ScheduledDropout"):
        DropoutTimeScheduler(torch.nn.Linear(2, 2), [0.1])
    with pytest.raises(ValueError, match="ps"):
        fit_exponents("relu", [0.1, 1.5])


# reproduction

def test_reproduce_quick_is_well_formed():
    from icml26.theory.dropout_meanfield.reproduce import reproduce
    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    checks = [c for c in out.claims if c.kind == "check"]
    assert len(claims) == 5 and len(checks) == 8
    # the deterministic numerics of the maps (identical on every seed) are checks, not claims
    assert {c.statement.split(":")[0] for c in checks} >= {"Kinked (ReLU) activations", "Smooth (tanh) activations"}
    for c in claims:
        assert c.control is not None and c.control_arm
    assert all(math.isfinite(c.measured) and c.verdict in ("holds", "does not hold", "inconclusive")
               for c in out.claims)
    assert all(c.falsifier for c in claims)
    assert all(math.isfinite(v) for v in out.metrics.values())
    assert {"correlation_decay", "exponents_collapse"} <= set(out.figures)
    assert {"exponents", "theory_vs_simulation", "schedules", "collapse"} <= set(out.tables)


def test_mixer_blocks_carry_their_rates():
    from icml26.theory.dropout_meanfield.mixer import make_mixer
    m = make_mixer([0.4, 0.2, 0.0], dim=16)
    rates = [d.p for d in m.modules() if isinstance(d, ScheduledDropout)]
    assert rates == pytest.approx([0.4, 0.4, 0.2, 0.2, 0.0, 0.0])
    assert m(torch.rand(3, 64)).shape == (3, 10)
    with pytest.raises(ValueError, match="dropout rate"):
        make_mixer([1.2])
    with pytest.raises(ValueError, match="divide"):
        make_mixer([0.1], patch=3)
