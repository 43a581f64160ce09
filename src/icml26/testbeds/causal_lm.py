"""Tiny causal-LM testbed: byte-level BPE tokenizers and Llama-style models trained on the code corpus.

Everything is built from configs (no downloads), trained for a pinned number of steps, and cached on disk
keyed by the config hash (see :mod:`icml26.testbeds.cache`). The cached model loads with
``LlamaForCausalLM.from_pretrained`` and the tokenizer with ``PreTrainedTokenizerFast.from_pretrained``.

    >>> from icml26.testbeds.causal_lm import load_causal_lm, TOY_4L
    >>> model, tok = load_causal_lm(TOY_4L)

Methods in ``icml26.lm`` take any Hugging Face causal LM + tokenizer; these models are only the default.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from .cache import load_cached
from .code_corpus import Split, corpus_texts
from .llama import tiny_llama
from .progress import BuildProgress, build_phase
from .training import pinned_training, train_lm_on_stream

log = logging.getLogger(__name__)
EOS = "<eos>"


@dataclass(frozen=True)
class TokenizerConfig:
    vocab_size: int = 512
    sample_bytes: int = 4_000_000  # characters of training text the BPE is learned from
    min_frequency: int = 2


@dataclass(frozen=True)
class CausalLMConfig:
    """A tiny Llama-style model and its training recipe (AdamW, warmup + cosine, fixed step count).

    Training runs on exactly ``train_threads`` threads with deterministic algorithms (see
    ``training.pinned_training``), so a config names one set of weights whatever machine builds it."""

    name: str = "toy-4L"
    tokenizer: TokenizerConfig = TokenizerConfig()
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 344
    context: int = 256
    steps: int = 300
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 2e-3
    warmup: int = 30
    weight_decay: float = 0.1
    train_bytes: int = 6_000_000  # characters of training text tokenized for LM training
    seed: int = 0
    train_threads: int = 1
    eval_every: int = 0  # >0: record the validation loss every this many steps in the build's training log

    def cache_key(self) -> dict[str, Any]:
        """The config as the cache keys it. Fields added after the first release (``train_threads``,
        ``eval_every``) are left out at their defaults, so the toy models cached before them stay valid."""
        key = asdict(self)
        for name, default in (("train_threads", 1), ("eval_every", 0)):
            if key[name] == default:
                del key[name]
        return key


TOY_4L = CausalLMConfig()
TOY_8L = replace(TOY_4L, name="toy-8L", num_layers=8)
TOY_1L = replace(TOY_4L, name="toy-1L", num_layers=1, hidden_size=64, num_heads=2, intermediate_size=172)
TOY_4L_V1024 = replace(TOY_4L, name="toy-4L-v1024", tokenizer=TokenizerConfig(vocab_size=1024))

# The "small" tier (issue 12): the standard and full budgets of [A19], [B04] and [B11] use it where the toys are too
# weak to decide a claim (two possible exit layers, a target so cheap that a draft costs a fifth of it). 8 layers at
# d = 256 with a 2,048-token BPE, 6.9M parameters, trained for as many steps as a one-time build of <= 20 min on 2
# idle cores allows (560 steps at lr 2e-3: 19.1 min here, 1.83 bits/byte). Our choice from a small sweep (see
# testbeds/README.md): 800 steps at lr 1e-3 reached 1.78 bits/byte in ~27 min.
SMALL_TOKENIZER = TokenizerConfig(vocab_size=2048)
SMALL_8L = CausalLMConfig(name="small-8L", tokenizer=SMALL_TOKENIZER, hidden_size=256, num_layers=8, num_heads=4,
                          intermediate_size=688, context=512, steps=560, batch_size=16, seq_len=256, lr=2e-3,
                          warmup=30, train_bytes=11_000_000, train_threads=2, eval_every=100)
# a second small-tier model with its own tokenizer (BPE-1024), [B11]'s ensemble partner for small-8L: 8 layers at
# d = 192 (3 heads), 800 steps, about as strong per byte as small-8L and cheaper per step
SMALL_8L_V1024 = CausalLMConfig(name="small-8L-v1024", tokenizer=TokenizerConfig(vocab_size=1024), hidden_size=192,
                                num_layers=8, num_heads=3, intermediate_size=512, context=512, steps=800, batch_size=16,
                                seq_len=256, lr=2e-3, warmup=40, train_bytes=11_000_000, train_threads=2,
                                eval_every=100)
# a cheap same-tokenizer assistant for Hugging Face assisted generation on the small tier ([B04]'s peer)
SMALL_1L = CausalLMConfig(name="small-1L", tokenizer=SMALL_TOKENIZER, hidden_size=128, num_layers=1, num_heads=2,
                          intermediate_size=344, context=512, steps=400, batch_size=16, seq_len=256, lr=2e-3,
                          warmup=30, train_bytes=11_000_000, train_threads=1, eval_every=100)


# tokenizer

def train_tokenizer(cfg: TokenizerConfig = TokenizerConfig()):
    """Byte-level BPE (no regex pre-tokenizer) with an ``<eos>`` token, as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if cfg.vocab_size < 257 + 1:
        raise ValueError(f"vocab_size must exceed 257 (256 bytes + <eos>), got {cfg.vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    # BPE training counts "words"; with no pre-tokenizer a whole file would be one word and training would
    # crawl. Training on line pieces (newline kept at the start, so indentation merges are learned) is fast;
    # merges never span two lines, which costs little on code. Encoding still sees the raw text.
    pieces = (piece for text in corpus_texts("train", cfg.sample_bytes) for piece in re.split(r"(?=\n)", text) if piece)
    with build_phase(log, f"tokenizer-{cfg.vocab_size}", f"training the byte-level BPE tokenizer (vocab {cfg.vocab_size})"):
        tok.train_from_iterator(pieces, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS)


def load_tokenizer(cfg: TokenizerConfig = TokenizerConfig()):
    """The cached tokenizer for ``cfg`` (trained on first use)."""
    from transformers import PreTrainedTokenizerFast

    return load_cached("tokenizer", asdict(cfg), lambda d: train_tokenizer(cfg).save_pretrained(d),
                       PreTrainedTokenizerFast.from_pretrained)


def encode_split(tokenizer, split: Split = "train", max_bytes: int | None = None) -> torch.Tensor:
    """All files of ``split`` encoded and joined with ``<eos>`` after each file: a 1-D LongTensor."""
    texts = corpus_texts(split, max_bytes)
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    eos = tokenizer.convert_tokens_to_ids(EOS)
    flat = [t for seq in ids for t in (*seq, eos)]
    return torch.tensor(flat, dtype=torch.long)


# model

def build_model(cfg: CausalLMConfig, vocab_size: int):
    return tiny_llama(vocab_size, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
                      intermediate_size=cfg.intermediate_size, max_positions=cfg.context, seed=cfg.seed)


TRAINING_LOG = "training_log.json"


def train_causal_lm(cfg: CausalLMConfig, tokenizer, out_dir: Path | None = None):
    """Train a fresh model for ``cfg.steps`` steps on the train split (deterministic for a fixed seed and
    ``cfg.train_threads``). With ``out_dir``, the model, tokenizer and ``training_log.json`` (the loss curve: every
    step's training loss, validation loss every ``cfg.eval_every`` steps and at the end, wall time) are saved."""
    import time

    model = build_model(cfg, len(tokenizer))
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.eos_token_id
    with build_phase(log, cfg.name, f"tokenizing {cfg.train_bytes / 1e6:.0f} MB of training text for {cfg.name}"):
        data = encode_split(tokenizer, "train", cfg.train_bytes)
    val = encode_split(tokenizer, "val", 400_000)
    losses: list[float] = []
    val_curve: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    with pinned_training(cfg.train_threads), BuildProgress(log, cfg.name, cfg.steps) as progress:
        def evaluate(done: int) -> None:  # the validation loss every eval_every steps (the last one: below)
            if cfg.eval_every and done % cfg.eval_every == 0 and done < cfg.steps:
                val_curve.append((done, eval_loss(model, val, cfg.seq_len, 16)))

        train_lm_on_stream(model, data, progress, steps=cfg.steps, batch_size=cfg.batch_size, seq_len=cfg.seq_len,
                           lr=cfg.lr, warmup=cfg.warmup, weight_decay=cfg.weight_decay, seed=cfg.seed,
                           losses=losses, on_step=evaluate)
    model.eval()
    final_val = eval_loss(model, val, cfg.seq_len, 64)
    if out_dir is not None:
        model.save_pretrained(out_dir, safe_serialization=True)
        tokenizer.save_pretrained(out_dir)
        bytes_per_token = len("".join(corpus_texts("val", 400_000)).encode()) / max(1, len(val))
        (Path(out_dir) / TRAINING_LOG).write_text(json.dumps({
            "name": cfg.name, "steps": cfg.steps, "train_threads": cfg.train_threads,
            "train_loss": losses, "val_loss": val_curve + [(cfg.steps, final_val)],
            "val_bits_per_byte": final_val / math.log(2) / bytes_per_token,
            "wall_s": time.perf_counter() - t0}, indent=1))
    return model


def _build(cfg: CausalLMConfig, folder: Path) -> None:
    train_causal_lm(cfg, load_tokenizer(cfg.tokenizer), folder)


def load_causal_lm(cfg: CausalLMConfig = TOY_4L):
    """The trained ``(model, tokenizer)`` for ``cfg``, trained once and cached (safe across processes)."""
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    if not isinstance(cfg, CausalLMConfig):
        raise TypeError(f"cfg must be a CausalLMConfig (e.g. TOY_4L), got {type(cfg).__name__}")
    return load_cached("causal_lm", cfg.cache_key(), lambda d: _build(cfg, d),
                       lambda d: (LlamaForCausalLM.from_pretrained(d).eval(), PreTrainedTokenizerFast.from_pretrained(d)))


def training_log(cfg: CausalLMConfig = TOY_4L) -> dict[str, Any]:
    """The loss curve of ``cfg``'s build (``training_log.json``: per-step training loss, validation loss every
    ``cfg.eval_every`` steps and at the end, validation bits per byte, wall time), building the model if needed.
    Models cached before the log existed have none: a ``FileNotFoundError`` says how to rebuild."""
    from .cache import cached_dir

    folder = cached_dir("causal_lm", cfg.cache_key(), lambda d: _build(cfg, d))
    path = folder / TRAINING_LOG
    if not path.exists():
        raise FileNotFoundError(f"{cfg.name} was cached before training logs were written; delete {folder} "
                                "and load it again to rebuild it with its loss curve")
    return json.loads(path.read_text())


@torch.no_grad()
def eval_loss(model, tokens: torch.Tensor, seq_len: int = 128, max_windows: int = 64) -> float:
    """Mean next-token cross-entropy (nats) over non-overlapping windows of ``tokens``."""
    n = min(max_windows, (len(tokens) - 1) // seq_len)
    if n < 1:
        raise ValueError("not enough tokens for one window")
    x = tokens[: n * seq_len + 1]
    inp = x[:-1].view(n, seq_len)
    tgt = x[1:].view(n, seq_len)
    logits = model(input_ids=inp, use_cache=False).logits
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten()).item()
