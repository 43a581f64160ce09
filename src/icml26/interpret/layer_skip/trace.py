"""[A14] Hidden-state and attention traces of a model's blocks through forward hooks (removed afterwards).

Works on any model whose blocks form an ``nn.ModuleList``: Hugging Face Llama/Mistral/Qwen-style
(``model.model.layers``), LLaVA (``model.model.language_model.layers``), GPT-2 (``model.transformer.h``),
GPT-NeoX, or a plain module with ``.layers`` / ``.blocks`` (or pass ``layers=`` explicitly).

    h_0            = input of block 1 (the embeddings)
    h_l            = output of block l,  l = 1..L
    attn[l-1]      = block l's attention probabilities [B, H, N, N] (needs eager attention: Hugging Face models
                     must be loaded with ``attn_implementation="eager"``)

Notation follows the spec of [A14]: vision tokens V (``vision_mask``), text tokens T = the rest of the *valid*
tokens. Padding is left out of every measure: ``collect_trace`` takes the valid tokens from ``valid_mask`` or, when
``inputs`` is a mapping with an ``attention_mask`` [B, N], from that mask (0 = padding), so a padded token counts
neither as text nor as vision.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import torch
from torch import nn

from icml26.harness import validate as v

_BLOCK_PATHS = ("layers", "blocks", "model.layers", "model.language_model.layers", "language_model.model.layers",
                "language_model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers")
_ATTN_NAMES = ("self_attn", "attn", "attention", "self_attention")


def find_blocks(model: nn.Module, layers: nn.ModuleList | None = None) -> nn.ModuleList:
    """The model's transformer blocks as an ``nn.ModuleList`` (``layers`` overrides the search).

    Raises ``TypeError`` when the model is not an ``nn.Module`` or no block list is found."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    if layers is not None:
        if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
            raise TypeError(f"layers must be a non-empty nn.ModuleList of the model's blocks, got {type(layers).__name__}")
        return layers
    for path in _BLOCK_PATHS:
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return obj
    raise TypeError(f"{type(model).__name__} has no transformer blocks where they were looked for "
                    f"({', '.join(_BLOCK_PATHS)}); pass layers=<the nn.ModuleList of its blocks>")


def find_attention(block: nn.Module) -> nn.Module:
    """The attention module of one block (``self_attn``, ``attn``, ``attention`` or ``self_attention``)."""
    for name in _ATTN_NAMES:
        mod = getattr(block, name, None)
        if isinstance(mod, nn.Module):
            return mod
    raise TypeError(f"block {type(block).__name__} has no attention module named one of {', '.join(_ATTN_NAMES)}; "
                    "attention traces need one")


def check_layer_index(index: int, num_layers: int, what: str = "layer index") -> int:
    """``index`` as an int in ``0..num_layers-1`` (0-based block index); a clear ``ValueError`` otherwise."""
    if isinstance(index, bool) or not isinstance(index, (int,)) and not (torch.is_tensor(index) and index.ndim == 0):
        raise TypeError(f"{what} must be an int, got {type(index).__name__}")
    index = int(index)
    if not 0 <= index < num_layers:
        raise ValueError(f"{what} {index} is out of range: the model has {num_layers} blocks, indices 0..{num_layers - 1}")
    return index


def call_model(model: nn.Module, inputs: Any) -> Any:
    """``model(**inputs)`` for a mapping, ``model(*inputs)`` for a tuple/list, ``model(inputs)`` otherwise."""
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def logits_of(out: Any) -> torch.Tensor:
    """The logits of a model output (HF ``.logits``, a tuple's first entry, or the tensor itself)."""
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (tuple, list)):
        return out[0]
    return out


def hidden_in(args: tuple, kwargs: dict) -> torch.Tensor:
    """A block's input hidden states (first positional argument or ``hidden_states=``)."""
    h = args[0] if args else kwargs.get("hidden_states")
    if not torch.is_tensor(h) or h.ndim != 3:
        raise TypeError("a block's first argument (or hidden_states=) must be the [B, N, d] hidden states; "
                        f"got {type(h).__name__}")
    return h


def hidden_out(output: Any) -> torch.Tensor:
    """A block's output hidden states (the tensor, or the first entry of a tuple)."""
    return output[0] if isinstance(output, (tuple, list)) else output


def normalise_mask(vision_mask: torch.Tensor, B: int, N: int, name: str = "vision_mask") -> torch.Tensor:
    """A token mask ([N] or [B, N], bool) as [B, N] bool; ``TypeError``/``ValueError`` on a wrong dtype or shape."""
    if not torch.is_tensor(vision_mask) or vision_mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor of shape [N] or [B, N], got "
                        f"{getattr(vision_mask, 'dtype', type(vision_mask).__name__)}")
    if vision_mask.ndim == 1:
        vision_mask = vision_mask[None].expand(B, -1)
    if vision_mask.shape != (B, N):
        raise ValueError(f"{name} has shape {tuple(vision_mask.shape)}; the sequence is [B={B}, N={N}], so "
                         f"pass [N] or [B, N]")
    return vision_mask


@dataclass
class HiddenTrace:
    """What :func:`collect_trace` records. ``hidden`` [L+1, B, N, d] (h_0..h_L), ``attn`` [L, B, H, N, N] or
    ``None``, ``vision_mask`` [B, N] bool (valid vision tokens), ``logits`` (the model's output logits),
    ``valid_mask`` [B, N] bool (False at padding; ``None``: every token is valid).

    ``vision_mask`` and ``valid_mask`` may be given as [N] (the same for every example); they are stored as
    [B, N], and ``vision_mask`` is restricted to the valid tokens."""

    hidden: torch.Tensor
    attn: torch.Tensor | None
    vision_mask: torch.Tensor
    logits: torch.Tensor | None = None
    valid_mask: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if not torch.is_tensor(self.hidden) or self.hidden.ndim != 4 or not self.hidden.is_floating_point():
            raise TypeError(f"hidden must be a float tensor [L+1, B, N, d], got {v.describe(self.hidden)}")
        if min(self.hidden.shape[:3]) < 1:
            raise ValueError(f"hidden must be [L+1, B, N, d] with L+1, B, N >= 1, got {tuple(self.hidden.shape)}")
        v.finite("hidden", self.hidden)
        _, B, N, _ = self.hidden.shape
        self.vision_mask = normalise_mask(self.vision_mask, B, N, "vision_mask")
        if self.valid_mask is not None:
            self.valid_mask = normalise_mask(self.valid_mask, B, N, "valid_mask")
            self.vision_mask = self.vision_mask & self.valid_mask
        if self.attn is not None:
            # [L, B, H, N', N']: N' < N when a skip plan ran the blocks on a subset of the tokens
            if not torch.is_tensor(self.attn) or self.attn.ndim != 5 or self.attn.shape[0] != self.hidden.shape[0] - 1 \
                    or self.attn.shape[1] != B or self.attn.shape[3] != self.attn.shape[4]:
                raise ValueError(f"attn must be [L={self.hidden.shape[0] - 1}, B={B}, H, N', N'] or None, got "
                                 f"{v.describe(self.attn)}")

    @property
    def num_layers(self) -> int:
        return self.hidden.shape[0] - 1

    @property
    def valid(self) -> torch.Tensor:
        """[B, N] bool: the tokens that are not padding."""
        if self.valid_mask is None:
            return torch.ones_like(self.vision_mask)
        return self.valid_mask

    @property
    def text_mask(self) -> torch.Tensor:
        """[B, N] bool: the valid tokens that are not vision tokens (padding is neither)."""
        return ~self.vision_mask & self.valid


@contextmanager
def hooks_removed(handles: list) -> Iterator[list]:
    """Yield ``handles`` (a list to append hook handles to) and remove every one on exit, even on error."""
    try:
        yield handles
    finally:
        for h in handles:
            h.remove()
        handles.clear()


@torch.no_grad()
def collect_trace(model: nn.Module, inputs: Any, vision_mask: torch.Tensor, *, attentions: bool = True,
                  layers: nn.ModuleList | None = None, valid_mask: torch.Tensor | None = None) -> HiddenTrace:
    """Run ``model`` once on ``inputs`` and record h_0..h_L (and each block's attention probabilities) [A14].

    Forward hooks on the blocks (and on their attention modules) are registered for this one call and removed
    afterwards, also when the forward raises; the model's parameters and outputs are untouched.

    Args:
        model: any ``nn.Module`` with a list of blocks (see :func:`find_blocks`).
        inputs: a mapping (``model(**inputs)``), a tuple (``model(*inputs)``) or one tensor.
        vision_mask: [N] or [B, N] bool, True at vision tokens.
        attentions: also record attention probabilities (the attention module must return them as its second
            output, as eager attention does).
        layers: the block list, when :func:`find_blocks` cannot find it.
        valid_mask: [N] or [B, N] bool, False at padding. Default: ``inputs["attention_mask"] != 0`` when
            ``inputs`` is a mapping with a 2-D ``attention_mask``, else every token is valid.
    """
    blocks = find_blocks(model, layers)
    if not torch.is_tensor(vision_mask) or vision_mask.dtype != torch.bool or vision_mask.ndim not in (1, 2):
        raise TypeError("vision_mask must be a bool tensor of shape [N] or [B, N] (True at vision tokens), got "
                        f"{v.describe(vision_mask)}")
    if not isinstance(attentions, bool):
        raise TypeError(f"attentions must be True or False, got {v.describe(attentions)}")
    if valid_mask is None and isinstance(inputs, Mapping):
        am = inputs.get("attention_mask")
        if torch.is_tensor(am) and am.ndim == 2:
            valid_mask = am != 0
    if valid_mask is not None and (not torch.is_tensor(valid_mask) or valid_mask.dtype != torch.bool
                                   or valid_mask.ndim not in (1, 2)):
        raise TypeError(f"valid_mask must be a bool tensor of shape [N] or [B, N] (False at padding), got "
                        f"{v.describe(valid_mask)}")
    L = len(blocks)
    h_in: list[torch.Tensor | None] = [None] * L
    h_out: list[torch.Tensor | None] = [None] * L
    att: list[torch.Tensor | None] = [None] * L
    attn_mods = [find_attention(b) for b in blocks] if attentions else []

    def pre(i):
        def fn(mod, args, kwargs):
            h_in[i] = hidden_in(args, kwargs).detach()
        return fn

    def post(i):
        def fn(mod, args, output):
            h_out[i] = hidden_out(output).detach()
        return fn

    def att_hook(i):
        def fn(mod, args, output):
            w = output[1] if isinstance(output, (tuple, list)) and len(output) > 1 else None
            att[i] = w.detach() if torch.is_tensor(w) and w.ndim == 4 else None
        return fn

    with hooks_removed([]) as handles:
        for i, b in enumerate(blocks):
            handles.append(b.register_forward_pre_hook(pre(i), with_kwargs=True, prepend=True))
            handles.append(b.register_forward_hook(post(i)))
        for i, a in enumerate(attn_mods):
            handles.append(a.register_forward_hook(att_hook(i)))
        out = call_model(model, inputs)
    missing = [i for i in range(L) if h_out[i] is None]
    if missing:
        raise ValueError(f"blocks {missing} did not run in the forward pass; check that `layers` are the blocks the "
                         "model uses")
    hidden = torch.stack([h_in[0]] + h_out)  # type: ignore[list-item]
    attn = None
    if attentions:
        if any(a is None for a in att):
            raise ValueError("the attention modules returned no attention probabilities; load a Hugging Face model "
                             "with attn_implementation='eager' (fused SDPA/flash attention does not return them), "
                             "or pass attentions=False")
        attn = torch.stack(att)  # type: ignore[arg-type]
    B, N = hidden.shape[1:3]
    valid = None if valid_mask is None else normalise_mask(valid_mask.to(hidden.device), B, N, "valid_mask")
    return HiddenTrace(hidden=hidden, attn=attn, vision_mask=normalise_mask(vision_mask.to(hidden.device), B, N),
                       logits=logits_of(out), valid_mask=valid)


__all__ = ["HiddenTrace", "collect_trace", "find_blocks", "find_attention", "check_layer_index", "call_model",
           "logits_of"]
