"""The long-context base of [A07]: a tiny Llama trained with full attention on code sequences in which a span of
earlier text (about a third of the sequence) is copied again further on, beyond any sliding window the
reproduction uses, so that the base uses context beyond the window. A 32-token span of 96 tokens (``COPY_2L``, 1000
steps) gives full attention a 0.118-nat advantage over a 16-token window + 4 sinks (README); the first recipe
(16-32 token spans, 80-400 steps) gave 0.009 nats or less: no copying was learned.

    copy span: tokens[d : d + L] <- tokens[s : s + L],   d >= s + L + gap   (gap > W + S: the source has left
                                                                            the window when the copy is read)

The toy code LM of the shared testbeds is trained on 128-token windows of natural code, where full attention is no
better than a 32-token window; on it an AHN has nothing to recover. Cached as ``ahn_base``.

    >>> model, tok = load_copy_lm(COPY_4L)   # trains once (~2 min CPU on an idle core), then loads from the cache
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from icml26.harness import validate as _chk
from icml26.testbeds.cache import load_cached
from icml26.testbeds.causal_lm import CausalLMConfig, TokenizerConfig, build_model, encode_split, load_tokenizer
from icml26.testbeds.progress import BuildProgress, build_phase
from icml26.testbeds.training import pinned_training, train_steps, warmup_cosine

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CopyLMConfig:
    """A tiny Llama (the toy-4L shape) and its recipe on code sequences with planted copy spans."""

    name: str = "copy-4L"
    tokenizer: TokenizerConfig = TokenizerConfig()
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 344
    context: int = 512
    seq_len: int = 256
    span: int = 32             # L: copied tokens
    min_gap: int = 48          # tokens between the end of the source and the copy (> W + S of the reproduction)
    steps: int = 400
    batch_size: int = 8
    lr: float = 2e-3
    warmup: int = 30
    weight_decay: float = 0.1
    train_bytes: int = 6_000_000
    seed: int = 0
    train_threads: int = 1

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "context", "seq_len", "span",
                     "steps", "batch_size", "train_bytes", "train_threads"):
            _chk.positive_int(name, getattr(self, name))
        for name in ("min_gap", "warmup", "seed"):
            _chk.non_negative_int(name, getattr(self, name))
        _chk.positive("lr", self.lr)
        _chk.non_negative("weight_decay", self.weight_decay)
        if 2 * self.span + self.min_gap >= self.seq_len:
            raise ValueError(f"seq_len {self.seq_len} is too short for a {self.span}-token copy {self.min_gap} tokens "
                             f"on (need seq_len > 2 span + min_gap = {2 * self.span + self.min_gap})")
        if self.seq_len > self.context:
            raise ValueError(f"seq_len {self.seq_len} must be <= context {self.context}")

    def model_config(self) -> CausalLMConfig:
        return CausalLMConfig(name=self.name, tokenizer=self.tokenizer, hidden_size=self.hidden_size,
                              num_layers=self.num_layers, num_heads=self.num_heads,
                              intermediate_size=self.intermediate_size, context=self.context, seed=self.seed)


COPY_4L = CopyLMConfig(span=85, min_gap=56, steps=1000)
COPY_2L = CopyLMConfig(name="copy-2L", num_layers=2, hidden_size=64, num_heads=2, intermediate_size=172, seq_len=96,
                       span=32, min_gap=20, steps=1000, train_bytes=1_000_000)


def plant_copies(seqs: torch.Tensor, *, span: int, min_gap: int, lo: int = 0,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy one span of ``span`` tokens of each row further on, at least ``min_gap`` tokens after the source ends.

    Returns (the planted rows [B, T], a mask [B, T] of the copy's target positions after the first, i.e. the
    tokens a model can predict by recalling the source). The source starts at >= ``lo``.
    """
    if not isinstance(seqs, torch.Tensor) or seqs.dim() != 2 or seqs.dtype not in (torch.long, torch.int):
        raise ValueError(f"seqs must be an integer tensor [B, T] of token ids, got {_chk.describe(seqs)}")
    span = _chk.positive_int("span", span)
    min_gap = _chk.non_negative_int("min_gap", min_gap)
    lo = _chk.non_negative_int("lo", lo)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    B, T = seqs.shape
    hi = T - 2 * span - min_gap
    if hi <= lo:
        raise ValueError(f"sequences of {T} tokens are too short for a {span}-token copy {min_gap} tokens on "
                         f"(need T > {lo + 2 * span + min_gap})")
    out = seqs.clone()
    mask = torch.zeros(B, T, dtype=torch.bool)
    s = torch.randint(lo, hi, (B,), generator=generator)
    room = (T - span) - (s + span + min_gap) + 1                         # choices of the destination start
    d = s + span + min_gap + (torch.rand(B, generator=generator) * room).long()
    ar = torch.arange(span)
    rows = torch.arange(B)[:, None]
    out[rows, d[:, None] + ar] = seqs[rows, s[:, None] + ar]
    mask[rows, d[:, None] + ar[1:]] = True
    return out, mask


def train_copy_lm(cfg: CopyLMConfig, tokenizer, out_dir: Path | None = None):
    """Next-token training with full attention on ``seq_len``-token windows, each with one planted copy span."""
    model = build_model(cfg.model_config(), len(tokenizer))
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.eos_token_id
    with build_phase(log, cfg.name, f"tokenizing {cfg.train_bytes / 1e6:.1f} MB of training text for {cfg.name}"):
        data = encode_split(tokenizer, "train", cfg.train_bytes)
    g = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = warmup_cosine(opt, cfg.warmup, cfg.steps)
    offsets = torch.arange(cfg.seq_len + 1)

    def batch_loss(_step: int) -> torch.Tensor:
        starts = torch.randint(0, len(data) - cfg.seq_len - 1, (cfg.batch_size,), generator=g)
        batch, _ = plant_copies(data[starts[:, None] + offsets], span=cfg.span, min_gap=cfg.min_gap, generator=g)
        logits = model(input_ids=batch[:, :-1], use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())

    with pinned_training(cfg.train_threads), BuildProgress(log, cfg.name, cfg.steps) as progress:
        train_steps(model, opt, sched, cfg.steps, batch_loss, progress)
    model.eval()
    if out_dir is not None:
        model.save_pretrained(out_dir, safe_serialization=True)
        tokenizer.save_pretrained(out_dir)
    return model


def load_copy_lm(cfg: CopyLMConfig = COPY_4L):
    """The trained ``(LlamaForCausalLM, tokenizer)`` for ``cfg``, trained once and cached (``ahn_base``)."""
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    if not isinstance(cfg, CopyLMConfig):
        raise TypeError(f"cfg must be a CopyLMConfig (e.g. COPY_4L), got {type(cfg).__name__}")

    def build(d: Path) -> None:
        train_copy_lm(cfg, load_tokenizer(cfg.tokenizer), d)

    return load_cached("ahn_base", asdict(cfg), build,
                       lambda d: (LlamaForCausalLM.from_pretrained(d).eval(), PreTrainedTokenizerFast.from_pretrained(d)))


__all__ = ["CopyLMConfig", "COPY_4L", "COPY_2L", "plant_copies", "train_copy_lm", "load_copy_lm"]
