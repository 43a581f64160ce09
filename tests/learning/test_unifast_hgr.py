"""Tests for [A17] UniFast-HGR / OptFast-HGR and its baselines."""

from __future__ import annotations

import functools
import math
import re
import time

import pytest
import torch

from icml26.harness import Budget, Claim, Outcome
from icml26.learning.unifast_hgr import (
    DCCALoss,
    InfoNCELoss,
    OptFastHGRLoss,
    SoftHGRLoss,
    UniFastHGRLoss,
    benchmark_loss_scaling,
    canonical_correlations,
    cosine_features,
    info_nce_loss,
    loglog_slope,
    optfast_hgr,
    rademacher_probes,
    soft_hgr,
    unifast_hgr,
    whitened_hgr,
)

D = torch.float64




def pair(m: int = 24, K: int = 10, seed: int = 0, noise: float = 1.0, dtype=D):
    gen = torch.Generator().manual_seed(seed)
    f = torch.randn(m, K, generator=gen, dtype=dtype)
    return f, f + noise * torch.randn(m, K, generator=gen, dtype=dtype)


def structural_R(f, g, **kw):
    """R recovered from the score: H = A - lam/2 R with A = H at lam = 0."""
    return 2.0 * (unifast_hgr(f, g, lam=0.0, **kw) - unifast_hgr(f, g, lam=1.0, **kw))


# the mathematics


@pytest.mark.parametrize("m,K", [(16, 8), (8, 64), (32, 32)])
def test_gram_identity(m, K):
    f, g = pair(m, K)
    fh, gh = cosine_features(f), cosine_features(g)
    gram = (fh @ gh.T).square().sum()                # m x m, O(m^2 K)
    kspace = torch.trace(fh.T @ fh @ gh.T @ gh)      # K x K, Soft-HGR's tr(Sigma_f Sigma_g) up to m^2
    assert torch.allclose(gram, kspace, rtol=1e-6, atol=0)
    slip = (fh.T @ gh).square().sum()                # ||F^T G||_F^2: a different quantity
    assert not torch.allclose(gram, slip, rtol=1e-3)


def test_score_is_soft_hgr_on_cosine_features_without_tss():
    f, g = pair(20, 12)
    m = f.shape[0]
    fh, gh = cosine_features(f), cosine_features(g)
    sf, sg = fh.T @ fh / m, gh.T @ gh / m
    expected = (fh * gh).sum(1).mean() - 0.5 * (sf * sg).sum()
    assert torch.allclose(unifast_hgr(f, g, tss=False), expected, rtol=1e-10)


def test_tss_and_within_penalty_closed_forms():
    f, g = pair(12, 7)
    m = f.shape[0]
    fh, gh = cosine_features(f), cosine_features(g)
    S = fh @ gh.T
    off = ~torch.eye(m, dtype=torch.bool)
    assert torch.allclose(structural_R(f, g), S[off].square().sum() / (m * (m - 1)), rtol=1e-10)
    within = ((fh @ fh.T) * (gh @ gh.T))[off].sum() / (m * (m - 1))
    assert torch.allclose(structural_R(f, g, penalty="within"), within, rtol=1e-10)
    # within-modality form: ||F^T G||_F^2 minus the unit diagonal
    assert torch.allclose(within * m * (m - 1), (fh.T @ gh).square().sum() - m, rtol=1e-10)


def test_bounded_and_perfect_alignment():
    for seed in range(5):
        f, g = pair(16, 5, seed=seed, noise=3.0)
        h = unifast_hgr(f, g)
        assert -1.5 <= float(h) <= 1.0
    f, _ = pair(16, 40)
    assert math.isclose(float(unifast_hgr(f, f, lam=0.0)), 1.0, rel_tol=1e-12)


@pytest.mark.parametrize("penalty", ["cross", "within"])
def test_invariances(penalty):
    f, g = pair(20, 9, noise=0.7)
    h = unifast_hgr(f, g, penalty=penalty)
    gen = torch.Generator().manual_seed(3)
    shift = torch.randn(1, 9, generator=gen, dtype=D)
    q, _ = torch.linalg.qr(torch.randn(9, 9, generator=gen, dtype=D))
    perm = torch.randperm(20, generator=gen)
    variants = {
        "constant row added": unifast_hgr(f + shift, g - 3 * shift, penalty=penalty),
        "positive scaling": unifast_hgr(7.5 * f, 0.01 * g, penalty=penalty),
        "joint rotation": unifast_hgr(f @ q, g @ q, penalty=penalty),
        "joint permutation": unifast_hgr(f[perm], g[perm], penalty=penalty),
    }
    for name, v in variants.items():
        assert abs(float(v - h)) < 1e-6, name


def test_shuffling_one_view_destroys_alignment():
    f, g = pair(256, 32, noise=0.1)
    a_paired = float(unifast_hgr(f, g, lam=0.0))
    perm = torch.randperm(256, generator=torch.Generator().manual_seed(1))
    a_shuffled = float(unifast_hgr(f, g[perm], lam=0.0))
    assert a_paired > 0.95 and abs(a_shuffled) < 0.1


@pytest.mark.parametrize("penalty", ["cross", "within"])
def test_optfast_is_unbiased(penalty):
    f, g = pair(32, 6, noise=0.5)  # standard error of the mean ~0.2% of R: 1% is ~5 standard errors
    exact = float(structural_R(f, g, penalty=penalty))
    a = unifast_hgr(f, g, lam=0.0)
    gen = torch.Generator().manual_seed(0)
    est = torch.stack([2.0 * (a - optfast_hgr(f, g, num_probes=32, generator=gen, penalty=penalty))
                       for _ in range(4000)])
    assert abs(float(est.mean()) / exact - 1.0) < 0.01


def test_optfast_variance_scales_as_one_over_probes():
    f, g = pair(16, 12, noise=2.0)
    gen = torch.Generator().manual_seed(1)

    def var(s):
        return float(torch.stack([optfast_hgr(f, g, num_probes=s, generator=gen) for _ in range(2000)]).var())

    assert 3.0 <= var(8) / var(32) <= 5.0


def test_optfast_exact_when_probes_span_and_matches_unifast_gradient_direction():
    # With many probes the estimate converges to UniFast; gradients agree closely.
    f, g = pair(10, 6)
    f.requires_grad_()
    (gu,) = torch.autograd.grad(unifast_hgr(f, g), f)
    (go,) = torch.autograd.grad(optfast_hgr(f, g, num_probes=200_000, generator=torch.Generator().manual_seed(0)), f)
    assert torch.nn.functional.cosine_similarity(gu.flatten(), go.flatten(), dim=0) > 0.99


def test_gradcheck_float64():
    f, g = pair(6, 4)
    f.requires_grad_(), g.requires_grad_()
    checks = {
        "unifast": lambda a, b: unifast_hgr(a, b),
        "unifast within": lambda a, b: unifast_hgr(a, b, penalty="within"),
        "unifast no centre": lambda a, b: unifast_hgr(a, b, center=False, tss=False),
        "optfast": lambda a, b: optfast_hgr(a, b, num_probes=5, generator=torch.Generator().manual_seed(0)),
        "soft-hgr": soft_hgr,
        "whitened hgr": lambda a, b: whitened_hgr(a, b, ridge=1e-2),
        "infonce": info_nce_loss,
    }
    for name, fn in checks.items():
        assert torch.autograd.gradcheck(fn, (f, g)), name


def test_soft_hgr_matches_official_trace_form():
    f, g = pair(15, 6)
    f0, g0 = f - f.mean(0), g - g.mean(0)
    cf, cg = f0.T @ f0 / 14, g0.T @ g0 / 14
    expected = (f0 * g0).sum(1).mean() - torch.trace(cf @ cg) / 2
    assert torch.allclose(soft_hgr(f, g), expected, rtol=1e-12)


def test_canonical_correlations_match_cca_zoo():
    objectives = pytest.importorskip("cca_zoo.deep.objectives")
    for m, K in [(40, 5), (20, 30)]:
        f, g = pair(m, K, noise=1.5)
        rho = canonical_correlations(f, g, ridge=1e-3)
        peer = -objectives.CCALoss(reg_covar=1e-3)([f, g])
        assert torch.allclose(rho.square().sum(), peer, rtol=1e-8)
        assert rho.numel() == min(K, m - 1) and bool((rho[:-1] >= rho[1:]).all())


def test_dcca_gradient_finite_when_K_exceeds_m():
    f, g = pair(16, 48, dtype=torch.float32)
    f.requires_grad_()
    (gr,) = torch.autograd.grad(whitened_hgr(f, g, ridge=1e-3), f)
    assert torch.isfinite(gr).all() and float(gr.abs().max()) < 1e4


def test_info_nce_closed_form():
    f, g = pair(8, 3)
    logits = torch.nn.functional.normalize(f, dim=1) @ torch.nn.functional.normalize(g, dim=1).T / 0.1
    expected = 0.5 * (-logits.log_softmax(1).diag().mean() - logits.log_softmax(0).diag().mean())
    assert torch.allclose(info_nce_loss(f, g), expected, rtol=1e-12)


def test_modules_are_negated_scores():
    f, g = pair(12, 6)
    assert torch.equal(UniFastHGRLoss()(f, g), -unifast_hgr(f, g))
    assert torch.equal(SoftHGRLoss()(f, g), -soft_hgr(f, g))
    assert torch.equal(DCCALoss(k=2)(f, g), -whitened_hgr(f, g, k=2))
    assert torch.equal(InfoNCELoss(0.5)(f, g), info_nce_loss(f, g, tau=0.5))
    o1 = OptFastHGRLoss(8, generator=torch.Generator().manual_seed(5))(f, g)
    assert torch.equal(o1, -optfast_hgr(f, g, num_probes=8, generator=torch.Generator().manual_seed(5)))


# determinism


def test_optfast_deterministic_with_generator():
    f, g = pair(20, 30)
    a = optfast_hgr(f, g, generator=torch.Generator().manual_seed(7))
    b = optfast_hgr(f, g, generator=torch.Generator().manual_seed(7))
    c = optfast_hgr(f, g, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)
    loss_a = OptFastHGRLoss(generator=torch.Generator().manual_seed(1))
    loss_b = OptFastHGRLoss(generator=torch.Generator().manual_seed(1))
    assert [float(loss_a(f, g)) for _ in range(3)] == [float(loss_b(f, g)) for _ in range(3)]


# input validation


@pytest.mark.parametrize("fn", [unifast_hgr, optfast_hgr, soft_hgr, whitened_hgr, info_nce_loss,
                                UniFastHGRLoss(), OptFastHGRLoss(), SoftHGRLoss(), DCCALoss(), InfoNCELoss()])
def test_bad_inputs(fn):
    f, g = pair(8, 4, dtype=torch.float32)
    nan = f.clone()
    nan[0, 0] = math.nan
    inf = f.clone()
    inf[1, 1] = math.inf
    for bad in [(f, g[:5]), (f[:, 0], g[:, 0]), (f[:1], g[:1]), (nan, g), (f, inf), (f[None], g[None])]:
        with pytest.raises(ValueError):
            fn(*bad)
    for bad in [(f.numpy(), g), (f.long(), g.long()), (f, g.double())]:
        with pytest.raises(TypeError):
            fn(*bad)


def test_feature_dimension_mismatch():
    f, g = pair(8, 4)
    with pytest.raises(ValueError, match="feature dimension"):
        unifast_hgr(f, g[:, :3])
    assert whitened_hgr(f, g[:, :3]).isfinite()  # CCA allows different K per view


def test_bad_options():
    f, g = pair(8, 4)
    with pytest.raises(ValueError, match="lam"):
        unifast_hgr(f, g, lam=-1.0)
    with pytest.raises(ValueError, match="penalty"):
        unifast_hgr(f, g, penalty="diag")
    with pytest.raises(ValueError, match="num_probes"):
        optfast_hgr(f, g, num_probes=0)
    with pytest.raises(TypeError, match="generator"):
        optfast_hgr(f, g, generator=0)
    with pytest.raises(ValueError, match="ridge"):
        whitened_hgr(f, g, ridge=0.0)
    with pytest.raises(ValueError, match="tau"):
        info_nce_loss(f, g, tau=0.0)
    for ctor in [lambda: UniFastHGRLoss(lam=-0.1), lambda: OptFastHGRLoss(num_probes=1.5),
                 lambda: DCCALoss(k=0), lambda: DCCALoss(ridge=-1.0), lambda: InfoNCELoss(tau=-1)]:
        with pytest.raises(ValueError):
            ctor()


# Gram (dual) forms of the baselines, and K = 1


@pytest.mark.parametrize("m, K", [(16, 4), (16, 40), (32, 200)])
def test_gram_forms_equal_covariance_forms(m, K):
    f, g = pair(m, K)
    f.requires_grad_()
    g.requires_grad_()
    assert soft_hgr(f, g, form="gram").item() == pytest.approx(soft_hgr(f, g).item(), rel=1e-12)
    a, b = canonical_correlations(f, g), canonical_correlations(f, g, form="gram")
    assert torch.allclose(a, b, atol=1e-5)
    ga = torch.autograd.grad(a.sum(), (f, g))
    gb = torch.autograd.grad(b.sum(), (f, g))
    assert all(torch.allclose(x, y, atol=1e-4 * float(x.abs().max())) for x, y in zip(ga, gb))
    assert DCCALoss(form="gram")(f, g).item() == pytest.approx(DCCALoss()(f, g).item(), rel=1e-5)


def test_gram_form_dcca_finite_in_float32_at_large_K():
    f, g = pair(32, 4096, dtype=torch.float32)
    f.requires_grad_()
    loss = DCCALoss(form="gram")(f, g)
    (grad,) = torch.autograd.grad(loss, f)
    assert loss.dtype == torch.float32 and torch.isfinite(loss) and torch.isfinite(grad).all()


@pytest.mark.parametrize("m, K", [(64, 4096), (32, 65536)])
def test_float32_gram_matches_float64_gram(m, K):
    # the fast Gram baseline of the extreme-K claim (float32 K-long matmul, diagonal-relative jitter, float64
    # Cholesky) must compute the float64 Gram form's loss: the docstring states ~1e-7 in value, ~2e-5 in gradient
    f, g = pair(m, K, seed=3, dtype=torch.float32)
    f.requires_grad_()
    g.requires_grad_()
    a = DCCALoss(form="gram")(f, g)
    b = DCCALoss(form="gram", gram_dtype="input")(f, g)
    assert a.dtype == b.dtype == torch.float32
    assert float((a - b).detach().abs() / a.detach().abs()) < 1e-6
    ga, gb = torch.autograd.grad(a, (f, g)), torch.autograd.grad(b, (f, g))
    assert all(float((x - y).abs().max() / x.abs().max()) < 1e-4 for x, y in zip(ga, gb))
    # covariance-form features with K <= m need no factor: both dtypes give the same rows
    f2, g2 = pair(m, 8, dtype=torch.float32)
    assert torch.equal(DCCALoss(form="gram")(f2, g2), DCCALoss(form="gram", gram_dtype="input")(f2, g2))


def test_float32_gram_differs_on_rank_deficient_features():
    # documented limitation: with rank < m - 1 and K > m, the relative jitter lifts the Gram's null directions to
    # canonical correlations near 1; the float64 form keeps them at ~1e-6 and matches the covariance form
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(64, 8, generator=gen, dtype=D)
    f, g = z @ torch.randn(8, 512, generator=gen, dtype=D), (z + torch.randn(64, 8, generator=gen, dtype=D)) @ \
        torch.randn(8, 512, generator=gen, dtype=D)
    cov = whitened_hgr(f, g).item()
    assert whitened_hgr(f, g, form="gram").item() == pytest.approx(cov, rel=1e-4)  # 55 null directions x 1e-6
    assert whitened_hgr(f, g, form="gram", gram_dtype="input").item() > 2 * cov


def test_single_feature_raises_instead_of_zero_gradient():
    f, g = pair(16, 1)
    for fn in (unifast_hgr, optfast_hgr, UniFastHGRLoss(), OptFastHGRLoss()):
        with pytest.raises(ValueError, match="K >= 2"):
            fn(f, g)
    assert torch.isfinite(soft_hgr(f, g))  # the baselines still take scalar features


def test_unknown_form_raises():
    f, g = pair(8, 4)
    with pytest.raises(ValueError, match="form"):
        soft_hgr(f, g, form="dual")
    with pytest.raises(ValueError, match="form"):
        DCCALoss(form="K")
    with pytest.raises(ValueError, match="form"):
        SoftHGRLoss(form=None)


# benchmark helper


def test_loglog_slope_of_power_law():
    Ks = [64, 128, 256, 512]
    assert math.isclose(loglog_slope(Ks, [1e-6 * k**2.5 for k in Ks]), 2.5, rel_tol=1e-9)
    assert math.isclose(loglog_slope(Ks, [1e-6 * k for k in Ks], k_min=128), 1.0, rel_tol=1e-9)
    assert math.isnan(loglog_slope(Ks, [1.0, math.nan, math.nan, math.nan]))


def test_benchmark_marks_dnf_past_cap():
    def slow(f, g):
        time.sleep(f.shape[1] * 1e-2)
        return (f * g).sum()

    # the cap is 10x above the "fast" loss's worst scheduling hiccup seen on a loaded 2-core machine
    res = benchmark_loss_scaling({"slow": slow, "fast": lambda f, g: (f * g).sum()},
                                 m=4, Ks=[10, 20, 80, 160], reps=2, warmup=0, time_cap_s=0.5)
    assert res["fast"]["status"] == ["ok"] * 4 and all(res["fast"]["finite"])
    assert res["slow"]["status"][0] == "ok" and res["slow"]["status"][2].startswith("DNF")
    assert res["slow"]["status"][3] == res["slow"]["status"][2] and math.isnan(res["slow"]["min_s"][3])
    with pytest.raises(ValueError):
        benchmark_loss_scaling({"fast": slow}, m=4, Ks=[20, 10])


# the reproduction


def test_reproduce_quick_is_well_formed():
    from icml26.learning.unifast_hgr.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome) and len(out.claims) == 12 and len(out.checks) == 4
    assert all(isinstance(c, Claim) for c in out.claims)
    assert all(math.isfinite(c.measured) for c in out.claims)
    assert all(c.falsifier for c in out.claims if c.kind == "claim")
    # quality claims are paired over the 540 test pairs; the untrained-encoder anchor is one of them
    quality = [c for c in out.claims if c.paired is not None and c.timing_control is None]
    assert len(quality) == 4 and all(len(c.paired) == 540 for c in quality)
    # the >= 10x claim and the extreme-K comparison are paired over >= 7 interleaved repeats against the fastest of
    # their baselines (covariance form + both Gram forms; both Gram forms) and carry its same-work control
    timed = [c for c in out.claims if c.timing_control is not None]
    assert len(timed) == 2 and all(len(c.paired) >= 7 and c.strongest_baseline for c in timed)
    tenx = next(c for c in timed if "10x" in c.statement)
    extreme = next(c for c in timed if "extreme K" in c.statement)
    assert len(tenx.baselines) == 3 and "covariance" not in tenx.strongest_baseline
    assert len(extreme.baselines) == 2 and all("Gram form" in b for b in extreme.baselines)
    assert extreme.reference == min(extreme.baselines.values())  # the faster Gram form decides
    assert any("untrained" in c.statement for c in quality)
    # issue 29: the "matches" claims are decided by the strongest of Soft-HGR, DCCA and InfoNCE; the time-cap bar
    # carries the fastest whitening baseline as control
    matches = [c for c in quality if c.baselines]
    assert len(matches) == 3 and all(len(c.baselines) == 3 and c.strongest_baseline for c in matches)
    cap = next(c for c in out.claims if "still runs" in c.statement)
    assert cap.bar and cap.control == out.metrics["fastest_hgr_cca_cap_frac_at_Kmax"]
    # the fast (Gram-form) baselines are timed and compared, and equal their covariance forms
    assert math.isfinite(out.metrics["dcca_gram_over_unifast_time"])
    assert next(c for c in out.checks if c.statement.startswith("Gram-form")).verdict == "holds"
    assert next(c for c in out.checks if "float32-matmul" in c.statement).verdict == "holds"
    assert {"cost_vs_K", "quality"} <= set(out.figures)
    assert {"scaling", "quality"} <= set(out.tables)
    assert math.isfinite(out.metrics["slope_unifast"])
    # the quadratic/cubic baselines are stopped well before the largest K; UniFast reaches it
    rows = [r for r in out.tables["scaling"] if r["K"] == 65536]
    status = {r["loss"]: r["status"] for r in rows}
    assert status["Soft-HGR (covariance form)"].startswith("DNF")
    assert status["DCCA / whitened HGR (covariance form)"].startswith("DNF")
    assert status["DCCA / whitened HGR (Gram form)"] == "ok" and status["Soft-HGR (Gram form)"] == "ok"
    assert status["DCCA / whitened HGR (Gram form, float32 matmul)"] == "ok"


@functools.lru_cache(maxsize=1)
def _bad_input_cases():
    gen = torch.Generator().manual_seed(0)
    f, g = torch.randn(8, 4, generator=gen), torch.randn(8, 4, generator=gen)
    nan, inf = math.nan, math.inf
    soft = {"a": soft_hgr}
    return [
        (lambda: cosine_features(f * nan), ValueError, "x has 32 NaN"),                               # silent
        (lambda: cosine_features([[1.0, 2.0]]), TypeError, "floating-point torch.Tensor"),             # AttributeError
        (lambda: cosine_features(torch.randn(5)), ValueError, "x must have 2 dimensions"),             # IndexError
        (lambda: cosine_features(torch.zeros(0, 3)), ValueError, "x is empty"),                        # silent
        (lambda: cosine_features(f, eps=-1.0), ValueError, "eps must be > 0"),                         # silent
        (lambda: rademacher_probes(0, 3, like=f), ValueError, "rows must be a positive int"),          # silent
        (lambda: rademacher_probes(3, -1, like=f), ValueError, "num_probes must be a positive int"),   # RuntimeError
        (lambda: rademacher_probes(3, 2, like=[1]), TypeError, "like must be a floating-point"),       # AttributeError
        (lambda: rademacher_probes(3, 2, like=f, generator=3), TypeError, "generator must be a torch.Generator"),
        (lambda: unifast_hgr(f, g, lam=inf), ValueError, "lam must be a finite non-negative number"),   # -inf
        (lambda: unifast_hgr(f, g, center="no"), TypeError, "center must be True or False"),           # silent
        (lambda: optfast_hgr(f, g, tss="no"), TypeError, "tss must be True or False"),                 # silent
        (lambda: optfast_hgr(f, g, num_probes=0), ValueError, "num_probes must be a positive int"),
        (lambda: soft_hgr(f * nan, g), ValueError, "f and g must be finite"),
        (lambda: soft_hgr(f, g, form="x"), ValueError, "unknown form 'x'"),
        (lambda: canonical_correlations(f, g, ridge=inf), ValueError, "ridge must be a finite positive"),  # LinAlgError
        (lambda: whitened_hgr(f, g, k=100), ValueError, "k=100 exceeds the number of batch canonical"),  # silent
        (lambda: info_nce_loss(f, g, tau=inf), ValueError, "tau must be a finite positive temperature"),  # silent
        (lambda: UniFastHGRLoss(center="x"), TypeError, "center must be True or False"),               # silent
        (lambda: OptFastHGRLoss(generator=3), TypeError, "generator must be a torch.Generator"),        # silent
        (lambda: OptFastHGRLoss()(f * nan, g), ValueError, "f and g must be finite"),
        (lambda: SoftHGRLoss(form="y"), ValueError, "unknown form 'y'"),
        (lambda: DCCALoss(ridge=inf), ValueError, "ridge must be a finite positive"),                  # silent
        (lambda: DCCALoss(form="gram", gram_dtype="float32"), ValueError, "unknown gram_dtype 'float32'"),
        (lambda: InfoNCELoss(inf), ValueError, "tau must be a finite positive temperature"),           # silent
        (lambda: benchmark_loss_scaling({"a": 3}, m=4, Ks=[2]), TypeError, "not callable: ['a']"),
        (lambda: benchmark_loss_scaling(soft, m=4, Ks=[2], reps="a"), TypeError, "reps must be an integer"),
        (lambda: benchmark_loss_scaling(soft, m=4, Ks=[2.7]), TypeError, "each K in Ks must be an integer"),  # silent
        (lambda: benchmark_loss_scaling(soft, m=4, Ks=[2], dtype=torch.long), TypeError,
         "dtype must be a floating-point torch.dtype"),                                                # NotImplementedError
        (lambda: benchmark_loss_scaling(soft, m=4, Ks=[2], reps=1.5), TypeError, "reps must be an integer"),  # silent
        (lambda: benchmark_loss_scaling(soft, m=4, Ks=[2], time_cap_s=inf), ValueError, "time_cap_s > 0"),
        (lambda: loglog_slope([1, 2, 3], [1, 2]), ValueError, "Ks has 3, times has 2"),                # silent
        (lambda: loglog_slope([-1, 2, 3], [1, 2, 3]), ValueError, "Ks must be positive"),              # silent
        (lambda: loglog_slope([1, nan, 3], [1, 2, 3]), ValueError, "Ks has 1 NaN"),                    # silent
        (lambda: loglog_slope([1, 2, 3], [1, 2, 3], k_min=nan), ValueError, "k_min must be finite"),   # nan
    ]


@pytest.mark.parametrize("case", range(35))
def test_public_entry_points_refuse_bad_input(case):
    cases = _bad_input_cases()
    assert len(cases) == 35
    call, error, fragment = cases[case]
    with pytest.raises(error, match=re.escape(fragment)):
        call()
