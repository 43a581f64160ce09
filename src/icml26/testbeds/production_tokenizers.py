"""Production-size byte-level BPE tokenizers with GPT-2 / Llama-3 regex pre-tokenizers, trained offline.

Text (nothing is downloaded): the ``.py``, ``.md``, ``.rst`` and ``.txt`` files of a fixed list of installed
distributions (``CORPUS_DISTS``: transformers, torch, numpy, scipy, sympy; those not installed are skipped), each
walked in sorted path order, taken one file from each in turn (files over 200 kB skipped) until ``sample_bytes``
bytes; read as UTF-8 (undecodable bytes replaced). The tokenizer is trained once with ``tokenizers``'
``BpeTrainer`` at its own vocabulary size and cached (atomically, under the testbed cache).

Cache key: the config, the versions of the distributions used, and the SHA-256 of the exact training text, so a
cached tokenizer is never a different one from what a rebuild would train (a different installed version, or an
edited file, is a different key). The digest is memoised on disk per (path, size, mtime) fingerprint of the files,
so loading a cached tokenizer reads the text only when a file changed; ``corpus.json`` next to the tokenizer lists
the files, their sizes and the digest.

Pre-tokenizers: GPT-2 (``ByteLevel(use_regex=True)``) and Llama-3 (``Sequence[Split(<Llama-3 regex>,
"isolated"), ByteLevel(use_regex=False)]`` with ``ignore_merges``), the published configurations, with special
tokens ``<|endoftext|>`` (EOS/BOS), ``<|pad|>``, ``<|user|>``.

    >>> tok = production_tokenizer("gpt2", 8192)          # doctest: +SKIP  (tokenizers.Tokenizer)
    >>> model = random_llama(tok.get_vocab_size())         # doctest: +SKIP  (random weights, for timing)
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["ProductionTokenizerConfig", "PRODUCTION_SIZES", "CORPUS_DISTS", "corpus_files", "corpus_digest",
           "package_texts", "train_production_tokenizer", "production_tokenizer", "random_llama", "SPECIAL_TOKENS",
           "LLAMA3_PATTERN"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>", "<|user|>")
# Llama-3's published pre-tokenizer regex (the Split step of its tokenizer.json)
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
#: the vocabulary sizes of the family (1k for tests and the quick budget; 8k, 32k, 64k at standard and full)
PRODUCTION_SIZES = (1024, 8192, 32768, 65536)
#: the distributions whose sources and docs are the training text (in this order, one file from each in turn)
CORPUS_DISTS = ("transformers", "torch", "numpy", "scipy", "sympy")
_SUFFIXES = (".py", ".md", ".rst", ".txt")
_MAX_FILE = 200_000


@dataclass(frozen=True)
class ProductionTokenizerConfig:
    style: str = "gpt2"               # "gpt2" | "llama3"
    vocab_size: int = 8192
    sample_bytes: int = 16_000_000    # bytes of distribution text to train on


def _check_bytes(max_bytes) -> None:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")


def _dist_root(name: str) -> tuple[str, Path] | None:
    """(version, package folder) of an installed distribution, or None."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version(name)
        spec = importlib.util.find_spec(name)
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return version, Path(list(spec.submodule_search_locations)[0])


def _walk_sorted(root: Path):
    """(path, size) of the text files under ``root`` in sorted path order, lazily (only the folders reached are
    listed)."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        if e.name == "__pycache__":
            continue
        try:
            if e.is_dir(follow_symlinks=False):
                yield from _walk_sorted(Path(e.path))
            elif e.name.endswith(_SUFFIXES) and e.is_file(follow_symlinks=False):
                size = e.stat().st_size
                if 0 < size <= _MAX_FILE:
                    yield Path(e.path), size, e.stat().st_mtime_ns
        except OSError:
            continue


@lru_cache(maxsize=8)
def corpus_files(max_bytes: int) -> tuple[dict, tuple]:
    """({distribution: version}, ((name/relative path, path, size, mtime_ns), ...)): the training files for
    ``max_bytes`` bytes, one file from each distribution of ``CORPUS_DISTS`` in turn, each in sorted path order."""
    _check_bytes(max_bytes)
    roots = [(n, *r) for n in CORPUS_DISTS if (r := _dist_root(n)) is not None]
    if not roots:
        raise RuntimeError(f"none of the corpus distributions {CORPUS_DISTS} is installed")
    walks = [(n, root, _walk_sorted(root)) for n, _, root in roots]
    out, total = [], 0
    while walks and total < max_bytes:
        for w in list(walks):
            n, root, it = w
            f = next(it, None)
            if f is None:
                walks.remove(w)
                continue
            path, size, mtime = f
            out.append((f"{n}/{path.relative_to(root).as_posix()}", path, size, mtime))
            total += size
            if total >= max_bytes:
                break
    return {n: v for n, v, _ in roots}, tuple(out)


def package_texts(max_bytes: int) -> list[str]:
    """The training texts for ``max_bytes`` bytes (see ``corpus_files``), read as UTF-8 with undecodable bytes
    replaced."""
    return [path.read_bytes().decode("utf-8", "replace") for _, path, _, _ in corpus_files(max_bytes)[1]]


def _digest(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def corpus_digest(max_bytes: int) -> str:
    """SHA-256 of the exact training text for ``max_bytes`` (memoised on disk per fingerprint of the files'
    paths, sizes and modification times; recomputed from the text when any of them changed)."""
    from .cache import cache_root

    _, files = corpus_files(max_bytes)
    fp = hashlib.sha256(json.dumps([(r, s, m) for r, _, s, m in files]).encode()).hexdigest()
    memo = cache_root() / "production-corpus" / f"{fp[:32]}.json"
    try:
        return json.loads(memo.read_text())["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    digest = _digest(package_texts(max_bytes))
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"sha256": digest, "files": len(files)}))
        os.replace(tmp, memo)
    except OSError:
        pass
    return digest


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
    versions, files = corpus_files(cfg.sample_bytes)
    key = {**asdict(cfg), "corpus": versions, "corpus_sha256": corpus_digest(cfg.sample_bytes)}

    def build(d):
        import logging

        texts = package_texts(cfg.sample_bytes)
        if _digest(texts) != key["corpus_sha256"]:
            raise RuntimeError("the corpus files changed while the production tokenizer was being built; retry")
        with build_phase(logging.getLogger(__name__), "production-tokenizer",
                         f"training a {style} BPE-{vocab_size} on {cfg.sample_bytes / 1e6:.0f} MB of package text"):
            train_regex_bpe(style, vocab_size, texts).save(str(d / "tokenizer.json"))
        (d / "corpus.json").write_text(json.dumps({"distributions": versions, "sha256": key["corpus_sha256"],
                                                   "files": [[r, s] for r, _, s, _ in files]}, indent=0))

    return load_cached("production-tokenizer", key, build, lambda d: Tokenizer.from_file(str(d / "tokenizer.json")))


def random_llama(vocab_size: int, *, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 intermediate_size: int = 344, seed: int = 0, dtype=None):
    """A random-weight Hugging Face ``LlamaForCausalLM`` (eval mode) for timing at a given vocabulary (its
    quality does not matter for speed); same seed, same weights."""
    from .llama import tiny_llama

    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    model = tiny_llama(vocab_size, hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads,
                       intermediate_size=intermediate_size, max_positions=4096, bos_token_id=1, eos_token_id=2,
                       seed=seed).eval()  # token ids 1 / 2: LlamaConfig's defaults, as before
    return model if dtype is None else model.to(dtype)
