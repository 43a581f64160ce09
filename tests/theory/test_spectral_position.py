"""Tests of [A13] spectral position: exact identities, scalable == exact, tracker, bad input, quick reproduction."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from icml26.harness import Budget, Outcome
from icml26.testbeds.ntk import empirical_ntk
from icml26.theory.spectral_position import (
    SpectralPositionTracker,
    TwoLayerMLP,
    residual,
    spectral_decomposition,
    spectral_position,
    teacher_student_data,
)


class Scaled(nn.Module):
    def __init__(self, m, alpha):
        super().__init__()
        self.m, self.alpha = m, alpha

    def forward(self, x):
        return self.alpha * self.m(x)


@pytest.fixture(scope="module")
def setup():
    X, Y, _, _ = teacher_student_data(24, 4, d=6, seed=0)
    m = TwoLayerMLP(6, 10, generator=torch.Generator().manual_seed(0)).double()
    return m, X.double(), Y.double()


def test_residual_on_eigenvector_gives_eigenvalue(setup):
    m, X, _ = setup
    K = empirical_ntk(m, X, trace_outputs=False)
    lam, U = torch.linalg.eigh(K)
    with torch.no_grad():
        f = m(X)
    for j in (-1, -3, 5):
        Y = f - U[:, j].reshape(f.shape)                   # r = f - Y = u_j
        sp = spectral_position(m, X, Y, method="scalable", normalize=None)
        assert sp == pytest.approx(float(lam[j]), rel=1e-9)
        assert spectral_position(m, X, Y, method="exact", normalize=None) == pytest.approx(float(lam[j]), rel=1e-9)


def test_invariances(setup):
    m, X, Y = setup
    r, _ = residual(m, X, Y)
    with torch.no_grad():
        f = m(X)
    sp = spectral_position(m, X, Y)
    assert spectral_position(m, X, f - 3.7 * r.reshape(f.shape)) == pytest.approx(sp, rel=1e-9)   # r -> c r
    alpha = 2.5
    ms = Scaled(m, alpha)                                                                        # K -> alpha^2 K
    Ys = alpha * f - r.reshape(f.shape)
    assert spectral_position(ms, X, Ys) == pytest.approx(sp, rel=1e-9)
    assert spectral_position(ms, X, Ys, normalize="lmax") == pytest.approx(
        spectral_position(m, X, Y, normalize="lmax"), rel=1e-6)
    assert spectral_position(ms, X, Ys, normalize=None) == pytest.approx(
        alpha ** 2 * spectral_position(m, X, Y, normalize=None), rel=1e-9)


@pytest.mark.parametrize("normalize", ["trace", "lmax", None])
def test_scalable_equals_exact(setup, normalize):
    m, X, Y = setup
    a = spectral_position(m, X, Y, method="scalable", normalize=normalize)
    b = spectral_position(m, X, Y, method="exact", normalize=normalize)
    assert a == pytest.approx(b, rel=1e-7)


def test_hutchinson_trace_close(setup):
    m, X, Y = setup
    a = spectral_position(m, X, Y, trace="hutchinson", n_probes=300)
    assert a == pytest.approx(spectral_position(m, X, Y), rel=0.15)


def test_decomposition_consistent(setup):
    m, X, Y = setup
    dec = spectral_decomposition(m, X, Y)
    assert dec.residual_mass.sum() == pytest.approx(1.0)
    assert dec.loss_share.sum() == pytest.approx(1.0)
    assert np.all(np.diff(dec.eigvals) <= 1e-12)
    assert dec.position == pytest.approx(spectral_position(m, X, Y, method="exact"), rel=1e-9)
    assert 0.0 <= dec.quantile <= 1.0


def test_cross_entropy_multi_output():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    X = torch.randn(10, 5, dtype=torch.float64)
    y = torch.randint(0, 3, (10,))
    r, L = residual(m, X, y, loss="ce")
    assert r.shape == (30,)
    assert L == pytest.approx(float(nn.functional.cross_entropy(m(X), y).detach()))
    assert torch.allclose(r.reshape(10, 3).sum(1), torch.zeros(10, dtype=torch.float64), atol=1e-12)
    a = spectral_position(m, X, y, loss="ce", method="scalable")
    assert a == pytest.approx(spectral_position(m, X, y, loss="ce", method="exact"), rel=1e-7)


def test_tracker_records_gradient_norm(setup):
    m, X, Y = setup
    tr = SpectralPositionTracker(m, X, Y, every=2)
    assert tr(1) is None
    rec = tr(0)
    loss = 0.5 * ((m(X) - Y) ** 2).sum() / len(X)
    grads = torch.autograd.grad(loss, list(m.parameters()))
    assert rec["grad_sq"] == pytest.approx(float(sum((g ** 2).sum() for g in grads)), rel=1e-9)
    assert rec["loss"] == pytest.approx(float(loss), rel=1e-12)
    assert rec["amplification"] == pytest.approx(rec["grad_sq"] / rec["loss"])
    assert rec["sp"] == pytest.approx(spectral_position(m, X, Y), rel=1e-12)
    assert tr.reach() == rec["sp"]


def test_frozen_features_use_readout_kernel():
    X, Y, _, _ = teacher_student_data(16, 4, d=5, seed=1)
    m = TwoLayerMLP(5, 7, generator=torch.Generator().manual_seed(0)).double().freeze_features()
    X = X.double()
    K = empirical_ntk(m, X)
    with torch.no_grad():
        phi = m.features(X)
    assert torch.allclose(K, m.mult ** 2 * phi @ phi.T, atol=1e-12)


def test_bad_inputs(setup):
    m, X, Y = setup
    with pytest.raises(ValueError, match="unknown loss"):
        spectral_position(m, X, Y, loss="hinge")
    with pytest.raises(ValueError, match="same non-zero number of rows"):
        spectral_position(m, X, Y[:3])
    with pytest.raises(ValueError, match="NaN"):
        spectral_position(m, X, Y * float("nan"))
    with pytest.raises(ValueError, match="unknown method"):
        spectral_position(m, X, Y, method="fast")
    with pytest.raises(ValueError, match="every"):
        SpectralPositionTracker(m, X, Y, every=0)
    with pytest.raises(ValueError, match="width"):
        TwoLayerMLP(6, 0)
    with pytest.raises(ValueError, match="width"):
        TwoLayerMLP(6, -3)
    frozen = nn.Linear(6, 1).double().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        spectral_position(frozen, X, Y)
    with pytest.raises(ValueError, match="no records"):
        SpectralPositionTracker(m, X, Y).reach()


def test_data_deterministic():
    a = teacher_student_data(10, 5, seed=3)
    b = teacher_student_data(10, 5, seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert float(a[1].mean()) == pytest.approx(0.0, abs=1e-6)


def test_quick_reproduction_structure():
    from icml26.theory.spectral_position.reproduce import reproduce
    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    checks = [c for c in out.claims if c.kind == "check"]
    assert len(claims) == 6 and len(checks) == 4
    assert all(c.falsifier for c in claims)
    # second pass: every fixed-bar claim (a Spearman threshold across widths) carries its control, the same
    # measure at initialisation; "SP decreases during training" is a check (any fixed kernel does it)
    bars = [c for c in claims if c.bar]
    assert len(bars) == 3 and all(c.control is not None and "initialisation" in c.control_arm for c in bars)
    assert any(c.kind == "check" and "decreases throughout training" in c.statement for c in out.claims)
    assert all(math.isfinite(c.measured) for c in out.claims)
    assert all(c.verdict in ("holds", "does not hold", "inconclusive") for c in out.claims)
    assert all(math.isfinite(v) for v in out.metrics.values())
    assert "spectral_position" in out.figures and out.tables["per_width"]


def test_init_control_is_the_trained_students_initialisation():
    """The across-width control re-builds each student's initialisation; it must be the one training starts from."""
    from icml26.theory.spectral_position import spectral_position
    from icml26.theory.spectral_position.models import TwoLayerMLP
    from icml26.theory.spectral_position.reproduce import D_IN, SIZES, train_student

    data = teacher_student_data(64, 16, d=D_IN, seed=2)
    sz = SIZES[Budget.QUICK]
    tr, _ = train_student(8, False, data, sz, seed=2)
    init = TwoLayerMLP(D_IN, 8, generator=torch.Generator().manual_seed(2 * 1000 + 8))
    assert float(tr.column("sp")[0]) == pytest.approx(spectral_position(init, data[0], data[1]), rel=1e-5)
