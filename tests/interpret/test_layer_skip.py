"""[A14] Skip-It: traces, redundancy measures on constructed cases, skip plans (exactness), hooks, bad input."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from icml26.harness import Budget, Outcome
from icml26.interpret.layer_skip import (
    VLM_QUICK,
    BlockCost,
    DigitVQA,
    HiddenTrace,
    RedundancyReport,
    SkipPlan,
    TinyVLM,
    adjacent_token_redundancy,
    apply_skip_plan,
    block_influence,
    collect_trace,
    cross_modal_attention,
    digit_vqa,
    fastv_pruning,
    find_blocks,
    layer_redundancy,
    load_tiny_vlm,
    per_example_redundancy,
    plan_flops,
    spearman,
    uniform_vision_share,
    unique_information_probe,
)
from icml26.interpret.layer_skip.testbed import N_TEXT, N_VISION, answer_correct, train_tiny_vlm


def _hooks(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.fixture(scope="module")
def vlm():
    torch.manual_seed(0)
    return TinyVLM(replace(VLM_QUICK, num_layers=4)).eval()


@pytest.fixture(scope="module")
def batch():
    d = digit_vqa(0)
    return d.subset(torch.arange(0, 9000, 300)[:24])


@pytest.fixture(scope="module")
def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    return LlamaForCausalLM(cfg).eval()


IDS = torch.randint(0, 50, (3, 10), generator=torch.Generator().manual_seed(1))
VM = torch.arange(10) < 6


def _run(m, **kw):
    with torch.no_grad():
        return m(IDS, use_cache=False, **kw).logits


# --- known answers -------------------------------------------------------------------------------------------

class _Identity(nn.Module):
    def forward(self, hidden_states):
        return hidden_states


class _Plain(nn.Module):
    """A plain nn.Module with a ``blocks`` list: identity, a random MLP block, identity."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([_Identity(), nn.Sequential(nn.Linear(8, 8), nn.Tanh()), _Identity()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_identity_block_is_maximally_redundant():
    torch.manual_seed(0)
    m = _Plain()
    x = torch.randn(5, 7, 8)
    tr = collect_trace(m, x, torch.arange(7) < 3, attentions=False)
    R = layer_redundancy(tr, "vision")
    assert R[0] == pytest.approx(1.0, abs=1e-6) and R[2] == pytest.approx(1.0, abs=1e-6)
    assert R[1] < 0.99 and bool((R <= 1 + 1e-6).all())
    assert block_influence(tr)[0] == pytest.approx(0.0, abs=1e-6)
    assert _hooks(m) == 0


def _synthetic_trace(B: int, text_feat: np.ndarray, vis_feat: np.ndarray, n_vis: int = 3, n_txt: int = 2):
    d = text_feat.shape[1]
    h = torch.zeros(1, B, n_vis + n_txt, d, dtype=torch.float64)
    h[0, :, :n_vis] = torch.tensor(vis_feat)[:, None]
    h[0, :, n_vis:] = torch.tensor(text_feat)[:, None]
    vm = (torch.arange(n_vis + n_txt) < n_vis)[None].expand(B, -1)
    return HiddenTrace(hidden=h, attn=None, vision_mask=vm)


def test_text_only_task_has_zero_unique_visual_information():
    rng = np.random.default_rng(0)
    B, d = 240, 4
    y = rng.integers(0, 2, B)
    text = rng.normal(size=(B, d)) + 1.5 * y[:, None]                   # the answer is in the text
    # vision carries nothing: constant images -> exactly the text-only probe
    tr = _synthetic_trace(B, text, np.ones((B, d)))
    assert abs(unique_information_probe(tr, y, n_folds=3)[0]) < 1e-6
    # no vision tokens at all -> 0 by definition
    tr0 = HiddenTrace(hidden=tr.hidden, attn=None, vision_mask=torch.zeros_like(tr.vision_mask))
    assert unique_information_probe(tr0, y, n_folds=3)[0] == 0.0
    # vision noise independent of the answer -> ~0 (cross-validated probes cannot gain)
    u_noise = unique_information_probe(_synthetic_trace(B, text, rng.normal(size=(B, d))), y, n_folds=3)[0]
    assert abs(u_noise) < 0.05
    # control: answer only in the image -> clearly positive
    vis = rng.normal(size=(B, d)) + 2.0 * y[:, None]
    u_vis = unique_information_probe(_synthetic_trace(B, rng.normal(size=(B, d)), vis), y, n_folds=3)[0]
    assert u_vis > 0.3


def test_adjacent_token_redundancy_known_cases():
    B, d = 2, 3
    v = torch.randn(d, dtype=torch.float64)
    same = torch.zeros(1, B, 4 + 1, d, dtype=torch.float64)
    same[0, :, :4] = v
    same[0, :, 4] = torch.randn(d, dtype=torch.float64)
    vm = (torch.arange(5) < 4)[None].expand(B, -1)
    assert adjacent_token_redundancy(HiddenTrace(same, None, vm), (2, 2))[0] == pytest.approx(1.0)
    checker = same.clone()
    checker[0, :, :4] = torch.stack([v, -v, -v, v])                   # 2x2 checkerboard
    assert adjacent_token_redundancy(HiddenTrace(checker, None, vm), (2, 2))[0] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="cells"):
        adjacent_token_redundancy(HiddenTrace(same, None, vm), (3, 2))


def test_cross_modal_attention_brute_force_and_masked(vlm, batch):
    tr = collect_trace(vlm, batch.inputs(), vlm.vision_mask)
    assert torch.allclose(tr.attn.sum(-1), torch.ones(()), atol=1e-5)
    A = cross_modal_attention(tr)
    vm = vlm.vision_mask
    for layer in range(tr.num_layers):
        brute = np.mean([[tr.attn[layer, b, h][~vm][:, vm].sum(-1).mean().item() for h in range(tr.attn.shape[2])]
                         for b in range(tr.attn.shape[1])])
        assert A[layer].item() == pytest.approx(brute, abs=1e-6)
    # no vision tokens -> A = 0; under a vision exit at 0 the attention modules only see the text tokens
    none = HiddenTrace(tr.hidden, tr.attn, torch.zeros_like(tr.vision_mask))
    assert float(cross_modal_attention(none).abs().max()) == 0.0
    with apply_skip_plan(vlm, SkipPlan(vision_exit=0), vm):
        tr0 = collect_trace(vlm, batch.inputs(), vm)
    assert tr0.attn.shape[-1] == N_TEXT


# --- skip plans: exactness -----------------------------------------------------------------------------------

def test_hf_hooks_leave_the_model_unchanged(llama):
    base = _run(llama)
    params = {k: v.clone() for k, v in llama.state_dict().items()}
    tr = collect_trace(llama, {"input_ids": IDS, "use_cache": False}, VM)
    assert tr.hidden.shape == (4, 3, 10, 32) and tr.attn.shape == (3, 3, 4, 10, 10)
    assert torch.equal(tr.logits, base)
    with apply_skip_plan(llama, SkipPlan(skip_vision=(1,), vision_exit=2), VM):
        changed = _run(llama)
    with fastv_pruning(llama, VM, K=1, keep=0.5):
        _run(llama)
    assert not torch.equal(changed, base)
    assert torch.equal(_run(llama), base) and _hooks(llama) == 0
    assert all(torch.equal(v, params[k]) for k, v in llama.state_dict().items())
    with pytest.raises(RuntimeError, match="boom"):        # hooks are removed on error too
        with apply_skip_plan(llama, SkipPlan(vision_exit=1), VM):
            raise RuntimeError("boom")
    assert _hooks(llama) == 0


def test_hf_plans_match_direct_computations(llama):
    base = _run(llama)
    with torch.no_grad():
        with apply_skip_plan(llama, SkipPlan(), VM):
            assert torch.equal(_run(llama), base)
        with apply_skip_plan(llama, SkipPlan(vision_exit=3), VM):
            assert torch.equal(_run(llama), base)
        # exit at 0: text tokens never see V == running the text alone at its original rotary positions
        with apply_skip_plan(llama, SkipPlan(vision_exit=0), VM):
            ex0 = _run(llama)
        alone = llama(IDS[:, 6:], position_ids=torch.arange(6, 10)[None].expand(3, -1), use_cache=False).logits
        assert torch.allclose(ex0[:, 6:], alone, atol=1e-5)
        with apply_skip_plan(llama, SkipPlan(skip_all=(1,)), VM):
            sk = _run(llama)
        deleted = copy.deepcopy(llama)
        del deleted.model.layers[1]
        deleted.config.num_hidden_layers = 2
        assert torch.allclose(sk, deleted(IDS, use_cache=False).logits, atol=1e-5)


def test_llava_adapter():
    """A tiny LLaVA from a config: blocks found at model.language_model.layers, image tokens as V."""
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(0)
    vc = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                          image_size=16, patch_size=8)
    tc = LlamaConfig(vocab_size=60, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, max_position_embeddings=64)
    cfg = LlavaConfig(vision_config=vc, text_config=tc, image_token_index=59, vision_feature_layer=-1,
                      vision_feature_select_strategy="default")
    for c in (cfg, cfg.text_config, cfg.vision_config):
        c._attn_implementation = "eager"
    m = LlavaForConditionalGeneration(cfg).eval()
    ids = torch.cat([torch.full((2, 4), 59), torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(0))], 1)
    inp = {"input_ids": ids, "pixel_values": torch.randn(2, 3, 16, 16), "use_cache": False}
    vm = ids[0] == 59
    with torch.no_grad():
        base = m(**inp).logits
    hooks = _hooks(m)                                   # transformers registers its own output recorders
    tr = collect_trace(m, inp, vm)
    assert tr.hidden.shape == (3, 2, 9, 32) and tr.attn.shape == (2, 2, 4, 9, 9) and torch.equal(tr.logits, base)
    with torch.no_grad():
        with apply_skip_plan(m, SkipPlan(vision_exit=2), vm):
            assert torch.equal(m(**inp).logits, base)
        with apply_skip_plan(m, SkipPlan(vision_exit=0), vm):
            assert not torch.allclose(m(**inp).logits, base)
    assert _hooks(m) == hooks


def test_plain_vlm_plans(vlm, batch):
    vm, x = vlm.vision_mask, batch.inputs()
    L = len(vlm.layers)
    with torch.no_grad():
        base = vlm(**x)
        # vision-only skip of block 1: V unchanged through it, text differs from skipping it for all tokens
        with apply_skip_plan(vlm, SkipPlan(skip_vision=(1,)), vm):
            tr_v = collect_trace(vlm, x, vm, attentions=False)
        with apply_skip_plan(vlm, SkipPlan(skip_all=(1,)), vm):
            tr_a = collect_trace(vlm, x, vm, attentions=False)
        assert torch.equal(tr_v.hidden[2][:, vm], tr_v.hidden[1][:, vm])
        assert not torch.allclose(tr_v.hidden[2][:, ~vm], tr_a.hidden[2][:, ~vm])
        # FastV keeping every vision token == base; keeping none == vision exit at K
        with fastv_pruning(vlm, vm, K=2, keep=1.0):
            assert torch.allclose(vlm(**x), base, atol=1e-6)
        with fastv_pruning(vlm, vm, K=2, keep=0.0):
            f0 = vlm(**x)
        with apply_skip_plan(vlm, SkipPlan(vision_exit=2), vm):
            e2 = vlm(**x)
        assert torch.allclose(f0, e2, atol=1e-6)
        # late entry at L == V never processed == exit at 0 (text positions)
        with apply_skip_plan(vlm, SkipPlan(vision_entry=L), vm):
            en = vlm(**x)
        with apply_skip_plan(vlm, SkipPlan(vision_exit=0), vm):
            e0 = vlm(**x)
        assert torch.allclose(en[:, ~vm], e0[:, ~vm], atol=1e-6)
    assert _hooks(vlm) == 0


def test_fastv_keeps_the_most_attended_vision_tokens(vlm, batch):
    vm, x = vlm.vision_mask, batch.inputs()
    tr = collect_trace(vlm, x, vm)
    received = tr.attn[0].mean(1).mean(1)[:, vm]                      # block 0 = K-1 for K = 1
    top = received.topk(4, dim=1).indices
    with fastv_pruning(vlm, vm, K=1, keep=0.25), torch.no_grad():
        got = vlm(**x)[:, -1]
    with torch.no_grad():  # by hand: block 0 on all tokens, then the 4 most attended vision tokens + text
        h = vlm.layers[0](vlm.embed(**x))
        keep = torch.cat([top.sort(1).values, torch.arange(N_VISION, N_VISION + N_TEXT).expand(len(batch), -1)], 1)
        h = h.gather(1, keep[..., None].expand(-1, -1, h.shape[-1]))
        for block in vlm.layers[1:]:
            h = block(h)
        want = vlm.head(vlm.norm(h[:, -1]))
    assert torch.allclose(got, want, atol=1e-5)


def test_flops_accounting():
    cost = BlockCost(d=8, d_ff=16, mlp_mats=2)
    vm = torch.arange(6) < 4
    L = 3
    assert plan_flops(SkipPlan(), vm, L, cost) == pytest.approx(1.0)
    assert plan_flops(SkipPlan(skip_all=(1,)), vm, L, cost) == pytest.approx(2 / 3)

    def brute(queries, keys):                                          # explicit per-token count
        f = 0
        for q in queries:
            f += 4 * 64 + 2 * 2 * 8 * 16 + 4 * 8 * sum(1 for k in keys if k <= q)
        return f + 4 * 64 * len(keys)

    full = brute(range(6), range(6))
    assert plan_flops(SkipPlan(vision_exit=0), vm, L, cost) == pytest.approx(brute([4, 5], [4, 5]) / full)
    assert plan_flops(SkipPlan(skip_vision=(0,)), vm, L, cost) == pytest.approx(
        (brute([4, 5], range(6)) + 2 * full) / (3 * full))
    assert plan_flops(SkipPlan(), vm, L, cost, fastv=(1, 2)) == pytest.approx(
        (full + 2 * brute([2, 3, 4, 5], [2, 3, 4, 5])) / (3 * full))


def test_recommend_rules():
    rep = RedundancyReport(R_vision=np.array([0.99, 0.9, 0.98, 0.99]), R_text=np.zeros(4),
                           A=np.array([0.01, 0.3, 0.2, 0.02]), U=np.array([0.5, 0.3, 0.1, 0.01, 0.0]))
    plan = rep.recommend(tau_R=0.97, tau_A=0.05, eps_U=0.02)
    assert plan.vision_exit == 3 and plan.vision_entry == 1 and plan.skip_vision == (2,)
    none = RedundancyReport(R_vision=np.zeros(2), R_text=np.zeros(2), A=np.ones(2), U=np.ones(3)).recommend()
    assert none == SkipPlan()


def test_exit_rule_relative_to_the_uniform_vision_share():
    """Issue 30: with 16 of 20 tokens visual, text attending to V at 0.49-0.85 (below the uniform 0.87) can never meet
    the absolute tau_A = 0.05; read relative to |V|/N the rule can fire. The uniform share is the causal one."""
    from icml26.interpret.layer_skip import uniform_vision_share

    vm = torch.tensor([True] * 16 + [False] * 4)
    brute = np.mean([16 / (q + 1) for q in range(16, 20)])
    assert uniform_vision_share(vm) == pytest.approx(brute)
    assert uniform_vision_share(vm, causal=False) == pytest.approx(0.8)
    assert uniform_vision_share(vm[None].repeat(3, 1)) == pytest.approx(brute)
    A = np.array([0.72, 0.63, 0.40, 0.30])
    rep = RedundancyReport(R_vision=np.full(4, 0.9), R_text=np.zeros(4), A=A, U=np.zeros(5),
                           A_uniform=uniform_vision_share(vm))
    assert rep.recommend(tau_A=0.05).vision_exit is None                      # absolute: cannot fire
    assert rep.recommend(tau_A=0.5, relative_A=True).vision_exit == 2          # 0.40 / 0.87 <= 0.5
    with pytest.raises(ValueError, match="A_uniform"):
        RedundancyReport(R_vision=np.zeros(2), R_text=np.zeros(2), A=A[:2]).recommend(relative_A=True)
    with pytest.raises(ValueError, match="text queries"):
        uniform_vision_share(torch.ones(5, dtype=torch.bool))


# --- bad input and determinism ----------------------------------------------------------------------------

def _tiny_trace(attn: bool = True) -> HiddenTrace:
    g = torch.Generator().manual_seed(0)
    h = torch.randn(3, 4, 5, 6, generator=g)                           # L = 2, B = 4, N = 5 (4 vision + 1 text)
    a = torch.softmax(torch.randn(2, 4, 2, 5, 5, generator=g), -1) if attn else None
    return HiddenTrace(h, a, torch.arange(5) < 4)


def _report(**kw) -> RedundancyReport:
    base = dict(R_vision=np.array([0.9, 0.99]), R_text=np.array([0.8, 0.9]), A=np.array([0.5, 0.4]))
    base.update(kw)
    return RedundancyReport(**base)


def _enter(cm):
    with cm:
        pass


_COST = BlockCost(d=8, d_ff=16)
_NAN_H = torch.zeros(3, 2, 5, 4)
_NAN_H[1, 0, 0, 0] = float("nan")
_Y = np.arange(4) % 2

# (callable, kwargs, error type, message fragment); every case would return a number (or an object) or fail deep
# inside torch / numpy / scipy / sklearn without its check
BAD_INPUTS = [
    (lambda **k: collect_trace(**k), dict(model=nn.Linear(3, 3), inputs=torch.zeros(2, 3),
                                          vision_mask=torch.zeros(3, dtype=torch.bool)), TypeError, "no transformer"),
    (lambda **k: collect_trace(**k), dict(model=_Plain(), inputs=torch.zeros(2, 7, 8), vision_mask=torch.zeros(7)),
     TypeError, "vision_mask must be a bool"),
    (lambda **k: collect_trace(**k), dict(model=_Plain(), inputs=torch.zeros(2, 7, 8),
                                          vision_mask=torch.zeros(7, dtype=torch.bool), attentions="no"),
     TypeError, "attentions"),
    (lambda **k: collect_trace(**k), dict(model=_Plain(), inputs=torch.zeros(2, 7, 8), attentions=False,
                                          vision_mask=torch.zeros(7, dtype=torch.bool), valid_mask=torch.ones(7)),
     TypeError, "valid_mask"),
    (lambda **k: collect_trace(**k), dict(model=_Plain(), inputs=torch.zeros(2, 7, 8), attentions=False,
                                          vision_mask=torch.zeros(5, dtype=torch.bool)), ValueError, "shape"),
    (lambda **k: find_blocks(**k), dict(model="not a model"), TypeError, "nn.Module"),
    (lambda **k: HiddenTrace(**k), dict(hidden=_NAN_H, attn=None, vision_mask=torch.arange(5) < 4), ValueError,
     "NaN"),
    (lambda **k: HiddenTrace(**k), dict(hidden=torch.zeros(2, 5, 4), attn=None, vision_mask=torch.arange(5) < 4),
     TypeError, "hidden"),
    (lambda **k: HiddenTrace(**k), dict(hidden=torch.zeros(3, 2, 5, 4), attn=None, vision_mask=torch.arange(6) < 4),
     ValueError, "vision_mask has shape"),
    (lambda **k: layer_redundancy(**k), dict(trace="not a trace"), TypeError, "HiddenTrace"),
    (lambda **k: layer_redundancy(**k), dict(trace=_tiny_trace(), mask="audio"), ValueError, "unknown token type"),
    (lambda **k: per_example_redundancy(**k), dict(trace=_tiny_trace(), mask=torch.ones(3, dtype=torch.bool)),
     ValueError, "mask has shape"),
    (lambda **k: block_influence(**k), dict(trace=object()), TypeError, "HiddenTrace"),
    (lambda **k: adjacent_token_redundancy(**k), dict(trace=_tiny_trace(), grid=(2.5, 2)), TypeError, "grid rows"),
    (lambda **k: adjacent_token_redundancy(**k), dict(trace=_tiny_trace(), grid=(0, 4)), ValueError, "grid rows"),
    (lambda **k: cross_modal_attention(**k), dict(trace=_tiny_trace(attn=False)), ValueError, "no attention"),
    (lambda **k: unique_information_probe(**k), dict(trace=_tiny_trace(), y=np.array([0.0, 1.0, np.nan, 1.0])),
     ValueError, "NaN"),
    (lambda **k: unique_information_probe(**k), dict(trace=_tiny_trace(), y=_Y, n_folds=1), ValueError, "n_folds"),
    (lambda **k: unique_information_probe(**k), dict(trace=_tiny_trace(), y=_Y, n_folds=9), ValueError, "n_folds"),
    (lambda **k: unique_information_probe(**k), dict(trace=_tiny_trace(), y=_Y, n_folds=2, C=0.0), ValueError,
     "C must be > 0"),
    (lambda **k: unique_information_probe(**k), dict(trace=_tiny_trace(), y=np.zeros(5)), ValueError,
     "one label per example"),
    (lambda **k: _report(**k), dict(R_vision=np.array([np.nan, 0.9])), ValueError, "R_vision has 1 NaN"),
    (lambda **k: _report(**k), dict(A=np.array([0.5])), ValueError, "A must have shape"),
    (lambda **k: _report(**k), dict(U=np.array([0.1, 0.0])), ValueError, "U must have shape"),
    (lambda **k: _report(**k), dict(A_uniform=0.0), ValueError, "A_uniform"),
    (lambda **k: RedundancyReport.from_trace(_tiny_trace(), y=_Y, **k), dict(n_fold=2), ValueError, "unknown keys"),
    (lambda **k: _report().recommend(**k), dict(eps_U=float("nan")), ValueError, "eps_U"),
    (lambda **k: _report().recommend(**k), dict(tau_R="high"), TypeError, "tau_R"),
    (lambda **k: _report().recommend(**k), dict(tau_A=1.5), ValueError, "tau_A"),
    (lambda **k: _report().recommend(**k), dict(relative_A=True), ValueError, "A_uniform"),
    (lambda **k: spearman(**k), dict(x=[1.0, 2.0, 3.0], y=[1.0, 2.0]), ValueError, "same length"),
    (lambda **k: spearman(**k), dict(x=[1.0, np.nan, 3.0], y=[1.0, 2.0, 3.0]), ValueError, "NaN"),
    (lambda **k: spearman(**k), dict(x=[1.0], y=[2.0]), ValueError, "at least 2"),
    (lambda **k: uniform_vision_share(**k), dict(vision_mask=torch.tensor([1, 0, 0])), TypeError, "bool"),
    (lambda **k: uniform_vision_share(**k), dict(vision_mask=torch.tensor([True, False]), causal="yes"),
     TypeError, "causal"),
    (lambda **k: SkipPlan(**k), dict(skip_vision=3), TypeError, "skip_vision"),
    (lambda **k: SkipPlan(**k), dict(skip_vision=(1, 1)), ValueError, "twice"),
    (lambda **k: SkipPlan(**k), dict(skip_all=(0.5,)), TypeError, "skip_all block index"),
    (lambda **k: SkipPlan(**k), dict(vision_entry=-1), ValueError, "vision_entry"),
    (lambda **k: _enter(apply_skip_plan(**k)), dict(model=_Plain(), plan="skip block 1", vision_mask=VM), TypeError,
     "SkipPlan"),
    (lambda **k: _enter(apply_skip_plan(**k)), dict(model=_Plain(), plan=SkipPlan(skip_vision=(3,)), vision_mask=VM),
     ValueError, "out of range"),
    (lambda **k: _enter(fastv_pruning(**k)), dict(model=_Plain(), vision_mask=VM, K=1, keep="half"), TypeError,
     "keep"),
    (lambda **k: _enter(fastv_pruning(**k)), dict(model=_Plain(), vision_mask=VM, K=1, keep=1.5), ValueError, "keep"),
    (lambda **k: _enter(fastv_pruning(**k)), dict(model=_Plain(), vision_mask=VM, K=0), ValueError, "K must be"),
    (lambda **k: BlockCost(**k), dict(d=0, d_ff=16), ValueError, "d must be"),
    (lambda **k: BlockCost(**k), dict(d=8, d_ff=16.5), TypeError, "d_ff"),
    (lambda **k: plan_flops(**k), dict(plan=SkipPlan(), vision_mask=VM, num_layers=0, cost=_COST), ValueError,
     "num_layers"),
    (lambda **k: plan_flops(**k), dict(plan=SkipPlan(), vision_mask=VM.long(), num_layers=3, cost=_COST), TypeError,
     "vision_mask"),
    (lambda **k: plan_flops(**k), dict(plan=SkipPlan(), vision_mask=VM, num_layers=3, cost=(8, 16)), TypeError,
     "BlockCost"),
    (lambda **k: plan_flops(**k), dict(plan=SkipPlan(), vision_mask=VM, num_layers=3, cost=_COST, fastv=(1, 99)),
     ValueError, "n_keep"),
    (lambda **k: plan_flops(**k), dict(plan=(1,), vision_mask=VM, num_layers=3, cost=_COST), TypeError, "SkipPlan"),
    (lambda **k: TinyVLM(**k), dict(cfg="vlm-6L"), TypeError, "TinyVLMConfig"),
    (lambda **k: replace(VLM_QUICK, **k), dict(lr=-1e-3), ValueError, "lr"),
    (lambda **k: replace(VLM_QUICK, **k), dict(steps=0), ValueError, "steps"),
    (lambda **k: replace(VLM_QUICK, **k), dict(hidden_size=30), ValueError, "divisible"),
    (lambda **k: TinyVLM(replace(VLM_QUICK, num_layers=1))(**k),
     dict(patches=torch.full((2, N_VISION, 4), float("nan")), input_ids=torch.zeros(2, N_TEXT, dtype=torch.long)),
     ValueError, "patches has"),
    (lambda **k: TinyVLM(replace(VLM_QUICK, num_layers=1))(**k),
     dict(patches=torch.zeros(2, N_VISION, 4), input_ids=torch.full((2, N_TEXT), 99)), ValueError, "input_ids"),
    (lambda **k: TinyVLM(replace(VLM_QUICK, num_layers=1))(**k),
     dict(patches=torch.zeros(2, 5, 4), input_ids=torch.zeros(2, N_TEXT, dtype=torch.long)), ValueError, "patches"),
    (lambda **k: DigitVQA(**k), dict(patches=torch.zeros(3, N_VISION, 4), input_ids=torch.zeros(3, N_TEXT),
                                     answer=torch.zeros(2), qtype=torch.zeros(3), image=torch.zeros(3),
                                     train=torch.zeros(3)), ValueError, "same length"),
    (lambda **k: DigitVQA(**k), dict(patches=torch.zeros(3, 5, 4), input_ids=torch.zeros(3, N_TEXT),
                                     answer=torch.zeros(3), qtype=torch.zeros(3), image=torch.zeros(3),
                                     train=torch.zeros(3)), ValueError, "patches must have shape"),
    (lambda **k: digit_vqa(**k), dict(split_seed=-1), ValueError, "split_seed"),
    (lambda **k: digit_vqa(**k), dict(split_seed=0.5), TypeError, "split_seed"),
    (lambda **k: load_tiny_vlm(**k), dict(cfg="vlm-6L"), TypeError, "TinyVLMConfig"),
]


@pytest.mark.parametrize("fn, kwargs, error, fragment", BAD_INPUTS,
                         ids=[f"{i}-{c[3][:20]}" for i, c in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise(fn, kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        fn(**kwargs)


def test_bad_inputs_need_a_model(vlm, llama, batch):
    """Cases that need a built model or the dataset (and the hooks are gone afterwards)."""
    with pytest.raises(ValueError, match="out of range"):
        _enter(apply_skip_plan(llama, SkipPlan(vision_exit=7), VM))
    with pytest.raises(ValueError, match="after vision_exit"):
        _enter(apply_skip_plan(llama, SkipPlan(vision_exit=1, vision_entry=2), VM))
    with pytest.raises(ValueError, match="eager"):
        from transformers import LlamaConfig, LlamaForCausalLM

        sdpa = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=1, num_attention_heads=4, attn_implementation="sdpa"))
        collect_trace(sdpa, {"input_ids": IDS, "use_cache": False}, VM)
    with pytest.raises(ValueError, match="idx must hold indices"):
        batch.subset([0, 10 ** 6])
    with pytest.raises(TypeError, match="idx must hold integers"):
        batch.subset(torch.tensor([0.5]))
    with apply_skip_plan(vlm, SkipPlan(vision_exit=0), vlm.vision_mask):
        tr0 = collect_trace(vlm, batch.inputs(), vlm.vision_mask)
    with pytest.raises(ValueError, match="covers 4 of its 20 tokens"):
        cross_modal_attention(tr0)
    assert _hooks(llama) == 0 and _hooks(vlm) == 0


def test_padding_is_neither_text_nor_vision():
    """Review finding 5: padding tokens were counted as text (text = ~vision, attention_mask ignored): right-padding
    one example by 4 moved A from 0.770 to 0.719 and R(T) from 0.981 to 0.490. The valid tokens' states are the
    same with and without the padding, so every measure must be too."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, attn_implementation="eager", pad_token_id=0)
    m = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(3, 50, (1, 12), generator=torch.Generator().manual_seed(2))
    vm = torch.arange(12) < 8
    t1 = collect_trace(m, {"input_ids": ids, "use_cache": False}, vm)
    ids2 = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], 1)
    am = torch.cat([torch.ones(1, 12), torch.zeros(1, 4)], 1).long()
    vm2 = torch.arange(16) < 8
    t2 = collect_trace(m, {"input_ids": ids2, "attention_mask": am, "use_cache": False}, vm2)
    assert t2.text_mask.sum() == 4 and t2.valid.sum() == 12
    for mask in ("text", "vision", "all"):
        assert torch.allclose(layer_redundancy(t1, mask), layer_redundancy(t2, mask), atol=1e-5), mask
    assert torch.allclose(cross_modal_attention(t1), cross_modal_attention(t2), atol=1e-5)
    from icml26.interpret.layer_skip import uniform_vision_share

    assert uniform_vision_share(vm2, valid=am[0].bool()) == pytest.approx(uniform_vision_share(vm))
    # the same with valid_mask= given explicitly (no attention_mask in the inputs)
    t3 = collect_trace(m, {"input_ids": ids2, "use_cache": False}, vm2, valid_mask=am[0].bool())
    assert torch.equal(t3.valid_mask, t2.valid_mask)


def test_determinism():
    a, b = digit_vqa(0), digit_vqa(0)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.answer, b.answer)
    assert 0.75 < a.train.float().mean() < 0.85
    # images never straddle the split
    assert all(bool((a.train[a.image == i] == a.train[a.image == i][0]).all()) for i in range(0, 1797, 97))
    cfg = replace(VLM_QUICK, steps=3, batch_size=8)
    m1, m2 = train_tiny_vlm(cfg), train_tiny_vlm(cfg)
    assert all(torch.equal(p, q) for p, q in zip(m1.state_dict().values(), m2.state_dict().values()))
    rng = np.random.default_rng(0)
    tr = _synthetic_trace(60, rng.normal(size=(60, 3)), rng.normal(size=(60, 3)))
    y = rng.integers(0, 2, 60)
    assert np.array_equal(unique_information_probe(tr, y, n_folds=3, seed=1),
                          unique_information_probe(tr, y, n_folds=3, seed=1))
    assert answer_correct(m1, a.subset(torch.arange(10))).shape == (10,)


# --- the quick reproduction ------------------------------------------------------------------------------

def test_reproduce_quick_is_well_formed():
    from icml26.interpret.layer_skip.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    checks = [c for c in out.claims if c.kind == "check"]
    assert len(claims) >= 7 and len(checks) == 6
    assert all(c.falsifier for c in claims)
    assert all(c.verdict in ("holds", "does not hold", "inconclusive") for c in out.claims)
    for c in out.claims:                 # NaN only where the claim says why (no exit chosen, all skips tie)
        assert math.isfinite(c.measured) or "NaN" in c.note, c.statement
        if "vision exit chosen" in c.statement and not math.isfinite(c.measured):
            assert "no exit" in c.note
    assert sum(math.isfinite(c.measured) for c in claims) >= 6
    assert all(c.verdict == "holds" for c in checks)
    assert {"accuracy_vs_flops"} <= set(out.figures)
    assert all(math.isfinite(v) for k, v in out.metrics.items() if "spearman" not in k)
    # issue 30: the plan claim is decided by the strongest baseline, which includes skip-the-last-k and random
    # k-subsets at equal FLOPs; every fixed-bar claim carries a control
    plan = next(c for c in claims if "strongest baseline at equal" in c.statement)
    assert any("last" in n for n in plan.baselines) and any("random" in n for n in plan.baselines)
    assert plan.reference == max(plan.baselines.values())
    assert all(c.control is not None for c in claims if c.bar)
    assert "exit_rule_sweep" in out.tables
    # review finding 2: block L-1's V-skip is free (its V outputs are never read), so no plan may spend a slot on it
    name = next(k[: -len("_layers")] for k in out.tables if k.endswith("_layers"))
    layers = out.tables[f"{name}_layers"]
    L = len(layers)
    assert layers[-1]["acc_skip_V"] == pytest.approx(out.metrics[f"{name}_base_acc"])
    for row in out.tables["plans"]:
        if row["plan"].startswith(("Skip-It", "skip the last")):
            assert str(L - 1) not in row["blocks"].strip("()").split(", "), row
    # review finding 1: the "<= 2 points" bar's control is the label-free skip-the-last-k plan, not a random subset
    best = next(c for c in claims if "most redundant blocks for V costs" in c.statement)
    assert best.control == pytest.approx(out.metrics["base_acc"] - out.metrics["lastk_acc"])
    # review finding 3: the U-shape claim is decided on D (adjacent vision tokens' similarity) at h_1 and h_L
    u = next(c for c in claims if "U-shape" in c.statement)
    # measured is min(mean D_1, mean D_L) (both ends above the middle, as the falsifier says; the per-pair minimum
    # read a clear U as "no U": third review), and measured - reference is exactly the mean of the per-pair
    # differences of the lower end (it once was not: A14 seed 0)
    assert u.measured == pytest.approx(min(layers[0]["D_out"], layers[-1]["D_out"]), abs=1e-6)
    assert u.reference == pytest.approx(np.mean([r["D_out"] for r in layers[1:-1]]))
    assert u.measured - u.reference == pytest.approx(np.mean(u.paired), abs=1e-6)
    # its control is the untrained architecture, tested against its own middle
    assert u.control is not None and "untrained" in u.control_arm
    assert u.control - u.reference == pytest.approx(np.mean(u.control_paired), abs=1e-6)


def test_u_shape_statistic_reads_both_ends_not_the_per_pair_minimum():
    """Third review, finding 1: with both ends above the middle on every pair but far apart from each other, the
    mean of the per-pair minimum can sit below the middle; the claim's statistic (min of the end means) does not."""
    from icml26.interpret.layer_skip.reproduce import _u_shape_D

    B = 40
    g = np.random.default_rng(0)
    swing = np.where(np.arange(B) % 2 == 0, 0.10, -0.10)          # ends alternate which one is high
    mid = 0.78 + 0.001 * g.standard_normal((3, B))
    d1, dl = 0.80 + swing, 0.81 - swing                         # both end means above 0.78; per-pair min 0.70-0.71
    D_ex = np.vstack([np.full(B, 0.5), d1, mid, dl])            # h_0 (ignored), h_1, h_2..h_{L-1}, h_L
    measured, reference, paired, extra = _u_shape_D(D_ex)
    assert measured > reference and np.mean(paired) > 0
    assert measured - reference == pytest.approx(np.mean(paired))
    assert extra["per_pair_min_minus_mid"] < 0 < extra["first_minus_mid"] < extra["last_minus_mid"]


def test_reproduce_retrains_the_model_per_seed(monkeypatch):
    """Issue 30: seeds must retrain the VLMs, not only redraw the evaluation split."""
    from icml26.interpret.layer_skip import reproduce as rp

    seen = []

    def fake_load(cfg):
        seen.append(cfg.seed)
        raise RuntimeError("stop")

    monkeypatch.setattr(rp, "load_tiny_vlm", fake_load)
    for seed in (3, 4):
        with pytest.raises(RuntimeError, match="stop"):
            rp.reproduce(Budget.QUICK, seed=seed)
    assert seen == [3, 4]


def test_vlm_trains_on_one_thread_with_deterministic_algorithms(threads_during_training):
    """The cached VLMs must not depend on the builder's thread count: training runs inside pinned_training(1)."""
    import icml26.interpret.layer_skip.testbed as tb

    seen, after = threads_during_training(tb, lambda: tb.train_tiny_vlm(replace(tb.VLM_QUICK, steps=1)))
    assert seen == [(1, True)] and after == 2
