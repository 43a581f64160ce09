"""Production-size byte-level BPE tokenizers with GPT-2 / Llama-3 regex pre-tokenizers, trained offline.

Text: the ``.py``, ``.md``, ``.rst`` and ``.txt`` files of the installed Python packages (the interpreter's
``site-packages``; files over 200 kB skipped), in a fixed pseudo-random order by a hash of their path relative to
``site-packages``, up to ``sample_bytes`` characters. Nothing is downloaded. The tokenizer is trained once with
``tokenizers``' ``BpeTrainer`` at its own vocabulary size and cached (atomically, under the testbed cache).
The text depends on which packages (and versions) are installed, so two machines can train different
vocabularies of the same size; the cache key is the config, the tokenizer.json is what a run used.

Pre-tokenizers: GPT-2 (``ByteLevel(use_regex=True)``) and Llama-3 (``Sequence[Split(<Llama-3 regex>,
"isolated"), ByteLevel(use_regex=False)]`` with ``ignore_merges``), the published configurations, with special
tokens ``<|endoftext|>`` (EOS/BOS), ``<|pad|>``, ``<|user|>``.

    >>> tok = production_tokenizer("gpt2", 8192)          # doctest: +SKIP  (tokenizers.Tokenizer)
    >>> model = random_llama(tok.get_vocab_size())         # doctest: +SKIP  (random weights, for timing)
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["ProductionTokenizerConfig", "PRODUCTION_SIZES", "package_texts", "train_production_tokenizer",
           "production_tokenizer", "random_llama", "SPECIAL_TOKENS", "LLAMA3_PATTERN"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>", "<|user|>")
# Llama-3's published pre-tokenizer regex (the Split step of its tokenizer.json)
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
#: the vocabulary sizes of the family (1k for tests and the quick budget; 8k, 32k, 64k at standard and full)
PRODUCTION_SIZES = (1024, 8192, 32768, 65536)
_SUFFIXES = (".py", ".md", ".rst", ".txt")
_MAX_FILE = 200_000


@dataclass(frozen=True)
class ProductionTokenizerConfig:
    style: str = "gpt2"               # "gpt2" | "llama3"
    vocab_size: int = 8192
    sample_bytes: int = 16_000_000    # characters of installed-package text to train on


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


@lru_cache(maxsize=1)
def _package_files() -> tuple[tuple[str, Path], ...]:
    root = _site_packages()
    out = []
    for p in root.rglob("*"):
        if p.suffix in _SUFFIXES and "__pycache__" not in p.parts and p.is_file():
            try:
                if p.stat().st_size > _MAX_FILE:
                    continue
            except OSError:
                continue
            out.append((p.relative_to(root).as_posix(), p))
    if not out:
        raise RuntimeError(f"no package sources or docs found under {root}")
    out.sort(key=lambda rp: hashlib.sha256(rp[0].encode()).hexdigest())
    return tuple(out)


def package_texts(max_bytes: int):
    """Texts of the installed packages' sources and docs in a fixed pseudo-random order (a generator), stopping
    once ``max_bytes`` characters are yielded; files that are not UTF-8 are skipped."""
    if not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
    total = 0
    for _, p in _package_files():
        try:
            t = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        yield t
        total += len(t)
        if total >= max_bytes:
            return


def train_production_tokenizer(cfg: ProductionTokenizerConfig):
    """Train the tokenizer of ``cfg`` with ``BpeTrainer`` (a ``tokenizers.Tokenizer``; ``<|endoftext|>`` is EOS)."""
    if cfg.style not in ("gpt2", "llama3"):
        raise ValueError(f"style must be 'gpt2' or 'llama3', got {cfg.style!r}")
    if not isinstance(cfg.vocab_size, int) or cfg.vocab_size <= 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be an int above {256 + len(SPECIAL_TOKENS)} (bytes + special tokens), "
                         f"got {cfg.vocab_size!r}")
    return train_regex_bpe(cfg.style, cfg.vocab_size, package_texts(cfg.sample_bytes))


def train_regex_bpe(style: str, vocab_size: int, texts, pattern: str = LLAMA3_PATTERN):
    """A byte-level BPE with a production pre-tokenizer, trained by ``BpeTrainer`` on ``texts`` (an iterable of
    strings): ``style="gpt2"`` (GPT-2's regex) or ``"llama3"`` (``pattern`` split, then byte-level; merges ignored
    where a whole pre-token is in the vocabulary, as Llama-3 does). Special tokens: ``SPECIAL_TOKENS``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(ignore_merges=style == "llama3"))
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def production_tokenizer(style: str = "gpt2", vocab_size: int = 8192, sample_bytes: int | None = None):
    """The cached production-size tokenizer (``tokenizers.Tokenizer``) of ``style`` and ``vocab_size``."""
    from tokenizers import Tokenizer

    from .cache import load_cached
    from .progress import build_phase

    if style not in ("gpt2", "llama3"):
        raise ValueError(f"style must be 'gpt2' or 'llama3', got {style!r}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be an int above {256 + len(SPECIAL_TOKENS)} (bytes + special tokens), "
                         f"got {vocab_size!r}")
    cfg = ProductionTokenizerConfig(style, vocab_size) if sample_bytes is None else \
        ProductionTokenizerConfig(style, vocab_size, sample_bytes)

    def build(d):
        import logging

        with build_phase(logging.getLogger(__name__), "production-tokenizer",
                         f"training a {style} BPE-{vocab_size} on {cfg.sample_bytes / 1e6:.0f} MB of package text"):
            train_production_tokenizer(cfg).save(str(d / "tokenizer.json"))

    return load_cached("production-tokenizer", asdict(cfg), build,
                       lambda d: Tokenizer.from_file(str(d / "tokenizer.json")))


def random_llama(vocab_size: int, *, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 intermediate_size: int = 344, seed: int = 0, dtype=None):
    """A random-weight Hugging Face ``LlamaForCausalLM`` (eval mode) for timing at a given vocabulary (its
    quality does not matter for speed); same seed, same weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                      num_attention_heads=num_heads, num_key_value_heads=num_heads,
                      intermediate_size=intermediate_size, max_position_embeddings=4096, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    return model if dtype is None else model.to(dtype)
