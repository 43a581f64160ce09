"""Model-family adapters: how to walk the blocks of a Hugging Face causal LM one at a time [A19].

Early exit needs four things the HF ``forward`` hides: the embedding, the list of blocks, the final norm + LM head
(to decode an intermediate state h_l as ``lm_head(final_norm(h_l))``), and, for generation, a way to run one block on
one new token against the KV cache and to write the K/V of a *skipped* block from the exited state (CALM-style state
propagation). Two layouts are supported:

- Llama-style (``model.model.layers``, ``model.model.norm``, ``model.model.rotary_emb``, ``model.lm_head``):
  Llama, and Mistral/Qwen2-like models with the same attention (``k_proj``/``v_proj`` + rotary).
- GPT-2-style (``model.transformer.h``, ``model.transformer.ln_f``, ``model.transformer.wpe``, ``model.lm_head``).

Written against transformers 5.x (blocks take ``cache=``); the older ``past_key_values=`` keyword is detected.
"""

from __future__ import annotations

import inspect
import sys

import torch
from torch import nn

# helper functions

def _cache_keyword(fn) -> str:
    params = inspect.signature(fn).parameters
    for name in ("cache", "past_key_values", "past_key_value"):
        if name in params:
            return name
    raise TypeError(f"{fn.__qualname__} takes no KV-cache argument; this transformers version is not supported")


def _first(out) -> torch.Tensor:
    return out if torch.is_tensor(out) else out[0]


def _matmul_params(module: nn.Module) -> int:
    """Weights that take part in a matmul (Linear or GPT-2's Conv1D): 2 * this = FLOPs per token."""
    return sum(m.weight.numel() for m in module.modules()
               if isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D")


def new_cache(model: nn.Module):
    """An empty HF ``DynamicCache`` for ``model``."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older transformers
        return DynamicCache()


# main classes

class CausalLMAdapter:
    """Uniform access to one model family. ``num_layers`` blocks; layer indices are 1-based in the paper's notation
    (h_l is the residual stream after block l, h_0 the embedding)."""

    family = "base"

    def __init__(self, model: nn.Module):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a Hugging Face causal LM (torch.nn.Module), got {type(model).__name__}")
        matches = getattr(type(self), "matches", None)
        if matches is not None and not matches(model):
            raise TypeError(f"{type(model).__name__} does not have the {self.family} layout {type(self).__name__} "
                            "expects; use get_adapter(model) to pick the adapter for its layout")
        self.model = model

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the model's position embeddings cover (None: no hard limit, e.g. rotary)."""
        return None

    @property
    def blocks(self) -> nn.ModuleList:
        raise NotImplementedError

    @property
    def backbone(self) -> nn.Module:
        """The model without its LM head (returns hidden states, never logits)."""
        raise NotImplementedError

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    @property
    def final_norm(self) -> nn.Module:
        raise NotImplementedError

    @property
    def head(self) -> nn.Module:
        return self.model.lm_head

    @property
    def vocab_size(self) -> int:
        return self.head.weight.shape[0]

    def lens(self, h: torch.Tensor) -> torch.Tensor:
        """Logits of an intermediate state through the model's own head: lm_head(final_norm(h)) (logit lens)."""
        return self.head(self.final_norm(h))

    def embed(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def decode_context(self, h: torch.Tensor, positions: torch.Tensor) -> dict:
        """Per-step keyword arguments shared by all blocks (e.g. rotary embeddings)."""
        return {}

    def run_block(self, i: int, h: torch.Tensor, positions: torch.Tensor, cache, ctx: dict) -> torch.Tensor:
        """Block ``i`` (0-based) on the new token(s) ``h`` [B, t, d], reading and appending to ``cache``."""
        raise NotImplementedError

    def fill_kv(self, i: int, h: torch.Tensor, positions: torch.Tensor, cache, ctx: dict) -> None:
        """Write block ``i``'s K/V for the exited state ``h`` into ``cache`` without running the block."""
        raise NotImplementedError

    def kv_cost(self) -> float:
        """FLOPs of the K/V projections of one block over the FLOPs of the whole block (weight matmuls)."""
        raise NotImplementedError


class LlamaAdapter(CausalLMAdapter):
    family = "llama"

    @staticmethod
    def matches(model: nn.Module) -> bool:
        inner = getattr(model, "model", None)
        return all(hasattr(inner, a) for a in ("layers", "norm", "embed_tokens", "rotary_emb")) and hasattr(model, "lm_head")

    @property
    def blocks(self) -> nn.ModuleList:
        return self.model.model.layers

    @property
    def backbone(self) -> nn.Module:
        return self.model.model

    @property
    def final_norm(self) -> nn.Module:
        return self.model.model.norm

    def embed(self, ids, positions):
        return self.model.model.embed_tokens(ids)

    def decode_context(self, h, positions):
        return {"position_embeddings": self.model.model.rotary_emb(h, positions), "position_ids": positions}

    def run_block(self, i, h, positions, cache, ctx):
        block = self.blocks[i]
        kw = {_cache_keyword(block.forward): cache}
        return _first(block(h, attention_mask=None, use_cache=True, **ctx, **kw))

    def fill_kv(self, i, h, positions, cache, ctx):
        block = self.blocks[i]
        attn = block.self_attn
        x = block.input_layernorm(h)
        shape = (*x.shape[:-1], -1, attn.head_dim)
        k = attn.k_proj(x).view(shape).transpose(1, 2)
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        cos, sin = ctx["position_embeddings"]
        rope = sys.modules[type(attn).__module__].apply_rotary_pos_emb
        _, k = rope(k, k, cos, sin)
        cache.update(k, v, attn.layer_idx)

    def kv_cost(self):
        attn = self.blocks[0].self_attn
        return (attn.k_proj.weight.numel() + attn.v_proj.weight.numel()) / _matmul_params(self.blocks[0])


class GPT2Adapter(CausalLMAdapter):
    family = "gpt2"

    @staticmethod
    def matches(model: nn.Module) -> bool:
        inner = getattr(model, "transformer", None)
        return all(hasattr(inner, a) for a in ("h", "ln_f", "wte", "wpe")) and hasattr(model, "lm_head")

    @property
    def blocks(self) -> nn.ModuleList:
        return self.model.transformer.h

    @property
    def backbone(self) -> nn.Module:
        return self.model.transformer

    @property
    def final_norm(self) -> nn.Module:
        return self.model.transformer.ln_f

    def embed(self, ids, positions):
        t = self.model.transformer
        return t.drop(t.wte(ids) + t.wpe(positions))

    def run_block(self, i, h, positions, cache, ctx):
        block = self.blocks[i]
        kw = {_cache_keyword(block.forward): cache}
        return _first(block(h, attention_mask=None, use_cache=True, **kw))

    def fill_kv(self, i, h, positions, cache, ctx):
        block = self.blocks[i]
        attn = block.attn
        _, k, v = attn.c_attn(block.ln_1(h)).split(attn.split_size, dim=2)
        shape = (*k.shape[:-1], -1, attn.head_dim)
        cache.update(k.view(shape).transpose(1, 2), v.view(shape).transpose(1, 2), attn.layer_idx)

    def kv_cost(self):
        return (2 / 3) * self.blocks[0].attn.c_attn.weight.numel() / _matmul_params(self.blocks[0])

    @property
    def max_positions(self) -> int | None:
        return int(self.model.transformer.wpe.num_embeddings)   # learned absolute positions: a hard limit


ADAPTERS: tuple[type[CausalLMAdapter], ...] = (LlamaAdapter, GPT2Adapter)


def get_adapter(model: nn.Module) -> CausalLMAdapter:
    """The adapter for ``model``; ``TypeError`` when its layout is neither Llama- nor GPT-2-style."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a Hugging Face causal LM (torch.nn.Module), got {type(model).__name__}")
    for cls in ADAPTERS:
        if cls.matches(model):
            return cls(model)
    raise TypeError(
        f"{type(model).__name__} is not a supported layout: early exit needs a Llama-style model "
        "(model.model.layers/norm/rotary_emb + lm_head) or a GPT-2-style model (model.transformer.h/ln_f + lm_head)")
