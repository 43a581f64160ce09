"""The shared tiny-Llama builder: same seed, same weights; bad sizes refused before transformers sees them."""

import pytest
import torch

from icml26.testbeds.llama import llama_config, tiny_llama


def test_same_seed_same_weights_and_defaults():
    a, b = tiny_llama(64, hidden_size=16, num_layers=1, num_heads=2, seed=5), tiny_llama(64, hidden_size=16,
                                                                                    num_layers=1, num_heads=2, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    c = tiny_llama(64, hidden_size=16, num_layers=1, num_heads=2, seed=6)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    cfg = a.config
    assert cfg.intermediate_size == 32 and cfg.num_key_value_heads == 2 and cfg.tie_word_embeddings
    assert cfg.bos_token_id is None and cfg.eos_token_id is None


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"vocab_size": 0}, ValueError, "vocab_size must be an integer >= 1"),
    ({"vocab_size": 8, "hidden_size": 10, "num_heads": 4}, ValueError, "divisible by num_heads"),
    ({"vocab_size": 8, "num_layers": 0}, ValueError, "num_layers"),
    ({"vocab_size": 8, "num_kv_heads": 3}, ValueError, "multiple of num_kv_heads"),
    ({"vocab_size": 8.0}, TypeError, "vocab_size must be an integer"),
])
def test_bad_sizes_are_refused(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        llama_config(**kwargs)
