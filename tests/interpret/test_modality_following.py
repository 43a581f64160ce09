"""Tests for [B03] modality following: uncertainty indices, the following curve and balance point on constructed
cases with known answers, the logit lens through hooks (toy model and a Hugging Face model built from a config),
oscillation counting, the conflict task, SFT steering, validation, and the quick reproduction's structure."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from icml26.harness import Budget, Outcome
from icml26.interpret.modality_following import (
    INDICES,
    ToyConfig,
    ToyMultimodalClassifier,
    balance_point,
    corrupt_images,
    easy_cases,
    find_layers,
    fit_temperature,
    follow_outcomes,
    layerwise_logits,
    layerwise_oscillation,
    make_texts,
    modality_following_curve,
    modality_probs,
    nearest_boundary_cases,
    relative_uncertainty,
    sample_conflicts,
    select_boundary_cases,
    sft_steer,
    uncertainty,
)

K = 10


def _peaked(labels, mass, k=K):
    """Distributions with ``mass`` on ``labels`` and the rest spread uniformly."""
    n = len(labels)
    p = np.tile(((1 - mass) / (k - 1))[:, None], (1, k))
    p[np.arange(n), labels] = mass
    return p


def _hooks(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


# uncertainty indices

@pytest.mark.parametrize("index", INDICES)
def test_indices_are_zero_on_one_hot_and_one_on_uniform(index):
    p = np.vstack([np.eye(K)[3], np.full(K, 1 / K)])
    np.testing.assert_allclose(uncertainty(p, index), [0.0, 1.0], atol=1e-12)


@pytest.mark.parametrize("index", INDICES)
def test_indices_increase_as_mass_spreads(index):
    p = _peaked(np.zeros(5, int), np.array([0.99, 0.8, 0.6, 0.4, 0.2]))
    assert np.all(np.diff(uncertainty(p, index)) > 0)


def test_entropy_index_matches_scipy():
    from scipy.stats import entropy

    p = np.random.default_rng(0).dirichlet(np.ones(K), size=20)
    np.testing.assert_allclose(uncertainty(p, "entropy"), entropy(p, axis=1) / math.log(K), rtol=1e-12)


def test_relative_uncertainty_sign_and_antisymmetry():
    pa, pb = _peaked(np.zeros(3, int), np.array([0.3, 0.5, 0.9])), _peaked(np.ones(3, int), np.full(3, 0.6))
    du = relative_uncertainty(pa, pb)
    assert du[0] > 0 > du[2]
    np.testing.assert_allclose(relative_uncertainty(pb, pa), -du)


@pytest.mark.parametrize("bad,match", [(np.full((2, 3), np.nan), "NaN"), (np.ones((2, 3)), "probability"),
                                       (np.ones((2, 1)), "n_classes"), (np.ones((2, 2, 2)) / 2, "shape")])
def test_uncertainty_rejects_bad_distributions(bad, match):
    with pytest.raises(ValueError, match=match):
        uncertainty(bad)


def test_unknown_index_is_rejected():
    with pytest.raises(ValueError, match="unknown uncertainty index"):
        uncertainty(np.full((1, 3), 1 / 3), "variance")


# curve, filter, balance point: constructed cases with known answers

def _product_of_experts_case(n=4000, seed=0):
    """A bias-free fuser: p_joint ∝ p_V p_T. It follows the modality with the larger mass, i.e. the lower
    uncertainty, so P(follow text) switches exactly at dU = 0 (the balance point)."""
    rng = np.random.default_rng(seed)
    y_v = rng.integers(0, K, n)
    y_t = (y_v + rng.integers(1, K, n)) % K
    m_v, m_t = rng.uniform(0.2, 0.95, n), rng.uniform(0.2, 0.95, n)
    p_v, p_t = _peaked(y_v, m_v), _peaked(y_t, m_t)
    joint = p_v * p_t
    return p_v, p_t, joint / joint.sum(1, keepdims=True), y_v, y_t


def test_equal_uncertainties_sit_at_the_balance_point():
    p_v, p_t, p_j, y_v, y_t = _product_of_experts_case()
    c = modality_following_curve(p_v, p_t, p_j, y_v, y_t, n_bins=10)
    assert c.n_kept == len(y_v) and c.counts_by_outcome["neither"] == 0
    # known answer: follow text exactly when the text is the more certain modality
    np.testing.assert_array_equal(c.follow_text, c.delta_u < 0)
    for method in ("logistic", "binned"):
        bp = balance_point(c.delta_u, c.follow_text, c.follow_vision, method=method, n_boot=50)
        assert abs(bp.b) < 0.02, method
        assert bp.ci[0] <= 0.0 + 0.02 and bp.ci[1] >= -0.02
    # a case with exactly equal uncertainties is a tie in the joint: it follows neither side preferentially
    tie_v, tie_t = _peaked(np.array([1]), np.array([0.7])), _peaked(np.array([2]), np.array([0.7]))
    assert relative_uncertainty(tie_t, tie_v)[0] == pytest.approx(0.0, abs=1e-12)
    tie = tie_v * tie_t
    assert tie[0, 1] == pytest.approx(tie[0, 2])


def test_logistic_balance_point_recovers_a_known_bias():
    rng = np.random.default_rng(1)
    du = rng.uniform(-1, 1, 8000)
    follow_t = rng.uniform(size=du.size) < 1 / (1 + np.exp(5.0 * (du - 0.2)))
    bp = balance_point(du, follow_t, ~follow_t, n_boot=40, seed=0)
    assert bp.ci[0] < 0.2 < bp.ci[1] and abs(bp.b - 0.2) < 0.05
    assert bp.slope == pytest.approx(5.0, rel=0.15)


@pytest.mark.parametrize("method", ["logistic", "binned"])
def test_swapping_modalities_negates_the_balance_point(method):
    rng = np.random.default_rng(2)
    du = rng.normal(0.1, 0.4, 800)
    u = rng.uniform(size=du.size)
    fa = u < 1 / (1 + np.exp(4 * (du - 0.1)))
    fb = ~fa & (u < 0.97)
    a = balance_point(du, fa, fb, method=method, n_boot=30, seed=3)
    b = balance_point(-du, fb, fa, method=method, n_boot=30, seed=3)
    assert b.b == pytest.approx(-a.b, abs=1e-8)
    if method == "logistic":
        assert b.ci == pytest.approx((-a.ci[1], -a.ci[0]), abs=1e-8)


def test_filter_and_outcome_counts_add_up():
    rng = np.random.default_rng(4)
    n = 500
    p_v, p_t, p_j = (rng.dirichlet(np.ones(K) * 0.3, n) for _ in range(3))
    y_v = p_v.argmax(1)
    y_t = np.where(p_t.argmax(1) != y_v, p_t.argmax(1), (y_v + 1) % K)
    c = modality_following_curve(p_v, p_t, p_j, y_v, y_t, n_bins=5)
    cnt = c.counts_by_outcome
    assert sum(cnt.values()) == n and cnt["filtered_out"] == int((p_t.argmax(1) != y_t).sum())
    assert c.counts.sum() == c.n_kept
    ft, fv = follow_outcomes(p_j, y_t, y_v)
    assert not np.any(ft & fv)


def test_select_boundary_cases_is_exactly_the_eps_ball():
    du = np.random.default_rng(5).normal(size=300)
    for b, eps in ((0.0, 0.1), (0.5, 0.33), (-1.0, 0.0)):
        idx = select_boundary_cases(du, b, eps)
        assert set(idx) == {i for i in range(len(du)) if abs(du[i] - b) <= eps}
    near = nearest_boundary_cases(du, 0.2, 10)
    far = np.abs(du - 0.2)
    assert len(near) == 10 and far[near].max() <= np.sort(far)[9]
    easy = easy_cases(du, 0.2, 10, dominant="b")
    assert set(easy) == set(np.argsort(du)[-10:])


def test_balance_point_and_curve_validation():
    du, f = np.zeros(4), np.array([True, False, True, False])
    with pytest.raises(ValueError, match="exclusive"):
        balance_point(du, f, f)
    with pytest.raises(ValueError, match="each modality"):
        balance_point(du, np.ones(4, bool), np.zeros(4, bool))
    with pytest.raises(ValueError, match="unknown method"):
        balance_point(du, f, ~f, method="spline")
    with pytest.raises(ValueError, match="one entry per case"):
        balance_point(du[:3], f, ~f)
    with pytest.raises(ValueError, match="eps"):
        select_boundary_cases(du, 0.0, -1.0)
    p = np.full((4, K), 1 / K)
    with pytest.raises(ValueError, match="y_a != y_b"):
        follow_outcomes(p, np.zeros(4, int), np.zeros(4, int))
    with pytest.raises(ValueError, match="integer class labels"):
        modality_following_curve(p, p, p, np.zeros(4), np.ones(4))


# oscillation

def test_oscillation_counts_switches_and_ignores_other_labels():
    t, v, x = 3, 7, 1
    assert layerwise_oscillation(np.array([t, t, v, t, v]), t, v) == 3
    assert layerwise_oscillation(np.array([t, x, v, x, x, t]), t, v) == 2
    assert layerwise_oscillation(np.array([x, x, x]), t, v) == 0


def test_oscillation_vectorised_equals_brute_force_and_accepts_logits():
    rng = np.random.default_rng(6)
    preds = rng.integers(0, 4, size=(7, 200))
    ya, yb = rng.integers(0, 4, 200), None
    yb = (ya + rng.integers(1, 4, 200)) % 4

    def brute(seq, a, b):
        kept = [s for s in seq if s in (a, b)]
        return sum(p != q for p, q in zip(kept, kept[1:]))

    want = [brute(preds[:, i], ya[i], yb[i]) for i in range(200)]
    np.testing.assert_array_equal(layerwise_oscillation(preds, ya, yb), want)
    logits = np.eye(4)[preds]  # (layers, n, 4) one-hot logits
    np.testing.assert_array_equal(layerwise_oscillation(logits, ya, yb), want)
    with pytest.raises(ValueError, match="differ"):
        layerwise_oscillation(preds, ya, ya)


# logit lens through hooks

@pytest.fixture(scope="module")
def toy():
    torch.manual_seed(0)
    cs = sample_conflicts(16, "test", seed=0)
    return ToyMultimodalClassifier(ToyConfig(n_layers=3)).eval(), cs


def test_toy_lens_last_layer_equals_logits_and_leaves_model_unchanged(toy):
    model, cs = toy
    with torch.no_grad():
        before = model(cs.image, cs.text)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    lens = layerwise_logits(model, cs.image, cs.text, position=0)
    assert lens.shape == (3, 16, 10)
    torch.testing.assert_close(lens[-1], before, rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(model(cs.image, cs.text), before, rtol=0, atol=0)
    assert _hooks(model) == 0 and not model.training
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    np.testing.assert_array_equal(layerwise_logits(model, cs.image, cs.text, layers=[-1])[0], lens[-1])


def test_lens_bad_input_raises_clear_errors_and_removes_hooks(toy):
    model, cs = toy
    with pytest.raises(ValueError, match="out of range for a model with 3 layers"):
        layerwise_logits(model, cs.image, cs.text, layers=[3])
    with pytest.raises(TypeError, match="integers"):
        layerwise_logits(model, cs.image, cs.text, layers=[1.0])
    with pytest.raises(ValueError, match="could not find the layers"):
        find_layers(nn.Sequential(nn.Linear(4, 4)))
    with pytest.raises(ValueError, match="final norm and output head"):
        layerwise_logits(nn.Module(), modules=[nn.Linear(2, 2)])

    def broken(h):
        raise RuntimeError("readout failed")

    with pytest.raises(RuntimeError, match="readout failed"):
        layerwise_logits(model, cs.image, cs.text, readout=broken)
    assert _hooks(model) == 0


def test_lens_on_a_hugging_face_model_built_from_a_config():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        before = model(input_ids=ids).logits
    lens = layerwise_logits(model, input_ids=ids, position=-1)
    assert lens.shape == (3, 2, 50)
    torch.testing.assert_close(lens[-1], before[:, -1], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, before, rtol=0, atol=0)
    assert _hooks(model) == 0
    with pytest.raises(ValueError, match="out of range"):
        layerwise_logits(model, input_ids=ids, layers=[0, -4])


# conflict task, toy model, temperature, SFT

def test_text_and_image_corruption_extremes():
    gen = torch.Generator().manual_seed(0)
    y = torch.arange(10)
    assert torch.equal(make_texts(y, torch.zeros(10), gen), y[:, None].expand(10, 8))
    assert not (make_texts(y, torch.ones(10), gen) == y[:, None]).any()
    x = torch.rand(10, 64, generator=gen)
    assert torch.equal(corrupt_images(x, torch.zeros(10), gen), x)


def test_conflicts_are_conflicts_and_deterministic():
    a, b = sample_conflicts(200, "test", seed=3), sample_conflicts(200, "test", seed=3)
    assert torch.equal(a.image, b.image) and torch.equal(a.text, b.text) and torch.equal(a.v, b.v)
    assert (a.y_v != a.y_t).all()
    with pytest.raises(ValueError, match="split"):
        sample_conflicts(10, "dev", seed=0)


def test_masked_modality_has_no_influence(toy):
    model, cs = toy
    p_v, p_t, _ = modality_probs(model, cs.image, cs.text)
    other_text = torch.flip(cs.text, [0])
    other_image = torch.flip(cs.image, [0])
    p_v2, _, _ = modality_probs(model, cs.image, other_text)
    _, p_t2, _ = modality_probs(model, other_image, cs.text)
    torch.testing.assert_close(p_v, p_v2)
    torch.testing.assert_close(p_t, p_t2)
    with pytest.raises(ValueError, match="expected image"):
        model(cs.image[:, :10], cs.text)


def test_fit_temperature_recovers_a_known_temperature():
    g = torch.Generator().manual_seed(0)
    z = 2 * torch.randn(4000, 10, generator=g)
    y = torch.multinomial(torch.softmax(z, -1), 1, generator=g).squeeze(1)
    assert fit_temperature(3.0 * z, y) == pytest.approx(3.0, rel=0.1)


def test_sft_steer_leaves_the_original_and_is_deterministic(toy):
    model, cs = toy
    state = {k: v.clone() for k, v in model.state_dict().items()}
    a = sft_steer(model, (cs.image, cs.text), cs.y_v, steps=3, seed=1)
    b = sft_steer(model, (cs.image, cs.text), cs.y_v, steps=3, seed=1)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    assert not all(torch.equal(v, state[k]) for k, v in a.state_dict().items())
    with pytest.raises(ValueError, match="one row per target"):
        sft_steer(model, (cs.image[:3], cs.text), cs.y_v)


# the quick reproduction

def test_quick_reproduction_structure():
    from icml26.interpret.modality_following.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    checks = [c for c in out.claims if c.kind == "check"]
    assert len(claims) == 9 and len(checks) == 5
    # the law's bar claims carry the shuffled-outcome control (the outcome decoupled from dU)
    law = [c for c in claims if c.statement.startswith("P(follow text) decreases")]
    assert len(law) == 3 and all(c.control is not None and "shuffled" in c.control_arm for c in law)
    assert all(c.control_verdict != "holds" or c.verdict == "inconclusive" for c in law)
    assert all(c.bar for c in claims if c.reference == 0.0)           # fixed bars are marked as such
    for c in out.claims:
        assert math.isfinite(c.measured) and c.verdict in ("holds", "does not hold", "inconclusive")
    assert all(c.falsifier for c in claims)
    # the checks are true by construction: a failure is a bug
    assert all(c.verdict == "holds" for c in checks)
    assert {"following_curves", "resampled_balance_point", "oscillation", "sft_steering"} <= set(out.figures)
    assert {"b_star", "b_star_lo", "b_star_hi", "spearman_entropy", "heldout_vision_follow_boundary"} <= set(out.metrics)


def test_shuffled_control_destroys_the_law():
    from icml26.interpret.modality_following.reproduce import _shuffled_spearman

    p_v, p_t, p_j, y_v, y_t = _product_of_experts_case(n=4000, seed=3)
    c = modality_following_curve(p_v, p_t, p_j, y_v, y_t, n_bins=10)
    assert c.spearman < -0.8
    rhos = [_shuffled_spearman(c, s) for s in range(20)]
    assert np.mean(rhos) > -0.5 and np.mean(np.array(rhos) < -0.8) < 0.2


def test_monotone_transform_of_the_index_keeps_the_sign_of_the_law():
    from scipy.stats import spearmanr

    p_v, p_t, p_j, y_v, y_t = _product_of_experts_case(n=2000, seed=7)
    c = modality_following_curve(p_v, p_t, p_j, y_v, y_t, n_bins=8)
    u_t, u_v = uncertainty(p_t), uncertainty(p_v)
    for g in (np.sqrt, np.exp, lambda u: u ** 3):
        du = g(u_t) - g(u_v)
        parts = np.array_split(np.argsort(du, kind="stable"), 8)
        rho = spearmanr([du[p].mean() for p in parts], [c.follow_text[p].mean() for p in parts]).statistic
        assert np.sign(rho) == np.sign(c.spearman) == -1
