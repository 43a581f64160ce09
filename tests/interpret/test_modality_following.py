"""Tests for [B03] modality following: uncertainty indices, the following curve and balance point on constructed
cases with known answers, the logit lens through hooks (toy model and a Hugging Face model built from a config),
oscillation counting, the conflict task, SFT steering, validation, and the quick reproduction's structure."""

import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from icml26.harness import Budget, Outcome
from icml26.interpret.modality_following import (
    INDICES,
    BalancePoint,
    ConflictSet,
    Curve,
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
    load_toy_model,
    make_texts,
    modality_following_curve,
    modality_probs,
    nearest_boundary_cases,
    relative_uncertainty,
    sample_conflicts,
    select_boundary_cases,
    sft_steer,
    train_toy_model,
    uncertainty,
)
from icml26.interpret.modality_following.lens import default_readout

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
    with pytest.raises(ValueError, match="index must be one of"):
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


def _tiny_llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32)


def test_lens_finds_the_language_model_of_a_multimodal_model():
    # review: LlavaForConditionalGeneration (transformers 5.x: model.language_model.layers, lm_head) was refused
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(0)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                              image_size=32, patch_size=16)
    model = LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=_tiny_llama_config(),
                                                      image_token_index=63)).eval()
    assert len(find_layers(model)) == 3                       # the language model's blocks, not the vision tower's
    ids = torch.randint(0, 60, (2, 7))
    lens = layerwise_logits(model, input_ids=ids, position=-1)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, -1]
    assert lens.shape == (3, 2, 64)
    torch.testing.assert_close(lens[-1], logits, rtol=1e-5, atol=1e-5)
    assert _hooks(model) == 0


@pytest.mark.parametrize("side", ["right", "left"])
def test_lens_reads_the_last_real_token_of_a_padded_batch(side):
    # review: with right padding, position=-1 read the pad token (max logit difference 0.34)
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    lm = LlamaForCausalLM(_tiny_llama_config()).eval()
    real = torch.tensor([5, 6, 7, 8])
    pad = torch.zeros(2, dtype=torch.long)
    row0 = torch.cat([real, pad]) if side == "right" else torch.cat([pad, real])
    ids = torch.stack([row0, torch.tensor([5, 6, 7, 8, 9, 10])])
    mask = (torch.arange(6) < 4) if side == "right" else (torch.arange(6) >= 2)
    mask = torch.stack([mask.long(), torch.ones(6, dtype=torch.long)])
    lens = layerwise_logits(lm, input_ids=ids, attention_mask=mask, position=-1)
    with torch.no_grad():
        alone = lm(input_ids=real[None]).logits[0, -1]
        full = lm(input_ids=ids[1:]).logits[0, -1]
    torch.testing.assert_close(lens[-1, 0], alone, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lens[-1, 1], full, rtol=1e-4, atol=1e-4)
    first = layerwise_logits(lm, input_ids=ids, attention_mask=mask, position=0)
    with torch.no_grad():
        torch.testing.assert_close(first[-1, 0], lm(input_ids=real[None, :1]).logits[0, 0], rtol=1e-4, atol=1e-4)


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
    # review: the law's bar claims carry the fusion-free product-of-experts control (true by construction for it)
    law = [c for c in claims if c.statement.startswith("P(follow text) decreases")]
    assert len(law) == 3 and all(c.control is not None and "product of experts" in c.control_arm for c in law)
    assert all(c.control_verdict != "holds" or c.verdict == "inconclusive" for c in law)
    # review: the oscillation claim carries the no-layer-dynamics control
    osc = next(c for c in claims if c.statement.startswith("Concept oscillation"))
    assert "without layer dynamics" in osc.control_arm and osc.control is not None
    # review: the text-only-mix claim is compared with the shift from the training seed alone
    mix = next(c for c in claims if c.statement.startswith("Training that favours"))
    assert "seed alone" in mix.baseline and mix.reference == pytest.approx(abs(out.metrics["b_star_shift_seed_only"]))
    # review: SFT claims are measured against the best of easy, random and text-dominant selections
    sft = [c for c in claims if c.statement.startswith("Boundary-case SFT")]
    assert len(sft) == 3 and all(set(c.baselines) == {"easy", "random", "text_dominant"} for c in sft)
    for c in out.claims:
        assert math.isfinite(c.measured) and c.verdict in ("holds", "does not hold", "inconclusive")
    assert all(c.falsifier for c in claims)
    # the checks are true by construction: a failure is a bug
    assert all(c.verdict == "holds" for c in checks)
    assert {"following_curves", "resampled_balance_point", "oscillation", "sft_steering"} <= set(out.figures)
    assert {"b_star", "b_star_lo", "b_star_hi", "spearman_entropy", "heldout_vision_follow_boundary",
            "case_auc_entropy_poe_control", "osc_near_no_dynamics_control"} <= set(out.metrics)


def test_product_of_experts_control_is_the_normalised_product():
    from icml26.interpret.modality_following.reproduce import _auc, _poe

    g = torch.Generator().manual_seed(0)
    pv, pt = torch.softmax(torch.randn(5, K, generator=g), -1), torch.softmax(torch.randn(5, K, generator=g), -1)
    j = _poe(pv, pt)
    torch.testing.assert_close(j.sum(1), torch.ones(5))
    torch.testing.assert_close(j, pv * pt / (pv * pt).sum(1, keepdim=True))
    assert _auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)


def test_no_dynamics_control_keeps_the_final_layer_and_oscillates_at_ties():
    from icml26.interpret.modality_following.reproduce import _no_dynamics

    g = torch.Generator().manual_seed(0)
    lens = torch.randn(6, 400, K, generator=g).cumsum(0)
    lens[-1, :200, 0], lens[-1, :200, 1] = 50.0, 50.0              # an exact tie between labels 0 and 1 at the output
    lens[-1, 200:, 0], lens[-1, 200:, 1] = 50.0, 0.0               # a clear winner
    fake = _no_dynamics(lens, seed=1)
    assert fake.shape == lens.shape
    osc = layerwise_oscillation(fake, np.zeros(400, int), np.ones(400, int))
    assert osc[:200].mean() > 1.0 and osc[200:].mean() == 0.0


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


# argument checks on every public entry point (issue "Reliability"): each case would have returned a number or
# raised a low-level error without the check

class _MaskedNet(nn.Module):
    """A model whose forward takes an attention mask (as a Hugging Face model does)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.norm, self.head = nn.LayerNorm(4), nn.Linear(4, 3)

    def forward(self, x, attention_mask=None):
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


_TOY = ToyMultimodalClassifier(ToyConfig(n_layers=2)).eval()
_IMG, _TXT = torch.rand(4, 64), torch.randint(0, 20, (4, 8))
_UNI = np.full((4, K), 1 / K)
_DU, _FT = np.linspace(-1, 1, 6), np.array([True, True, True, False, False, False])
_Y0, _Y1 = np.zeros(4, int), np.ones(4, int)
_GEN = torch.Generator().manual_seed(0)
_CURVE = dict(delta_u=np.zeros(3), keep=np.ones(3, bool), follow_text=np.ones(3, bool), follow_vision=np.zeros(3, bool),
              centers=np.zeros(2), p_text=np.zeros(2), p_vision=np.zeros(2), counts=np.ones(2, int), spearman=0.0)

def _layerwise_logits(model, args=(), **kwargs):
    return layerwise_logits(model, *args, **kwargs)


BAD_INPUTS = [
    (uncertainty, dict(p=np.zeros((0, 3))), ValueError, "is empty"),
    (uncertainty, dict(p=[["a", "b"]]), TypeError, "array of numbers"),
    (relative_uncertainty, dict(p_a=np.full((2, 3), 1 / 3), p_b=np.full((2, 4), 1 / 4)), ValueError, "same classes"),
    (follow_outcomes, dict(p_joint=_UNI, y_a=np.full(4, 12), y_b=_Y1), ValueError, "indices in [0, 10)"),
    (modality_following_curve, dict(p_v=_UNI, p_t=_UNI, p_joint=_UNI, y_v=np.full(4, -1), y_t=_Y1, n_bins=2),
     ValueError, "y_v must hold indices"),
    (balance_point, dict(delta_u=_DU, follow_a=np.linspace(0.1, 0.9, 6), follow_b=np.zeros(6)), ValueError,
     "follow_a must hold booleans"),
    (balance_point, dict(delta_u=_DU, follow_a=_FT, follow_b=~_FT, n_boot=True), TypeError, "n_boot"),
    (balance_point, dict(delta_u=_DU, follow_a=_FT, follow_b=~_FT, seed=-1), ValueError, "seed must be"),
    (balance_point, dict(delta_u=_DU, follow_a=_FT, follow_b=~_FT, method="binned", n_bins=1), ValueError, "n_bins"),
    (select_boundary_cases, dict(delta_u=_DU, b="0.1", eps=0.1), TypeError, "b must be a real number"),
    (default_readout, dict(model="a model"), TypeError, "nn.Module"),
    (_layerwise_logits, dict(model=_TOY, args=(_IMG, _TXT), position=1.5), TypeError, "position must be an integer"),
    (_layerwise_logits, dict(model=_TOY, args=(_IMG, _TXT), position=9), ValueError, "out of range for 5 tokens"),
    (_layerwise_logits, dict(model=_TOY, args=(_IMG, _TXT), layers=1), TypeError, "sequence of layer indices"),
    (_layerwise_logits, dict(model=_TOY, args=(_IMG, _TXT), modules=["block"]), TypeError, "nn.Module blocks"),
    (_layerwise_logits, dict(model=_MaskedNet(), args=(torch.zeros(2, 3, 4),), attention_mask=torch.full((2, 3), 0.5)),
     ValueError, "0 (padding) and 1"),
    (_layerwise_logits, dict(model=_MaskedNet(), args=(torch.zeros(2, 3, 4),), attention_mask=torch.tensor([[1, 0, 0], [1] * 3]),
                            position=-2), ValueError, "needs at least 2 real tokens"),
    (layerwise_oscillation, dict(layer_preds=np.zeros((5, 3), int), y_a=[0, 1], y_b=2), ValueError, "one per case"),
    (layerwise_oscillation, dict(layer_preds=np.zeros((5, 3), int), y_a=0.5, y_b=2), TypeError, "integer labels"),
    (ToyConfig, dict(n_layers=0), ValueError, "n_layers must be an integer >= 1"),
    (ToyConfig, dict(p_text_only=0.9), ValueError, "p_image_only + p_text_only"),
    (ToyConfig, dict(lr=float("nan")), ValueError, "lr must be finite"),
    (ToyMultimodalClassifier, dict(cfg="small"), TypeError, "ToyConfig"),
    (_TOY, dict(image=_IMG, text=torch.full((4, 8), 25)), ValueError, "token ids must be in [0, 20)"),
    (_TOY, dict(image=_IMG, text=_TXT, drop_text=torch.zeros(4)), ValueError, "drop_text must be a bool tensor"),
    (train_toy_model, dict(cfg={"n_layers": 2}), TypeError, "ToyConfig"),
    (load_toy_model, dict(cfg=None), TypeError, "ToyConfig"),
    (modality_probs, dict(model=_TOY, image=_IMG, text=_TXT, temperature=0.0), ValueError, "temperature must be > 0"),
    (modality_probs, dict(model="toy", image=_IMG, text=_TXT), TypeError, "nn.Module"),
    (fit_temperature, dict(logits=torch.full((4, 10), float("nan")), y=torch.zeros(4, dtype=torch.long)), ValueError,
     "NaN"),
    (fit_temperature, dict(logits=torch.zeros(4, 10), y=torch.full((4,), 12)), ValueError, "indices in [0, 10)"),
    (nearest_boundary_cases, dict(delta_u=_DU, b="0.1", n=3), TypeError, "b must be a real number"),
    (nearest_boundary_cases, dict(delta_u=_DU, b=0.0, n=True), TypeError, "n must be an integer"),
    (easy_cases, dict(delta_u=_DU, b=float("inf"), n=2), ValueError, "b must be finite"),
    (sft_steer, dict(model=_TOY, inputs=(_IMG, _TXT), targets=torch.zeros(4)), TypeError, "integer tensor"),
    (sft_steer, dict(model=_TOY, inputs=(_IMG, _TXT), targets=torch.zeros(4, dtype=torch.long), lr=float("nan")),
     ValueError, "lr must be finite"),
    (sft_steer, dict(model=_TOY, inputs=(_IMG, _TXT), targets=torch.full((4,), 10)), ValueError, "indices in [0, 10)"),
    (ConflictSet, dict(image=_IMG, text=_TXT, y_v=torch.zeros(3, dtype=torch.long), y_t=torch.ones(4, dtype=torch.long),
                       v=torch.zeros(4), t=torch.zeros(4)), ValueError, "same length"),
    (sample_conflicts, dict(n=10, split="train", seed=0, v_beta=(float("nan"), 1.0)), ValueError, "v_beta must be finite"),
    (sample_conflicts, dict(n=10, split="train", seed=-1), ValueError, "seed must be an integer >= 0"),
    (corrupt_images, dict(x=torch.rand(3, 64), v=torch.full((3,), 2.0), gen=_GEN), ValueError, "difficulties in [0, 1]"),
    (corrupt_images, dict(x=torch.rand(3, 64), v=torch.zeros(3), gen=0), TypeError, "gen must be a torch.Generator"),
    (make_texts, dict(y=torch.tensor([3.0, 4.0]), t=torch.zeros(2), gen=_GEN), TypeError, "must hold integers"),
    (make_texts, dict(y=torch.tensor([3, 4]), t=torch.zeros(3), gen=_GEN), ValueError, "t must have shape"),
    (BalancePoint, dict(b=0.0, ci=(0.0, 0.0), slope=1.0, method="spline", n_used=3, boot=np.zeros(0)), ValueError,
     "method must be one of"),
    (Curve, dict(**_CURVE, index="variance"), ValueError, "index must be one of"),
]


@pytest.mark.parametrize("fn, kwargs, error, fragment", BAD_INPUTS,
                         ids=[f"{i}-{getattr(c[0], '__name__', type(c[0]).__name__)}" for i, c in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise(fn, kwargs, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        fn(**kwargs)


def test_toy_trains_on_one_thread_with_deterministic_algorithms(threads_during_training):
    """The cached toy must not depend on the builder's thread count: training runs inside pinned_training(1)."""
    from dataclasses import replace

    import icml26.interpret.modality_following.model as mf

    seen, after = threads_during_training(mf, lambda: mf.train_toy_model(replace(mf.ToyConfig(n_layers=2, steps=1),
                                                                                seed=0)))
    assert seen == [(1, True)] and after == 2
