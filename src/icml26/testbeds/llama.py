"""One builder for the small random-init Llama models the package builds from a config (no download).

Every paper that needs a tiny causal LM (the code-corpus testbed LMs, HeRL's and AutoTool's policies, the
retrosynthesis reasoner, B11's regex-tokenizer LMs and timing models) builds it here, so the defaults that matter
(tied embeddings, one key/value head per query head, no special-token ids unless given) are decided once.

    >>> from icml26.testbeds.llama import tiny_llama
    >>> model = tiny_llama(256, hidden_size=32, num_layers=1, num_heads=2, seed=0)
    >>> model.config.vocab_size, sum(p.numel() for p in model.parameters()) > 0
    (256, True)
"""

from __future__ import annotations

from typing import Any

from icml26.harness import validate

__all__ = ["tiny_llama", "llama_config"]


def llama_config(vocab_size: int, *, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
                 num_kv_heads: int | None = None, intermediate_size: int | None = None, max_positions: int = 128,
                 tie_word_embeddings: bool = True, pad_token_id: int | None = None, bos_token_id: int | None = None,
                 eos_token_id: int | None = None, **extra: Any):
    """A ``transformers.LlamaConfig`` for a small model; ``intermediate_size`` defaults to ``2 * hidden_size``,
    ``num_kv_heads`` to ``num_heads``; ``extra`` goes to ``LlamaConfig`` unchanged."""
    from transformers import LlamaConfig

    for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size), ("num_layers", num_layers),
                        ("num_heads", num_heads), ("max_positions", max_positions)):
        validate.positive_int(name, value)
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
    kv = num_heads if num_kv_heads is None else validate.positive_int("num_kv_heads", num_kv_heads)
    if num_heads % kv:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({kv})")
    inter = 2 * hidden_size if intermediate_size is None else validate.positive_int("intermediate_size",
                                                                                    intermediate_size)
    return LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                       num_attention_heads=num_heads, num_key_value_heads=kv, intermediate_size=inter,
                       max_position_embeddings=max_positions, tie_word_embeddings=tie_word_embeddings,
                       pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id, **extra)


def tiny_llama(vocab_size: int, *, seed: int | None = None, **config: Any):
    """A random-init ``LlamaForCausalLM`` from :func:`llama_config` (same arguments).

    With ``seed``, the global torch generator is seeded first (as ``transformers.set_seed`` would), so the same
    seed gives the same weights; wrap the call in ``torch.random.fork_rng()`` to leave the caller's stream alone.
    """
    import torch
    from transformers import LlamaForCausalLM

    cfg = llama_config(vocab_size, **config)
    if seed is not None:
        torch.manual_seed(validate.non_negative_int("seed", seed))
    return LlamaForCausalLM(cfg)
