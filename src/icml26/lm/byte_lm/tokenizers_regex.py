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

__all__ = ["RegexTokenizerConfig", "train_regex_tokenizer", "regex_tokenizer", "SPECIAL_TOKENS"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>", "<|user|>")


@dataclass(frozen=True)
class RegexTokenizerConfig:
    style: str = "gpt2"            # "gpt2" | "llama3"
    vocab_size: int = 320
    sample_bytes: int = 150_000    # characters of training text


def train_regex_tokenizer(cfg: RegexTokenizerConfig = RegexTokenizerConfig()):
    """Train the tokenizer of ``cfg`` (a ``tokenizers.Tokenizer``; ``<|endoftext|>`` is EOS and BOS)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from icml26.testbeds.code_corpus import corpus_texts

    if cfg.style not in ("gpt2", "llama3"):
        raise ValueError(f"style must be 'gpt2' or 'llama3', got {cfg.style!r}")
    if cfg.vocab_size < 256 + len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size must exceed {256 + len(SPECIAL_TOKENS)} (bytes + special tokens)")
    tok = Tokenizer(models.BPE(ignore_merges=cfg.style == "llama3"))
    if cfg.style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=cfg.vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus_texts("train", cfg.sample_bytes), trainer=trainer)
    return tok


def regex_tokenizer(style: str = "gpt2", vocab_size: int = 320):
    """The cached tokenizer (``tokenizers.Tokenizer``) for ``style`` and ``vocab_size``."""
    from tokenizers import Tokenizer

    from icml26.testbeds.cache import load_cached

    cfg = RegexTokenizerConfig(style, vocab_size)
    return load_cached("b11-regex-tokenizer", asdict(cfg),
                       lambda d: train_regex_tokenizer(cfg).save(str(d / "tokenizer.json")),
                       lambda d: Tokenizer.from_file(str(d / "tokenizer.json")))
