"""Tests for [B11] pure byte-level BPE at production-size vocabularies (issue 34): the on-demand pair-validity rows
(``bpe.PairValidity``) against the dense table they replace and the encode definition, and a ByteLevelLM on a
32k pure BPE built with no V x V array, exact against brute-force cover enumeration."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
import torch

from icml26.lm.byte_lm import EOS, ByteBPE, ByteLevelLM, is_canonical, validity_table
from icml26.lm.byte_lm.bpe import PairValidity, _dense_validity, bytes_to_unicode
from icml26.testbeds.causal_lm import TokenizerConfig, load_tokenizer


def _random_bpe(seed: int, n_merges: int = 60):
    """A pure byte-level BPE over a few bytes with random merges of existing tokens (many of them unreachable: the
    merge that would build them loses to an earlier one), plus ``<eos>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    rng = np.random.default_rng(seed)
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    toks, merges = [bytes([b]) for b in b"abc "], []
    while len(merges) < n_merges:
        x, y = (toks[int(i)] for i in rng.integers(0, len(toks), 2))
        s = "".join(b2u[c] for c in x + y)
        if s in vocab or len(x + y) > 6:
            continue
        vocab[s] = len(vocab)
        merges.append(("".join(b2u[c] for c in x), "".join(b2u[c] for c in y)))
        toks.append(x + y)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<eos>"])
    return tok


@pytest.fixture(scope="module")
def small_bpes():
    out = {f"testbed-{v}": ByteBPE(load_tokenizer(TokenizerConfig(vocab_size=v))) for v in (300, 512)}
    out.update({f"random-{s}": ByteBPE(_random_bpe(s)) for s in range(3)})
    return out


def test_on_demand_rows_and_pairs_equal_the_dense_table(small_bpes):
    for name, bpe in small_bpes.items():
        assert isinstance(bpe.valid, PairValidity) and bpe.valid.shape == (bpe.vocab_size + 1, bpe.vocab_size)
        dense = _dense_validity(bpe)
        assert np.array_equal(bpe.valid.dense(), dense), name
        rng = np.random.default_rng(0)
        for a, b in rng.integers(0, bpe.vocab_size, (500, 2)).tolist():
            assert bpe.valid[a, b] == bpe.valid.pair(a, b) == dense[a, b]
        assert np.array_equal(bpe.valid[bpe.start_row], bpe.reachable)
        assert not bpe.valid[bpe.eos_id].any()     # special tokens: all-False rows
        if name.startswith("random"):
            assert not bpe.reachable[[i for i, t in enumerate(bpe.token_bytes) if t is not None]].all()


def test_on_demand_rows_equal_the_encode_definition_on_random_bpes(small_bpes):
    for s in range(3):
        bpe = small_bpes[f"random-{s}"]
        assert np.array_equal(validity_table(bpe, "merges"), validity_table(bpe, "encode"))
        rng = np.random.default_rng(s)
        ids = sorted(bpe.token_id.values())
        for _ in range(100):     # pairwise test = encode definition, on walks that include invalid steps
            seq = [int(x) for x in rng.choice(ids, int(rng.integers(1, 6)))]
            assert bpe.is_canonical(seq) == is_canonical(bpe, seq)


def test_pair_validity_rejects_bad_indices(small_bpes):
    valid = small_bpes["testbed-300"].valid
    for bad, err in [(valid.shape[0], IndexError), (-1, IndexError), (1.5, TypeError), (True, TypeError),
                     ((1, 2, 3), IndexError), ((0, valid.shape[0] - 1), IndexError)]:
        with pytest.raises(err):
            valid[bad]


# a 32k pure byte-level BPE

@pytest.fixture(scope="module")
def tok32k():
    tok = load_tokenizer(TokenizerConfig(vocab_size=32768))   # cached; trained once (about 20 s)
    assert len(tok) >= 32768
    return tok


def _tiny_llama(vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256)
    model = LlamaForCausalLM(cfg).to(torch.float64).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model


@pytest.fixture(scope="module")
def lm32k(tok32k):
    """(ByteLevelLM, peak bytes allocated building the ByteBPE, peak bytes building the ByteLevelLM)."""
    model = _tiny_llama(len(tok32k))
    tracemalloc.start()
    try:
        bpe = ByteBPE(tok32k)
        peak_bpe = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        lm = ByteLevelLM(model, bpe)
        peak_lm = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return lm, peak_bpe, peak_lm


def test_32k_pure_bpe_builds_without_a_vocab_squared_table(lm32k):
    lm, peak_bpe, peak_lm = lm32k
    V = lm.bpe.vocab_size
    assert V >= 32768 and lm.bpe.pretok is None
    # a bool V x V table is V^2 bytes (1 GiB here), the old float64 mask 8 V^2: both far above these peaks
    assert peak_bpe < V * V / 8 and peak_lm < V * V / 8, (peak_bpe, peak_lm)
    for obj in (lm.bpe, lm):
        for k, x in vars(obj).items():
            if isinstance(x, (np.ndarray, torch.Tensor)):
                assert math.prod(x.shape) < V * V, k


def test_32k_next_byte_distribution_is_normalised_and_equals_brute_force(lm32k):
    """renormalize=True next-byte log-probabilities at V = 32k == brute force: every canonical token sequence
    covering the target (canonical by the encode definition) scored with p~, whose normaliser at each step sums the
    raw model over the continuations that the encode definition (not the validity rows) calls canonical."""
    lm = lm32k[0]
    bpe = lm.bpe
    s = b"de"
    lp = lm.next_byte_logprobs(s)
    assert abs(float(lp.exp().sum()) - 1.0) < 1e-9
    byte_ids = sorted(bpe.token_id.values())
    step: dict[tuple, torch.Tensor] = {}

    def next_logp(prefix: tuple) -> torch.Tensor:
        """log p~(. | prefix) by the definition: raw softmax renormalised over {v : prefix + v canonical} + EOS."""
        if prefix not in step:
            logits, _ = lm._forward([lm.bos_id] + list(prefix))
            raw = torch.log_softmax(logits[-1, : bpe.vocab_size].double(), -1)
            data = bpe.decode(prefix)
            ok = [v for v in byte_ids if bpe.encode(data + bpe.token_bytes[v]) == [*prefix, v]] + [bpe.eos_id]
            keep = torch.full_like(raw, -math.inf)
            keep[ok] = raw[ok]
            step[prefix] = keep - torch.logsumexp(keep, 0)
        return step[prefix]

    def covers(target: bytes) -> list[tuple]:
        out = []

        def rec(ids: tuple, pos: int) -> None:
            if pos >= len(target):
                out.append(ids)
                return
            for v in byte_ids:
                tb = bpe.token_bytes[v]
                n = min(len(tb), len(target) - pos)
                if tb[:n] == target[pos: pos + n]:
                    rec(ids + (v,), pos + len(tb))
        rec((), 0)
        return [t for t in out if is_canonical(bpe, list(t))]

    def log_p(target: bytes) -> float:
        vals = [sum(float(next_logp(t[:i])[t[i]]) for i in range(len(t))) for t in covers(target)]
        return float(torch.logsumexp(torch.tensor(vals, dtype=torch.float64), 0))

    base = log_p(s)
    for b in b" ft":
        assert float(lp[b]) == pytest.approx(log_p(s + bytes([b])) - base, abs=1e-8), bytes([b])
    enc = tuple(bpe.encode(s))
    eos = sum(float(next_logp(enc[:i])[enc[i]]) for i in range(len(enc))) + float(next_logp(enc)[bpe.eos_id])
    assert float(lp[EOS]) == pytest.approx(eos - base, abs=1e-8)


def test_32k_rows_equal_the_encode_definition(lm32k):
    bpe = lm32k[0].bpe
    ids = sorted(bpe.token_id.values())
    rng = np.random.default_rng(4)
    for a in [bpe.token_id[b"d"], bpe.token_id[b" "]] + rng.choice(ids, 2).tolist():
        row = bpe.valid[a]
        ref = [bpe.encode(bpe.token_bytes[a] + bpe.token_bytes[v]) == [a, v] for v in ids]
        assert np.array_equal(row[ids], ref), a
        assert 0 < row.sum() < len(ids)


def test_pair_masks_refuse_keys_the_dense_array_answered_differently():
    """Review of the on-demand masks: mask[a, b] was one element of the dense array, mask[2.7] / mask[True] are not
    rows; both must raise instead of returning something else."""
    from icml26.lm.byte_lm.lm import _PairMasks

    bpe = ByteBPE(load_tokenizer(TokenizerConfig(vocab_size=512)))
    masks = _PairMasks(bpe)
    assert masks[3].shape == (bpe.vocab_size,) and masks[[3, bpe.start_row]].shape == (2, bpe.vocab_size)
    for bad, err in (((3, 4), TypeError), (2.7, TypeError), (True, TypeError), (bpe.start_row + 1, IndexError)):
        with pytest.raises(err):
            masks[bad]
