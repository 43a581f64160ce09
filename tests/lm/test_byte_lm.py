"""Tests for [B11] ByteSampler: exact byte-level LM from a BPE LM."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch

from icml26.lm.byte_lm import (
    EOS,
    ByteBPE,
    ByteEnsemble,
    ByteLevelLM,
    PretokTree,
    ProxyTunedByteLM,
    StreamingBPETree,
    canonical_token_logprob,
    is_canonical,
    is_valid_pair,
    naive_next_byte_logprobs,
    token_healing_next,
    validity_table,
)
from icml26.testbeds.causal_lm import TokenizerConfig, corpus_texts, load_tokenizer

# fixtures

@pytest.fixture(scope="module")
def tok300():
    return load_tokenizer(TokenizerConfig(vocab_size=300))


@pytest.fixture(scope="module")
def tok512():
    return load_tokenizer(TokenizerConfig(vocab_size=512))


@pytest.fixture(scope="module")
def bpe300(tok300):
    return ByteBPE(tok300)


def _tiny_llama(vocab: int, seed: int = 0, dtype=torch.float64):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to(dtype).eval()
    with torch.no_grad():  # sharper than the random init, so the test distributions are not near-uniform
        model.lm_head.weight.mul_(8.0)
    return model


@pytest.fixture(scope="module")
def lm300(tok300):
    return ByteLevelLM(_tiny_llama(len(tok300)), tok300)


@pytest.fixture(scope="module")
def snippets():
    text = "".join(corpus_texts("val", 60_000)).encode()
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(text) - 64, size=1000)
    lens = rng.integers(1, 64, size=1000)
    return [text[s: s + n] for s, n in zip(starts, lens)]


# canonicity and validity

def test_validity_from_merges_equals_encode_definition(bpe300):
    assert np.array_equal(validity_table(bpe300, "merges"), validity_table(bpe300, "encode"))


def test_validity_table_on_512_vocab_spot_checks(tok512):
    bpe = ByteBPE(tok512)
    rng = np.random.default_rng(1)
    ids = [i for i, b in enumerate(bpe.token_bytes) if b is not None]
    for a, b in rng.choice(ids, size=(300, 2)):
        assert bpe.valid[a, b] == is_valid_pair(bpe, int(a), int(b))


def test_canonical_encodings_have_only_valid_pairs(bpe300, snippets):
    for s in snippets:
        ids = bpe300.encode(s)
        assert bpe300.decode(ids) == s
        assert bpe300.is_canonical(ids)


def test_pairwise_valid_sequences_are_canonical(bpe300):
    """Pairwise validity => canonicity (the factorisation the method rests on), on random valid walks."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        ids = [int(rng.choice(np.flatnonzero(bpe300.valid[bpe300.start_row])))]
        for _ in range(int(rng.integers(1, 8))):
            ids.append(int(rng.choice(np.flatnonzero(bpe300.valid[ids[-1]]))))
        assert is_canonical(bpe300, ids)
    # and a non-canonical one: a merged pair split into its parts
    a, b, _ = bpe300.merges[0]
    assert not is_canonical(bpe300, [a, b]) and not bpe300.is_canonical([a, b])


def test_streaming_tree_nodes_are_canonical_prefixes(bpe300, snippets):
    text = b"".join(snippets[:20])[:600]
    tree, fixed = StreamingBPETree(bpe300), []
    for b in text:
        fixed += tree.push(b)
        assert len(tree.nodes) <= bpe300.max_len + 1
        for u in tree.nodes:
            assert tree.fixed + list(u.suffix) == bpe300.encode(text[: u.offset])
    assert fixed == tree.fixed
    assert bpe300.encode(text)[: len(fixed)] == fixed
    assert tree.tree() and all("offset" in n for n in tree.tree())


# the byte-level distribution

def test_next_byte_distribution_sums_to_one(lm300, snippets):
    for s in snippets[:40]:
        lp = lm300.next_byte_logprobs(s)
        assert lp.shape == (257,) and lp.dtype == torch.float64
        assert abs(float(lp.exp().sum()) - 1.0) < 1e-6
    assert abs(float(lm300.next_byte_logprobs(b"").exp().sum()) - 1.0) < 1e-9


@pytest.mark.parametrize("text", [b"", b"x", b"    return self._value\n", "héllo wörld ✓".encode(),
                                  bytes([0xff, 0xfe, 0x00, 0x80]), b"def f(a, b):\n    return a + b\n\n"])
def test_bytelevel_logprob_equals_token_logprob_of_canonical_encoding(lm300, text):
    byte_lp = lm300.logprob(text, add_eos=True)
    tok_lp = canonical_token_logprob(lm300, text)
    assert math.isfinite(byte_lp)
    assert abs(byte_lp - tok_lp) < 1e-6


def test_prefix_probability_telescopes(lm300):
    text = b"import os\nclass A:\n"
    st = lm300.stream()
    total = 0.0
    for b in text:
        total += float(st.logprobs()[b])
        st.push(b)
    assert abs(st.log_prefix_prob() - total) < 1e-8


def _canonical_covers(bpe, target: bytes) -> list[list[int]]:
    """Every canonical token sequence whose bytes cover ``target`` (the last token may run past its end): the
    brute-force enumeration the cover-sum tests compare with."""
    out: list[list[int]] = []

    def rec(ids: list[int], pos: int) -> None:
        if pos >= len(target):
            out.append(ids)
            return
        for v, tb in enumerate(bpe.token_bytes):
            if tb is None:
                continue
            n = min(len(tb), len(target) - pos)
            if tb[:n] == target[pos: pos + n]:
                rec(ids + [v], pos + len(tb))
    rec([], 0)
    return [ids for ids in out if is_canonical(bpe, ids)]


def test_next_byte_matches_brute_force_enumeration(lm300, bpe300):
    """P(b | s) from the covering tree == brute force over all token sequences covering s b (canonical by the
    encode definition), each scored by a full forward pass."""
    s = b"def"

    def seqs_covering(target: bytes):
        return _canonical_covers(bpe300, target)

    def seq_logprob(ids):
        logits, _ = lm300._forward([lm300.bos_id] + ids[:-1])
        lp = lm300._masked_logprobs(logits, [bpe300.start_row] + ids[:-1])
        return float(lp[torch.arange(len(ids)), torch.tensor(ids)].sum())

    def log_p(target):
        return float(torch.logsumexp(torch.tensor([seq_logprob(t) for t in seqs_covering(target)], dtype=torch.float64), 0))

    lp = lm300.next_byte_logprobs(s)
    base = log_p(s)
    for b in (ord(" "), ord("a"), ord("\n")):
        assert abs((log_p(s + bytes([b])) - base) - float(lp[b])) < 1e-8
    assert abs(canonical_token_logprob(lm300, s) - base - float(lp[EOS])) < 1e-8


def test_raw_pairwise_cover_sums_equal_brute_force_enumeration(tok300, bpe300):
    """renormalize=False on the pairwise tree: log P(s b) = log sum of the *raw* p(t) over every canonical token
    sequence covering s b (brute-force enumeration, one forward each), and the EOS score is raw
    log p(encode(s) || EOS): the cover mask applied in ``log_scores`` (``_allowed_np``, ``_eos_ok``)."""
    lm = ByteLevelLM(_tiny_llama(len(tok300), seed=5), tok300, renormalize=False)

    def covers(target: bytes):
        return _canonical_covers(bpe300, target)

    def raw_logp(ids):
        logits, _ = lm._forward([lm.bos_id] + ids[:-1])
        lp = torch.log_softmax(logits[..., : bpe300.vocab_size].double(), -1)
        return float(lp[torch.arange(len(ids)), torch.tensor(ids)].sum())

    n_covers = 0
    for s in (b"def", b"sel", b" re"):
        scores = lm.stream(s).log_scores()
        for b in b" fa\n(":
            vals = [raw_logp(c) for c in covers(s + bytes([b]))]
            n_covers += len(vals)
            ref = float(torch.logsumexp(torch.tensor(vals, dtype=torch.float64), 0)) if vals else -math.inf
            assert scores[b] == pytest.approx(ref, abs=1e-9), (s, bytes([b]))
        assert scores[EOS] == pytest.approx(raw_logp(bpe300.encode(s) + [bpe300.eos_id]), abs=1e-9)
    assert n_covers > 15    # several covers per target: the sum, not one sequence, is what is tested


def test_stream_and_prefill_agree(lm300, snippets):
    text = (snippets[5] + snippets[6])[:40]
    st = lm300.stream(text[:3])
    for i in range(3, len(text)):
        assert torch.allclose(st.logprobs(), lm300.next_byte_logprobs(text[:i]), atol=1e-9)
        st.push(text[i])


def test_batched_tree_expansion_equals_one_call_per_node(tok300, snippets):
    """speculate=k (siblings computed ahead in one tree-masked forward) gives the same next-byte distributions as one
    single-token forward per node, with fewer model calls."""
    model = _tiny_llama(len(tok300))
    lms = {k: ByteLevelLM(model, tok300, speculate=k) for k in (1, 6)}
    calls = {}
    for k, lm in lms.items():
        calls[k] = 0
        for name in ("_forward", "_forward_tree"):
            f = getattr(lm, name)

            def counted(*a, _f=f, _k=k):
                calls[_k] += 1
                return _f(*a)
            setattr(lm, name, counted)
    text = (snippets[11] + snippets[12] + snippets[13])[:40]
    streams = {k: lm.stream(text[:2]) for k, lm in lms.items()}
    for b in text[2:]:
        assert torch.allclose(streams[1].logprobs(), streams[6].logprobs(), atol=1e-10, rtol=0)
        for st in streams.values():
            st.push(b)
    assert calls[6] < calls[1]
    g = {k: lm.generate(b"def ", 16, seed=1, method="bytewise") for k, lm in lms.items()}
    assert g[1].data == g[6].data and abs(g[1].logprob - g[6].logprob) < 1e-9


def test_model_ignoring_the_tree_mask_falls_back_to_one_call_per_node(tok300, snippets):
    from transformers import LlamaForCausalLM

    class NoTreeMask(LlamaForCausalLM):   # drops the custom attention mask and position ids
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kw):
            return super().forward(input_ids=input_ids, **kw)

    model = _tiny_llama(len(tok300), seed=1)
    ref = ByteLevelLM(model, tok300, speculate=1)
    broken = copy.deepcopy(model)
    broken.__class__ = NoTreeMask
    lm = ByteLevelLM(broken, tok300, speculate=8)
    text = (snippets[21] + snippets[22])[:24]
    a, b = lm.stream(text[:2]), ref.stream(text[:2])
    for byte in text[2:]:
        assert torch.allclose(a.logprobs(), b.logprobs(), atol=1e-10, rtol=0)
        a.push(byte)
        b.push(byte)
    assert lm.speculate == 1


# combining models with different tokenizers

def test_self_ensemble_equals_model(lm300):
    s = b"for i in range(10):\n    "
    lp = lm300.next_byte_logprobs(s)
    for mode in ("mixture", "product"):
        e = ByteEnsemble([lm300, lm300], mode=mode).next_byte_logprobs(s)
        assert torch.allclose(e, lp, atol=1e-10)
    proxy = ProxyTunedByteLM(lm300, lm300, lm300, alpha=0.7).next_byte_logprobs(s)
    assert torch.allclose(proxy, lp, atol=1e-10)


def test_ensemble_across_tokenizers_is_normalised_and_exact(lm300, tok512):
    lm512 = ByteLevelLM(_tiny_llama(len(tok512), seed=1), tok512)
    text = b"x = [1, 2]\n"
    for mode in ("mixture", "product"):
        ens = ByteEnsemble([lm300, lm512], weights=[0.3, 0.7], mode=mode)
        assert abs(float(ens.next_byte_logprobs(text[:4]).exp().sum()) - 1) < 1e-9
    mix = ByteEnsemble([lm300, lm512], weights=[0.3, 0.7])
    la, lb = lm300.byte_logprobs(text), lm512.byte_logprobs(text)
    expected = np.logaddexp(np.log(0.3) + la, np.log(0.7) + lb)
    assert np.allclose(mix.byte_logprobs(text), expected, atol=1e-10)
    assert abs(lm512.logprob(text) - canonical_token_logprob(lm512, text)) < 1e-6


# baselines

def test_naive_and_token_healing_are_distributions(lm300, bpe300):
    for prompt in (b"import o", b"def f", b"\n    "):
        for f in (naive_next_byte_logprobs, token_healing_next):
            lp = f(lm300.model, bpe300, prompt)
            assert lp.shape == (257,) and abs(float(lp.exp().sum()) - 1) < 1e-9
    assert abs(float(naive_next_byte_logprobs(lm300.model, bpe300, b"").exp().sum()) - 1) < 1e-9


def test_token_healing_reduces_to_naive_when_no_token_extends_the_last(lm300, bpe300):
    """If no token strictly extends the prompt's last token r, healing hands all mass to the naive distribution."""
    r = next(t for t in bpe300.token_bytes if t is not None and len(t) > 1 and bpe300.encode(t) == [bpe300.token_id[t]]
             and bpe300.prefix_range(t)[1] - bpe300.prefix_range(t)[0] == 1)
    heal = token_healing_next(lm300.model, bpe300, r)
    naive = naive_next_byte_logprobs(lm300.model, bpe300, r)
    assert torch.allclose(heal, naive, atol=1e-9)


# generation

def test_generate_is_deterministic_and_stops(lm300):
    a = lm300.generate(b"def ", 20, seed=3, method="bytewise")
    b = lm300.generate(b"def ", 20, seed=3, method="bytewise")
    assert a == b and len(a.data) <= 20 and a.stopped_by in ("eos", "max_bytes")
    g = lm300.generate(b"def ", 30, greedy=True)
    assert g == lm300.generate(b"def ", 30, greedy=True)
    # greedy log-probability equals the byte LM's own score of the continuation
    score = lm300.logprob(g.data, add_eos=g.stopped_by == "eos", prompt=b"def ")
    assert abs(score - g.logprob) < 1e-8
    stop = g.data[2:4] if len(g.data) >= 4 else None
    if stop:
        s = lm300.generate(b"def ", 30, greedy=True, stop=[stop])
        assert s.stopped_by == "stop" and s.data.endswith(stop)
    ens = ByteEnsemble([lm300, lm300]).generate(b"x", 8, seed=0)
    assert len(ens.data) <= 8


def test_covering_sampler_draws_the_exact_next_byte_distribution(lm300):
    """The covering candidates' weights, grouped by the byte each one emits next, are exactly P(b | s); and
    sample_covering draws from them (Monte Carlo on the most likely byte)."""
    prompt = b"def __init__(self, na"
    st = lm300.stream(prompt)
    exact = st.logprobs().exp()
    logw, nodes, owners, toks = st.covering()
    n, bpe = len(st.text), lm300.bpe
    nxt = torch.tensor([EOS if int(t) == bpe.eos_id else bpe.token_bytes[int(t)][n - nodes[int(k)].offset]
                        for k, t in zip(owners, toks)])
    grouped = torch.zeros(257, dtype=torch.float64).scatter_add_(0, nxt, logw.exp())
    assert torch.allclose(grouped, exact, atol=1e-12)
    gen = torch.Generator().manual_seed(0)
    top = int(exact.argmax())
    hits = 0
    for _ in range(1000):
        node, tok = st.sample_covering(gen)
        hits += (EOS if tok == bpe.eos_id else bpe.token_bytes[tok][n - node.offset]) == top
    p = float(exact[top])
    assert abs(hits / 1000 - p) < 5 * math.sqrt(p * (1 - p) / 1000) + 1e-3


def test_covering_generation_is_deterministic_and_respects_limits(lm300):
    a = lm300.generate(b"x = ", 25, seed=4, method="covering")
    assert a == lm300.generate(b"x = ", 25, seed=4)            # auto picks the covering sampler at T=1
    assert len(a.data) <= 25 and a.logprob is None
    assert lm300.generate(b"x = ", 0, method="covering").data == b""
    if len(a.data) >= 6:
        stop = a.data[3:5]
        s = lm300.generate(b"x = ", 25, seed=4, stop=[stop])
        assert s.stopped_by == "stop" and s.data.endswith(stop) and stop not in s.data[:-1]
    with pytest.raises(ValueError):
        lm300.generate(b"x", 5, temperature=0.5, method="covering")
    with pytest.raises(ValueError):
        lm300.generate(b"x", 5, method="fast")


# bad input

def test_rejects_unsupported_tokenizers(tok300):
    from tokenizers import Tokenizer, models, normalizers

    spec = json.loads(tok300.backend_tokenizer.to_str())
    spec["pre_tokenizer"]["add_prefix_space"] = True
    with pytest.raises(ValueError, match="add_prefix_space"):
        ByteBPE(Tokenizer.from_str(json.dumps(spec)))
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": " "}, "behavior": "Removed", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    with pytest.raises(ValueError, match="behavior"):
        ByteBPE(Tokenizer.from_str(json.dumps(spec)))
    t = Tokenizer.from_str(tok300.backend_tokenizer.to_str())
    t.normalizer = normalizers.NFC()
    with pytest.raises(ValueError, match="normalizer"):
        ByteBPE(t)
    with pytest.raises(ValueError, match="not byte-level BPE"):
        ByteBPE(Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")))
    with pytest.raises(TypeError):
        ByteBPE("gpt2")


def test_rejects_bad_inputs(tok300, lm300, bpe300):
    with pytest.raises(ValueError, match="speculate"):
        ByteLevelLM(lm300.model, tok300, speculate=0)
    with pytest.raises(ValueError, match="mismatch"):
        ByteLevelLM(_tiny_llama(100, dtype=torch.float32), tok300)
    with pytest.raises(ValueError, match="non-empty prompt"):
        token_healing_next(lm300.model, bpe300, b"")
    with pytest.raises(TypeError):
        lm300.next_byte_logprobs(123)
    with pytest.raises(ValueError):
        lm300.stream().push(256)
    with pytest.raises(ValueError):
        lm300.generate(b"a", -1)
    with pytest.raises(ValueError):
        lm300.generate(b"a", 5, temperature=0.0)
    with pytest.raises(ValueError):
        ByteEnsemble([lm300, lm300], weights=[1.0, -1.0])
    with pytest.raises(ValueError):
        ByteEnsemble([lm300], mode="median")
    with pytest.raises(TypeError):
        ByteEnsemble([lm300, "model"])
    with pytest.raises(ValueError):
        ProxyTunedByteLM(lm300, lm300, lm300, alpha=float("nan"))
    with pytest.raises(ValueError):
        validity_table(bpe300, method="guess")
    with pytest.raises(ValueError):
        is_valid_pair(bpe300, 0, 5)  # id 0 is <eos>, not a byte token


def test_accepts_str_prompts(lm300):
    assert torch.equal(lm300.next_byte_logprobs("ab"), lm300.next_byte_logprobs(b"ab"))


# reproduction

def test_reproduce_quick_is_well_formed():
    from icml26.harness import Budget
    from icml26.lm.byte_lm.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) == 7 and len(out.checks) == 3
    assert all(c.falsifier.strip() for c in claims)
    assert all(math.isfinite(c.measured) for c in out.claims)
    assert all(c.verdict == "holds" for c in out.checks)                    # exactness (x2) and normalisation
    # the accuracy comparisons are paired over the mid-token cuts (one 0/1 difference per cut)
    n_mid = next(r["n"] for r in out.tables["prompt_boundary"] if r["cuts"] == "mid-token")
    gain = claims[0]
    assert len(gain.paired) == n_mid == len(claims[1].paired) and gain.reference == 0.15
    assert gain.measured - gain.reference == pytest.approx(float(np.mean(gain.paired)))
    assert all(math.isfinite(v) for v in out.metrics.values())
    assert "prompt_boundary" in out.figures
    assert out.metrics["exactness_max_abs_diff_bits_per_byte"] < 1e-6      # exactness is robust, not a tuned claim
    assert out.metrics["regex_exactness_abs_diff_bits_per_byte"] < 1e-6
    assert {r["cuts"] for r in out.tables["prompt_boundary_gpt2_regex"]} == {"mid-token", "boundary", "all"}
    assert out.metrics["acc_bytelm_mid-token"] > out.metrics["acc_naive_mid-token"]
    # speed claims come from compare_times: paired over repeats, with the same-work control attached
    speed = [c for c in claims if "throughput" in c.statement]
    assert len(speed) == 2 and all(c.timing_control is not None and len(c.paired) >= 3 for c in speed)
    assert speed[0].control is not None                       # one model call per node, timed the same way
    assert [r["V"] for r in out.tables["production_vocabularies"]] == [1024]   # the quick budget: 1k only


# production-size tokenizers (issue 34): the smallest of the family only (32k/64k run in the standard budget)

def test_production_tokenizer_is_gpt2_regex_bpe_and_byte_lm_is_exact():
    from icml26.testbeds.production_tokenizers import production_tokenizer, random_llama

    tok = production_tokenizer("gpt2", 1024)
    assert tok.get_vocab_size() == 1024 and tok.token_to_id("<|endoftext|>") is not None
    bpe = ByteBPE(tok)
    assert bpe.pretok is not None and bpe.pretok._known
    text = "".join(corpus_texts("val", 4_000)) + " x  = 12345  it's naïve"
    assert bpe.encode(text.encode()) == tok.encode(text).ids
    lm = ByteLevelLM(random_llama(1024, hidden_size=32, num_heads=2, intermediate_size=64, seed=1,
                                  dtype=torch.float64), tok)
    for t in (b"def f(x):\n    return x  # it's\n", "é = 10000\n".encode()):
        assert lm.logprob(t) == pytest.approx(canonical_token_logprob(lm, t), abs=1e-8)
    with pytest.raises(ValueError, match="style"):
        production_tokenizer("bert", 1024)


# regex pre-tokenizers (GPT-2, Llama-3): production-style tokenizers trained offline

@pytest.fixture(scope="module")
def gpt2_tok():
    from icml26.lm.byte_lm.tokenizers_regex import regex_tokenizer

    return regex_tokenizer("gpt2", 300)


@pytest.fixture(scope="module")
def llama3_tok():
    from icml26.lm.byte_lm.tokenizers_regex import regex_tokenizer

    return regex_tokenizer("llama3", 300)


def _hf_prefix_canonical(tok, ids, data) -> bool:
    """Brute force, independent of pretok.py's segmentation and fast path: some witness z keeps ``ids`` a prefix
    of the tokenizer's own encode(decode(ids) || z) (witness set W = UTF-8 completion + "" or one probe character,
    the definition)."""
    from icml26.lm.byte_lm.pretok import PROBES, utf8_completions

    for c in utf8_completions(data) or []:
        for p in ("",) + PROBES:
            try:
                text = (data + c + p.encode()).decode("utf-8")
            except UnicodeDecodeError:
                continue
            if tok.encode(text).ids[: len(ids)] == list(ids):
                return True
    return False


@pytest.mark.parametrize("style", ["gpt2", "llama3"])
def test_regex_encode_equals_tokenizers_encode(style, gpt2_tok, llama3_tok):
    tok = gpt2_tok if style == "gpt2" else llama3_tok
    text = "".join(corpus_texts("val", 12_000)) + " x  = 12345  it's  'RE\\r\\n \\n\\t naïve ✓"
    assert ByteBPE(tok).encode(text.encode()) == tok.encode(text).ids


def test_pre_token_boundaries_are_stable_except_the_last():
    """The stable-cut assumption, by brute force on random strings over the characters the patterns branch on."""
    import regex

    from icml26.lm.byte_lm.pretok import GPT2_PATTERN, LLAMA3_PATTERN

    rng = np.random.default_rng(0)
    chars = list(" \t\n\r'sreLlA1.(é")
    for pat in (regex.compile(GPT2_PATTERN), regex.compile(LLAMA3_PATTERN)):
        ends = lambda t: {m.end() for m in pat.finditer(t)} | {m.start() for m in pat.finditer(t)} - {0}  # noqa: E731
        for _ in range(1500):
            s = "".join(rng.choice(chars, int(rng.integers(1, 9))))
            z = "".join(rng.choice(chars, int(rng.integers(1, 5))))
            b = sorted(ends(s) - {len(s)})
            assert set(b[:-1]) <= ends(s + z), (s, z)


def test_prefix_canonical_masks_equal_brute_force(gpt2_tok):
    """Every allowed/forbidden next token of a tree node, and EOS, as the tokenizer's own encode decides."""
    bpe = ByteBPE(gpt2_tok)
    for ctx in (b"x  ", b"a\n  "):
        tree = PretokTree(bpe)
        for b in ctx:
            tree.push(b)
        u = max(tree.nodes, key=lambda n: n.offset)
        ids = tree.fixed + list(u.suffix)
        allowed = tree.full_mask(u)
        for v in bpe._byte_ids:
            seq = ids + [v]
            assert allowed[v] == _hf_prefix_canonical(gpt2_tok, seq, bpe.decode(seq)), (ctx, bpe.token_bytes[v])
        assert u.can_end == (gpt2_tok.encode(bpe.decode(ids).decode()).ids == ids)
    # the pair definition with a pre-tokenizer: a lone UTF-8 continuation byte after "a" is never valid text
    assert not is_valid_pair(bpe, bpe.token_id[b"a"], bpe.token_id[b"\xa1"])
    with pytest.raises(ValueError, match="pairwise"):
        validity_table(bpe)


def test_raw_cover_sums_equal_brute_force_oracle(gpt2_tok):
    """renormalize=False: log P(s b) = log sum of raw p(t) over all covering sequences of s b that are
    prefix-canonical under the full tokenizer (brute-force enumeration, one forward per sequence), across
    pre-token boundaries, with special tokens in the vocabulary."""
    model = _tiny_llama(gpt2_tok.get_vocab_size(), seed=3)
    lm = ByteLevelLM(model, gpt2_tok, renormalize=False)
    bpe = lm.bpe

    def covers(target):
        out = []

        def rec(ids, pos):
            if pos >= len(target):
                out.append(ids)
                return
            for v in bpe._byte_ids:
                tb = bpe.token_bytes[v]
                n = min(len(tb), len(target) - pos)
                if tb[:n] == target[pos: pos + n]:
                    rec(ids + [v], pos + len(tb))
        rec([], 0)
        return [c for c in out if _hf_prefix_canonical(gpt2_tok, c, bpe.decode(c))]

    def raw_logp(ids):
        logits, _ = lm._forward([lm.bos_id] + ids[:-1])
        lp = torch.log_softmax(logits.double(), -1)
        return float(lp[torch.arange(len(ids)), torch.tensor(ids)].sum())

    for s in (b"x  ", b"it'", b"a1"):
        scores = lm.stream(s).log_scores()
        for b in b" s1\n":
            sb = s + bytes([b])
            vals = [raw_logp(c) for c in covers(sb)]
            ref = float(torch.logsumexp(torch.tensor(vals, dtype=torch.float64), 0)) if vals else -math.inf
            assert scores[b] == pytest.approx(ref, abs=1e-9), (s, bytes([b]))
        assert scores[EOS] == pytest.approx(raw_logp(gpt2_tok.encode(s.decode()).ids + [bpe.eos_id]), abs=1e-9)


@pytest.mark.parametrize("style", ["gpt2", "llama3"])
def test_regex_bytelevel_lm_is_exact_across_pre_token_boundaries(style, gpt2_tok, llama3_tok):
    """renormalize=True: sum_i log P(s_i | s_<i) + log P(EOS | s) = log p~(encode(s) || EOS) and every next-byte
    distribution sums to 1, on text whose pre-token boundaries move (look-ahead, digits, contractions, UTF-8)."""
    tok = gpt2_tok if style == "gpt2" else llama3_tok
    lm = ByteLevelLM(_tiny_llama(tok.get_vocab_size(), seed=4), tok)
    for text in (b"x  = 1234 \n", "it's é".encode()):
        assert lm.logprob(text) == pytest.approx(canonical_token_logprob(lm, text), abs=1e-8)
    st = lm.stream(b"a  ")
    assert abs(float(st.logprobs().exp().sum()) - 1) < 1e-9


def test_special_token_text_is_plain_bytes_and_tokenizer_json_loads(gpt2_tok, tmp_path):
    """The README example: a tokenizer.json on disk plus a randomly initialised transformers model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path / "tokenizer.json"
    gpt2_tok.save(str(path))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=gpt2_tok.get_vocab_size(), hidden_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=64)).eval()
    for renorm in (True, False):
        lm = ByteLevelLM(model, str(path), renormalize=renorm)
        assert abs(float(lm.next_byte_logprobs(b"print(x)\n").exp().sum()) - 1) < 1e-6
    bpe = ByteBPE(str(path))
    assert bpe.eos_id == gpt2_tok.token_to_id("<|endoftext|>")
    ids = bpe.encode(b"a<|endoftext|>")
    assert all(bpe.token_bytes[i] is not None for i in ids) and bpe.decode(ids) == b"a<|endoftext|>"
    assert lm.generate(b"def ", 6, seed=0).stopped_by in ("eos", "max_bytes")
    with pytest.raises(ValueError, match="covering"):
        lm.generate(b"x", 4, method="covering")


# bad input at every public entry point (issue "Reliability"): (callable on the fixtures, error, message fragment)

def _bad_input_cases():
    from icml26.lm.byte_lm import ByteStream, regex_tokenizer

    nan, inf = float("nan"), float("inf")
    return {
        "ByteLevelLM speculate": (lambda f: ByteLevelLM(f["model"], f["tok"], speculate=0), ValueError, "speculate"),
        "ByteLevelLM renormalize": (lambda f: ByteLevelLM(f["model"], f["tok"], renormalize="yes"), TypeError,
                                    "renormalize"),
        "ByteLevelLM model": (lambda f: ByteLevelLM("model", f["tok"]), TypeError, "model"),
        "ByteLevelLM bos negative": (lambda f: ByteLevelLM(f["model"], f["tok"], bos_token_id=-1), ValueError,
                                     "bos_token_id"),
        "ByteLevelLM bos too large": (lambda f: ByteLevelLM(f["model"], f["tok"], bos_token_id=10**6), ValueError,
                                      "bos_token_id"),
        "ByteLevelLM vocab mismatch": (lambda f: ByteLevelLM(_tiny_llama(100, dtype=torch.float32), f["tok"]),
                                       ValueError, "mismatch"),
        "generate max_bytes": (lambda f: f["lm"].generate(b"a", -1), ValueError, "max_bytes"),
        "generate temperature": (lambda f: f["lm"].generate(b"a", 4, temperature=nan), ValueError, "temperature"),
        "generate stop": (lambda f: f["lm"].generate(b"a", 4, stop=[b""]), ValueError, "stop"),
        "generate seed": (lambda f: f["lm"].generate(b"a", 4, seed=-3), ValueError, "seed"),
        "generate greedy": (lambda f: f["lm"].generate(b"a", 4, greedy="no"), TypeError, "greedy"),
        "generate method": (lambda f: f["lm"].generate(b"a", 4, method="fast"), ValueError, "method"),
        "next_byte_logprobs prefix": (lambda f: f["lm"].next_byte_logprobs(123), TypeError, "bytes"),
        "logprob text": (lambda f: f["lm"].logprob(3.5), TypeError, "text"),
        "stream push": (lambda f: f["lm"].stream().push(256), ValueError, "byte"),
        "ByteStream lm": (lambda f: ByteStream("lm"), TypeError, "ByteLevelLM"),
        "canonical_token_logprob lm": (lambda f: canonical_token_logprob("lm", b"x"), TypeError, "ByteLevelLM"),
        "canonical_token_logprob add_eos": (lambda f: canonical_token_logprob(f["lm"], b"x", add_eos="no"),
                                            TypeError, "add_eos"),
        "ByteBPE tokenizer": (lambda f: ByteBPE("gpt2"), TypeError, "tokenizer"),
        "ByteBPE masks": (lambda f: ByteBPE(f["tok"], masks="fast"), ValueError, "masks"),
        "is_valid_pair id": (lambda f: is_valid_pair(f["bpe"], 0, 5), ValueError, "token id"),
        "is_canonical float ids": (lambda f: is_canonical(f["bpe"], [1.5, 2]), TypeError, "ids"),
        "is_canonical str": (lambda f: is_canonical(f["bpe"], "ab"), TypeError, "ids"),
        "validity_table method": (lambda f: validity_table(f["bpe"], "guess"), ValueError, "method"),
        "StreamingBPETree push": (lambda f: StreamingBPETree(f["bpe"]).push(-1), ValueError, "byte"),
        "PretokTree pairwise": (lambda f: PretokTree(f["bpe"]), ValueError, "regex"),
        "ByteEnsemble empty": (lambda f: ByteEnsemble([]), ValueError, "at least one"),
        "ByteEnsemble nan weight": (lambda f: ByteEnsemble([f["lm"], f["lm"]], weights=[1.0, nan]), ValueError,
                                    "weights"),
        "ByteEnsemble str weights": (lambda f: ByteEnsemble([f["lm"], f["lm"]], weights="ab"), TypeError,
                                     "weights"),
        "ByteEnsemble weight count": (lambda f: ByteEnsemble([f["lm"], f["lm"]], weights=[1.0]), ValueError,
                                      "weights"),
        "ByteEnsemble mode": (lambda f: ByteEnsemble([f["lm"]], mode="median"), ValueError, "mode"),
        "ByteEnsemble member": (lambda f: ByteEnsemble([f["lm"], "model"]), TypeError, "ByteModel"),
        "ProxyTunedByteLM alpha": (lambda f: ProxyTunedByteLM(f["lm"], f["lm"], f["lm"], alpha=inf), ValueError,
                                   "alpha"),
        "naive model": (lambda f: naive_next_byte_logprobs("model", f["bpe"], b"x"), TypeError, "model"),
        "naive bos": (lambda f: naive_next_byte_logprobs(f["model"], f["bpe"], b"x", bos_token_id=10**6),
                      ValueError, "bos_token_id"),
        "token_healing empty": (lambda f: token_healing_next(f["model"], f["bpe"], b""), ValueError,
                                "non-empty prompt"),
        "token_healing prompt": (lambda f: token_healing_next(f["model"], f["bpe"], 5), TypeError, "prompt"),
        "regex_tokenizer style": (lambda f: regex_tokenizer("bert", 320), ValueError, "style"),
        "regex_tokenizer vocab": (lambda f: regex_tokenizer("gpt2", 100), ValueError, "vocab_size"),
    }


@pytest.mark.parametrize("case", list(_bad_input_cases()))
def test_public_entry_points_reject_bad_input(case, lm300, tok300, bpe300):
    fn, err, fragment = _bad_input_cases()[case]
    with pytest.raises(err, match=fragment):
        fn({"lm": lm300, "model": lm300.model, "tok": tok300, "bpe": bpe300})
