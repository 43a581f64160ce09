"""[A07] Artificial Hippocampus Networks: window attention + sinks, GDN/DeltaNet/Mamba2 memories (chunked vs
recurrent vs independent oracles), the HF wrapper (exactness, Mistral parity, streaming), distillation, reproduction."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

from icml26.harness import Budget, Outcome
from icml26.lm.ahn import (
    AHNCache,
    AHNConfig,
    AHNMemory,
    attended_keys,
    attention_flops,
    augment_with_ahn,
    chunk_memory_rule,
    decoder_flops,
    kv_cache_bytes,
    memory_step,
    self_distill_ahn,
    sliding_window_mask,
)

V = 97


def _llama(seed=0, layers=2, kv_heads=2):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=kv_heads, intermediate_size=64, max_position_embeddings=512,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(cfg).eval()


def _out_weight(mem):
    """The output projection's weight: per-head blocks [H, d, d] (official style) or a dense Linear's (v1)."""
    return mem.out_proj if isinstance(mem.out_proj, torch.nn.Parameter) else mem.out_proj.weight


def _randomize_memory(m, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mem in m.memories:
            _out_weight(mem).normal_(0, 0.3, generator=g)
            mem.a_proj.weight.normal_(0, 0.3, generator=g)
            mem.b_proj.weight.normal_(0, 0.3, generator=g)


@pytest.fixture(scope="module")
def base():
    return _llama()


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, V, (2, 75), generator=torch.Generator().manual_seed(0))


def _inputs(B=2, H=3, T=50, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, d, generator=g)
    k = torch.nn.functional.normalize(torch.randn(B, H, T, d, generator=g), dim=-1)
    v = torch.randn(B, H, T, d, generator=g)
    beta = torch.rand(B, H, T, generator=g)
    gl = -torch.rand(B, H, T, generator=g)
    return q, k, v, beta, gl


def _loop_recurrence(q, k, v, beta, g, delta):
    """Independent oracle, one token and one head at a time, in matrix form S_t = a_t (I - b k k^T) S + b k v^T."""
    B, H, T, d = k.shape
    out = torch.zeros(B, H, T, v.shape[-1], dtype=torch.float64)
    S_fin = torch.zeros(B, H, d, v.shape[-1], dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            S = torch.zeros(d, v.shape[-1], dtype=torch.float64)
            for t in range(T):
                kt, vt, qt = k[b, h, t].double(), v[b, h, t].double(), q[b, h, t].double()
                a, bt = math.exp(g[b, h, t].item()), beta[b, h, t].item()
                P = torch.eye(d, dtype=torch.float64) - bt * torch.outer(kt, kt) if delta else torch.eye(d, dtype=torch.float64)
                S = a * (P @ S) + bt * torch.outer(kt, vt)
                out[b, h, t] = qt @ S
            S_fin[b, h] = S
    return out, S_fin


# window attention

@pytest.mark.parametrize("T,W,S", [(10, 3, 0), (10, 3, 2), (7, 20, 1), (12, 1, 4)])
def test_mask_matches_brute_force(T, W, S):
    m = sliding_window_mask(T, W, S)
    for t in range(T):
        for j in range(T):
            assert bool(m[t, j]) == (j <= t and (t - j < W or j < S))
    assert attended_keys(T, W, S) == int(m.sum())


def test_mask_full_when_window_covers_sequence():
    assert torch.equal(sliding_window_mask(9, 9, 0), torch.ones(9, 9, dtype=torch.bool).tril())
    assert torch.equal(sliding_window_mask(9, None), torch.ones(9, 9, dtype=torch.bool).tril())


# memories: chunked form vs recurrences

@pytest.mark.parametrize("delta", [True, False])
@pytest.mark.parametrize("chunk", [1, 7, 16, 64])
def test_chunked_equals_step_recurrence_and_loop_oracle(delta, chunk):
    q, k, v, beta, g = _inputs()
    o, S = chunk_memory_rule(q, k, v, beta, g, delta_rule=delta, chunk_size=chunk)
    st, outs = torch.zeros(2, 3, 8, 8), []
    for t in range(q.shape[2]):
        st = memory_step(st, k[:, :, t], v[:, :, t], beta[:, :, t], g[:, :, t], delta_rule=delta)
        outs.append((q[:, :, t, None] @ st)[:, :, 0])
    assert torch.allclose(o, torch.stack(outs, 2), atol=1e-5)
    assert torch.allclose(S, st, atol=1e-5)
    o_ref, S_ref = _loop_recurrence(q, k, v, beta, g, delta)
    assert torch.allclose(o.double(), o_ref, atol=1e-5)
    assert torch.allclose(S.double(), S_ref, atol=1e-5)


def test_chunked_carries_initial_state():
    q, k, v, beta, g = _inputs(T=40)
    o_all, S_all = chunk_memory_rule(q, k, v, beta, g, chunk_size=8)
    _, S1 = chunk_memory_rule(q[:, :, :23], k[:, :, :23], v[:, :, :23], beta[:, :, :23], g[:, :, :23], chunk_size=8)
    o2, S2 = chunk_memory_rule(q[:, :, 23:], k[:, :, 23:], v[:, :, 23:], beta[:, :, 23:], g[:, :, 23:], chunk_size=8,
                               initial_state=S1)
    assert torch.allclose(o2, o_all[:, :, 23:], atol=1e-5) and torch.allclose(S2, S_all, atol=1e-5)


@pytest.mark.parametrize("gated", [True, False])
def test_matches_transformers_qwen3_next_torch_gated_delta_rule(gated):
    mod = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    q, k, v, beta, g = _inputs(T=70)
    if not gated:
        g = torch.zeros_like(g)  # DeltaNet: a_t = 1
    d = q.shape[-1]
    t = lambda x: x.transpose(1, 2)  # noqa: E731  (theirs is [B, T, H, d])
    ref, ref_S = mod.torch_recurrent_gated_delta_rule(t(q), t(k), t(v), t(g), t(beta), output_final_state=True)
    o, S = chunk_memory_rule(q / math.sqrt(d), k, v, beta, g, chunk_size=16)   # theirs scales q by 1/sqrt(d)
    assert torch.allclose(o, t(ref), atol=1e-5) and torch.allclose(S, ref_S, atol=1e-5)


def _fla_naive(rel):
    """flash-linear-attention's pure-PyTorch reference file, loaded on its own (its package imports Triton)."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("flash-linear-attention (fla-core) not installed")
    pytest.importorskip("einops")
    path = Path(list(spec.submodule_search_locations)[0]) / rel
    if not path.exists():
        pytest.skip(f"fla has no {rel}")
    s = importlib.util.spec_from_file_location(f"_fla_{path.parent.name}_naive", path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


def test_matches_fla_reference_gated_delta_rule():
    naive = _fla_naive("ops/gated_delta_rule/naive.py")
    q, k, v, beta, g = _inputs(T=70)
    t = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
    ref, ref_S = naive.naive_recurrent_gated_delta_rule(t(q), t(k), t(v), t(beta), t(g), scale=1.0,
                                                        output_final_state=True)
    o, S = chunk_memory_rule(q, k, v, beta, g, chunk_size=16)
    assert torch.allclose(o, t(ref).float(), atol=1e-5) and torch.allclose(S, ref_S.float(), atol=1e-5)


def test_matches_fla_reference_delta_rule():
    naive = _fla_naive("ops/delta_rule/naive.py")
    q, k, v, beta, g = _inputs(T=70)
    ref, ref_S = naive.delta_rule_recurrence(q, k, v, beta)   # [B, H, T, d]; scales q by d^-1/2
    o, S = chunk_memory_rule(q / math.sqrt(q.shape[-1]), k, v, beta, torch.zeros_like(g), chunk_size=16)
    assert torch.allclose(o, ref.float(), atol=1e-5) and torch.allclose(S, ref_S.float(), atol=1e-5)


def test_deltanet_closed_form_orthonormal_keys():
    d = 8
    keys = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(3)))[0].T  # orthonormal rows
    vals = torch.randn(d, 5, generator=torch.Generator().manual_seed(4))
    k = keys[None, None]
    v = vals[None, None]
    ones = torch.ones(1, 1, d)
    _, S = chunk_memory_rule(k, k, v, ones, torch.zeros(1, 1, d), chunk_size=3)
    read = keys @ S[0, 0]          # q = k_j returns v_j exactly
    assert torch.allclose(read, vals, atol=1e-5)
    # overwriting a key replaces its value (the delta rule), it does not add to it
    v2 = torch.randn(1, 1, 1, 5)
    S2 = memory_step(S, k[:, :, 2], v2[:, :, 0], torch.ones(1, 1), torch.zeros(1, 1))
    assert torch.allclose(keys[2] @ S2[0, 0], v2[0, 0, 0], atol=1e-5)


@pytest.mark.parametrize("kind", ["gdn", "deltanet", "mamba2"])
@pytest.mark.parametrize("style", ["official", "v1"])
def test_memory_module_step_equals_forward(kind, style):
    mem = AHNMemory(kind, 16, 2, 8, chunk_size=8, style=style)
    torch.nn.init.normal_(_out_weight(mem), std=0.2)
    g = torch.Generator().manual_seed(0)
    k, v, q = (torch.randn(1, 2, 20, 8, generator=g) for _ in range(3))
    x, xq = torch.randn(1, 20, 16, generator=g), torch.randn(1, 20, 16, generator=g)
    o, S = mem(k, v, x, q, x_q=xq)
    st = mem.init_state(1)
    for t in range(20):
        ot, st = mem.step(st, k[:, :, t], v[:, :, t], x[:, t], q[:, :, t], xq[:, t])
        assert torch.allclose(ot, o[:, :, t], atol=1e-5)
    assert torch.allclose(st, S, atol=1e-5)


def test_matches_fla_reference_simple_gla_for_mamba2():
    """Mamba2's scalar-decay update S <- e^g S + dt k v^T is fla's simple GLA with keys dt * k."""
    naive = _fla_naive("ops/simple_gla/naive.py")
    q, k, v, beta, g = _inputs(T=70)
    t = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
    ref, ref_S = naive.naive_recurrent_simple_gla(t(q), t(k * beta[..., None]), t(v), t(g), scale=1.0)
    o, S = chunk_memory_rule(q, k, v, beta, g, delta_rule=False, chunk_size=16)
    assert torch.allclose(o, t(ref).float(), atol=1e-5) and torch.allclose(S, ref_S.float(), atol=1e-5)


@pytest.mark.parametrize("kind", ["gdn", "mamba2"])
@torch.no_grad()
def test_official_output_stage_matches_reference_formula(kind):
    """ByteDance-Seed/AHN: GDN/DeltaNet FusedRMSNormSwishGate(head_dim)(o, g) = rmsnorm_h(o) w silu(g), Mamba2
    RMSNormGated(H d, norm_before_gate=False)(o, g) = rmsnorm(o silu(g)) w, with g = g_proj(x_t) repeated over each
    head's dims; then GroupLinear (per-head blocks, einsum 'bgi,gio->bgo')."""
    H, d, hid, n = 3, 8, 16, 5
    mem = AHNMemory(kind, hid, H, d, style="official")
    gen = torch.Generator().manual_seed(4)
    mem.out_proj.normal_(0, 0.3, generator=gen)
    mem.o_norm.weight.normal_(1, 0.2, generator=gen)
    o, x = torch.randn(2, H, n, d, generator=gen), torch.randn(2, n, hid, generator=gen)
    z = mem.g_proj(x).repeat_interleave(d, dim=-1)                            # [B, n, H d]
    flat = o.transpose(1, 2).reshape(2, n, H * d)
    rms = lambda a, w, eps=1e-5: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * w  # noqa: E731
    if kind == "mamba2":
        y = rms(flat * F.silu(z), mem.o_norm.weight)
    else:
        y = rms(flat.view(2, n, H, d), mem.o_norm.weight).reshape(2, n, H * d) * F.silu(z)
    ref = torch.einsum("bgi,gio->bgo", y.reshape(-1, H, d), mem.out_proj).reshape(2, n, H, d).transpose(1, 2)
    assert torch.allclose(mem.project(o, x), ref, atol=1e-5)
    assert sum(p.numel() for p in [mem.out_proj]) == H * d * d                # block-diagonal, not (H d)^2
    with pytest.raises(ValueError, match="x_q"):
        mem.project(o)


def test_official_gate_initialisation():
    torch.manual_seed(0)
    gdn, m2 = AHNMemory("gdn", 32, 16, 8), AHNMemory("mamba2", 32, 16, 8)
    A = gdn.A_log.exp()
    assert (A > 0).all() and (A < 16).all() and A.mean() > 4          # U(0, 16), not (1..16)/16
    dt = F.softplus(gdn.dt_bias)
    assert (dt >= 1e-4 - 1e-9).all() and (dt <= 0.1 + 1e-6).all()
    assert torch.allclose(m2.A_log.exp(), torch.arange(1.0, 17.0))
    dt0 = F.softplus(m2.dt_bias)                                        # Mamba2 step size about 1.3 at init
    assert torch.allclose(dt0, torch.full((16,), math.log1p(math.e)))
    v1 = AHNMemory("gdn", 32, 16, 8, style="v1")
    assert v1.A_log.exp().max() <= 1.0 + 1e-6 and v1.g_proj is None


# wrapper

def test_full_attention_and_wide_window_equal_base(base, ids):
    m = augment_with_ahn(base, kind="gdn", window=8, num_sinks=2, chunk_size=16)
    with torch.no_grad():
        ref = base(ids).logits
        assert torch.allclose(m(ids, window=None).logits, ref, atol=1e-5)
        _randomize_memory(m)
        assert torch.allclose(m(ids, window=ids.shape[1], num_sinks=0).logits, ref, atol=1e-5)
        # T <= S + W: exactly the base even with a trained (non-zero) memory
        assert torch.allclose(m(ids[:, :10], window=8, num_sinks=2).logits, ref[:, :10], atol=1e-5)


def test_window_only_matches_hf_mistral_sliding_window(base, ids):
    c = base.config
    mc = MistralConfig(vocab_size=V, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
                       num_attention_heads=c.num_attention_heads, num_key_value_heads=c.num_key_value_heads,
                       intermediate_size=c.intermediate_size, max_position_embeddings=512, sliding_window=8,
                       bos_token_id=None, eos_token_id=None, pad_token_id=None)
    mistral = MistralForCausalLM(mc).eval()
    mistral.load_state_dict(base.state_dict(), strict=False)
    m = augment_with_ahn(base, kind="gdn", window=8, num_sinks=0)
    with torch.no_grad():
        ours = m(ids, use_memory=False).logits
        assert torch.allclose(ours, mistral(ids).logits, atol=1e-5)
        assert not torch.allclose(ours, base(ids).logits, atol=1e-3)  # the window really cuts context
    # and the wrapper takes the Mistral model itself
    mm = augment_with_ahn(mistral, kind="deltanet", window=8, num_sinks=0)
    with torch.no_grad():
        assert torch.allclose(mm(ids, use_memory=False).logits, ours, atol=1e-5)


@pytest.mark.parametrize("kind", ["gdn", "deltanet", "mamba2"])
def test_zero_init_ahn_equals_window_only_and_memory_matters_once_trained(base, ids, kind):
    m = augment_with_ahn(base, kind=kind, window=8, num_sinks=2, chunk_size=16)
    with torch.no_grad():
        win = m(ids, use_memory=False).logits
        assert torch.equal(m(ids).logits, win)
        _randomize_memory(m)
        assert (m(ids).logits - win).abs().max() > 1e-3


@pytest.mark.parametrize("kind", ["gdn", "deltanet", "mamba2"])
def test_streaming_equals_parallel_and_cache_is_constant(kind):
    base = _llama(kv_heads=2)
    m = augment_with_ahn(base, kind=kind, window=8, num_sinks=2, chunk_size=16)
    _randomize_memory(m)
    ids = torch.randint(0, V, (2, 60), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        par = m(ids).logits
        cache = m.new_cache(2)
        sizes = []
        for t in range(60):
            assert torch.allclose(m.step(ids[:, t], cache), par[:, t], atol=1e-5)
            sizes.append(cache.nbytes())
        assert len(set(sizes)) == 1
        pre = m(ids[:, :33], return_cache=True).cache      # parallel prefill then streaming
        for t in range(33, 60):
            assert torch.allclose(m.step(ids[:, t], pre), par[:, t], atol=1e-5)
    assert sizes[0] == 2 * kv_cache_bytes(60, num_layers=2, num_kv_heads=2, head_dim=8, window=8, num_sinks=2,  # batch 2
                                      num_heads=4, memory=True)


@pytest.mark.parametrize("kind", ["gdn", "deltanet", "mamba2"])
def test_float64_model_streams_and_prefills_to_round_off(kind):
    """A float64 model stays float64 in the memory (it used to be cast to float32 and fail with a dtype error), so
    the streaming = parallel identity holds to round-off, not to float32's ~1e-5 on logits of ~20."""
    m = augment_with_ahn(_llama(kv_heads=2), kind=kind, window=8, num_sinks=2, chunk_size=16)
    _randomize_memory(m)
    m = m.double()
    ids = torch.randint(0, V, (2, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        par = m(ids).logits
        assert par.dtype == torch.float64
        cache = m.new_cache(2)
        stream = torch.stack([m.step(ids[:, t], cache) for t in range(40)], 1)
        pre = m(ids[:, :25], return_cache=True).cache
        tail = torch.stack([m.step(ids[:, t], pre) for t in range(25, 40)], 1)
    assert (stream - par).abs().max() < 1e-10
    assert (tail - par[:, 25:]).abs().max() < 1e-10


@pytest.mark.parametrize("kind", ["gdn", "deltanet", "mamba2"])
def test_bf16_model_runs_with_the_memory_in_float32(kind):
    """A model cast to bf16 (how 3B-scale bases are run) used to fail: the memory fed float32 inputs to its bf16
    layers. Now its layers are applied in the memory's working precision (float32); outputs stay bf16, streaming
    matches the parallel form to bf16 round-off, and both stay near the float32 model."""
    m = augment_with_ahn(_llama(kv_heads=2), kind=kind, window=8, num_sinks=2, chunk_size=16)
    _randomize_memory(m)
    ids = torch.randint(0, V, (2, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = m(ids).logits
        mb = m.to(torch.bfloat16)
        assert mb.memories[0].compute_dtype == torch.float32
        par = mb(ids).logits
        cache = mb.new_cache(2)
        stream = torch.stack([mb.step(ids[:, t], cache) for t in range(40)], 1)
    assert par.dtype == torch.bfloat16
    assert (stream.float() - par.float()).abs().max() < 1e-2
    assert (par.float() - ref).abs().max() < 0.1 * ref.abs().max()


def test_full_attention_generate_equals_hf_greedy(base, ids):
    m = augment_with_ahn(base, kind="gdn", window=8, num_sinks=2)
    with torch.no_grad():
        ours = m.generate(ids[:1, :20], 12, window=None)
        hf = base.generate(ids[:1, :20], max_new_tokens=12, do_sample=False, attention_mask=torch.ones(1, 20))
        assert torch.equal(ours, hf)
        assert m.generate(ids[:1, :20], 12).shape == (1, 32)


def test_base_frozen_and_distillation_trains_only_ahn(base):
    m = augment_with_ahn(base, kind="gdn", window=8, num_sinks=2, chunk_size=16)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    data = torch.randint(0, V, (6, 40), generator=torch.Generator().manual_seed(2))
    r1 = self_distill_ahn(m, data, steps=3, batch_size=2, windows=(8, 16), sinks=(2,), seed=5)
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())
    assert all(not p.requires_grad for p in base.parameters())
    assert any(_out_weight(mem).abs().sum() > 0 for mem in m.memories)
    m2 = augment_with_ahn(base, kind="gdn", window=8, num_sinks=2, chunk_size=16)
    r2 = self_distill_ahn(m2, data, steps=3, batch_size=2, windows=(8, 16), sinks=(2,), seed=5)
    assert r1.losses == r2.losses and r1.windows == r2.windows   # same seed, same run


def test_cost_accounting():
    kw = dict(num_layers=4, num_kv_heads=4, head_dim=32)
    assert kv_cache_bytes(4096, **kw) == 2 * kv_cache_bytes(2048, **kw)
    a = kv_cache_bytes(4096, window=32, num_sinks=4, num_heads=4, memory=True, **kw)
    assert a == kv_cache_bytes(1 << 17, window=32, num_sinks=4, num_heads=4, memory=True, **kw)
    full = attention_flops(1024, num_layers=1, num_heads=1, head_dim=1)
    assert full == 4 * 1024 * 1025 / 2
    assert attention_flops(1024, num_layers=1, num_heads=1, head_dim=1, window=1024) == full


def test_state_bytes_follow_the_dtype_unless_told():
    """Review finding 3: kv_cache_bytes counted the AHN state and gates at 4 bytes whatever dtype_bytes said."""
    kw = dict(num_layers=2, num_kv_heads=2, head_dim=8, window=8, num_sinks=2, num_heads=4, memory=True)
    kv = 2 * 2 * 2 * 8 * (2 + 8)                          # K and V, 2 layers x 2 KV heads x d 8 x 10 slots
    state = 2 * 4 * (8 * 8 + 2 * 8)                       # per layer and query head: d x d state + 2 gates per slot
    assert kv_cache_bytes(60, dtype_bytes=2, **kw) == 2 * (kv + state)
    assert kv_cache_bytes(60, dtype_bytes=2, state_bytes=4, **kw) == 2 * kv + 4 * state


def test_decoder_flops_counts_linear_layers_and_attention():
    kw = dict(num_layers=1, hidden_size=4, intermediate_size=8, num_heads=2, num_kv_heads=1, head_dim=2, vocab_size=10)
    per_token = 4 * 4 * 2 + 2 * 4 * 2 + 3 * 4 * 8 + 4 * 10   # q,o; k,v; MLP; head (multiply-adds)
    assert decoder_flops(5, **kw) == 2 * per_token * 5 + attention_flops(5, num_layers=1, num_heads=2, head_dim=2)
    # the abstract's setting: the package's cost model lands near the paper's -74.0% cache and -40.5% FLOPs
    from icml26.lm.ahn.reproduce import paper_costs
    c = paper_costs()
    assert 0.72 < c["paper_cache_cut_bf16_state"] < 0.74 and c["paper_cache_cut_fp32_state"] < 0.72
    assert 0.41 < c["paper_flops_cut"] < 0.44


def test_far_bigram_mask_excludes_a_pair_whose_second_token_is_still_in_the_window():
    """Review finding 5: j = t - W counted as 'beyond the window', but x_{j+1} = x_{t-W+1} is the window's oldest
    key, where in-window induction can still read it."""
    from icml26.lm.ahn.reproduce import _far_bigram_mask
    W, S, T = 4, 0, 16
    ids = torch.arange(100, 100 + T)[None].clone()
    t = 12
    ids[0, t - W], ids[0, t - W + 1] = ids[0, t], ids[0, t + 1]          # the bigram at j = t - W exactly
    assert not bool(_far_bigram_mask(ids, W, S)[0, t])
    ids = torch.arange(100, 100 + T)[None].clone()
    ids[0, t - W - 1], ids[0, t - W] = ids[0, t], ids[0, t + 1]          # j = t - W - 1: x_{j+1} has left
    assert bool(_far_bigram_mask(ids, W, S)[0, t])


def test_quick_base_plants_copies_beyond_the_quick_window():
    """Review finding 1: the copy recipe that makes full attention beat the window (span 32 of 96 tokens)."""
    from icml26.lm.ahn.reproduce import BASES, SIZES
    sz = SIZES[Budget.QUICK]
    cfg = BASES[sz.base]
    assert cfg.seq_len == sz.seq_len and cfg.span + cfg.min_gap > sz.window + sz.sinks
    assert cfg.span >= sz.seq_len // 3 and sz.steps >= 800


def test_quick_budget_distils_the_v1_output_stage_too():
    """Second pass, part A: the first version's output stage (style="v1") is compared with the official one at
    every budget, so the quick table shows it."""
    from icml26.lm.ahn.reproduce import SIZES
    assert all(sz.v1_arm for sz in SIZES.values())


# bad input: every public entry point refuses it before doing any work

def _rule(T=5, B=1, H=2, d=4):
    z = torch.zeros(B, H, T, d)
    return dict(q=z, k=z, v=z, beta=torch.zeros(B, H, T), g=torch.zeros(B, H, T))


def _step_args(B=1, H=2, d=4):
    return dict(state=torch.zeros(B, H, d, d), k=torch.zeros(B, H, d), v=torch.zeros(B, H, d),
                beta=torch.zeros(B, H), g=torch.zeros(B, H))


_NAN4 = torch.full((1, 2, 5, 4), float("nan"))
_LONG = torch.zeros(2, 40, dtype=torch.long)


def _bad_model_call(name):
    def call(**kw):
        m = augment_with_ahn(_llama(), kind="gdn", window=8, num_sinks=2)
        return getattr(m, name)(**kw)
    call.__name__ = f"AHNModel.{name}"
    return call


BAD_INPUTS = [
    ("sliding_window_mask", dict(T=0, window=4), ValueError, "T must be"),
    ("sliding_window_mask", dict(T=5, window=0), ValueError, "window"),
    ("attended_keys", dict(T=-5, window=4), ValueError, "T must be"),
    ("attended_keys", dict(T=5, window=4, num_sinks=-1), ValueError, "num_sinks"),
    ("attention_flops", dict(T=8, num_layers=0, num_heads=1, head_dim=1), ValueError, "num_layers"),
    ("decoder_flops", dict(T=8, num_layers=1, hidden_size=4, intermediate_size=8, num_heads=2, num_kv_heads=1,
                           head_dim=2, vocab_size=0), ValueError, "vocab_size"),
    ("kv_cache_bytes", dict(T=8, num_layers=1, num_kv_heads=1, head_dim=4, dtype_bytes=0), ValueError, "dtype_bytes"),
    ("kv_cache_bytes", dict(T=-1, num_layers=1, num_kv_heads=1, head_dim=4), ValueError, "T must be"),
    ("AHNMemory", dict(kind="gdn", hidden_size=0, num_heads=2, head_dim=4), ValueError, "hidden_size"),
    ("AHNMemory", dict(kind="lstm", hidden_size=8, num_heads=2, head_dim=4), ValueError, "kind"),
    ("GatedDeltaNetMemory", dict(hidden_size=8, num_heads=0, head_dim=4), ValueError, "num_heads"),
    ("DeltaNetMemory", dict(hidden_size=8, num_heads=2, head_dim=4, chunk_size=0), ValueError, "chunk_size"),
    ("Mamba2Memory", dict(hidden_size=8, num_heads=2, head_dim=4, use_q_proj="yes"), TypeError, "use_q_proj"),
    ("chunk_memory_rule", _rule() | dict(q=_NAN4), ValueError, "q has 40 NaN"),
    ("chunk_memory_rule", _rule() | dict(beta=torch.zeros(1, 2, 4)), ValueError, "beta must have shape"),
    ("chunk_memory_rule", _rule() | dict(g=torch.ones(1, 2, 5)), ValueError, "log-decay"),
    ("chunk_memory_rule", _rule() | dict(chunk_size=0), ValueError, "chunk_size"),
    ("chunk_memory_rule", _rule() | dict(initial_state=torch.zeros(1, 2, 4, 3)), ValueError, "state must have shape"),
    ("memory_step", _step_args() | dict(k=torch.zeros(1, 3, 4)), ValueError, "v must match k"),
    ("memory_step", _step_args() | dict(state=torch.zeros(1, 2, 4)), ValueError, "state must have 4 dimensions"),
    ("memory_read", dict(state=torch.zeros(1, 2, 4, 4), q=torch.zeros(1, 2, 5)), ValueError, "q must have shape"),
    ("memory_read", dict(state=[[0.0]], q=torch.zeros(1, 2, 4)), TypeError, "state must be a torch.Tensor"),
    ("AHNConfig", dict(window=0), ValueError, "window"),
    ("AHNConfig", dict(seed=-1), ValueError, "seed"),
    ("AHNConfig", dict(kind="lstm"), ValueError, "kind"),
    ("AHNModel", dict(base=torch.nn.Linear(3, 3), cfg=AHNConfig()), ValueError, "LlamaForCausalLM"),
    ("AHNModel", dict(base=_llama, cfg=dict(window=4)), TypeError, "AHNConfig"),
    ("AHNModel.forward", dict(input_ids=torch.full((1, 5), V, dtype=torch.long)), ValueError, "out of range"),
    ("AHNModel.forward", dict(input_ids=torch.zeros(5, dtype=torch.long)), ValueError, "batch, seq_len"),
    ("AHNModel.forward", dict(input_ids=torch.zeros(2, 20, dtype=torch.long), memory_from=torch.tensor([0])),
     ValueError, "memory_from"),
    ("AHNModel.new_cache", dict(batch=0), ValueError, "batch"),
    ("AHNModel.new_cache", dict(batch=1, window=None), ValueError, "capacity"),
    ("AHNModel.step", dict(token=torch.zeros(2, 1, dtype=torch.long), cache=None), TypeError, "AHNCache"),
    ("AHNModel.generate", dict(input_ids=torch.zeros(1, 4, dtype=torch.long), max_new_tokens=-1), ValueError,
     "max_new_tokens"),
    ("AHNModel.prefill", dict(input_ids=torch.zeros(1, 4, dtype=torch.long), extra_capacity=-1), ValueError,
     "extra_capacity"),
    ("AHNOutput", dict(logits=[[0.0]]), TypeError, "logits"),
    ("AHNCache", dict(window=4, num_sinks=1, k=[], v=[]), ValueError, "one tensor per layer"),
    ("AHNCache", dict(window=-4, num_sinks=1, k=[torch.zeros(1)], v=[torch.zeros(1)]), ValueError, "window"),
    ("augment_with_ahn", dict(model=torch.nn.Linear(3, 3)), ValueError, "LlamaForCausalLM"),
    ("augment_with_ahn", dict(model="llama"), TypeError, "torch.nn.Module"),
    ("self_distill_ahn", dict(model="ahn", data=_LONG, steps=1), TypeError, "AHNModel"),
    ("self_distill_ahn", dict(model=_llama, data=_LONG, steps=0), ValueError, "steps"),
    ("self_distill_ahn", dict(model=_llama, data=_LONG, steps=1, lr=float("nan")), ValueError, "lr"),
    ("self_distill_ahn", dict(model=_llama, data=torch.full((2, 40), V, dtype=torch.long), steps=1), ValueError,
     "out of range"),
    ("self_distill_ahn", dict(model=_llama, data=torch.zeros(2, 16, dtype=torch.long), steps=1, windows=(64,)),
     ValueError, "T/8 < W < T"),
    ("self_distill_ahn", dict(model=_llama, data=_LONG, steps=1, loss_mask=torch.ones(3, 3, dtype=torch.bool)),
     ValueError, "loss_mask"),
    ("DistillResult", dict(losses=3.0), TypeError, "losses must be a list"),
    ("CopyLMConfig", dict(span=0), ValueError, "span"),
    ("CopyLMConfig", dict(seq_len=64, span=32, min_gap=10), ValueError, "too short"),
    ("CopyLMConfig", dict(lr=-1.0), ValueError, "lr"),
    ("load_copy_lm", dict(cfg="copy-2L"), TypeError, "CopyLMConfig"),
    ("plant_copies", dict(seqs=torch.zeros(2, 40, dtype=torch.long), span=0, min_gap=4), ValueError, "span"),
    ("plant_copies", dict(seqs=torch.zeros(40, dtype=torch.long), span=4, min_gap=4), ValueError, "seqs"),
    ("plant_copies", dict(seqs=torch.zeros(2, 20, dtype=torch.long), span=8, min_gap=8), ValueError, "too short"),
]


def _entry(name):
    import icml26.lm.ahn as pkg
    if name.startswith("AHNModel."):
        return _bad_model_call(name.split(".")[1])
    return getattr(pkg, name)


def _materialise(kw):
    out = {}
    for k, val in kw.items():
        if val is _llama:
            val = augment_with_ahn(_llama(), kind="gdn", window=8, num_sinks=2) if k == "model" else _llama()
        out[k] = val
    return out


@pytest.mark.parametrize("name,kwargs,err,fragment", BAD_INPUTS, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise_clear_errors(name, kwargs, err, fragment):
    import re
    with pytest.raises(err, match=re.escape(fragment)):
        _entry(name)(**_materialise(kwargs))


def test_every_public_entry_point_has_a_bad_input_case():
    import icml26.lm.ahn as pkg
    constants = {"COPY_4L", "COPY_2L"}
    covered = {c[0].split(".")[0] for c in BAD_INPUTS}
    assert set(pkg.__all__) - constants <= covered


def test_bad_window_raises_everywhere(base):
    for w in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="window"):
            AHNConfig(window=w)
        m = augment_with_ahn(base, window=4)
        with pytest.raises(ValueError, match="window"):
            m(torch.zeros(1, 5, dtype=torch.long), window=w)
    assert AHNCache(window=None, num_sinks=0, k=[torch.zeros(1)], v=[torch.zeros(1)]).slot(3) == 3


# reproduction

def test_quick_reproduction_structure():
    from icml26.lm.ahn.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) >= 4 and out.checks
    no_gap = not out.metrics["teacher_gain_ce"] > 0  # a tiny base whose full attention is no better than the window
    for c in out.claims:
        if no_gap and "of the loss gap" in c.statement:
            # the gap fraction is undefined (NaN) without a gap, and the claim must then be undecided, never decided
            assert math.isnan(c.measured) and c.verdict == "inconclusive", c.statement
            continue
        assert math.isfinite(c.measured), c.statement
        assert c.verdict in ("holds", "does not hold", "inconclusive")
        if c.kind == "claim":
            assert c.falsifier
    assert {"ce_gdn-v1", "ahn_params_gdn_v1", "ce_v1_minus_official_gdn"} <= set(out.metrics)
    assert out.metrics["ce_v1_minus_official_gdn_seq_lo"] <= out.metrics["ce_v1_minus_official_gdn"]
    assert not any("v1" in c.statement for c in out.claims)   # a comparison, not a claim of the paper
    # third review: every "better than the window" claim also faces the window with the AHN's cache bytes
    window_claims = [c for c in claims if c.baselines]
    assert len(window_claims) == 6 and out.metrics["window_equal_bytes"] > 16
    assert all(any("equal cache bytes" in n for n in c.baselines) for c in window_claims)
    for c in out.checks:   # exactness checks are true by construction: they must hold
        if "the testbed can decide" in c.statement:
            # a precondition on the trained base, not an identity: reported as measured (the tiny quick base,
            # and so far the standard one too, does not use context beyond the window)
            assert math.isfinite(c.measured), c.statement
            continue
        assert c.verdict == "holds", c.statement


def test_equal_bytes_window_is_the_widest_window_within_the_ahn_cache():
    from icml26.lm.ahn.reproduce import equal_bytes_window

    cfg = _llama(kv_heads=2).config                     # 2 layers, 4 heads of 8, 2 KV heads
    kw = dict(num_layers=2, num_kv_heads=2, head_dim=8)
    W, S, T = 8, 2, 200
    ahn = kv_cache_bytes(T, window=W, num_sinks=S, num_heads=4, memory=True, **kw)
    w = equal_bytes_window(cfg, W, S, T)
    assert w > W
    assert kv_cache_bytes(T, window=w, num_sinks=S, **kw) <= ahn < kv_cache_bytes(T, window=w + 1, num_sinks=S, **kw)


def test_memory_from_control_and_loss_mask(base, ids):
    """memory_from=identity is the ordinary forward; another row's memory changes only positions that read it.
    An all-true loss_mask is the plain KL; a bad mask is refused."""
    m = augment_with_ahn(base, kind="gdn", window=8, num_sinks=2, chunk_size=16)
    _randomize_memory(m)
    B = ids.shape[0]
    with torch.no_grad():
        own = m(ids).logits
        assert torch.equal(m(ids, memory_from=torch.arange(B)).logits, own)
        other = m(ids, memory_from=torch.roll(torch.arange(B), 1)).logits
        assert torch.equal(other[:, :10], own[:, :10])                  # t < S + W reads no memory
        assert (other[:, 10:] - own[:, 10:]).abs().max() > 1e-4
    with pytest.raises(ValueError, match="memory_from"):
        m(ids, memory_from=torch.tensor([0]))
    data = torch.randint(0, V, (6, 40), generator=torch.Generator().manual_seed(2))
    m1 = augment_with_ahn(base, kind="gdn", window=8, num_sinks=2, chunk_size=16)
    m2 = augment_with_ahn(base, kind="gdn", window=8, num_sinks=2, chunk_size=16)
    r1 = self_distill_ahn(m1, data, steps=2, batch_size=2, windows=(8,), sinks=(2,), seed=1)
    r2 = self_distill_ahn(m2, data, steps=2, batch_size=2, windows=(8,), sinks=(2,), seed=1,
                          loss_mask=torch.ones_like(data, dtype=torch.bool))
    assert r1.losses == pytest.approx(r2.losses, rel=1e-6)
    with pytest.raises(ValueError, match="loss_mask"):
        self_distill_ahn(m2, data, steps=1, loss_mask=torch.ones(3, 3, dtype=torch.bool))
