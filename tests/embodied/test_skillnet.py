"""Tests for [B05] SkillNet: motion-code distance and clusters, skill hierarchy, skill-conditioned MoE."""

import itertools

import pytest
import torch

from icml26.embodied.skillnet import (
    RELEASED_CENTERS, SkillConditionedMoE, SkillHierarchy, assign_motion_cluster, motion_code_distance,
    routing_similarity,
)


def test_worked_distances():
    assert motion_code_distance("200200", "100200") == pytest.approx(1.528)
    assert motion_code_distance("200200", "000200") == pytest.approx(3.056)
    assert motion_code_distance("200200", "201200") == pytest.approx(1.350)


def test_distance_is_a_symmetric_semimetric():
    codes = ["200200", "100100", "220001", "000001", "201010", "121211", "011101"]
    for a, b in itertools.product(codes, codes):
        d = motion_code_distance(a, b)
        assert d == motion_code_distance(b, a)
        assert (d == 0) == (a == b)


def test_centres_assign_to_themselves_and_released_examples():
    for i, c in enumerate(RELEASED_CENTERS):
        assert assign_motion_cluster(c) == i
    # released annotation examples (data): pick -> 200200 (cluster 0), open drawer -> 200100 (1),
    # press button -> 100100 (4), cut apple -> 220001 (9)
    for code, k in (("200200", 0), ("200100", 1), ("100100", 4), ("220001", 9)):
        assert assign_motion_cluster(code) == k


def test_bad_codes_and_unknown_verbs():
    for bad in ("2002", "300200", "202200x", "002020"):
        with pytest.raises(ValueError):
            motion_code_distance(bad, "200200")
    with pytest.raises(TypeError):
        motion_code_distance(200200, "200200")
    h = SkillHierarchy({"push": ("100200", "push-12"), "put": ("200200", "put-9.1")})
    with pytest.raises(ValueError, match="unknown verb"):
        h.tokens("fly")


def test_hierarchy_tokens_and_similarity():
    h = SkillHierarchy({"push": ("100200", "push-12"), "shove": ("100200", "push-12"),
                        "put": ("200200", "put-9.1")})
    t = [h.tokens(v) for v in h.verbs]
    assert t[0][:2] == t[1][:2] and t[0][2] != t[1][2]
    assert max(max(x) for x in t) < h.n_tokens
    S = h.similarity()
    assert S[0, 0] == 1.0 and S[0, 1] == pytest.approx(2 / 3) and S[0, 2] == 0.0


def test_moe_single_expert_equals_shared_plus_ffn():
    torch.manual_seed(0)
    m = SkillConditionedMoE(16, 32, 8, num_experts=1, num_heads=2)
    x, s = torch.randn(2, 5, 16), torch.randn(2, 3, 8)
    y, aux = m(x, s, torch.ones(2, 3, dtype=torch.bool))
    assert torch.allclose(y, m.shared(x) + m.experts[0](x), atol=1e-6)
    assert torch.allclose(aux["probs"], torch.ones(2, 5, 1))


def test_moe_gates_and_balance_loss():
    torch.manual_seed(0)
    m = SkillConditionedMoE(16, 32, 8, num_experts=4, num_heads=2, balance_coef=1.0)
    x, s = torch.randn(3, 7, 16), torch.randn(3, 3, 8)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    y, aux = m(x, s, mask)
    assert torch.allclose(aux["probs"].sum(-1), torch.ones(3, 7))
    assert torch.equal(aux["topk_mask"].sum(-1), torch.ones(3, 7))
    # padded skill tokens do not influence routing
    s2 = s.clone()
    s2[0, 2] += 100.0
    assert torch.allclose(m(x, s2, mask)[1]["probs"], aux["probs"], atol=1e-6)
    # balance loss: 1 under uniform routing (P_e = 1/E, sum f_e = 1), E under full collapse
    E = 4
    with torch.no_grad():
        m.state_router.weight.zero_()
    _, aux = m(torch.randn(1, 16, 16))
    assert aux["balance_loss"].item() == pytest.approx(1.0)
    xs = torch.randn(1, 16, 16).abs()
    with torch.no_grad():
        m.state_router.weight[0] = 50.0
    _, aux = m(xs)
    assert aux["topk_mask"][..., 0].all()
    assert aux["balance_loss"].item() == pytest.approx(E, rel=1e-3)
    with pytest.raises(ValueError):
        m(x, s, torch.zeros(3, 3, dtype=torch.bool))


def test_routing_similarity():
    g = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0.9, 0.1, 0]])
    S = routing_similarity(g, torch.tensor([0, 0, 1, 2]), 3)
    assert S[0, 0] == pytest.approx(1.0) and S[0, 1] == pytest.approx(0.0) and S[0, 2] > 0.99
