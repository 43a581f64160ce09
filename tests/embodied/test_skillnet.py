"""Tests for [B05] SkillNet: motion-code distance and clusters, skill hierarchy, skill-conditioned MoE."""

import itertools
import re

import pytest
import torch

from icml26.embodied.skillnet import (
    RELEASED_CENTERS,
    SkillConditionedMoE,
    SkillHierarchy,
    assign_motion_cluster,
    motion_code_distance,
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
    m = SkillConditionedMoE(16, 32, 8, num_experts=4, num_heads=2, balance_coef=1.0, routing="state")
    with torch.no_grad():
        m.router.weight.zero_()
    _, aux = m(torch.randn(1, 16, 16))
    assert aux["balance_loss"].item() == pytest.approx(1.0)
    xs = torch.randn(1, 16, 16).abs()
    with torch.no_grad():
        m.router.weight[0] = 50.0
    _, aux = m(xs)
    assert aux["topk_mask"][..., 0].all()
    assert aux["balance_loss"].item() == pytest.approx(E, rel=1e-3)
    skill = SkillConditionedMoE(16, 32, 8, num_experts=4, num_heads=2)
    with pytest.raises(ValueError):
        skill(x, s, torch.zeros(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="needs skill_emb"):
        skill(x)
    with pytest.raises(ValueError, match="routing"):
        SkillConditionedMoE(16, 32, 8, routing="both")


def _official_moe(x, e, mask, W, D, S, heads, k):
    """The official MoEFeedForward (VIPL-VSU/SkillNet gemma_moe_skill.py), transcribed equation by equation in
    float64 NumPy: query projection only when D != S, Q/K/V with bias, no output projection, bias-free router,
    tanh GELU (Flax's default), top-k mask x p, shared expert."""
    def dense(z, name):
        return z @ W[name + ".weight"].T + (W[name + ".bias"] if name + ".bias" in W else 0.0)

    def gelu_tanh(z):
        return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))

    def ffn(z, p):
        return (gelu_tanh(z @ W[p + ".g.weight"].T) * (z @ W[p + ".u.weight"].T)) @ W[p + ".o.weight"].T

    B, T, _ = x.shape
    L, hd = e.shape[1], S // heads
    q = dense(x, "query") if D != S else x
    Q = dense(q, "q").reshape(B, T, heads, hd).transpose(0, 2, 1, 3)
    K = dense(e, "k_proj").reshape(B, L, heads, hd).transpose(0, 2, 1, 3)
    V = dense(e, "v").reshape(B, L, heads, hd).transpose(0, 2, 1, 3)
    sc = np.where(mask[:, None, None, :], Q @ K.transpose(0, 1, 3, 2) / np.sqrt(hd), -1e9)
    a = np.exp(sc - sc.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    att = (a @ V).transpose(0, 2, 1, 3).reshape(B, T, S)
    lg = att @ W["router.weight"].T
    p = np.exp(lg - lg.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    top = np.argsort(p, -1)[..., -k:]
    tm = np.zeros_like(p)
    np.put_along_axis(tm, top, 1.0, -1)
    n_exp = W["router.weight"].shape[0]
    outs = np.stack([ffn(x, f"experts.{i}") for i in range(n_exp)], -2)
    return ffn(x, "shared") + ((tm * p)[..., None] * outs).sum(-2)


@pytest.mark.parametrize("D,S", [(16, 8), (8, 8)])
def test_moe_matches_the_official_layer_on_identical_weights(D, S):
    # issue 31: nn.MultiheadAttention's output projection acted as a router bias the official has not, exact vs
    # tanh GELU, and the query projection is skipped when D = S
    torch.manual_seed(1)
    m = SkillConditionedMoE(D, 24, S, num_experts=4, num_heads=2, top_k=2).double()
    assert (m.query is None) == (D == S)
    assert not any("out_proj" in n for n, _ in m.named_parameters())
    x, e = torch.randn(3, 5, D, dtype=torch.float64), torch.randn(3, 4, S, dtype=torch.float64) * 8
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    y, _ = m(x, e, mask)
    W = {n: p.detach().numpy() for n, p in m.named_parameters()}
    ref = _official_moe(x.numpy(), e.numpy(), mask.numpy(), W, D, S, 2, 2)
    assert np.abs(y.detach().numpy() - ref).max() < 1e-10
    exact = SkillConditionedMoE(D, 24, S, num_experts=4, num_heads=2, top_k=2, approximate="none").double()
    exact.load_state_dict(m.state_dict())
    assert np.abs(exact(x, e, mask)[0].detach().numpy() - ref).max() > 1e-6     # erf GELU is not the official


def test_skill_embedder_scales_by_sqrt_dim():
    from icml26.embodied.skillnet.moe import SkillEmbedder
    torch.manual_seed(0)
    emb = SkillEmbedder(10, 64)
    tok = torch.tensor([[1, 2, 3]])
    assert torch.allclose(emb(tok), emb.weight[tok] * 8.0)
    assert 0.005 < float(emb.weight.detach().std()) < 0.02                      # official init N(0, 0.01^2)


# the zero-skill-router control keeps SkillNet's layers by design: only the maps of its (zero) skill input get no gradient
_IDLE_BY_DESIGN = {"skillnet_blind": [f"ffns.{i}.{w}.weight" for i in range(2) for w in ("k_proj", "v")]}


def test_policies_hold_no_unused_parameters():
    # issue 31: state_moe kept unused query / attention / router weights, skillnet an unused state_router
    from icml26.embodied.skillnet.policy import ARMS, SkillNetPolicy
    for arm in ARMS:
        torch.manual_seed(0)
        pol = SkillNetPolicy(arm, 20, 30, chunk=4)
        a, bal, _ = pol(torch.randn(256, 20), torch.randint(30, (256, 4)))
        (a.square().sum() + bal).backward()
        # experts may be unselected on one batch; every other parameter must receive a gradient
        idle = [n for n, p in pol.named_parameters() if (p.grad is None or not p.grad.abs().sum()) and ".experts." not in n]
        assert idle == _IDLE_BY_DESIGN.get(arm, []), (arm, idle)


def test_few_shot_mix_is_a_random_sample_of_every_composition():
    # issue 31: mix = d[:len(shots) * 4] took 1,360 rows from 2 of 14 compositions at standard size
    from icml26.embodied.skillnet.reproduce import HELD_OUT, few_shot_mix, hierarchy, make_dataset
    from icml26.embodied.skillnet.tabletop import OBJECTS as OBJ
    from icml26.embodied.skillnet.tabletop import VERBS as VB
    h = hierarchy()
    pairs = [(v, o) for v in VB for o in OBJ if (v, o) not in HELD_OUT]
    rng = np.random.default_rng(0)
    data, shots = make_dataset(h, pairs, 60, rng), make_dataset(h, HELD_OUT, 5, rng)
    mix = few_shot_mix(data, shots, seed=0)
    n_rows = len(shots[0]) * 4
    assert len(mix[0]) == n_rows + len(shots[0])
    comps = {tuple(t) for t in mix[1][:n_rows].tolist()}
    assert len(comps) >= 12                                          # nearly all 14 training compositions
    assert torch.equal(few_shot_mix(data, shots, seed=0)[0], mix[0])


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


def _tiny_sizes(monkeypatch, arms=("skillnet", "state_moe", "dense", "dense_verb"), verb_mse_steps=0):
    from icml26.embodied.skillnet import reproduce as R
    from icml26.harness import Budget
    tiny = R.Sizes(4, 20, 2, 5, 4, tuple(arms), 2, 10, 2, verb_mse_steps)
    monkeypatch.setitem(R.SIZES, Budget.QUICK, tiny)
    return R


def test_reproduction_structure(monkeypatch):
    # tiny sizes (the quick budget itself trains 4 arms x 1000 steps): structure, best peer on validation episodes,
    # the degenerate-testbed gate
    R = _tiny_sizes(monkeypatch)
    from icml26.harness import Budget
    out = R.reproduce(Budget.QUICK, 0)
    assert {c.kind for c in out.claims} == {"claim", "check"}
    for c in out.claims:
        assert c.verdict in ("holds", "does not hold", "inconclusive")
    assert len(out.tables["arms"]) == 4
    peers = ("state_moe", "dense", "dense_verb")
    for key in ("zero_shot", "few_shot"):            # the best peer is chosen on validation episodes
        c = next(c for c in out.claims if c.statement.startswith(key.replace("_", "-")))
        best = max(peers, key=lambda a: out.metrics[f"val_{key}_{a}"])
        assert "validation" in c.baseline and R.NAMES[best] in c.baseline
        # review: a policy that cannot act in-domain (20 BC steps) leaves the held-out comparison undecided
        weak = min(out.metrics["in_domain_skillnet"], out.metrics[f"in_domain_{best}"]) < R.MIN_IN_DOMAIN
        assert weak and c.verdict == "inconclusive" and math.isnan(c.measured) and "Not decided" in c.note
    pre = next(c for c in out.claims if c.statement.startswith("every compared policy learns"))
    assert pre.kind == "check" and pre.verdict == "does not hold"
    # review: the in-domain "state of the art" claim is measured and claimed, against the best peer
    ind = next(c for c in out.claims if c.statement.startswith("in-domain success"))
    assert ind.kind == "claim" and ind.paired and "validation" in ind.baseline
    # review: the routing claim is compared with the untrained router as well as the critical value
    rho = next(c for c in out.claims if "correlates" in c.statement)
    assert set(rho.baselines) == {"one-sided 5% critical value of rho", "the same SkillNet before training"}
    assert "spearman_untrained_skillnet" in out.metrics


def test_reproduction_held_out_verb_claims(monkeypatch):
    # issue 31: the held-out-verb experiment, every arm with the flow head (and the MSE head where the budget asks),
    # against the strongest peer, with the zero-skill-router control, and the routing claim on the held-out verbs;
    # tiny sizes cannot act, so neither is decided
    R = _tiny_sizes(monkeypatch, verb_mse_steps=5)
    from icml26.harness import Budget
    out = R.reproduce(Budget.QUICK, 0)
    verb = [c for c in out.claims if c.statement.startswith("zero-shot success on held-out verbs whose")]
    assert len(verb) == 2 and {("flow" in c.statement) for c in verb} == {True, False}
    for c in verb:
        assert c.kind == "claim" and set(c.baselines) == {f"{R.NAMES[a]} + 0.160" for a in R.PEERS}
        assert "skill input set to zero" in c.control_arm and c.paper == "+16.0% zero-shot"
        assert c.verdict == "inconclusive" and math.isnan(c.measured) and "Not decided" in c.note
    routing = [c for c in out.claims if c.statement.startswith("held-out verbs are routed like their own motion group")]
    assert len(routing) == 2 and {("flow" in c.statement) for c in routing} == {True, False}
    for c in routing:
        assert set(c.baselines) == {"0 (routing unrelated to the motion group)", "the same SkillNet before training",
                                    "the state-routed MoE peer (trained the same way, same tokens)"}
        assert "skill input set to zero" in c.control_arm and c.control == 0.0      # a blind router routes verbs alike
        assert c.verdict == "inconclusive" and math.isnan(c.measured) and "Not decided" in c.note
    assert "skillnet_crossed" not in R.VERB_ARMS and "skillnet_crossed" not in R.NAMES
    head_rows = {r["head"] for r in out.tables["held_out_verbs"]}
    assert head_rows == {"flow", "mse"} and len(out.tables["held_out_verbs"]) == 2 * len(R.VERB_ARMS)
    for head in ("flow", "mse"):
        counts = [out.metrics[f"verb_{head}_params_{a}"] for a in R.VERB_ARMS]
        assert max(counts) / min(counts) <= 1.02
        pre = next(c for c in out.claims if c.statement.startswith(f"every held-out-verb arm ({R.HEAD_NAMES[head]})"))
        assert pre.kind == "check" and pre.verdict == "does not hold"
    assert out.metrics["verb_flow_params_skillnet"] > out.metrics["verb_mse_params_skillnet"]
    assert out.metrics["verb_expert_success_held_out"] == 1.0


def test_held_out_verb_claim_decides_against_the_strongest_peer_and_the_control(monkeypatch):
    # the claim's logic on fixed success vectors: the strongest peer is the reference, the control must fail
    R = _tiny_sizes(monkeypatch)
    n = len(R.verb_split(R.SYNONYM_VERBS, R.HELD_OUT_VERBS)[1]) * 2
    ok, bad = np.ones(n), np.zeros(n)
    half = np.r_[np.ones(n // 2), np.zeros(n - n // 2)]

    def fake(zs, control, in_domain=1.0):
        def evaluate(pol, hh, pairs, k, seed, table=None):
            if len(pairs) != n // 2:                       # the training compositions: in-domain
                return np.full(len(pairs) * k, in_domain), None, np.zeros(len(pairs) * k, bool)
            v = control if pol.arm == "skillnet_blind" else zs[pol.arm]
            return v.copy(), None, np.zeros(len(v), bool)
        return evaluate

    sz = R.SIZES[R.Budget.QUICK]
    monkeypatch.setattr(R, "evaluate", fake({"skillnet": ok, "state_moe": bad, "dense": half, "dense_verb": bad}, bad))
    c = R.held_out_verb_experiment(sz, 0)[1][1]
    assert c.strongest_baseline == f"{R.NAMES['dense']} + 0.160" and c.verdict == "holds"
    monkeypatch.setattr(R, "evaluate", fake({"skillnet": ok, "state_moe": bad, "dense": half, "dense_verb": bad}, ok))
    c = R.held_out_verb_experiment(sz, 0)[1][1]
    assert c.verdict == "inconclusive" and "control passes too" in c.reason
    monkeypatch.setattr(R, "evaluate", fake({"skillnet": half, "state_moe": bad, "dense": ok, "dense_verb": bad}, bad))
    assert R.held_out_verb_experiment(sz, 0)[1][1].verdict == "does not hold"
    monkeypatch.setattr(R, "evaluate", fake({"skillnet": ok, "state_moe": bad, "dense": bad, "dense_verb": bad}, bad,
                                            in_domain=0.3))
    c = R.held_out_verb_experiment(sz, 0)[1][1]
    assert c.verdict == "inconclusive" and math.isnan(c.measured)


def test_arms_do_not_depend_on_the_run_order(monkeypatch):
    # review: one shared batch generator gave each arm a data order that depended on where it ran
    from icml26.harness import Budget
    R = _tiny_sizes(monkeypatch, ("skillnet", "dense"))
    a = R.reproduce(Budget.QUICK, 1).metrics
    R = _tiny_sizes(monkeypatch, ("dense", "skillnet"))
    b = R.reproduce(Budget.QUICK, 1).metrics
    for key in ("bc_final_loss_dense", "bc_final_loss_skillnet", "zero_shot_dense", "in_domain_dense"):
        assert a[key] == b[key], key


def test_quick_budget_is_not_degenerate():
    # review: at 20 demos x 150 steps every arm scored 0 in-domain; the quick budget now trains long enough to act
    from icml26.embodied.skillnet.reproduce import CORE_ARMS, SIZES
    from icml26.harness import Budget
    q = SIZES[Budget.QUICK]
    assert q.steps >= 1000 and q.demos >= 30 and set(CORE_ARMS) <= set(q.arms)


# --- flow-matching head, synonym verb table, held-out-verb split (issue 31) ----------------------------------------

def test_flow_head_parameter_parity_and_no_unused_parameters():
    from icml26.embodied.skillnet.policy import ARMS, SkillNetPolicy, _n_params
    counts = {}
    for arm in ARMS:
        torch.manual_seed(0)
        pol = SkillNetPolicy(arm, 20, 30, chunk=4, head="flow")
        counts[arm] = _n_params(pol)
        loss, bal, _ = pol.loss(torch.randn(256, 20), torch.randint(30, (256, 4)), torch.randn(256, 4, 3),
                                generator=torch.Generator().manual_seed(0))
        (loss + bal).backward()
        idle = [n for n, p in pol.named_parameters() if (p.grad is None or not p.grad.abs().sum()) and ".experts." not in n]
        assert idle == _IDLE_BY_DESIGN.get(arm, []), (arm, idle)
        a, _, _ = pol(torch.randn(5, 20), torch.randint(30, (5, 4)))
        assert a.shape == (5, 4, 3) and torch.isfinite(a).all()
    assert max(counts.values()) / min(counts.values()) < 1.02
    mse = SkillNetPolicy("skillnet", 20, 30, chunk=4)
    # every arm carries the same head, so the difference to the MSE head is the same for every arm
    assert counts["skillnet"] - _n_params(mse) == _n_params(SkillNetPolicy("dense", 20, 30, chunk=4, head="flow")) - \
        _n_params(SkillNetPolicy("dense", 20, 30, chunk=4))
    with pytest.raises(ValueError, match="unknown head"):
        SkillNetPolicy("skillnet", 20, 30, head="diffusion")


def test_flow_training_reduces_the_flow_loss():
    from icml26.embodied.skillnet.policy import SkillNetPolicy, train_bc
    torch.manual_seed(0)
    pol = SkillNetPolicy("skillnet", 20, 30, chunk=2, head="flow")
    obs, tok = torch.randn(128, 20), torch.randint(30, (128, 4))
    act = torch.tanh(obs[:, :6]).view(128, 2, 3)

    def held_loss():         # the same noise and times before and after training
        with torch.no_grad():
            return float(pol.loss(obs, tok, act, generator=torch.Generator().manual_seed(5))[0])
    before = held_loss()
    train_bc(pol, obs, tok, act, steps=150, generator=torch.Generator().manual_seed(0))
    assert held_loss() < 0.5 * before


def test_flow_sampler_is_deterministic_given_the_noise():
    from icml26.embodied.skillnet.policy import SkillNetPolicy
    torch.manual_seed(0)
    pol = SkillNetPolicy("state_moe", 20, 30, chunk=4, head="flow")
    obs, tok = torch.randn(6, 20), torch.randint(30, (6, 4))
    noise = torch.randn(6, 12, generator=torch.Generator().manual_seed(3))
    a1, a2 = pol(obs, tok, noise=noise)[0], pol(obs, tok, noise=noise.clone())[0]
    assert torch.equal(a1, a2)
    assert torch.equal(pol(obs, tok, generator=torch.Generator().manual_seed(3))[0], a1)   # generator = its noise
    assert not torch.allclose(pol(obs, tok, generator=torch.Generator().manual_seed(4))[0], a1)
    assert torch.equal(pol(obs, tok)[0], pol(obs, tok)[0])                                  # default: seeded 0
    with pytest.raises(ValueError, match="noise"):
        pol(obs, tok, noise=torch.randn(6, 5))
    with pytest.raises(TypeError, match="generator"):
        pol(obs, tok, generator=3)


def test_flow_conventions_match_pi0():
    # training: x_t = t eps + (1 - t) a, target eps - a, t = 0.001 + 0.999 Beta(1.5, 1); sampling: Euler from t = 1 to 0.
    # With the exact velocity of a point mass at a, v(x, t) = (x - a) / t, the training loss is 0 and the 10-step Euler
    # sampler returns a from any noise (x stays on the straight line a + t (eps - a)).
    from icml26.embodied.skillnet.policy import SkillNetPolicy
    torch.manual_seed(0)
    pol = SkillNetPolicy("dense", 20, 30, chunk=2, head="flow")
    obs, tok = torch.randn(4000, 20), torch.randint(30, (4000, 4))
    target = torch.linspace(-1, 1, 6).repeat(4000, 1)
    seen = []

    def exact(z, x, t):
        seen.append(t)
        return (x - target[:len(x)]) / t[:, None]
    pol.head.forward = exact
    loss = pol.loss(obs, tok, target.view(-1, 2, 3), generator=torch.Generator().manual_seed(0))[0]
    assert float(loss) < 1e-9
    t = seen[0]
    assert 0.001 <= float(t.min()) and float(t.max()) <= 1.0
    assert float(t.mean()) == pytest.approx(0.001 + 0.999 * 0.6, abs=0.02)               # Beta(1.5, 1) mean 0.6
    assert float((t < 0.5).float().mean()) == pytest.approx(0.5 ** 1.5, abs=0.03)         # CDF t^1.5
    a = pol(obs[:7], tok[:7], noise=torch.randn(7, 6) * 3)[0]
    assert torch.allclose(a.reshape(7, 6), target[:7], atol=1e-5)
    assert len(seen) == 1 + pol.flow_steps and float(seen[1][0]) == 1.0


def test_synonym_verbs_share_motion_within_a_group_and_differ_across_groups():
    from icml26.embodied.skillnet.reproduce import hierarchy, verb_groups
    from icml26.embodied.skillnet.tabletop import SYNONYM_VERBS
    groups = verb_groups(SYNONYM_VERBS)
    assert len(groups) == 4 and all(len(v) == 3 for v in groups.values())
    offsets = {tuple(SYNONYM_VERBS[v][0]) for v in SYNONYM_VERBS}
    assert len(offsets) == 4
    for verbs in groups.values():
        assert len({tuple(SYNONYM_VERBS[v][0]) for v in verbs}) == 1
    h = hierarchy(SYNONYM_VERBS)
    assert len({h.cluster(v) for v in SYNONYM_VERBS}) == 4          # 4 distinct motion clusters
    verbs = list(SYNONYM_VERBS)
    objs = np.arange(len(verbs)) % len(OBJECTS)
    _, _, ok = rollout_expert(verbs * 3, np.r_[objs, (objs + 1) % 3, (objs + 2) % 3], 20, np.random.default_rng(0),
                              SYNONYM_VERBS)
    assert ok.all()
    env = TableTop(verb_table=SYNONYM_VERBS)
    env.reset(["nudge", "skid"], np.array([0, 1]), np.random.default_rng(0))
    assert np.allclose(env.goal - env.start[[0, 1], [0, 1]], [SYNONYM_VERBS["nudge"][0], SYNONYM_VERBS["skid"][0]])
    with pytest.raises(ValueError, match="unknown verbs"):
        TableTop().reset(["nudge"], np.zeros(1, int), np.random.default_rng(0))      # not in the default table


@pytest.mark.parametrize("table, error, fragment", [
    ([("push", ((0.3, 0, 0), "100200", "push-12"))], TypeError, "non-empty dict"),
    ({}, TypeError, "non-empty dict"),
    ({"push": ((0.3, 0.0), "100200", "push-12")}, ValueError, "verb_table['push']"),
    ({"push": ((0.3, 0.0, float("nan")), "100200", "push-12")}, ValueError, "3 finite numbers"),
    ({"push": (("a", "b", "c"), "100200", "push-12")}, ValueError, "3 finite numbers"),
    ({"push": ((0.3, 0.0, 0.0), "100200")}, ValueError, "motion code, VerbNet class"),
    ({3: ((0.3, 0.0, 0.0), "100200", "push-12")}, ValueError, "verb_table[3]"),
])
def test_verb_table_validation(table, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        TableTop(verb_table=table)
    with pytest.raises(error, match=re.escape(fragment)):
        rollout_expert(["push"], np.zeros(1, int), 5, np.random.default_rng(0), table)


def test_held_out_verb_split_holds_out_a_verb_of_every_group():
    from icml26.embodied.skillnet.reproduce import HELD_OUT_VERBS, hierarchy, make_dataset, verb_groups, verb_split
    from icml26.embodied.skillnet.tabletop import SYNONYM_VERBS
    train, test = verb_split(SYNONYM_VERBS, HELD_OUT_VERBS)
    trained = {v for v, _ in train}
    for verbs in verb_groups(SYNONYM_VERBS).values():
        assert any(v not in trained for v in verbs)                 # >= 1 verb per group never seen in training
        assert any(v in trained for v in verbs)                     # its cluster and class tokens are trained
    assert {v for v, _ in test} == set(HELD_OUT_VERBS) and not trained & set(HELD_OUT_VERBS)
    assert len(test) == len(HELD_OUT_VERBS) * len(OBJECTS) and len(train) == 8 * len(OBJECTS)
    h = hierarchy(SYNONYM_VERBS)
    _, tok, _ = make_dataset(h, train, 2, np.random.default_rng(0), SYNONYM_VERBS)
    unseen = {h.tokens(v)[2] for v in HELD_OUT_VERBS}
    assert not unseen & set(tok[:, 2].tolist())                     # no training row carries a held-out verb token
    assert {h.tokens(v)[0] for v in HELD_OUT_VERBS} <= set(tok[:, 0].tolist())
    with pytest.raises(ValueError, match="every verb of the group"):
        verb_split(SYNONYM_VERBS, ("push", "shove", "nudge"))
    with pytest.raises(ValueError, match="not in the verb table"):
        verb_split(SYNONYM_VERBS, ("fly",))


def _routing_fixture(seed=0):
    # synthetic top-1 routing distributions (12 verbs x 2 layers x 4 experts) for the held-out-verb routing claim
    from icml26.embodied.skillnet.reproduce import HELD_OUT_VERBS, verb_groups
    from icml26.embodied.skillnet.tabletop import SYNONYM_VERBS
    verbs, groups = list(SYNONYM_VERBS), list(verb_groups(SYNONYM_VERBS).values())
    rng = np.random.default_rng(seed)
    group_of = {v: k for k, g in enumerate(groups) for v in g}
    grouped = np.stack([[0.6 * np.eye(4)[group_of[v]] + 0.4 * rng.dirichlet(np.ones(4)) for _ in range(2)]
                        for v in verbs])                          # each group mostly on its own expert
    equal = np.full((len(verbs), 2, 4), 0.25)                      # every verb routed alike
    return verbs, groups, HELD_OUT_VERBS, grouped, equal


def test_routing_margins_grouped_equal_and_ties():
    from icml26.embodied.skillnet.reproduce import routing_margins
    verbs, groups, held, grouped, equal = _routing_fixture()
    mg, ok = routing_margins(grouped, verbs, groups, held)
    assert mg.shape == ok.shape == (4, 2) and (mg > 0).all() and ok.all()
    mg, ok = routing_margins(equal, verbs, groups, held)
    assert (mg == 0).all() and not ok.any()                         # ties count as wrong
    # a held-out verb routed exactly like another group: negative margin, wrong group
    swapped = grouped.copy()
    i, j = verbs.index(held[0]), verbs.index(groups[1][0])
    swapped[i] = grouped[[verbs.index(v) for v in groups[1] if v not in held]].mean(0)
    mg, ok = routing_margins(swapped, verbs, groups, held)
    assert (mg[0] < 0).all() and not ok[0].any() and ok[1:].all() and j != i
    # by hand: one layer, group means one-hot, q halfway between own and another group's expert
    d = np.zeros((len(verbs), 1, 4))
    for k, g in enumerate(groups):
        d[[verbs.index(v) for v in g], 0, k] = 1.0
    d[verbs.index(held[0]), 0] = [0.75, 0.25, 0, 0]
    mg, _ = routing_margins(d, verbs, groups, held)
    assert mg[0, 0] == pytest.approx(0.75 - 0.25)                   # TV to group 1 is 0.75, to its own 0.25


def test_routing_claim_holds_for_grouped_routing_and_fails_for_a_blind_router():
    from icml26.embodied.skillnet.reproduce import routing_claim
    verbs, groups, held, grouped, equal = _routing_fixture()
    c = routing_claim(grouped, equal, equal, verbs, groups, held, "test")
    assert c.verdict == "holds" and c.control == 0.0 and c.control_verdict == "does not hold"
    assert c.strongest_baseline.startswith("0 (") and len(c.paired) == 8
    # equal gates (a router that does not tell verbs apart): never holds
    assert routing_claim(equal, equal, equal, verbs, groups, held, "test").holds is not True
    # anti-grouped: every held-out verb routed like the next group -> does not hold
    anti = grouped.copy()
    for k, g in enumerate(groups):
        mates = [verbs.index(v) for v in groups[(k + 1) % 4] if v not in held]
        anti[verbs.index(next(v for v in g if v in held))] = grouped[mates].mean(0)
    assert routing_claim(anti, equal, equal, verbs, groups, held, "test").verdict == "does not hold"
    # the untrained router already grouped as strongly: the reference is the untrained one, not chance
    c = routing_claim(grouped, grouped, equal, verbs, groups, held, "test")
    assert c.strongest_baseline == "the same SkillNet before training" and c.holds is not True
    # a control that groups too makes the claim inconclusive
    c = routing_claim(grouped, equal, grouped, verbs, groups, held, "test")
    assert c.verdict == "inconclusive" and "control passes too" in c.reason
    # third review: a trained peer that groups the held-out verbs as strongly is the reference, and blocks the claim
    c = routing_claim(grouped, equal, equal, verbs, groups, held, "test", dist_peer=grouped)
    assert c.strongest_baseline.startswith("the state-routed MoE peer") and c.holds is not True
    c = routing_claim(grouped, equal, equal, verbs, groups, held, "test", dist_peer=equal)
    assert c.verdict == "holds" and "State-routed MoE peer: mean margin +0.000" in c.note
    # not decided when SkillNet cannot act
    c = routing_claim(grouped, equal, equal, verbs, groups, held, "test", weak=True)
    assert c.verdict == "inconclusive" and math.isnan(c.measured) and "Not decided" in c.note


def test_blind_router_routes_every_verb_alike():
    from icml26.embodied.skillnet.policy import SkillNetPolicy
    from icml26.embodied.skillnet.reproduce import (
        HELD_OUT_VERBS,
        hierarchy,
        routing_margins,
        routing_states,
        top1_routing,
        verb_groups,
    )
    from icml26.embodied.skillnet.tabletop import SYNONYM_VERBS, obs_dim
    h, verbs = hierarchy(SYNONYM_VERBS), list(SYNONYM_VERBS)
    groups = list(verb_groups(SYNONYM_VERBS).values())
    obs, objs = routing_states(SYNONYM_VERBS, 1, 0)
    assert obs.shape == (12 * 3 * 20, obs_dim()) and objs.shape == (len(obs),)
    for arm in ("skillnet_blind", "skillnet"):
        torch.manual_seed(0)
        pol = SkillNetPolicy(arm, obs_dim(), h.n_tokens + 3, chunk=4)
        d = top1_routing(pol, h, obs, objs, verbs)
        assert d.shape == (12, 2, 4) and np.allclose(d.sum(-1), 1.0)
        mg, ok = routing_margins(d, verbs, groups, HELD_OUT_VERBS)
        if arm == "skillnet_blind":
            assert (d == d[:1]).all() and (mg == 0).all() and not ok.any()
    with pytest.raises(ValueError, match="MoE policy"):
        top1_routing(SkillNetPolicy("dense", obs_dim(), h.n_tokens + 3, chunk=4), h, obs, objs, verbs)


# argument checks on every public entry point (issue "Reliability"): each case would have returned a number or
# raised a low-level error without the check

from icml26.embodied.skillnet import (  # noqa: E402
    Skill,
    SkillNetPolicy,
    similarity_loss,
    train_bc,
    validate_motion_code,
)
from icml26.embodied.skillnet.moe import GatedFFN  # noqa: E402

_H = SkillHierarchy({"push": ("100200", "push-12"), "put": ("200200", "put-9.1")})
_MOE = SkillConditionedMoE(16, 32, 8, num_experts=4, num_heads=2)
_POL = SkillNetPolicy("skillnet", 20, 30, chunk=2)
_OBS, _TOK, _ACT = torch.randn(8, 20), torch.randint(30, (8, 4)), torch.randn(8, 2, 3)
_RNG = np.random.default_rng(0)


def _fresh_env_step(**kwargs):
    return TableTop().step(**kwargs)


def _forward(module, **kwargs):
    return module(**kwargs)


BAD_INPUTS = [
    (validate_motion_code, dict(code=200200), TypeError, "6-character string"),
    (motion_code_distance, dict(a="200200", b="100200", weights=("a",) * 6), TypeError, "weights must be a real"),
    (assign_motion_cluster, dict(code="200200", centers=()), ValueError, "centers is empty"),
    (assign_motion_cluster, dict(code="200200", centers="200200"), TypeError, "sequence of motion codes"),
    (Skill, dict(verb="push", motion_code="9", verbnet_class="push-12"), ValueError, "invalid motion code"),
    (SkillHierarchy, dict(skills={"push": "100200"}), TypeError, "pair (motion_code, verbnet_class)"),
    (SkillHierarchy, dict(skills=[("push", ("100200", "push-12"))]), TypeError, "must be a dict"),
    (_H.similarity, dict(verbs=[]), ValueError, "verbs is empty"),
    (GatedFFN, dict(dim=0, hidden=4), ValueError, "dim must be an integer >= 1"),
    (GatedFFN, dict(dim=4.5, hidden=4), TypeError, "dim must be an integer"),
    (SkillConditionedMoE, dict(dim=16, hidden=32, skill_dim=8, balance_coef=-1.0), ValueError, "balance_coef"),
    (SkillConditionedMoE, dict(dim=16, hidden=32, skill_dim=8, num_heads=0), ValueError, "num_heads must be"),
    (_forward, dict(module=_MOE, x=torch.full((2, 5, 16), float("nan")), skill_emb=torch.randn(2, 3, 8)), ValueError,
     "NaN"),
    (_forward, dict(module=_MOE, x=torch.randn(2, 5, 12), skill_emb=torch.randn(2, 3, 8)), ValueError,
     "x must be (B, T, D=16)"),
    (routing_similarity, dict(gates=torch.ones(4, 3) / 3, skill_ids=torch.tensor([0, 1, 2, 5]), n_skills=3), ValueError,
     "indices in [0, 3)"),
    (routing_similarity, dict(gates=torch.full((4, 3), float("nan")), skill_ids=torch.tensor([0, 1, 2, 0]), n_skills=3),
     ValueError, "NaN"),
    (routing_similarity, dict(gates=torch.ones(4, 3) / 3, skill_ids=torch.tensor([0.0, 1.0, 2.0, 0.0]), n_skills=3),
     TypeError, "must hold integers"),
    (SkillNetPolicy, dict(arm="skillnet", obs_dim=0, n_tokens=30), ValueError, "obs_dim must be"),
    (SkillNetPolicy, dict(arm="skillnet", obs_dim=20, n_tokens=0), ValueError, "n_tokens must be"),
    (_forward, dict(module=_POL, obs=_OBS, tokens=torch.full((8, 4), 31)), ValueError, "indices in [0, 30)"),
    (_forward, dict(module=_POL, obs=torch.full((8, 20), float("nan")), tokens=_TOK), ValueError, "NaN"),
    (_forward, dict(module=_POL, obs=_OBS, tokens=_TOK[:, :2]), ValueError, "L >= 3"),
    (similarity_loss, dict(probs=torch.ones(4, 3) / 3, skill_ids=torch.tensor([0, 1, 0, 1]), similarity=torch.ones(2, 3)),
     ValueError, "square"),
    (train_bc, dict(policy=_POL, obs=_OBS, tokens=_TOK, actions=_ACT, steps=2.5), TypeError, "steps must be an integer"),
    (train_bc, dict(policy=_POL, obs=_OBS, tokens=_TOK, actions=_ACT, steps=1, batch=True), TypeError, "batch"),
    (train_bc, dict(policy=_POL, obs=_OBS.clone().fill_(float("nan")), tokens=_TOK, actions=_ACT, steps=1), ValueError,
     "NaN"),
    (train_bc, dict(policy=_POL, obs=_OBS, tokens=_TOK, actions=_ACT, steps=1, sim_coef=1.0,
                    skill_ids=torch.full((8,), 5), similarity=torch.eye(2)), ValueError, "skill_ids must hold indices"),
    (train_bc, dict(policy=torch.nn.Linear(20, 6), obs=_OBS, tokens=_TOK, actions=_ACT, steps=1), TypeError,
     "SkillNetPolicy"),
    (TableTop().reset, dict(verbs=["push"], objects=np.zeros(1, int), rng=0), TypeError, "numpy Generator"),
    (_fresh_env_step, dict(action=np.zeros((1, 3))), ValueError, "call .reset"),
    (TableTop, dict(n_objects=5), ValueError, "n_objects must be in 1..4"),
    (rollout_expert, dict(verbs=["push"], objects=np.zeros(1, int), horizon=0, rng=_RNG), ValueError,
     "horizon must be an integer >= 1"),
]


@pytest.mark.parametrize("fn, kwargs, error, fragment", BAD_INPUTS,
                         ids=[f"{i}-{getattr(c[0], '__name__', type(c[0]).__name__)}" for i, c in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise(fn, kwargs, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        fn(**kwargs)


def test_blind_router_control_zeroes_only_the_router_skill_input():
    """[B05] the held-out-verb control: same layers and parameters as SkillNet, the router gets a zero skill input,
    so its routing cannot depend on the skill tokens (the trunk still sees them)."""
    torch.manual_seed(0)
    a = SkillNetPolicy("skillnet", 10, 12)
    torch.manual_seed(0)
    b = SkillNetPolicy("skillnet_blind", 10, 12)
    assert sum(p.numel() for p in a.parameters()) == sum(p.numel() for p in b.parameters())
    b.load_state_dict(a.state_dict())
    obs = torch.randn(6, 10)
    tok1, tok2 = torch.randint(0, 12, (6, 4)), torch.randint(0, 12, (6, 4))
    tok2[:, 3] = tok1[:, 3]                                     # same object token; skill tokens differ
    _, _, pa = a.features(obs, tok1)
    _, _, pb1 = b.features(obs, tok1)
    assert not torch.allclose(pa[0], pb1[0])                    # the skill input moves SkillNet's router
    # blind: the first layer's routing depends on the state and the trunk conditioning only, never on the skill input
    b2 = SkillNetPolicy("skillnet_blind", 10, 12)
    b2.load_state_dict(b.state_dict())
    b2.cond.weight.data.zero_()
    b2.cond.bias.data.zero_()
    assert torch.allclose(b2.features(obs, tok1)[2][0], b2.features(obs, tok2)[2][0])
