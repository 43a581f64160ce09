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


# --- tabletop, policy, reproduction ---------------------------------------------------------------------------

import math  # noqa: E402

import numpy as np  # noqa: E402

from icml26.embodied.skillnet.tabletop import OBJECTS, VERBS, TableTop, rollout_expert  # noqa: E402


def test_expert_solves_every_composition_and_is_deterministic():
    verbs = [v for v in VERBS for _ in OBJECTS] * 5
    objs = np.array([o for _ in VERBS for o in range(len(OBJECTS))] * 5)
    O1, A1, ok = rollout_expert(verbs, objs, 16, np.random.default_rng(3))
    O2, A2, _ = rollout_expert(verbs, objs, 16, np.random.default_rng(3))
    assert ok.all()
    assert np.array_equal(O1, O2) and np.array_equal(A1, A2)


def test_doing_nothing_fails_and_wrong_object_fails():
    env = TableTop()
    env.reset(["push"] * 4, np.zeros(4, int), np.random.default_rng(0))
    for _ in range(16):
        env.step(np.zeros((4, 3)))
    assert not env.success().any()
    env.reset(["push"] * 4, np.zeros(4, int), np.random.default_rng(0))
    env.target = np.ones(4, int)          # expert for object 1, success judged for object 0
    for _ in range(16):
        env.step(env.expert())
    env.target = np.zeros(4, int)
    assert not env.success().any()


def test_tabletop_bad_input():
    env = TableTop()
    with pytest.raises(ValueError, match="unknown verbs"):
        env.reset(["fly"], np.zeros(1, int), np.random.default_rng(0))
    with pytest.raises(ValueError, match="indices"):
        env.reset(["push"], np.array([7]), np.random.default_rng(0))
    env.reset(["push"], np.zeros(1, int), np.random.default_rng(0))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.full((1, 3), np.nan))


def test_egocentric_observation_layout():
    from icml26.embodied.skillnet.tabletop import obs_dim
    env = TableTop()
    o = env.reset(["push", "rotate"], np.array([0, 2]), np.random.default_rng(1))
    K = len(OBJECTS)
    assert o.shape == (2, obs_dim()) and obs_dim() == 2 + 7 * K
    assert np.allclose(o[:, 2:2 + 2 * K].reshape(2, K, 2), env.obj[..., :2] - env.eff[:, None], atol=1e-6)
    assert np.allclose(o[:, 2 + 2 * K:2 + 5 * K], 0.0)          # nothing displaced at reset
    for _ in range(20):
        o = env.step(env.expert())
    disp = o[:, 2 + 2 * K:2 + 5 * K].reshape(2, K, 3)
    assert np.allclose(disp[0, 0], [0.3, 0.0, 0.0], atol=0.05) and np.allclose(disp[1, 2, 2], 1.2, atol=0.15)
    assert env.success().all()


def test_train_bc_bad_input():
    from icml26.embodied.skillnet.policy import SkillNetPolicy, train_bc
    pol = SkillNetPolicy("dense", 20, 30, chunk=2)
    obs, tok, act = torch.randn(8, 20), torch.randint(30, (8, 4)), torch.randn(8, 2, 3)
    with pytest.raises(ValueError, match="same"):
        train_bc(pol, obs[:4], tok, act, steps=1)
    with pytest.raises(ValueError, match="steps"):
        train_bc(pol, obs, tok, act, steps=0)


def test_policy_arms_equal_parameters_and_shapes():
    from icml26.embodied.skillnet.policy import ARMS, SkillNetPolicy, _n_params
    counts = []
    for arm in ARMS:
        torch.manual_seed(0)
        pol = SkillNetPolicy(arm, 20, 30, chunk=4)
        a, bal, probs = pol(torch.randn(5, 20), torch.randint(30, (5, 4)))
        assert a.shape == (5, 4, 3) and torch.isfinite(bal)
        assert len(probs) == (0 if arm.startswith("dense") else 2)
        counts.append(_n_params(pol))
    assert max(counts) / min(counts) < 1.02
    with pytest.raises(ValueError, match="unknown arm"):
        SkillNetPolicy("sparse", 20, 30)
    with pytest.raises(ValueError, match="n_skill_tokens"):
        SkillNetPolicy("skillnet", 20, 30, n_skill_tokens=0)


def test_dense_verb_ignores_hierarchy_tokens_and_similarity_loss():
    from icml26.embodied.skillnet.policy import SkillNetPolicy, similarity_loss
    torch.manual_seed(0)
    pol = SkillNetPolicy("dense_verb", 20, 30)
    obs, tok = torch.randn(5, 20), torch.randint(30, (5, 4))
    tok2 = tok.clone()
    tok2[:, :2] = (tok2[:, :2] + 7) % 30
    assert torch.allclose(pol(obs, tok)[0], pol(obs, tok2)[0])
    dense = SkillNetPolicy("dense", 20, 30)
    assert not torch.allclose(dense(obs, tok)[0], dense(obs, tok2)[0])
    # one expert per skill -> cosine matrix = identity: L_sim = 0 against S = I, 1 against S = all ones
    g, ids = torch.eye(3)[[0, 0, 1, 2]], torch.tensor([0, 0, 1, 2])
    assert float(similarity_loss(g, ids, torch.eye(3))) == pytest.approx(0.0)
    assert float(similarity_loss(g, ids, torch.ones(3, 3))) == pytest.approx(1.0)


def test_bc_reduces_loss():
    from icml26.embodied.skillnet.policy import SkillNetPolicy, train_bc
    torch.manual_seed(0)
    pol = SkillNetPolicy("skillnet", 20, 30, chunk=2)
    obs, tok = torch.randn(64, 20), torch.randint(30, (64, 4))
    act = torch.tanh(obs[:, :6]).view(64, 2, 3)
    losses = train_bc(pol, obs, tok, act, steps=60, generator=torch.Generator().manual_seed(0))
    assert losses[-1] < 0.5 * losses[0]


def test_quick_reproduction_structure():
    from icml26.embodied.skillnet.reproduce import reproduce
    from icml26.harness import Budget
    out = reproduce(Budget.QUICK, 0)
    assert {c.kind for c in out.claims} == {"claim", "check"}
    for c in out.claims:
        assert math.isfinite(c.measured) and c.verdict in ("holds", "does not hold", "inconclusive")
    assert len(out.tables["arms"]) == 3
