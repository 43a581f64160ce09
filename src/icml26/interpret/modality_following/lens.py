"""Layer-wise logit lens through forward hooks, and concept oscillation [B03].

Logit lens: read the residual stream h_l after layer l at one position (the CLS token of a classifier, the
last token of a causal LM) through the model's own final norm and head, logits_l = head(norm(h_l)). Hooks
capture h_l during one ordinary forward pass and are removed afterwards, so the model is left unchanged.

Concept oscillation of one case: the sequence of top-1 predictions over layers, restricted to the two
modality-supported answers (other labels are skipped), and the number of switches between them:
[t, t, v, t, v] -> 3 switches.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
from torch import nn

from icml26.harness import validate as check

# where common model families keep their blocks, final norm and head
# (multimodal models keep the language model's blocks under ``language_model``: transformers 5.x
# ``LlavaForConditionalGeneration.model.language_model.layers``, older releases ``language_model.model.layers``; they
# come before the generic paths so that a vision tower's blocks are never read by mistake)
LAYER_PATHS = ("layers", "model.language_model.layers", "language_model.model.layers", "language_model.layers",
               "model.layers", "model.model.layers", "transformer.h", "gpt_neox.layers",
               "model.decoder.layers", "encoder.layer", "bert.encoder.layer", "blocks", "h")
READOUT_PATHS = (("norm", "head"), ("model.language_model.norm", "lm_head"),
                 ("language_model.model.norm", "language_model.lm_head"), ("language_model.norm", "lm_head"),
                 ("model.norm", "lm_head"), ("model.model.norm", "lm_head"),
                 ("transformer.ln_f", "lm_head"), ("gpt_neox.final_layer_norm", "embed_out"),
                 ("model.decoder.final_layer_norm", "lm_head"))


# helper functions

def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _hidden(out: Any) -> torch.Tensor:
    """The hidden state a block returns (HF blocks may return a tuple whose first entry it is)."""
    h = out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(h, torch.Tensor):
        raise TypeError(f"a hooked layer returned {type(h).__name__}, not a tensor of hidden states; pass the "
                        "modules whose output is the residual stream as layers=")
    return h


# main functions

def find_layers(model: nn.Module) -> nn.ModuleList:
    """The model's stack of blocks (``model.layers``, ``model.model.layers``, ``transformer.h``, ...)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for path in LAYER_PATHS:
        layers = _get(model, path)
        if isinstance(layers, nn.ModuleList) and len(layers) > 0:
            return layers
    raise ValueError(f"could not find the layers of {type(model).__name__} (looked for a non-empty ModuleList at "
                     f"{', '.join(LAYER_PATHS)}); pass modules=[...] with the blocks to read (and readout=<callable hidden -> "
                     "logits> if the final norm and head are not found either)")


def default_readout(model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """head(norm(h)) from the model's final norm and output head (``norm``/``head``, ``model.norm``/``lm_head``,
    ``transformer.ln_f``/``lm_head``, ...)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for norm_path, head_path in READOUT_PATHS:
        norm, head = _get(model, norm_path), _get(model, head_path)
        if isinstance(norm, nn.Module) and isinstance(head, nn.Module):
            return lambda h, norm=norm, head=head: head(norm(h))
    raise ValueError(f"could not find a final norm and output head on {type(model).__name__} (tried "
                     f"{', '.join('/'.join(p) for p in READOUT_PATHS)}); pass readout=<callable hidden -> logits>")


def _row_positions(position: int, mask: torch.Tensor | None, batch: int, tokens: int) -> torch.Tensor | int:
    """The token index to read in each row: ``position`` counted over the real (mask = 1) tokens of each row when
    an attention mask with padding is given (left or right padding), else ``position`` itself."""
    if mask is None or bool(mask.bool().all()):
        if not -tokens <= position < tokens:
            raise ValueError(f"position {position} is out of range for {tokens} tokens")
        return position
    if mask.shape != (batch, tokens):
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)} but the hooked layers see (batch, tokens) = "
                         f"({batch}, {tokens}); with padding the lens reads position {position} of the real tokens "
                         "of each row, so the mask must cover the hidden sequence")
    real = mask.bool()
    lengths = real.sum(1)
    need = position + 1 if position >= 0 else -position
    if bool((lengths < need).any()):
        raise ValueError(f"position {position} needs at least {need} real tokens in every row; attention_mask has rows "
                         f"with {int(lengths.min())}")
    order = torch.cumsum(real.long(), 1) - 1                           # rank of each real token in its row
    want = torch.full_like(lengths, position) if position >= 0 else lengths + position
    hit = real & (order == want[:, None])
    return hit.float().argmax(1)


def layerwise_logits(model: nn.Module, *args: Any, layers: Sequence[int] | None = None,
                     modules: Sequence[nn.Module] | None = None,
                     readout: Callable[[torch.Tensor], torch.Tensor] | None = None, position: int = 0,
                     **kwargs: Any) -> torch.Tensor:
    """Logit lens: logits read from the residual stream after each chosen layer, shape (n_layers, batch, K) [B03].

    Runs ``model(*args, **kwargs)`` once under ``torch.no_grad`` with forward hooks on the chosen blocks
    (``layers``: indices into the model's block stack, found by :func:`find_layers`, default all; or ``modules``:
    the blocks themselves), takes the hidden state at token ``position`` (0: CLS; -1: last token of a causal LM)
    and applies ``readout`` (default: the model's final norm and head). With an ``attention_mask`` keyword that
    marks padding, ``position`` counts over each row's real tokens (-1 is the last real token under left *or*
    right padding), never a pad token. The hooks are removed afterwards, even on error; the model's parameters,
    mode and outputs are unchanged.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(position, (int, np.integer)) or isinstance(position, bool):
        raise TypeError(f"position must be an integer token index (0: CLS, -1: last token), got {position!r}")
    position = int(position)
    if readout is not None and not callable(readout):
        raise TypeError(f"readout must be a callable hidden states -> logits, got {type(readout).__name__}")
    mask = kwargs.get("attention_mask")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dim() != 2:
            raise ValueError(f"attention_mask must be a (batch, tokens) tensor, got {check.describe(mask)}")
        if bool(((mask != 0) & (mask != 1)).any()):
            raise ValueError("attention_mask must hold 0 (padding) and 1 (real token) only")
    if modules is None:
        stack = find_layers(model)
        n = len(stack)
        if layers is not None and (isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable)):
            raise TypeError(f"layers must be a sequence of layer indices, got {check.describe(layers)}")
        idx = list(range(n)) if layers is None else list(layers)
        for i in idx:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
                raise TypeError(f"layer indices must be integers, got {i!r}")
            if not -n <= i < n:
                raise ValueError(f"layer index {i} is out of range for a model with {n} layers "
                                 f"(valid: 0..{n - 1}, or -{n}..-1)")
        modules = [stack[i] for i in idx]
    elif layers is not None:
        raise ValueError("pass either layers= (indices) or modules= (the blocks), not both")
    else:
        modules = list(modules)
        bad = [type(m).__name__ for m in modules if not isinstance(m, nn.Module)]
        if bad:
            raise TypeError(f"modules must be torch.nn.Module blocks, got {', '.join(bad)}")
    if len(modules) == 0:
        raise ValueError("no layers to read; pass at least one layer")
    readout = readout or default_readout(model)
    captured: list[torch.Tensor | None] = [None] * len(modules)

    def hook(i: int) -> Callable:
        def fn(_module: nn.Module, _inp: Any, out: Any) -> None:
            h = _hidden(out)
            if h.dim() != 3:
                raise ValueError(f"layer {i} returned hidden states of shape {tuple(h.shape)}; expected "
                                 "(batch, tokens, width)")
            at = _row_positions(position, mask, h.shape[0], h.shape[1])
            captured[i] = (h[:, at] if isinstance(at, int) else h[torch.arange(h.shape[0]), at.to(h.device)]).detach()
        return fn

    handles = [m.register_forward_hook(hook(i)) for i, m in enumerate(modules)]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
            missing = [i for i, h in enumerate(captured) if h is None]
            if missing:
                raise ValueError(f"layers {missing} did not run in the forward pass; pass blocks that the model calls")
            return torch.stack([readout(h) for h in captured])  # type: ignore[arg-type]
    finally:
        for h in handles:
            h.remove()


def layerwise_oscillation(layer_preds: Any, y_a: Any, y_b: Any) -> np.ndarray:
    """Switches between y_a and y_b in the layer-wise top-1 predictions, ignoring other labels [B03].

    ``layer_preds``: (n_layers,) or (n_layers, n) integer top-1 labels, or (n_layers, n, K) logits (argmax
    taken). ``y_a``, ``y_b``: scalars or (n,) labels, y_a != y_b. Returns the counts, shape (n,) (a scalar
    array for one sequence).
    """
    arr = layer_preds.detach().cpu().numpy() if isinstance(layer_preds, torch.Tensor) else np.asarray(layer_preds)
    single = arr.ndim == 1
    if arr.ndim == 3:
        arr = arr.argmax(axis=2)
    elif arr.ndim in (1, 2):
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError("1-D or 2-D layer_preds must be integer labels; pass (n_layers, n, K) logits otherwise")
        arr = arr.reshape(arr.shape[0], -1)
    else:
        raise ValueError(f"layer_preds must have shape (n_layers,), (n_layers, n) or (n_layers, n, K); "
                         f"got {arr.shape}")
    labels = []
    for name, y in (("y_a", y_a), ("y_b", y_b)):
        y = np.asarray(y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y)
        if not np.issubdtype(y.dtype, np.integer):
            raise TypeError(f"{name} must hold integer labels, got dtype {y.dtype}")
        if y.shape not in ((), (arr.shape[1],)):
            raise ValueError(f"{name} must be one label or one per case ({arr.shape[1]}), got shape {y.shape}")
        labels.append(np.broadcast_to(y, arr.shape[1:]))
    ya, yb = labels
    if np.any(ya == yb):
        raise ValueError("y_a and y_b must differ on every case")
    prev = np.full(arr.shape[1], -1)
    count = np.zeros(arr.shape[1], dtype=np.int64)
    for cur in arr:  # a loop over layers (a handful), vectorised over cases
        is_a, is_b = cur == ya, cur == yb
        lab = np.where(is_a, 0, np.where(is_b, 1, -1))
        count += (lab >= 0) & (prev >= 0) & (lab != prev)
        prev = np.where(lab >= 0, lab, prev)
    return count[0] if single else count


__all__ = ["find_layers", "default_readout", "layerwise_logits", "layerwise_oscillation", "LAYER_PATHS"]
