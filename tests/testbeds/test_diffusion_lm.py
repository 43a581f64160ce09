"""Tests for the masked diffusion LM testbed: tasks, exact oracles, the tiny model, the decoder framework."""

import itertools
import math

import numpy as np
import pytest
import torch

from icml26.testbeds.diffusion_lm import (
    BOS,
    EOS,
    PAD,
    ConfidenceThresholdDecoder,
    DLMTrainConfig,
    LowConfidenceRemasking,
    PFSAOracleMLM,
    PhraseGrammar,
    PhraseGrammarConfig,
    SudokuOracleMLM,
    SudokuTask,
    TinyMaskedDiffusionLM,
    TranslationOracleMLM,
    TranslationTask,
    check_invariants,
    decode,
    generate,
    load_masked_diffusion_lm,
    mdlm_loss,
    sudoku_grids,
)
from icml26.testbeds.diffusion_lm.model import dlm_name, one_token_validity, train_masked_diffusion_lm

SMALL = PhraseGrammarConfig(n_types=2, heads_per_type=2, n_tail_tokens=2, max_tail=1, stop_prob=0.4,
                            response_length=6, seed=3)


def _all_sentences(g: PhraseGrammar) -> dict:
    """Brute force from the grammar's definition: every sentence of length <= R-1 with its probability."""
    out, R = {}, g.response_length

    def rec(toks, t, p):
        for h in np.flatnonzero(g.head_type == t):
            tt = toks + [g.head0 + h, *g.tails[h]]
            if len(tt) > R - 1:
                continue
            q = p * g.head_p[h]
            key = tuple(tt + [EOS] + [PAD] * (R - len(tt) - 1))
            out[key] = out.get(key, 0.0) + q * g.config.stop_prob
            for t2 in range(g.config.n_types):
                if g.trans[t, t2] > 0:
                    rec(tt, t2, q * (1 - g.config.stop_prob) * g.trans[t, t2])

    for t in range(g.config.n_types):
        rec([], t, g.start[t])
    z = sum(out.values())
    return {k: v / z for k, v in out.items()}


def _brute_marginals(table: dict, x: np.ndarray, mask: int, V: int) -> np.ndarray:
    m = np.zeros((len(x), V))
    for s, p in table.items():
        if all(xi == mask or xi == si for xi, si in zip(x, s)):
            m[np.arange(len(x)), list(s)] += p
    return m / m.sum(1, keepdims=True)


# tasks

def test_sudoku_has_288_valid_grids():
    g = sudoku_grids()
    assert g.shape == (288, 16) and len({tuple(r) for r in g}) == 288
    G = g.reshape(-1, 4, 4)
    full = np.arange(1, 5)
    assert (np.sort(G, 1) == full[None, :, None]).all() and (np.sort(G, 2) == full[None, None, :]).all()
    boxes = G.reshape(-1, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4).reshape(-1, 4, 4)
    assert (np.sort(boxes, 2) == full).all()


def test_grammar_log_prob_matches_brute_force_and_normalises():
    g = PhraseGrammar(SMALL)
    table = _all_sentences(g)
    keys = np.array(list(table))
    assert np.allclose(np.exp(g.log_prob(keys)), list(table.values()), atol=1e-12)
    assert math.isclose(sum(table.values()), 1.0)
    bad = keys[:1].copy()
    bad[0, -1] = g.head0  # a head after the padding: not a sentence
    assert not g.is_valid(bad).any() and g.is_valid(keys).all()


def test_samplers_are_seeded_and_valid():
    g = PhraseGrammar()
    p1, r1 = g.sample(50, seed=4)
    p2, r2 = g.sample(50, seed=4)
    assert torch.equal(r1, r2) and (p1 == BOS).all() and g.is_valid(r1).all()
    t = TranslationTask()
    pt, rt = t.sample(50, seed=5)
    assert t.is_valid(pt, rt).all() and torch.equal(rt, t.sample(50, seed=5)[1])
    b = t.boundaries(pt)
    assert all(bb == sorted(bb) and bb[-1] == int((row == EOS).nonzero()[0]) for bb, row in zip(b, rt))
    s = SudokuTask()
    ps, rs = s.sample(20, seed=6, n_givens=5)
    assert s.is_valid(ps, rs).all() and ((ps != 0).sum(1) == 5).all() and (s.n_completions(ps) >= 1).all()


# exact oracles

def test_pfsa_oracle_matches_brute_force():
    g = PhraseGrammar(SMALL)
    table = _all_sentences(g)
    oracle = PFSAOracleMLM(g)
    rng = np.random.default_rng(0)
    keys = list(table)
    for i in rng.choice(len(keys), 8):
        x = np.array(keys[i])
        x = np.where(rng.random(len(x)) < 0.6, g.mask_token_id, x)
        lp = oracle(torch.tensor([[BOS, *x]])).logits[0, 1:]
        want = _brute_marginals(table, x, g.mask_token_id, g.vocab_size + 1)
        assert np.allclose(lp.exp().numpy(), want, atol=1e-5)


def test_translation_oracle_matches_brute_force():
    t = TranslationTask()
    prompts, resp = t.sample(4, seed=1)
    oracle = TranslationOracleMLM(t)
    rng = np.random.default_rng(1)
    g = t.grammar
    for p, y in zip(prompts, resp):
        heads = [int(v) - g.head0 for v in p if g.head0 <= v < g.tail0]
        table = {}
        for opts in itertools.product((0, 1), repeat=len(heads)):
            s = t.translate(heads, list(opts))
            key = tuple(s + [EOS] + [PAD] * (t.response_length - len(s) - 1))
            table[key] = float(np.prod([t.config.marker_p if o == 0 else 1 - t.config.marker_p for o in opts]))
        x = np.where(rng.random(len(y)) < 0.7, t.mask_token_id, y.numpy())
        lp = oracle(torch.cat([p, torch.tensor(x)])[None]).logits[0, t.prompt_length:]
        assert np.allclose(lp.exp().numpy(), _brute_marginals(table, x, t.mask_token_id, t.vocab_size + 1), atol=1e-6)


def test_sudoku_oracle_matches_brute_force():
    s = SudokuTask()
    prompts, grids = s.sample(5, seed=2, n_givens=3)
    oracle = SudokuOracleMLM(s)
    rng = np.random.default_rng(2)
    for p, y in zip(prompts, grids):
        x = np.where(rng.random(16) < 0.8, s.mask_token_id, y.numpy())
        m = np.zeros((16, 6))
        for grid in sudoku_grids():
            if all(pi in (0, gi) for pi, gi in zip(p.tolist(), grid)) and all(xi in (5, gi) for xi, gi in zip(x, grid)):
                m[np.arange(16), grid] += 1
        lp = oracle(torch.cat([p, torch.tensor(x)])[None]).logits[0, 16:]
        assert np.allclose(lp.exp().numpy(), m / m.sum(1, keepdims=True), atol=1e-6)


# model

def test_prefix_cache_matches_full_forward_and_bad_context():
    torch.manual_seed(0)
    m = TinyMaskedDiffusionLM(10, 12, d_model=32, n_layers=2, n_heads=4, d_ff=64).eval()
    x = torch.randint(0, 11, (3, 12))
    full = m(x, use_cache=True)
    past = tuple((k[:, :, :5], v[:, :, :5]) for k, v in full.past_key_values)
    part = m(x[:, 5:], past_key_values=past)
    assert torch.allclose(part.logits, full.logits[:, 5:], atol=1e-5)
    assert torch.isinf(full.logits[..., m.mask_token_id]).all() and m.mask_token_id == 10
    with pytest.raises(ValueError, match="context"):
        m(torch.zeros(1, 13, dtype=torch.long))


def test_training_reduces_loss_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path))
    cfg = DLMTrainConfig(task="sudoku", d_model=32, n_layers=1, n_heads=2, d_ff=32, steps=30, batch_size=16,
                         pool_size=200, warmup=5, lr=3e-3)
    t = SudokuTask()
    p, r = t.sample(64, seed=9)
    seqs = torch.cat([p, r], 1)
    g = torch.Generator().manual_seed(0)
    m0 = TinyMaskedDiffusionLM(t.vocab_size, 32, 32, 1, 2, 32)
    m1 = load_masked_diffusion_lm(cfg)
    with torch.no_grad():
        l0 = mdlm_loss(m0, seqs, 16, t.mask_token_id, torch.Generator().manual_seed(0))
        l1 = mdlm_loss(m1, seqs, 16, t.mask_token_id, torch.Generator().manual_seed(0))
    assert l1 < l0
    m2 = load_masked_diffusion_lm(cfg)  # from the cache: same weights
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert len(list((tmp_path / "masked_diffusion_lm").iterdir())) >= 1
    del g


def test_default_recipe_cache_key_is_unchanged_and_strong_recipe_differs():
    from dataclasses import asdict

    from icml26.testbeds.cache import config_hash
    from icml26.testbeds.diffusion_lm import DLM_T1C_STRONG

    assert config_hash(asdict(DLMTrainConfig(task="t1c"))) == "57153efb9c7bfe8e"  # dlm-t1c's cached weights
    assert DLM_T1C_STRONG.task == "t1c" and DLM_T1C_STRONG != DLMTrainConfig(task="t1c")
    assert dlm_name(DLM_T1C_STRONG) == "dlm-t1c-strong"


def test_training_log_and_evaluation_do_not_change_the_weights():
    cfg = DLMTrainConfig(task="t1c", d_model=16, n_layers=1, n_heads=2, d_ff=16, steps=6, batch_size=8,
                         pool_size=64, warmup=2)
    record: dict = {}
    m1 = train_masked_diffusion_lm(cfg, record, eval_every=3, eval_prompts=8)
    m2 = train_masked_diffusion_lm(cfg)
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert len(record["train_loss"]) == 6 and all(math.isfinite(x) for x in record["train_loss"])
    assert [s for s, _ in record["validity_1tok"]] == [3, 6]
    assert all(0.0 <= v <= 1.0 for _, v in record["validity_1tok"])
    assert one_token_validity(TranslationOracleMLM(TranslationTask()), TranslationTask(), n=4) == 1.0


# decoder framework

class Spy(torch.nn.Module):
    """Wraps an oracle and records every input it sees."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.mask_token_id, self.seen = inner, inner.mask_token_id, []

    def forward(self, input_ids):
        self.seen.append(input_ids.clone())
        return self.inner(input_ids)


DECODERS = [ConfidenceThresholdDecoder(4, 0.9), ConfidenceThresholdDecoder(16, 0.7), ConfidenceThresholdDecoder(3, 1.0),
            LowConfidenceRemasking(8, 2), LowConfidenceRemasking(5, 5)]


@pytest.mark.parametrize("dec", DECODERS, ids=repr)
def test_decode_invariants_on_oracle(dec):
    t = TranslationTask()
    prompts, _ = t.sample(16, seed=3)
    spy = Spy(TranslationOracleMLM(t))
    res = decode(spy, prompts, t.response_length, dec)
    check_invariants(res, t.mask_token_id)
    assert (res.nfe == res.rounds).all() and (res.rounds <= t.response_length).all()
    assert (res.commit_prob > 0).all() and (res.commit_entropy >= 0).all()
    # committed tokens never change: each later input keeps every unmasked token of the previous one
    for a, b in zip(spy.seen, spy.seen[1:]):
        if a.shape == b.shape:
            known = a != t.mask_token_id
            assert torch.equal(a[known], b[known])
    assert t.is_valid(prompts, res.tokens).mean() > 0.5
    if isinstance(dec, LowConfidenceRemasking):
        G, b = t.response_length, dec.block_length
        assert (res.rounds == sum(min(dec.steps_per_block, min(b, G - s)) for s in range(0, G, b))).all()
    per_round = res.commits[0]
    assert len(per_round) == int(res.rounds[0]) and all(len(r) >= 1 for r in per_round)


def test_batched_equals_one_by_one_and_generate():
    s = SudokuTask()
    prompts, _ = s.sample(6, seed=4, n_givens=4)
    oracle = SudokuOracleMLM(s)
    dec = ConfidenceThresholdDecoder(16, 0.9)
    res = decode(oracle, prompts, 16, dec)
    for i in range(6):
        one = decode(oracle, prompts[i:i + 1], 16, dec)
        assert torch.equal(one.tokens[0], res.tokens[i]) and one.rounds[0] == res.rounds[i]
    assert s.is_valid(prompts, res.tokens).all()
    assert torch.equal(generate(oracle, prompts, dec, 16), res.sequences)


def test_decode_with_tiny_model_cache_and_no_cache():
    torch.manual_seed(0)
    g = PhraseGrammar()
    m = TinyMaskedDiffusionLM(g.vocab_size, 33, d_model=32, n_layers=2, n_heads=4, d_ff=64).eval()
    prompts = torch.full((5, 1), BOS)
    for use_cache in (True, False):
        res = decode(m, prompts, 32, ConfidenceThresholdDecoder(8, 0.9, use_cache=use_cache))
        check_invariants(res, m.mask_token_id)
        assert res.used_cache == use_cache


def test_bad_inputs_raise_clear_errors():
    t = TranslationTask()
    oracle = TranslationOracleMLM(t)
    prompts, _ = t.sample(2, seed=0)
    dec = ConfidenceThresholdDecoder(4, 0.9)
    with pytest.raises(ValueError, match="gen_length"):
        decode(oracle, prompts, 0, dec)
    with pytest.raises(ValueError, match="context"):
        decode(oracle, torch.cat([prompts, prompts], 1), t.response_length, dec)
    for tau in (0.0, 1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="tau"):
            ConfidenceThresholdDecoder(4, tau)
    with pytest.raises(ValueError, match="block_length"):
        ConfidenceThresholdDecoder(0, 0.9)
    with pytest.raises(ValueError, match="mask token"):
        decode(lambda ids: torch.zeros(*ids.shape, 5), prompts, 4, dec)  # a plain callable without a mask id

    class NoMask(torch.nn.Module):
        mask_token_id = 7

        def forward(self, input_ids):
            return torch.zeros(*input_ids.shape, 5)

    with pytest.raises(ValueError, match="no mask token"):
        decode(NoMask(), torch.zeros(1, 2, dtype=torch.long), 3, dec)
    bad = prompts.clone()
    bad[0, 0] = t.mask_token_id
    with pytest.raises(ValueError, match="mask token"):
        decode(oracle, bad, t.response_length, dec)
    with pytest.raises(TypeError):
        decode(oracle, prompts.float(), t.response_length, dec)
    with pytest.raises(TypeError):
        decode(oracle, prompts, t.response_length, "confidence")


def test_temperature_sampling_is_seeded():
    from icml26.testbeds.diffusion_lm import PFSAOracleMLM, PhraseGrammar

    g = PhraseGrammar()
    prompts = torch.full((24, 1), BOS)
    oracle = PFSAOracleMLM(g)
    a = decode(oracle, prompts, 32, ConfidenceThresholdDecoder(8, 0.9), temperature=1.0, seed=3)
    b = decode(oracle, prompts, 32, ConfidenceThresholdDecoder(8, 0.9), temperature=1.0, seed=3)
    check_invariants(a, g.mask_token_id)
    assert torch.equal(a.tokens, b.tokens) and len({tuple(r) for r in a.tokens.tolist()}) > 1
    assert g.is_valid(a.tokens).mean() > 0.5
    with pytest.raises(ValueError, match="temperature"):
        decode(oracle, prompts, 32, ConfidenceThresholdDecoder(8, 0.9), temperature=-1.0)


def test_decode_refuses_an_empty_prompt_batch():
    import torch

    from icml26.testbeds.diffusion_lm.decoding import MaskedDiffusionDecoder, decode

    with pytest.raises(ValueError, match="prompt_ids has no rows"):
        decode(object(), torch.zeros(0, 4, dtype=torch.long), 4, MaskedDiffusionDecoder())
