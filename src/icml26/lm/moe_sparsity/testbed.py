"""The tiny MoE causal LM testbed of [A09]: a Hugging Face Mixtral (SwiGLU experts, softmax-then-top-k router,
Mixtral renormalisation) trained on the standard-library code corpus with the shared BPE tokenizer, cached on
disk (cache kind ``"moe_lm"``) and loaded with its MoE blocks converted to :class:`SparseMoE`.

    >>> model, tok = load_moe_lm(MOE_4L)      # trains once (~4 min CPU), then loads from the cache

A second testbed, ``OLMOE_4L``, is an OLMoE-style model (Hugging Face ``OlmoeForCausalLM``: softmax over all
experts, top-4 of 8, **no renormalisation**) with the same width, depth, active expert neurons per token and
recipe. With renormalised top-2 several drop policies coincide (ratio skip at beta is the threshold at
beta / (1 + beta); static top-1 is the threshold at 0.5); with k >= 3 and raw softmax weights they differ, so the
comparison of policies can come out either way.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from icml26.harness import validate as v
from icml26.testbeds.cache import load_cached
from icml26.testbeds.causal_lm import TokenizerConfig, encode_split, load_tokenizer
from icml26.testbeds.progress import BuildProgress, build_phase
from icml26.testbeds.training import pinned_training, train_steps

from .moe import convert_hf_moe

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MoELMConfig:
    """A tiny Mixtral and its training recipe (AdamW, warmup + cosine, fixed steps, load-balance loss)."""

    name: str = "moe-4L"
    tokenizer: TokenizerConfig = TokenizerConfig()
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    ffn_size: int = 256
    num_experts: int = 8
    top_k: int = 2
    aux_loss_coef: float = 0.01
    context: int = 256
    steps: int = 500
    batch_size: int = 8
    seq_len: int = 128
    lr: float = 2e-3
    warmup: int = 30
    weight_decay: float = 0.1
    train_bytes: int = 6_000_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {v.describe(self.name)}")
        if not isinstance(self.tokenizer, TokenizerConfig):
            raise TypeError(f"tokenizer must be a TokenizerConfig, got {v.describe(self.tokenizer)}")
        for key in ("hidden_size", "num_layers", "num_heads", "ffn_size", "num_experts", "top_k", "context", "steps",
                    "batch_size", "seq_len", "warmup", "train_bytes"):
            v.positive_int(key, getattr(self, key))
        v.non_negative_int("seed", self.seed)
        v.non_negative("aux_loss_coef", self.aux_loss_coef)
        v.non_negative("weight_decay", self.weight_decay)
        v.positive("lr", self.lr)
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k = {self.top_k} exceeds num_experts = {self.num_experts}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size = {self.hidden_size} must be divisible by num_heads = {self.num_heads}")
        if self.seq_len > self.context:
            raise ValueError(f"seq_len = {self.seq_len} exceeds the context length {self.context}")


@dataclass(frozen=True)
class OlmoeLMConfig(MoELMConfig):
    """An OLMoE-style tiny MoE LM: top-k of the softmax over all experts, not renormalised (``norm_topk_prob``)."""

    name: str = "olmoe-4L"
    ffn_size: int = 128
    top_k: int = 4
    norm_topk_prob: bool = False


MOE_4L = MoELMConfig()
OLMOE_4L = OlmoeLMConfig()
MOE_2L = replace(MOE_4L, name="moe-2L", num_layers=2, hidden_size=64, num_heads=2, ffn_size=128, steps=60,
                 batch_size=8, seq_len=64, warmup=10, train_bytes=1_000_000)
OLMOE_2L = replace(OLMOE_4L, name="olmoe-2L", num_layers=2, hidden_size=64, num_heads=2, ffn_size=64, steps=60,
                   batch_size=8, seq_len=64, warmup=10, train_bytes=1_000_000)


def build_moe_lm(cfg: MoELMConfig, vocab_size: int):
    """An untrained ``MixtralForCausalLM`` (``OlmoeForCausalLM`` for an :class:`OlmoeLMConfig`) for ``cfg``
    (seeded)."""
    from transformers import MixtralConfig, MixtralForCausalLM, OlmoeConfig, OlmoeForCausalLM

    if isinstance(cfg, OlmoeLMConfig):
        config = OlmoeConfig(vocab_size=vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.ffn_size,
                             num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                             num_key_value_heads=cfg.num_heads, num_experts=cfg.num_experts,
                             num_experts_per_tok=cfg.top_k, norm_topk_prob=cfg.norm_topk_prob,
                             router_aux_loss_coef=cfg.aux_loss_coef, max_position_embeddings=cfg.context,
                             tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None)
        torch.manual_seed(cfg.seed)
        return OlmoeForCausalLM(config)

    config = MixtralConfig(vocab_size=vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.ffn_size,
                           num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                           num_key_value_heads=cfg.num_heads, num_local_experts=cfg.num_experts,
                           num_experts_per_tok=cfg.top_k, router_aux_loss_coef=cfg.aux_loss_coef,
                           max_position_embeddings=cfg.context, sliding_window=None, tie_word_embeddings=True,
                           bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(cfg.seed)
    return MixtralForCausalLM(config)


def train_moe_lm(cfg: MoELMConfig, tokenizer, out_dir: Path | None = None):
    """Train for ``cfg.steps`` steps on the train split: cross-entropy + aux_loss_coef * load-balance loss, on one
    thread with deterministic algorithms (``pinned_training(1)``), so the weights do not depend on the builder's
    thread count."""
    model = build_moe_lm(cfg, len(tokenizer))
    with build_phase(log, cfg.name, f"tokenizing {cfg.train_bytes / 1e6:.1f} MB of training text for {cfg.name}"):
        data = encode_split(tokenizer, "train", cfg.train_bytes)
    g = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / cfg.warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / cfg.steps))))
    offsets = torch.arange(cfg.seq_len + 1)

    def batch_loss(_step: int) -> torch.Tensor:
        starts = torch.randint(0, len(data) - cfg.seq_len - 1, (cfg.batch_size,), generator=g)
        batch = data[starts[:, None] + offsets]
        out = model(input_ids=batch[:, :-1], use_cache=False, output_router_logits=True)
        ce = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), batch[:, 1:].flatten())
        return ce + cfg.aux_loss_coef * out.aux_loss

    # one thread, deterministic algorithms: the same weights whoever builds it (A09's standard table once moved when
    # the testbeds were rebuilt on another machine, e.g. threshold dropping's loss increase 0.0047 -> 0.0100)
    with pinned_training(1), BuildProgress(log, cfg.name, cfg.steps) as progress:
        train_steps(model, opt, sched, cfg.steps, batch_loss, progress)
    model.eval()
    if out_dir is not None:
        model.save_pretrained(out_dir, safe_serialization=True)
        tokenizer.save_pretrained(out_dir)
    return model


def load_moe_lm(cfg: MoELMConfig = MOE_4L, *, convert: bool = True):
    """The trained ``(model, tokenizer)`` for ``cfg``, trained once and cached; with ``convert`` its Mixtral
    MoE blocks are replaced by equivalent :class:`SparseMoE` layers (drop policies off)."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    if not isinstance(cfg, MoELMConfig):
        raise TypeError(f"cfg must be a MoELMConfig (e.g. MOE_4L or OLMOE_4L), got {type(cfg).__name__}")
    if not isinstance(convert, bool):
        raise TypeError(f"convert must be True or False, got {v.describe(convert)}")

    def build(d: Path) -> None:
        train_moe_lm(cfg, load_tokenizer(cfg.tokenizer), d)

    model, tok = load_cached("moe_lm", asdict(cfg), build,
                             lambda d: (AutoModelForCausalLM.from_pretrained(d).eval(),
                                        PreTrainedTokenizerFast.from_pretrained(d)))
    return (convert_hf_moe(model, inplace=True) if convert else model), tok


__all__ = ["MoELMConfig", "OlmoeLMConfig", "MOE_4L", "MOE_2L", "OLMOE_4L", "OLMOE_2L", "build_moe_lm", "train_moe_lm", "load_moe_lm"]
