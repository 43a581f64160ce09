"""The code corpus, the byte-level BPE tokenizer, the on-disk cache and the tiny causal-LM testbed."""

import multiprocessing as mp
from dataclasses import replace

import pytest
import torch

from icml26.testbeds import cache
from icml26.testbeds.causal_lm import TOY_4L, TokenizerConfig, encode_split, load_causal_lm, load_tokenizer
from icml26.testbeds.code_corpus import HELDOUT_DIRS, corpus_files, corpus_texts, split_of


def test_corpus_splits_are_disjoint_deterministic_and_hold_out_domains():
    train, val, held = corpus_files("train"), corpus_files("val"), corpus_files("heldout")
    assert train and val and held
    assert not (set(train) & set(val)) and not (set(train) & set(held)) and not (set(val) & set(held))
    assert all(p.split("/")[0] in HELDOUT_DIRS for p in held)
    assert 0.02 < len(val) / (len(train) + len(val)) < 0.09
    assert split_of("json/decoder.py") == split_of("json/decoder.py")
    assert corpus_texts("val", 10_000) == corpus_texts("val", 10_000)
    with pytest.raises(ValueError, match="unknown split"):
        corpus_files("test")  # type: ignore[arg-type]


def test_tokenizer_is_byte_level_and_lossless():
    tok = load_tokenizer(TokenizerConfig())
    assert len(tok) == 512 and tok.eos_token == "<eos>"
    for text in ["def f(x):\n    return x  # ok\n", "naïve — ünïcödé 😀\t\r\n", "\x00\x01 raw bytes"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    merged = tok("    return", add_special_tokens=False)["input_ids"]
    assert len(merged) < len("    return")  # real merges were learned


def _build_counting(d, counter):
    with open(counter, "a") as f:
        f.write("x")
    (d / "artefact.txt").write_text("ok")


def _worker(cfg, counter, root):
    import os
    os.environ["ICML26_CACHE"] = root
    import functools

    path = cache.cached_dir("unit", cfg, functools.partial(_build_counting, counter=counter))
    assert (path / "artefact.txt").read_text() == "ok"


def test_cache_builds_once_even_with_two_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path / "c"))
    counter = tmp_path / "count"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=({"k": 1}, str(counter), str(tmp_path / "c"))) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert counter.read_text() == "x"  # built exactly once
    _worker({"k": 1}, str(counter), str(tmp_path / "c"))
    assert counter.read_text() == "x"  # cache hit
    assert not list((tmp_path / "c" / "unit").glob(".*tmp*"))  # no half-written folders left


def test_cached_model_round_trips(monkeypatch):
    tiny = replace(TOY_4L, name="unit-tiny", hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                   steps=3, batch_size=2, seq_len=32, train_bytes=50_000)
    model, tok = load_causal_lm(tiny)
    again, _ = load_causal_lm(tiny)
    x = encode_split(tok, "val", 5_000)[:40][None]
    with torch.no_grad():
        assert torch.equal(model(x).logits, again(x).logits)
    assert model.config.vocab_size == len(tok)
    with pytest.raises(TypeError, match="CausalLMConfig"):
        load_causal_lm("toy-4L")  # type: ignore[arg-type]


def test_pinned_training_is_deterministic_and_writes_the_loss_curve(tmp_path):
    """Same config -> same weights whatever thread count the caller runs with; settings restored; log written."""
    import json

    from icml26.testbeds.causal_lm import TRAINING_LOG, train_causal_lm
    from icml26.testbeds.training import pinned_training

    tiny = replace(TOY_4L, name="unit-pinned", hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                   steps=4, batch_size=2, seq_len=32, train_bytes=50_000, train_threads=2, eval_every=2)
    tok = load_tokenizer(tiny.tokenizer)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = train_causal_lm(tiny, tok, tmp_path)
        assert torch.get_num_threads() == 1 and not torch.are_deterministic_algorithms_enabled()
        torch.set_num_threads(2)
        b = train_causal_lm(tiny, tok)
    finally:
        torch.set_num_threads(before)
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), n
    log = json.loads((tmp_path / TRAINING_LOG).read_text())
    assert len(log["train_loss"]) == 4 and [s for s, _ in log["val_loss"]] == [2, 4]
    assert log["val_bits_per_byte"] > 0
    with pytest.raises(ValueError, match="threads"):
        with pinned_training(0):
            pass


def test_cache_keys_of_the_toy_configs_are_unchanged_by_new_fields():
    """Fields added later are left out of the key at their defaults, so caches built before them stay valid."""
    from dataclasses import asdict

    from icml26.testbeds.causal_lm import SMALL_8L

    legacy = {k: v for k, v in asdict(TOY_4L).items() if k not in ("train_threads", "eval_every")}
    assert TOY_4L.cache_key() == legacy
    assert SMALL_8L.cache_key()["train_threads"] == 2 and SMALL_8L.cache_key() != legacy
