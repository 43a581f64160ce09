"""Small production-style byte-level BPE tokenizers, built offline [B11].

The published pre-tokenizer configurations of GPT-2 (``ByteLevel(use_regex=True)``) and Llama-3
(``Sequence[Split(<Llama-3 regex>, "isolated"), ByteLevel(use_regex=False)]`` with ``ignore_merges``) with a
small vocabulary trained by ``tokenizers``' BpeTrainer on the standard-library code corpus, plus special tokens.
They exercise everything the real tokenizer.json files do (regex pre-tokens, look-ahead, digit groups,
contractions, special tokens) at a vocabulary size where brute force is feasible.

    >>> tok = regex_tokenizer("gpt2", 320)                  # doctest: +SKIP  (a tokenizers.Tokenizer, cached)
    >>> tok.save("tokenizer.json")                           # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .pretok import LLAMA3_PATTERN

__all__ = ["RegexTokenizerConfig", "RegexLMConfig", "GPT2_REGEX_LM", "train_regex_tokenizer", "regex_tokenizer",
           "regex_causal_lm", "SPECIAL_TOKENS"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>", "<|user|>")


@dataclass(frozen=True)
class RegexTokenizerConfig:
    style: str = "gpt2"            # "gpt2" | "llama3"
    vocab_size: int = 320
    sample_bytes: int = 150_000    # characters of training text


def train_regex_tokenizer(cfg: RegexTokenizerConfig = RegexTokenizerConfig()):
    """Train the tokenizer of ``cfg`` (a ``tokenizers.Tokenizer``; ``<|endoftext|>`` is EOS and BOS)."""
    from icml26.testbeds.code_corpus import corpus_texts
    from icml26.testbeds.production_tokenizers import train_regex_bpe

    if cfg.style not in ("gpt2", "llama3"):
        raise ValueError(f"style must be 'gpt2' or 'llama3', got {cfg.style!r}")
    if cfg.vocab_size < 256 + len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size must exceed {256 + len(SPECIAL_TOKENS)} (bytes + special tokens)")
    return train_regex_bpe(cfg.style, cfg.vocab_size, corpus_texts("train", cfg.sample_bytes), LLAMA3_PATTERN)


def regex_tokenizer(style: str = "gpt2", vocab_size: int = 320):
    """The cached tokenizer (``tokenizers.Tokenizer``) for ``style`` and ``vocab_size``."""
    from tokenizers import Tokenizer

    from icml26.testbeds.cache import load_cached

    if style not in ("gpt2", "llama3"):
        raise ValueError(f"style must be 'gpt2' or 'llama3', got {style!r}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be an int above {256 + len(SPECIAL_TOKENS)} (bytes + special tokens), "
                         f"got {vocab_size!r}")
    cfg = RegexTokenizerConfig(style, vocab_size)
    return load_cached("b11-regex-tokenizer", asdict(cfg),
                       lambda d: train_regex_tokenizer(cfg).save(str(d / "tokenizer.json")),
                       lambda d: Tokenizer.from_file(str(d / "tokenizer.json")))


@dataclass(frozen=True)
class RegexLMConfig:
    """A tiny Llama trained on the code corpus with a regex-pre-tokenized tokenizer (recipe as the testbed's
    ``CausalLMConfig``: AdamW, warmup + cosine, fixed step count)."""

    tokenizer: RegexTokenizerConfig = RegexTokenizerConfig("gpt2", 512)
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 344
    context: int = 256
    steps: int = 250
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 2e-3
    warmup: int = 25
    train_bytes: int = 1_500_000
    seed: int = 0


GPT2_REGEX_LM = RegexLMConfig()


def _train_regex_lm(cfg: RegexLMConfig, out_dir) -> None:
    import logging

    import torch

    from icml26.testbeds.code_corpus import corpus_texts
    from icml26.testbeds.llama import tiny_llama
    from icml26.testbeds.progress import BuildProgress, build_phase
    from icml26.testbeds.training import train_lm_on_stream

    log = logging.getLogger(__name__)
    tok = train_regex_tokenizer(cfg.tokenizer)
    eos = tok.token_to_id(SPECIAL_TOKENS[0])
    what = f"tokenizing {cfg.train_bytes / 1e6:.1f} MB with the {cfg.tokenizer.style} tokenizer"
    with build_phase(log, "b11-regex-lm", what):
        enc = tok.encode_batch(corpus_texts("train", cfg.train_bytes))
        data = torch.tensor([t for e in enc for t in (*e.ids, eos)], dtype=torch.long)
    model = tiny_llama(tok.get_vocab_size(), hidden_size=cfg.hidden_size, num_layers=cfg.num_layers,
                       num_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size, max_positions=cfg.context,
                       bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, seed=cfg.seed)
    with BuildProgress(log, "b11-regex-lm", cfg.steps) as progress:
        train_lm_on_stream(model, data, progress, steps=cfg.steps, batch_size=cfg.batch_size, seq_len=cfg.seq_len,
                           lr=cfg.lr, warmup=cfg.warmup, weight_decay=0.1, seed=cfg.seed)
    model.eval()
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save(str(out_dir / "tokenizer.json"))


def regex_causal_lm(cfg: RegexLMConfig = GPT2_REGEX_LM):
    """``(model, tokenizer)``: a tiny Llama trained with a GPT-2 (or Llama-3) style regex tokenizer; trained once
    (about a minute on 2 cores) and cached. The tokenizer is a ``tokenizers.Tokenizer`` (tokenizer.json)."""
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    from icml26.testbeds.cache import load_cached

    if not isinstance(cfg, RegexLMConfig):
        raise TypeError(f"cfg must be a RegexLMConfig, got {type(cfg).__name__}")
    return load_cached("b11-regex-lm", asdict(cfg), lambda d: _train_regex_lm(cfg, d),
                       lambda d: (LlamaForCausalLM.from_pretrained(d).eval(),
                                  Tokenizer.from_file(str(d / "tokenizer.json"))))
