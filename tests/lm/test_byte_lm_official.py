"""[B11] The optional official byte-sampler arm of Exp IV (issue 34): found through an environment variable, never a
dependency; without it Exp IV runs as before and says it was not available."""
from __future__ import annotations

import pytest

from icml26.lm.byte_lm import official
from icml26.testbeds.code_corpus import corpus_texts


def test_a_wrong_source_folder_is_reported_not_raised(tmp_path, monkeypatch):
    monkeypatch.setenv(official.ENV, str(tmp_path))
    mod, why = official.load_official()
    assert mod is None and "byte_sampling" in why and official.ENV in why


def test_without_the_official_sampler_exp4_adds_no_claim_and_records_it(monkeypatch):
    from icml26.lm.byte_lm.reproduce import production_benchmark

    monkeypatch.setattr("icml26.lm.byte_lm.reproduce.load_official", lambda: (None, "not installed"))
    texts = [t.encode() for t in corpus_texts("heldout")]
    claims, rows, metrics = production_benchmark((1024,), gen_bytes=4, repeats=3, texts=texts, warm_bytes=300,
                                                 official=True)
    assert metrics["prod_official_available"] == 0.0
    assert not any("official" in c.statement for c in claims)
    assert "ours / official" not in rows[0]
    with pytest.raises(ImportError, match="not installed"):
        monkeypatch.setattr(official, "load_official", lambda: (None, "not installed"))
        official.OfficialGreedy(None, None)


@pytest.mark.skipif(official.load_official()[0] is None, reason="the official byte-sampler is not installed")
def test_the_official_sampler_and_ours_give_the_same_greedy_bytes():
    from icml26.lm.byte_lm import ByteLevelLM
    from icml26.lm.byte_lm.reproduce import production_benchmark
    from icml26.testbeds.production_tokenizers import production_tokenizer, random_llama

    tok = production_tokenizer("gpt2", 1024)
    lm = ByteLevelLM(random_llama(tok.get_vocab_size(), seed=0), tok)
    prompt = corpus_texts("heldout")[0].encode()[200:264]
    off = official.OfficialGreedy(lm.model, tok)
    assert off.generate(prompt, 12) == lm.generate(prompt, 12, greedy=True).data
    texts = [t.encode() for t in corpus_texts("heldout")]
    claims, rows, metrics = production_benchmark((1024,), gen_bytes=4, repeats=3, texts=texts, warm_bytes=300,
                                                 official=True)
    assert metrics["prod_official_available"] == 1.0 and metrics["prod_v1024_official_same_bytes"] == 1.0
    assert any("official" in c.statement for c in claims)
