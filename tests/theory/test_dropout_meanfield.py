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


# review fixes (fresh-eyes review, findings 1, 2, 4, 5, 6)

def _tiny_sizes():
    import dataclasses

    from icml26.theory.dropout_meanfield.reproduce import SIZES
    return dataclasses.replace(SIZES[Budget.QUICK], width=32, depth=6, n_nets=2, n_pairs=2, epochs=(1,),
                               mixer_epochs=1, mixer_dim=8, mlp_width=16)


def test_every_arm_at_one_p_bar_starts_from_the_same_weights():
    """Findings 2 and 4: the time arms were built with zero rates (He init) and each depth arm with its own
    critical init, while the constant arm got sw2 = 2(1 - p_bar): the comparison measured the init, not only the
    schedule. Now every arm at one p_bar starts from the constant arm's weights."""
    from icml26.theory.dropout_meanfield.reproduce import _conditions, build_model
    sz = _tiny_sizes()
    conds = _conditions(6, 24, (0.2,), True)
    weights = {k: [p.detach().clone() for p in build_model(sz, "mlp", prof, init, 7).parameters()]
               for k, (prof, _, init) in conds.items()}
    ref = weights["constant@0.2"]
    for k in ("depth_front@0.2", "depth_back@0.2", "time_front@0.2", "time_back@0.2"):
        assert all(torch.equal(a, b) for a, b in zip(weights[k], ref)), k
    assert not all(torch.equal(a, b) for a, b in zip(weights["none"], ref))     # He init at p = 0
    # the time arms' rates still follow their schedule (the scheduler sets them before the first step)
    model = build_model(sz, "mlp", *conds["time_front@0.2"][::2], 7)
    sched = DropoutTimeScheduler(model, conds["time_front@0.2"][1])
    assert sched.current() == pytest.approx([0.4] * 6)


def test_make_mlp_init_rates_decide_the_init():
    torch.manual_seed(0)
    a = make_mlp(8, 3, [0.4, 0.0], width=64, init_rates=[0.2, 0.2])
    torch.manual_seed(0)
    b = make_mlp(8, 3, [0.2, 0.2], width=64)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert [m.p for m in a.modules() if isinstance(m, ScheduledDropout)] == [0.4, 0.0]


def test_decision_cell_is_chosen_on_seed_independent_selection_repetitions():
    """Finding 5: the cell was chosen per seed on the measured repetitions themselves."""
    from icml26.theory.dropout_meanfield.reproduce import measured_rep_seed, selection_rep_seed
    sel = {selection_rep_seed(r) for r in range(8)}
    measured = {measured_rep_seed(s, r) for s in range(50) for r in range(8)}
    assert not sel & measured and len(sel) == 8


def _nll(front, back, const, none, E=30, pb=0.1, arch="mlp"):
    return {(arch, E, f"depth_front@{pb:g}"): np.array(front), (arch, E, f"depth_back@{pb:g}"): np.array(back),
            (arch, E, f"constant@{pb:g}"): np.array(const), (arch, E, "none"): np.array(none)}


def test_schedule_claim_is_undecided_where_dropout_never_helps():
    """Finding 1: on an underfit testbed (constant dropout worse than none at every cell) the claim was decided
    against no dropout, where no dropout arm can help. Now it is undecided (NaN) and says why."""
    from icml26.theory.dropout_meanfield.reproduce import schedule_claim
    nll = _nll([0.05, 0.051, 0.049], [0.09, 0.091, 0.092], [0.08, 0.081, 0.079], [0.085, 0.084, 0.086])
    decided = schedule_claim(nll, "mlp", "depth", "depth", (30, 0.1, 0.004), "")
    assert decided.verdict == "holds"
    undecided = schedule_claim(nll, "mlp", "depth", "depth", (30, 0.1, -0.02), "")
    assert math.isnan(undecided.measured) and undecided.verdict == "inconclusive"
    assert "UNDECIDED" in undecided.note
    acc = _nll([0.97, 0.975, 0.972], [0.95, 0.951, 0.952], [0.96, 0.961, 0.962], [0.955, 0.956, 0.957])
    claim = schedule_claim(nll, "mlp", "depth", "depth", (30, 0.1, 0.004), "", metric_kind="acc", acc=acc)
    assert claim.verdict == "holds" and claim.op == ">"


def test_dc_claim_within_two_standard_errors_of_the_tolerance_is_undecided():
    """Finding 6: a max |dc| of 0.041 with an SE over nets of about 0.03 was reported as 'does not hold'."""
    from icml26.theory.dropout_meanfield.reproduce import dc_claim

    def rows(spread):
        theo = np.zeros((3, 1))
        per_net = np.zeros((3, 1, 4))
        per_net[1, 0] = 0.041 + spread * np.array([-1.5, -0.5, 0.5, 1.5])
        return [{"_mean": per_net.mean(-1), "_theo": theo, "_theo0": theo + 0.8, "_per_net": per_net}]
    noisy, tight = dc_claim(rows(0.04)), dc_claim(rows(0.001))
    assert noisy.measured == pytest.approx(0.041) and noisy.verdict == "inconclusive"
    assert tight.verdict == "does not hold"


# bad input: every public entry point refuses it before doing any work

def _mlp():
    return make_mlp(4, 2, [0.1, 0.1], width=8)


NAN = float("nan")
BAD_INPUTS = [
    ("q_map", dict(q=NAN, act="tanh", sw2=1.0, sb2=0.0), ValueError, "q has 1 NaN"),
    ("q_map", dict(q=1.0, act="tanh", sw2=1.0, sb2=0.0, keep=0.0), ValueError, "keep"),
    ("q_fixed_point", dict(act="tanh", sw2=1.0, sb2=0.0, q_scale=-1.0), ValueError, "q_scale"),
    ("c_map", dict(c=0.5, q=NAN, act="tanh", sw2=1.0, sb2=0.0), ValueError, "q must be finite"),
    ("c_map", dict(c=1.5, q=1.0, act="tanh", sw2=1.0, sb2=0.0), ValueError, "correlation c"),
    ("chi_c", dict(c=0.5, q=1.0, act="tanh", sw2=-1.0, sb2=0.0), ValueError, "sw2"),
    ("chi_c", dict(c=2.0, q=1.0, act="relu", sw2=2.0, sb2=0.0), ValueError, "correlation c"),
    ("c_fixed_point", dict(act="tanh", sw2=1.5, sb2=0.05, grid=0), ValueError, "grid"),
    ("depth_scale", dict(act="gelu", sw2=1.0, sb2=0.0), ValueError, "unknown activation"),
    ("depth_scale", dict(act="tanh", sw2=float("inf"), sb2=0.0), ValueError, "sw2"),
    ("critical_sigma_w", dict(act="tanh", sb2=0.05, keep=0.9, detuning=NAN), ValueError, "detuning"),
    ("critical_sigma_w", dict(act="tanh", sb2=-0.1), ValueError, "sb2"),
    ("c_trajectory", dict(c0=1.5, depth=3, act="relu", sw2=1.8, sb2=0.0, keep=0.9), ValueError, "c0"),
    ("c_trajectory", dict(c0=0.3, depth=0, act="relu", sw2=1.8, sb2=0.0, keep=0.9), ValueError, "depth"),
    ("c_trajectory", dict(c0=0.3, depth=3, act="tanh", sw2=1.8, sb2=0.0, q0=-1.0), ValueError, "q0"),
    ("fit_exponents", dict(act="relu", ps=[1e-5, NAN]), ValueError, "ps has 1 NaN"),
    ("fit_exponents", dict(act="relu", ps=[0.1, 1.5]), ValueError, "ps must hold"),
    ("scaling_collapse", dict(act="tanh", ps=[], xs=[0.0], sb2=0.05), ValueError, "ps is empty"),
    ("scaling_collapse", dict(act="tanh", ps=[1e-3], xs=[0.0], sb2=0.05, nu=NAN), ValueError, "nu"),
    ("get_activation", dict(act=3), TypeError, "act must be"),
    ("Activation", dict(name="x", phi=3, dphi=np.tanh), TypeError, "phi must be callable"),
    ("make_mixer", dict(dropout_profile=[1.2]), ValueError, "dropout rate"),
    ("make_mixer", dict(dropout_profile=[0.1], patch=3), ValueError, "divide"),
    ("make_mixer", dict(dropout_profile=[]), ValueError, "empty"),
    ("make_mixer", dict(dropout_profile=[0.1], dim=0), ValueError, "dim"),
    ("DropoutProfile.constant", dict(n=0, p_bar=0.1), ValueError, "n (layers or steps)"),
    ("DropoutProfile.front_loaded", dict(n=4, p_bar=0.6), ValueError, "p_max"),
    ("DropoutProfile.back_loaded", dict(n=4, p_bar=0.2, kind="cubic"), ValueError, "kind"),
    ("DropoutProfile.make", dict(name="middle", n=4, p_bar=0.1), ValueError, "name"),
    ("DropoutTimeScheduler", dict(model=torch.nn.Linear(2, 2), schedule=[0.1]), ValueError, "no ScheduledDropout"),
    ("DropoutTimeScheduler", dict(model=_mlp, schedule=[0.1, NAN]), ValueError, "schedule has 1 NaN"),
    ("DropoutTimeScheduler", dict(model=_mlp, schedule=[]), ValueError, "schedule is empty"),
    ("DropoutTimeScheduler", dict(model=_mlp, schedule=[0.1], depth_profile=[NAN, 1.0]), ValueError,
     "depth_profile has 1 NaN"),
    ("ScheduledDropout", dict(p=1.0), ValueError, "dropout rate"),
    ("ScheduledDropout", dict(p="0.1"), TypeError, "must be a number"),
    ("dropout_layers", dict(model=3), TypeError, "torch.nn.Module"),
    ("init_critical", dict(model=torch.nn.Linear(2, 2), sw2=NAN, sb2=0.0), ValueError, "sw2"),
    ("init_critical", dict(model="mlp", sw2=1.0, sb2=0.0), TypeError, "torch.nn.Module"),
    ("make_mlp", dict(in_dim=8, out_dim=2, dropout_profile=[0.1], width=0), ValueError, "width"),
    ("make_mlp", dict(in_dim=8, out_dim=2, dropout_profile=[NAN]), ValueError, "dropout_profile has 1 NaN"),
    ("make_mlp", dict(in_dim=8, out_dim=2, dropout_profile=[0.1], init_rates=[0.1, 0.1]), ValueError, "init_rates"),
    ("make_mlp", dict(in_dim=8, out_dim=2, dropout_profile=[0.1], act="gelu"), ValueError, "act"),
    ("fit_depth_scale", dict(c=[0.9, NAN, 0.5], c_star=0.5), ValueError, "c has 1 NaN"),
    ("fit_depth_scale", dict(c=[0.9, 0.7, 0.5], c_star=0.5, window=[True, False]), ValueError, "window"),
    ("fit_window", dict(c=[0.9, 0.7, 0.5], c_star=0.5, floor=-1.0), ValueError, "floor"),
    ("fit_window", dict(c=[0.9, 0.7, 0.5], c_star=NAN, floor=0.0), ValueError, "c_star"),
    ("simulate_correlations", dict(act="relu", sw2=-2.0, sb2=0.0, keep=1.0, c0=0.3, q0=1.0, depth=2, width=8,
                                   n_nets=1), ValueError, "sw2"),
    ("simulate_correlations", dict(act="relu", sw2=2.0, sb2=0.0, keep=1.0, c0=0.3, q0=1.0, depth=2, width=-4,
                                   n_nets=1), ValueError, "width"),
    ("simulate_correlations", dict(act="relu", sw2=2.0, sb2=0.0, keep=1.0, c0=[0.3, 1.5], q0=1.0, depth=2,
                                   width=8, n_nets=1), ValueError, "c0"),
]


def _resolve(name):
    import icml26.theory.dropout_meanfield as pkg
    obj = pkg
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name,kwargs,err,fragment", BAD_INPUTS, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise_clear_errors(name, kwargs, err, fragment):
    kwargs = {k: (v() if v is _mlp else v) for k, v in kwargs.items()}
    with pytest.raises(err, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        _resolve(name)(**kwargs)


def test_every_public_entry_point_has_a_bad_input_case():
    import icml26.theory.dropout_meanfield as pkg
    constants = {"ACTIVATIONS", "RELU_A"}
    covered = {c[0].split(".")[0] for c in BAD_INPUTS}
    assert set(pkg.__all__) - constants <= covered
    profile_methods = {c[0].split(".")[1] for c in BAD_INPUTS if c[0].startswith("DropoutProfile.")}
    assert profile_methods >= {"constant", "front_loaded", "back_loaded", "make"}


# reproduction

def test_reproduce_quick_is_well_formed(monkeypatch):
    """The quick reproduction's structure, on a shrunken quick budget (the real quick budget trains the 30-epoch
    sweep; its numbers are in the README)."""
    from icml26.theory.dropout_meanfield import reproduce as R
    monkeypatch.setitem(R.SIZES, Budget.QUICK, _tiny_sizes())
    out = R.reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    checks = [c for c in out.claims if c.kind == "check"]
    assert len(claims) == 6 and len(checks) == 10
    # the deterministic numerics of the maps (identical on every seed) are checks, not claims
    assert {c.statement.split(":")[0] for c in checks} >= {"Kinked (ReLU) activations", "Smooth (tanh) activations"}
    for c in claims:
        assert c.control is not None and c.control_arm
        assert c.falsifier
        assert c.verdict in ("holds", "does not hold", "inconclusive")
        # a schedule claim is NaN (undecided) exactly when its decision cell's selection gain is <= 0
        if "Front-loaded" in c.statement:
            arch = "mixer" if "Mixer" in c.statement else "mlp"
            assert math.isnan(c.measured) == (out.metrics[f"constant_gain_over_none_selection[{arch}]"] <= 0)
        else:
            assert math.isfinite(c.measured)
    assert all(math.isfinite(c.measured) for c in checks)
    # at this tiny width a per-config xi fit can have < 3 layers above the noise (NaN); nothing else may be
    assert all(math.isfinite(v) for k, v in out.metrics.items() if not k.startswith("xi_sim_"))
    assert {"correlation_decay", "exponents_collapse"} <= set(out.figures)
    assert {"exponents", "theory_vs_simulation", "schedules", "collapse", "selection"} <= set(out.tables)


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
