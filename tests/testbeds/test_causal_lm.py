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
