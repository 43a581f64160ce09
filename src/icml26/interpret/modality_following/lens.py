"""Layer-wise logit lens through forward hooks, and concept oscillation [B03].

Logit lens: read the residual stream h_l after layer l at one position (the CLS token of a classifier, the
last token of a causal LM) through the model's own final norm and head, logits_l = head(norm(h_l)). Hooks
capture h_l during one ordinary forward pass and are removed afterwards, so the model is left unchanged.

Concept oscillation of one case: the sequence of top-1 predictions over layers, restricted to the two
modality-supported answers (other labels are skipped), and the number of switches between them:
[t, t, v, t, v] -> 3 switches.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

# where common model families keep their blocks, final norm and head
LAYER_PATHS = ("layers", "model.layers", "model.model.layers", "transformer.h", "gpt_neox.layers",
               "model.decoder.layers", "encoder.layer", "bert.encoder.layer", "blocks", "h")
READOUT_PATHS = (("norm", "head"), ("model.norm", "lm_head"), ("model.model.norm", "lm_head"),
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
                     f"{', '.join(LAYER_PATHS)}); pass layers=[...] with the blocks to read")


def default_readout(model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """head(norm(h)) from the model's final norm and output head (``norm``/``head``, ``model.norm``/``lm_head``,
    ``transformer.ln_f``/``lm_head``, ...)."""
    for norm_path, head_path in READOUT_PATHS:
        norm, head = _get(model, norm_path), _get(model, head_path)
        if isinstance(norm, nn.Module) and isinstance(head, nn.Module):
            return lambda h, norm=norm, head=head: head(norm(h))
    raise ValueError(f"could not find a final norm and output head on {type(model).__name__} (tried "
                     f"{', '.join('/'.join(p) for p in READOUT_PATHS)}); pass readout=<callable hidden -> logits>")


def layerwise_logits(model: nn.Module, *args: Any, layers: Sequence[int] | None = None,
                     modules: Sequence[nn.Module] | None = None,
                     readout: Callable[[torch.Tensor], torch.Tensor] | None = None, position: int = 0,
                     **kwargs: Any) -> torch.Tensor:
    """Logit lens: logits read from the residual stream after each chosen layer, shape (n_layers, batch, K) [B03].

    Runs ``model(*args, **kwargs)`` once under ``torch.no_grad`` with forward hooks on the chosen blocks
    (``layers``: indices into the model's block stack, found by :func:`find_layers`, default all; or ``modules``:
    the blocks themselves), takes the hidden state at token ``position`` (0: CLS; -1: last token of a causal LM)
    and applies ``readout`` (default: the model's final norm and head). The hooks are removed afterwards, even on
    error; the model's parameters, mode and outputs are unchanged.
    """
    if modules is None:
        stack = find_layers(model)
        n = len(stack)
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
            captured[i] = h[:, position].detach()
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
    ya = np.broadcast_to(np.asarray(y_a), arr.shape[1:])
    yb = np.broadcast_to(np.asarray(y_b), arr.shape[1:])
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
