"""Tests of the shared empirical-NTK machinery (testbeds/ntk.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from icml26.testbeds.ntk import (
    NTKOperator,
    empirical_ntk,
    fit_power_law,
    jacobian,
    ntk_topk,
    ntk_trace,
    per_sample_grad_norms,
    power_law_spectrum,
    topk_eigh,
    trainable_parameters,
)


def _mlp(d_in=5, width=16, d_out=3, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, width), nn.Tanh(), nn.Linear(width, d_out)).double()


def _X(n=12, d=5, seed=1):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_jacobian_matches_finite_differences():
    m, X = _mlp(), _X(4)
    J = jacobian(m, X)                                      # (n, C, P)
    theta = torch.nn.utils.parameters_to_vector(m.parameters()).detach()
    h = 1e-6
    for j in [0, 7, 50, theta.numel() - 1]:
        e = torch.zeros_like(theta)
        e[j] = h
        torch.nn.utils.vector_to_parameters(theta + e, m.parameters())
        fp = m(X).detach()
        torch.nn.utils.vector_to_parameters(theta - e, m.parameters())
        fm = m(X).detach()
        torch.nn.utils.vector_to_parameters(theta, m.parameters())
        assert torch.allclose(J[:, :, j], (fp - fm) / (2 * h), atol=1e-7)


def test_ntk_symmetric_psd_and_traced_blocks():
    m, X = _mlp(), _X()
    K = empirical_ntk(m, X, trace_outputs=False)
    assert K.shape == (36, 36)
    assert torch.allclose(K, K.T, atol=1e-12)
    assert torch.linalg.eigvalsh(K).min() > -1e-10
    Kt = empirical_ntk(m, X)
    assert torch.allclose(Kt, K.reshape(12, 3, 12, 3).diagonal(dim1=1, dim2=3).sum(-1), atol=1e-12)
    K12 = empirical_ntk(m, X[:5], X[5:])
    assert torch.allclose(K12, Kt[:5, 5:], atol=1e-12)


def test_operator_matches_dense_and_preconditioner():
    m, X = _mlp(), _X()
    P = sum(p.numel() for p in m.parameters())
    d = torch.rand(P, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    op = NTKOperator(m, X, precond=d)
    K = empirical_ntk(m, X, precond=d, trace_outputs=False)
    assert torch.allclose(op.dense(), K, atol=1e-12)
    r = _X(36, 1, seed=4).ravel()
    assert op.quad(r) == pytest.approx(float(r @ K @ r), rel=1e-12)
    J = jacobian(m, X).reshape(36, P)
    assert torch.allclose(K, J @ torch.diag(d) @ J.T, atol=1e-12)


@pytest.mark.parametrize("method", ["lanczos", "randomized"])
def test_topk_matches_dense_eigh(method):
    m, X = _mlp(width=32), _X(40)
    K = empirical_ntk(m, X, trace_outputs=False)
    dense = torch.linalg.eigvalsh(K).flip(0)[:6].numpy()
    ev, V = ntk_topk(m, X, 6, method=method, n_iter=12)
    assert np.max(np.abs(ev - dense) / dense) < 1e-6
    # eigenvectors: K v = lambda v
    resid = K.numpy() @ V - V * ev
    assert np.linalg.norm(resid, axis=0).max() / ev[0] < 1e-5


def test_trace_exact_and_hutchinson():
    m, X = _mlp(), _X(30)
    K = empirical_ntk(m, X)
    assert ntk_trace(m, X) == pytest.approx(float(K.trace()), rel=1e-12)
    assert torch.allclose(per_sample_grad_norms(m, X, chunk_size=7), K.diagonal(), atol=1e-10)
    assert ntk_trace(m, X, method="hutchinson", n_probes=400, seed=0) == pytest.approx(float(K.trace()), rel=0.1)


def test_frozen_parameters_excluded_and_no_trainable_raises():
    m, X = _mlp(), _X()
    m[0].weight.requires_grad_(False)
    assert "0.weight" not in trainable_parameters(m)
    J = jacobian(m, X)
    assert J.shape[2] == sum(p.numel() for p in m.parameters() if p.requires_grad)
    for p in m.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        empirical_ntk(m, X)
    with pytest.raises(TypeError):
        jacobian("not a model", X)


def test_bad_inputs():
    m, X = _mlp(), _X()
    with pytest.raises(ValueError, match="NaN"):
        jacobian(m, X * float("nan"))
    with pytest.raises(ValueError, match="k must be"):
        topk_eigh(NTKOperator(m, X), 0)
    with pytest.raises(ValueError, match="unknown method"):
        topk_eigh(NTKOperator(m, X), 2, method="qr")
    with pytest.raises(ValueError, match="precond"):
        NTKOperator(m, X, precond=torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="non-negative"):
        NTKOperator(m, X, precond=-torch.ones(sum(p.numel() for p in m.parameters()), dtype=torch.float64))
    with pytest.raises(ValueError, match="exponent"):
        power_law_spectrum(10, -1.0)
    with pytest.raises(ValueError, match="positive"):
        fit_power_law(np.array([1.0, -1.0, 0.5]))


def test_power_law_helpers_exact():
    lam = power_law_spectrum(1000, 1.5)
    assert lam.sum() == pytest.approx(1.0)
    a, c = fit_power_law(lam)
    assert a == pytest.approx(1.5, abs=1e-10)
    assert c == pytest.approx(lam[0], rel=1e-10)
    t = np.array([1.0, 10.0, 100.0])
    assert fit_power_law(3.0 * t ** -0.5, t)[0] == pytest.approx(0.5)


def test_deterministic():
    m, X = _mlp(), _X(30)
    a = topk_eigh(NTKOperator(m, X), 3, method="randomized", seed=5)[0]
    b = topk_eigh(NTKOperator(m, X), 3, method="randomized", seed=5)[0]
    assert np.array_equal(a, b)


def test_gaussian_maps_closed_forms_and_quadrature():
    from scipy.special import erf

    from icml26.testbeds.ntk import erf_expectation, gaussian_expectation, relu_expectation
    q1, q2 = np.array([0.5, 1.0, 2.0]), np.array([1.5, 1.0, 0.3])
    c = np.array([-0.4, 0.0, 0.9])
    # erf: closed form vs quadrature (smooth: converges fast)
    assert np.allclose(gaussian_expectation(erf, q1, q2, c, n_quad=80), erf_expectation(q1, q2, c), atol=1e-10)
    # relu: E[relu(u)^2] = q/2 exactly; quadrature converges slowly at the kink
    assert relu_expectation(2.0, 2.0, 1.0) == pytest.approx(1.0)
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    assert np.allclose(gaussian_expectation(relu, q1, q2, c, n_quad=120), relu_expectation(q1, q2, c), atol=2e-3)
    # linear activation: E[u v] = c sqrt(q1 q2)
    assert np.allclose(gaussian_expectation(lambda x: x, q1, q2, c), c * np.sqrt(q1 * q2), atol=1e-12)
    with pytest.raises(ValueError, match="correlation"):
        gaussian_expectation(np.tanh, 1.0, 1.0, 1.5)


def test_nngp_kernel_matches_wide_network():
    from icml26.testbeds.ntk import nngp_kernel
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 3))
    K = nngp_kernel(X, depth=1, activation="relu", sigma_w2=2.0)
    assert np.allclose(K, K.T) and np.linalg.eigvalsh(K).min() > -1e-10
    # Monte Carlo: one hidden ReLU layer of width 200k, readout variance sigma_w2 / width
    W = rng.standard_normal((3, 200_000)) * np.sqrt(2.0 / 3)
    H = np.maximum(X @ W, 0.0)
    K_mc = 2.0 * H @ H.T / H.shape[1]
    assert np.allclose(K, K_mc, rtol=0.02, atol=0.02)
    Kt = nngp_kernel(X, depth=2, activation="tanh", sigma_w2=1.5, sigma_b2=0.1)
    assert np.isfinite(Kt).all()
    with pytest.raises(ValueError, match="activation"):
        nngp_kernel(X, activation="gelu2")
