"""[A19] Geometric early exit: geometry, exit rules, wrapper (Llama + GPT-2), calibration, reproduction."""

import functools
import math
import re

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers.modeling_outputs import CausalLMOutputWithPast

from icml26.harness import Budget, Outcome
from icml26.lm.early_exit import (
    ConfidenceExitCriterion,
    EntropyExitCriterion,
    ExitCriterion,
    ExitState,
    GeometricEarlyExitLM,
    GeometricExitCriterion,
    GPT2Adapter,
    LlamaAdapter,
    StaticExit,
    calibrate_exit,
    calibrate_on_trajectory,
    collect_trajectory,
    default_grid,
    evaluate_exit,
    first_exit,
    get_adapter,
    oracle_exit_layers,
    residual_stream,
    trajectory_geometry,
    two_phase_profile,
)
from icml26.lm.early_exit.adapters import new_cache

V = 97


def _llama(seed=0, layers=4):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(cfg).eval()


def _gpt2(seed=0, layers=4):
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=V, n_embd=32, n_layer=layers, n_head=4, n_positions=128, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval()


MODELS = {"llama": _llama, "gpt2": _gpt2}


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model(request):
    return MODELS[request.param]()


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, V, (3, 12), generator=torch.Generator().manual_seed(1))


def _median_rule(traj, tau_cos=0.0):
    return GeometricExitCriterion(float(traj.step[1:].median()), tau_cos)


# geometry

def test_geometry_matches_numpy_recomputation():
    hs = torch.randn(6, 2, 5, 16, generator=torch.Generator().manual_seed(0))
    step, cos = trajectory_geometry(list(hs))
    x = hs.double().numpy()
    d = np.diff(x, axis=0)
    s_np = np.linalg.norm(d, axis=-1) / (np.linalg.norm(x[:-1], axis=-1) + 1e-6)
    c_np = (d[1:] * d[:-1]).sum(-1) / (np.linalg.norm(d[1:], axis=-1) * np.linalg.norm(d[:-1], axis=-1) + 1e-6)
    assert step.shape == cos.shape == (5, 2, 5)
    np.testing.assert_allclose(step.numpy(), s_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cos[1:].numpy(), c_np, rtol=1e-5, atol=1e-6)
    assert torch.isnan(cos[0]).all()


def test_geometry_invariances():
    hs = torch.randn(5, 7, 8, generator=torch.Generator().manual_seed(2))
    step, cos = trajectory_geometry(hs)
    s2, c2 = trajectory_geometry(hs * 3.0)                       # scale-invariant
    torch.testing.assert_close(s2, step, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(c2[1:], cos[1:], rtol=1e-4, atol=1e-5)
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(3)))
    s3, c3 = trajectory_geometry(hs @ q)                         # rotation-invariant
    torch.testing.assert_close(s3, step, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(c3[1:], cos[1:], rtol=1e-4, atol=1e-5)
    line = torch.arange(5.0)[:, None] * torch.ones(1, 8) + 1.0   # straight line at constant speed: c = 1
    _, c_line = trajectory_geometry(line)
    torch.testing.assert_close(c_line[1:], torch.ones(3), rtol=1e-5, atol=1e-5)


def test_residual_stream_is_raw_and_matches_hf(model, ids):
    hs, logits = residual_stream(model, ids)
    out = model(ids, output_hidden_states=True)
    ad = get_adapter(model)
    assert hs.shape == (ad.num_layers + 1, *ids.shape, 32)
    for a, b in zip(hs[:-1], out.hidden_states[:-1]):
        assert torch.equal(a, b)
    assert torch.equal(ad.final_norm(hs[-1]), out.hidden_states[-1])   # HF's last slot is the normed state
    assert torch.equal(logits, out.logits)
    assert torch.equal(ad.lens(hs[-1]), out.logits)


def test_two_phase_profile_finds_planted_transition():
    s = torch.tensor([1.0, 0.9, 0.01, 0.009, 0.008])[:, None].repeat(1, 50)
    c = torch.tensor([math.nan, -0.2, 0.1, 0.9, 0.95])[:, None].repeat(1, 50)
    prof = two_phase_profile(s, c)
    assert prof["transition_layer"] == 3
    assert prof["sharpness"] > 0.9
    torch.testing.assert_close(prof["median_step"], s[:, 0])
    # a planted transition that is not sharp: equal drops at every layer
    smooth = two_phase_profile(torch.tensor([1.0, 0.5, 0.25, 0.125, 0.0625])[:, None].repeat(1, 9), c[:, :9])
    assert smooth["sharpness"] < 0.5


def test_two_phase_profile_ignores_layer_one():
    # a huge s_1 (tiny embedding norm) must not become "the transition": statistics start at layer 2
    s = torch.tensor([50.0, 1.0, 0.9, 0.05, 0.045, 0.04])[:, None].repeat(1, 20)
    c = torch.tensor([math.nan, 0.0, 0.1, 0.6, 0.7, 0.8])[:, None].repeat(1, 20)
    prof = two_phase_profile(s, c)
    assert prof["transition_layer"] == 4 and prof["n_drops"] == 4
    assert two_phase_profile(s, c, first_layer=1)["transition_layer"] == 2
    # with only two drops left (L = 4), the larger always carries >= half: no sharpness statistic
    four = two_phase_profile(s[:4], c[:4])
    assert four["n_drops"] == 2 and math.isnan(four["sharpness"])


# exit rules

def test_first_exit_min_layer_and_patience():
    p = torch.tensor([[1, 0, 1, 1, 0, 1], [0, 1, 1, 1, 1, 0], [0, 0, 1, 0, 1, 0], [0, 1, 0, 1, 1, 1]]).T.bool()
    # rows: tokens; layers 1..6
    assert first_exit(p, min_layer=1, patience=1).tolist() == [1, 2, 3, 2]
    assert first_exit(p, min_layer=3, patience=1).tolist() == [3, 3, 3, 4]
    assert first_exit(p, min_layer=1, patience=2).tolist() == [4, 3, 6, 5]
    assert first_exit(p, min_layer=1, patience=3).tolist() == [6, 4, 6, 6]


def test_oracle_exit_layers():
    argmax = torch.tensor([[5, 1, 7, 2], [3, 1, 7, 2], [5, 2, 7, 2], [5, 2, 9, 2]])   # [L=4, tokens]
    # token 0: 5,3,5,5 -> layer 3; token 1: 1,1,2,2 -> 3; token 2: 7,7,7,9 -> 4; token 3: all 2 -> 1
    assert oracle_exit_layers(argmax).tolist() == [3, 3, 4, 1]


@pytest.mark.parametrize("rule", [GeometricExitCriterion(0.5, 0.0), GeometricExitCriterion(0.3, -1.0, patience=2),
                                  ConfidenceExitCriterion(0.012), EntropyExitCriterion(4.57), StaticExit(2)])
def test_streaming_equals_batched(rule, model, ids):
    traj = collect_trajectory(model, ids)
    ad = get_adapter(model)
    h = traj.hidden.flatten(1, 2)                                # [L+1, N, d]
    state = ExitState.start(h.shape[1], traj.num_layers)
    for layer in range(traj.num_layers):
        rule.update(state, h[layer], h[layer + 1], ad.lens)
    assert torch.equal(state.exit_layer, rule.exit_layers(traj).flatten())


def test_decide_equals_exit_layers(model, ids):
    traj = collect_trajectory(model, ids, with_lens=False)
    rule = _median_rule(traj)
    assert torch.equal(rule.decide(traj.step, traj.cos), rule.exit_layers(traj))
    assert (GeometricExitCriterion.disabled().decide(traj.step, traj.cos) == traj.num_layers).all()


# wrapper

def test_disabled_exit_reproduces_logits_exactly(model, ids):
    out = GeometricEarlyExitLM(model)(ids)
    assert torch.equal(out.logits, model(ids).logits)
    assert (out.exit_layers == 4).all() and out.flops_fraction == 1.0


def test_forward_decodes_each_token_at_its_exit_layer(model, ids):
    base = GeometricEarlyExitLM(model)(ids)
    ee = GeometricEarlyExitLM(model, _median_rule(base.trajectory))
    out = ee(ids)
    L = ee.num_layers
    assert (out.exit_layers < L).any() and (out.exit_layers >= 2).all()
    assert out.flops_fraction == float(out.exit_layers.double().mean() / L)
    ad = get_adapter(model)
    hs = base.trajectory.hidden
    for b, t in [(0, 0), (1, 5), (2, 11)]:
        expect = ad.lens(hs[out.exit_layers[b, t], b, t])
        torch.testing.assert_close(out.logits[b, t], expect, rtol=1e-5, atol=1e-5)


class _RowCounter:
    """Counts the token-rows that pass through a module (forward hooks)."""

    def __init__(self, modules):
        self.calls = self.rows = 0
        self.handles = [m.register_forward_hook(self._hook) for m in modules]

    def _hook(self, mod, inp, out):
        self.calls += 1
        self.rows += inp[0].shape[:-1].numel()

    def remove(self):
        for h in self.handles:
            h.remove()


def test_forward_applies_the_head_once_per_token(model, ids):
    base = GeometricEarlyExitLM(model)(ids)
    ee = GeometricEarlyExitLM(model, _median_rule(base.trajectory))
    head = _RowCounter([get_adapter(model).head])
    try:
        out = ee(ids)
    finally:
        head.remove()
    assert (out.exit_layers < ee.num_layers).any()
    assert head.calls == 1 and head.rows == ids.numel()


def test_batched_generation_skips_exited_rows_and_counts_what_ran(model, ids):
    traj = collect_trajectory(model, ids, with_lens=False)
    ee = GeometricEarlyExitLM(model, _median_rule(traj, tau_cos=-1.0))
    L, n = ee.num_layers, 6
    blocks = _RowCounter(get_adapter(model).blocks)
    try:
        gen = ee.generate(ids, max_new_tokens=n)
    finally:
        blocks.remove()
    dec = gen.exit_layers[:, 1:]
    assert len(set(dec.flatten().tolist())) > 1                  # rows of one step exit at different layers
    prefill = L * ids.numel()
    assert blocks.rows - prefill == gen.block_rows == int(dec.sum())      # exited rows never run a block
    assert gen.kv_rows == int((L - dec).sum())
    kv = get_adapter(model).kv_cost()
    e = gen.exit_layers.double()
    expect = float((e.sum() + kv * (L - e).sum()) / (L * e.numel()))
    assert gen.flops_fraction == pytest.approx(expect, rel=1e-12)
    # skipping rows changes nothing else: each row decodes as it would alone
    for b in range(ids.shape[0]):
        alone = ee.generate(ids[b:b + 1], max_new_tokens=n)
        assert torch.equal(alone.sequences[0], gen.sequences[b])
        assert torch.equal(alone.exit_layers[0], gen.exit_layers[b])


def test_disabled_generation_equals_hf_greedy(model, ids):
    gen = GeometricEarlyExitLM(model).generate(ids, max_new_tokens=6)
    hf = model.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert torch.equal(gen.sequences, hf)
    assert (gen.exit_layers == 4).all() and gen.flops_fraction == 1.0


def test_generation_exits_early_and_first_decode_step_matches_forward(model, ids):
    traj = collect_trajectory(model, ids, with_lens=False)
    rule = _median_rule(traj, tau_cos=-1.0)
    ee = GeometricEarlyExitLM(model, rule)
    gen = ee.generate(ids, max_new_tokens=6)
    assert gen.sequences.shape == (3, 18) and gen.exit_layers.shape == (3, 6)
    assert (gen.exit_layers[:, 0] == 4).all()                    # first token comes from the full-depth prefill
    assert (gen.exit_layers[:, 1:] < 4).any() and gen.flops_fraction < 1.0
    # the first decoded token sees a full-depth cache: its exit equals the batched decision at that position
    fwd = ee(gen.sequences[:, :13])
    assert torch.equal(gen.exit_layers[:, 1], fwd.exit_layers[:, -1])
    assert torch.equal(gen.sequences[:, 13], fwd.logits[:, -1].argmax(-1))


def test_kv_propagation_equals_running_the_block(model):
    ad = get_adapter(model)
    h = torch.randn(2, 1, 32, generator=torch.Generator().manual_seed(4))
    pos = torch.full((2, 1), 0, dtype=torch.long)
    ctx = ad.decode_context(h, pos)
    c_run, c_fill = new_cache(model), new_cache(model)
    for i in range(ad.num_layers):
        ad.run_block(i, h, pos, c_run, ctx)
        ad.fill_kv(i, h, pos, c_fill, ctx)
    for i in range(ad.num_layers):
        torch.testing.assert_close(c_fill.layers[i].keys, c_run.layers[i].keys, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c_fill.layers[i].values, c_run.layers[i].values, rtol=1e-5, atol=1e-6)
    assert 0 < ad.kv_cost() < 0.5


# calibration

def test_calibration_meets_its_target(ids):
    m = _llama(seed=3)
    x = torch.randint(0, V, (4, 24), generator=torch.Generator().manual_seed(5))
    traj = collect_trajectory(m, x)
    for cls in (GeometricExitCriterion, ConfidenceExitCriterion, EntropyExitCriterion, StaticExit):
        cal = calibrate_on_trajectory(traj, cls, target_agreement=0.9)
        assert cal.evaluation.agreement >= 0.9 and isinstance(cal.criterion, cls)
        assert cal.evaluation == evaluate_exit(traj, cal.criterion)
        best = max(r["flops_saved"] for r in cal.grid if r["agreement"] >= 0.9)
        assert cal.evaluation.flops_saved == best
    cal = calibrate_on_trajectory(traj, StaticExit, target_flops_saved=0.25)
    assert cal.evaluation.flops_saved >= 0.25
    assert cal.evaluation.agreement == max(r["agreement"] for r in cal.grid if r["flops_saved"] >= 0.25)
    assert len(repr(cal)) < 200 and "grid=<" in repr(cal)            # no wall of grid rows in a notebook
    assert repr(traj).startswith("Trajectory(layers=4, batch=4, seq=24")
    strict = calibrate_exit(m, x, target_agreement=1.0)
    assert strict.evaluation.agreement == 1.0
    assert calibrate_exit(m, x, target_agreement=0.9).criterion.__dict__ == \
        calibrate_exit(m, x, target_agreement=0.9).criterion.__dict__        # deterministic


def test_confidence_grids_match_the_geometric_grid_size():
    from icml26.lm.early_exit.calibrate import GRID_POINTS, default_grid

    x = torch.randint(0, V, (8, 64), generator=torch.Generator().manual_seed(2))
    traj = collect_trajectory(_llama(seed=4), x)
    sizes = {cls.__name__: len(default_grid(traj, cls))
             for cls in (GeometricExitCriterion, ConfidenceExitCriterion, EntropyExitCriterion)}
    # the same search budget for every family (distinct quantiles of a continuous statistic stay distinct)
    assert sizes == dict.fromkeys(sizes, GRID_POINTS + 1), sizes


def test_chunked_lens_equals_one_pass(monkeypatch):
    import icml26.lm.early_exit.geometry as geo

    m = _llama(seed=2)
    x = torch.randint(0, V, (5, 16), generator=torch.Generator().manual_seed(3))
    one = collect_trajectory(m, x)
    monkeypatch.setattr(geo, "_LENS_CHUNK", 2 * 16 * V)            # two rows per chunk, last chunk ragged
    for kw in ({}, {"with_logits": False}):
        two = collect_trajectory(m, x, **kw)
        assert torch.equal(one.layer_argmax, two.layer_argmax)
        torch.testing.assert_close(one.max_prob, two.max_prob, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(one.entropy, two.entropy, rtol=1e-5, atol=1e-6)


def test_evaluate_exit_accuracy_and_oracle(ids):
    m = _llama()
    traj = collect_trajectory(m, ids)
    orc = evaluate_exit(traj, oracle_exit_layers(traj.layer_argmax), targets=traj.layer_argmax[-1])
    assert orc.agreement == 1.0 and orc.accuracy == 1.0
    full = evaluate_exit(traj, StaticExit(4))
    assert full.agreement == 1.0 and full.flops_saved == 0.0 and math.isnan(full.accuracy)


# bad input

class _NoHidden(LlamaForCausalLM):
    def forward(self, input_ids=None, **kwargs):
        kwargs.pop("output_hidden_states", None)
        return CausalLMOutputWithPast(logits=super().forward(input_ids=input_ids, **kwargs).logits)


def test_bad_input_raises_clear_errors(ids):
    m = _llama()
    ee = GeometricEarlyExitLM(m)
    with pytest.raises(ValueError, match="empty prompt"):
        ee(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="empty prompt"):
        ee.generate(torch.zeros(2, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 97\)"):
        ee(torch.tensor([[1, 2, 97]]))
    with pytest.raises(TypeError, match="integer token ids"):
        ee(torch.rand(1, 4))
    with pytest.raises(ValueError, match="max_new_tokens"):
        ee.generate(ids, 0)
    with pytest.raises(TypeError, match="not a supported layout"):
        GeometricEarlyExitLM(torch.nn.Linear(4, 4))
    with pytest.raises(TypeError, match="ExitCriterion"):
        GeometricEarlyExitLM(m, criterion=0.5)
    torch.manual_seed(0)
    nohid = _NoHidden(m.config).eval()
    with pytest.raises(ValueError, match="hidden states"):
        collect_trajectory(nohid, ids)
    inner = _llama()
    backbone_forward = inner.model.forward

    def no_hidden(*args, **kwargs):
        kwargs.pop("output_hidden_states", None)
        out = backbone_forward(*args, **kwargs)
        out.hidden_states = None
        return out

    inner.model.forward = no_hidden
    with pytest.raises(ValueError, match="hidden states"):
        GeometricEarlyExitLM(inner)(ids)
    with pytest.raises(ValueError, match="first_layer"):
        two_phase_profile(torch.rand(4, 5), torch.rand(4, 5), first_layer=5)
    with pytest.raises(ValueError, match="tau_cos"):
        GeometricExitCriterion(0.1, 1.5)
    with pytest.raises(ValueError, match="tau_step"):
        GeometricExitCriterion(-0.1, 0.5)
    with pytest.raises(ValueError, match="tau_step"):
        GeometricExitCriterion(float("nan"), 0.5)
    with pytest.raises(TypeError, match="tau_step"):
        GeometricExitCriterion("0.1", 0.5)
    with pytest.raises(ValueError, match="tau_prob"):
        ConfidenceExitCriterion(1.2)
    with pytest.raises(ValueError, match="tau"):
        EntropyExitCriterion(-1.0)
    with pytest.raises(ValueError, match="patience"):
        GeometricExitCriterion(0.1, 0.5, patience=0)
    with pytest.raises(ValueError, match="layer"):
        StaticExit(0)
    with pytest.raises(ValueError, match="exceeds the model's 4 layers"):
        GeometricEarlyExitLM(m, StaticExit(5))
    with pytest.raises(ValueError, match="at least two states"):
        trajectory_geometry(torch.randn(1, 3, 4))
    with pytest.raises(ValueError, match="NaN"):
        trajectory_geometry(torch.full((3, 4), float("nan")))
    traj = collect_trajectory(m, ids, with_lens=False)
    with pytest.raises(ValueError, match="with_lens"):
        ConfidenceExitCriterion(0.5).exit_layers(traj)
    with pytest.raises(ValueError, match="at most one"):
        calibrate_on_trajectory(traj, target_agreement=0.9, target_flops_saved=0.2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        calibrate_exit(m, ids, target_agreement=1.5)


# reproduction

def test_reproduction_windows_are_seeded_and_disjoint():
    from icml26.lm.early_exit.reproduce import _windows

    toks = torch.arange(5000)
    a = _windows(toks, 15, 20, torch.Generator().manual_seed(7))
    b = _windows(toks, 15, 20, torch.Generator().manual_seed(7))
    assert torch.equal(a, b) and a.shape == (20, 16)
    assert len(set(a[:, 0].tolist())) == 20                       # no window drawn twice
    assert not torch.equal(a, _windows(toks, 15, 20, torch.Generator().manual_seed(8)))
    with pytest.raises(ValueError, match="too short"):
        _windows(toks[:100], 15, 20, torch.Generator())


def test_exit_bound_is_an_upper_bound():
    from icml26.lm.early_exit.reproduce import _exit_bound

    g = torch.Generator().manual_seed(0)
    la = torch.randint(0, 3, (6, 4, 50), generator=g)
    first = [next(layer for layer in range(2, 7) if la[layer - 1, b, t] == la[-1, b, t]) for b in range(4) for t in range(50)]
    assert _exit_bound(la, 2, 1.0) == pytest.approx(1 - np.mean(first) / 6)     # loop recomputation
    assert _exit_bound(la, 2, 0.0) == pytest.approx(1 - 2 / 6)                  # everyone exits at l_min
    k = 20                                                                       # 10% may disagree
    top = sorted(first, reverse=True)[:k]
    assert _exit_bound(la, 2, 0.9) == pytest.approx(1 - (sum(first) - sum(top) + 2 * k) / (200 * 6))
    traj = collect_trajectory(_llama(seed=1, layers=6), torch.randint(0, V, (4, 50), generator=g))
    for cls in (GeometricExitCriterion, ConfidenceExitCriterion, EntropyExitCriterion, StaticExit):
        cal = calibrate_on_trajectory(traj, cls, target_agreement=0.9, min_layer=2)
        assert cal.evaluation.flops_saved <= _exit_bound(traj.layer_argmax, 2, cal.evaluation.agreement) + 1e-12


def test_quick_reproduction_is_well_formed():
    from icml26.lm.early_exit.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) >= 8 and len(out.checks) >= 2
    for c in out.claims:
        assert c.verdict in ("holds", "does not hold", "inconclusive")
        if c.kind == "claim":
            assert c.falsifier.strip(), c.statement
    by = {c.statement: c for c in out.claims}
    sharp = by["The transition is sharp: one dominant drop in log step size"]
    # 4 layers leave two drops after layer 1, so the sharpness statistic is undefined, never a free "holds"
    assert out.metrics["num_layers"] == 4 and math.isnan(sharp.measured) and sharp.verdict == "inconclusive"
    for c in out.claims:
        if c is not sharp:
            assert math.isfinite(c.measured), c.statement
    # comparisons over many windows carry per-window paired differences
    assert sum(c.paired is not None and len(c.paired) == 40 for c in claims) >= 10
    # the 98%-agreement comparison: geometric vs the strongest of both confidence exits and static truncation
    best = by["Geometric exit saves more FLOPs at 98% agreement than the strongest baseline exit "
              "(max-probability, entropy, static truncation)"]
    assert set(best.baselines) == {"max-probability exit", "entropy exit", "static truncation"}
    assert best.reference == max(best.baselines.values())
    # every fixed-bar claim carries a measured control (static truncation or the untrained model)
    for c in claims:
        if c.bar:
            assert c.control is not None and c.control_arm, c.statement
    assert sharp.control_arm.startswith("the same architecture untrained")
    m = out.metrics
    assert m["grid_size_geometric"] == m["grid_size_max_prob"] == m["grid_size_entropy"]
    assert {"two_phase", "tradeoff", "overhead"} <= set(out.figures)
    assert out.metrics["accuracy_full_depth"] > 0.05          # far above chance (1/512)
    rows = {(r["target"], r["rule"]): r for r in out.tables["operating_points"]}
    assert rows[("agreement>=0.98", "static")]["flops_saved"] <= rows[("-", "oracle")]["flops_saved"] + 1e-9
    # the geometric test never touches the head: its overhead must not grow like the confidence test's
    assert out.metrics["overhead_growth_max_prob"] > 2.0
    # generation counts what ran: block rows + K/V rows cover every decoded token at every layer
    for g in out.tables["generation"]:
        assert g["block_rows"] + g["kv_rows"] == 4 * 2 * (12 - 1)


@functools.lru_cache(maxsize=1)
def _bad_input_cases():
    llama = _llama()
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=4, n_head=4, n_positions=16,
                                      bos_token_id=0, eos_token_id=0)).eval()
    x = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(0))
    traj = collect_trajectory(llama, x)
    traj_nolens = collect_trajectory(llama, x, with_lens=False)
    geo = GeometricExitCriterion(0.5, 0.3)
    h = torch.randn(2, 8, generator=torch.Generator().manual_seed(1))
    on = torch.ones(4, 3, dtype=torch.bool)
    nan = math.nan
    return [
        (lambda: trajectory_geometry(torch.randn(5, 3, 8), eps=math.inf), ValueError, "eps must be a positive finite"),
        (lambda: trajectory_geometry(torch.randn(5, 3, 8), eps=True), ValueError, "eps must be a positive finite"),
        (lambda: trajectory_geometry(torch.zeros(5, 3, 0)), ValueError, "hidden states are empty"),       # silent
        (lambda: residual_stream(llama, x, with_logits="no"), TypeError, "with_logits must be True or False"),
        (lambda: residual_stream(gpt2, torch.randint(0, V, (1, 40))), ValueError,
         "40 prompt tokens exceed the model's 16 positions"),                                             # IndexError
        (lambda: residual_stream("m", x), TypeError, "model must be a Hugging Face causal LM"),
        (lambda: collect_trajectory(llama, x, with_lens="no"), TypeError, "with_lens must be True or False"),
        (lambda: two_phase_profile(traj.step * nan, traj.cos), ValueError, "step has 48 NaN"),            # silent
        (lambda: two_phase_profile(-traj.step, traj.cos), ValueError, "step sizes must be >= 0"),         # silent
        (lambda: two_phase_profile([1.0], [1.0]), TypeError, "step must be a floating-point tensor"),    # AttributeError
        (lambda: two_phase_profile(torch.zeros(4, 0), torch.zeros(4, 0)), ValueError, "are empty"),      # RuntimeError
        (lambda: first_exit(torch.rand(4, 3), 1), TypeError, "passes must be a bool tensor"),            # RuntimeError
        (lambda: first_exit(on, 0), ValueError, "min_layer must be >= 1"),                               # silent
        (lambda: first_exit(on, 9), ValueError, "min_layer=9 exceeds the 4 layers"),                     # silent
        (lambda: first_exit(on, 1, 0), ValueError, "patience must be >= 1"),                             # silent
        (lambda: first_exit(torch.tensor(True), 1), ValueError, "L >= 1 layers on dim 0"),               # IndexError
        (lambda: oracle_exit_layers(torch.rand(4, 3)), TypeError, "layer_argmax must hold integer"),     # silent
        (lambda: oracle_exit_layers(torch.zeros(0, 3, dtype=torch.long)), ValueError, "L >= 1 layers"),  # IndexError
        (lambda: ExitState.start(0, 4), ValueError, "batch must be >= 1"),                               # silent
        (lambda: ExitState.start(3, 0), ValueError, "num_layers must be >= 1"),                          # silent
        (lambda: ExitCriterion(min_layer=0), ValueError, "min_layer must be >= 1"),
        (lambda: geo.decide(traj.step * nan, traj.cos), ValueError, "step contains NaN"),                # silent
        (lambda: geo.decide([1.0], [1.0]), TypeError, "step must be a floating-point tensor"),           # AttributeError
        (lambda: geo.exit_layers("t"), TypeError, "traj must be a Trajectory"),                          # AttributeError
        (lambda: geo.update(ExitState.start(2, 4), h, torch.randn(3, 8)), ValueError, "B = 2"),         # RuntimeError
        (lambda: geo.update(ExitState.start(2, 4), h, h * nan), ValueError, "h_new contains NaN"),       # silent
        (lambda: geo.update("s", h, h), TypeError, "state must be an ExitState"),                        # AttributeError
        (lambda: [geo.update(st, h, h + 1) for st in [ExitState.start(2, 1)] for _ in range(2)], ValueError,
         "already seen all 1 layers"),                                                                    # silent
        (lambda: ConfidenceExitCriterion(1.5), ValueError, "tau_prob must lie in [0.0, 1.0]"),
        (lambda: ConfidenceExitCriterion(0.5).exit_layers(traj_nolens), ValueError, "with_lens=True"),
        (lambda: EntropyExitCriterion(0.5).update(ExitState.start(2, 4), h, h + 1, lens=3), TypeError,
         "lens must be callable"),
        (lambda: StaticExit(9).exit_layers(traj), ValueError, "min_layer=9 exceeds the model's 4 layers"),
        (lambda: GeometricEarlyExitLM(llama, "c"), TypeError, "criterion must be an ExitCriterion"),
        (lambda: GeometricEarlyExitLM(llama)(x + 200), ValueError, "token ids must lie in [0, 97)"),
        (lambda: GeometricEarlyExitLM(llama).generate(x, 0), ValueError, "max_new_tokens must be a positive int"),
        (lambda: GeometricEarlyExitLM(gpt2).generate(torch.randint(0, V, (1, 10)), 20), ValueError,
         "10 prompt tokens + 19 new tokens exceed the model's 16 positions"),                             # IndexError
        (lambda: evaluate_exit("t", geo), TypeError, "traj must be a Trajectory"),                       # AttributeError
        (lambda: evaluate_exit(traj, "rule"), TypeError, "rule must be an ExitCriterion"),               # AttributeError
        (lambda: evaluate_exit(traj, torch.full((2, 6), 2.5)), TypeError, "exit layers must be integers"),  # RuntimeError
        (lambda: evaluate_exit(traj, geo, targets=torch.full((2, 6), 500)), ValueError,
         "targets must be token ids in [0, 97)"),                                                         # silent
        (lambda: evaluate_exit(traj, geo, targets=torch.full((2, 6), 1.0)), TypeError,
         "targets must be an integer tensor"),                                                            # silent
        (lambda: default_grid(traj, min_layer=9), ValueError, "min_layer=9 exceeds the trajectory's 4"),  # silent
        (lambda: default_grid(traj_nolens, ConfidenceExitCriterion), ValueError, "needs logit-lens"),   # TypeError
        (lambda: default_grid("t"), TypeError, "traj must be a Trajectory"),                             # AttributeError
        (lambda: calibrate_on_trajectory(traj, candidates=["x"]), TypeError, "candidates must be ExitCriterion"),
        (lambda: calibrate_on_trajectory(traj, target_agreement=nan), ValueError, "the target must be a number"),
        (lambda: calibrate_exit(llama, x, target_agreement=1.5), ValueError, "the target must be a number"),
        (lambda: get_adapter(torch.nn.Linear(2, 2)), TypeError, "not a supported layout"),
        (lambda: LlamaAdapter(gpt2), TypeError, "does not have the llama layout"),                       # AttributeError
        (lambda: GPT2Adapter(torch.nn.Linear(2, 2)), TypeError, "does not have the gpt2 layout"),       # silent
    ]


@pytest.mark.parametrize("case", range(50))
def test_public_entry_points_refuse_bad_input(case):
    cases = _bad_input_cases()
    assert len(cases) == 50
    call, error, fragment = cases[case]
    with pytest.raises(error, match=re.escape(fragment)):
        call()
