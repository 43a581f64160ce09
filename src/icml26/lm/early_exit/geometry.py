"""Geometry of the hidden-state trajectory h_0 -> h_1 -> ... -> h_L [A19].

Per token, h_0 is the embedding and h_l the residual stream after block l. With Delta_l = h_l - h_{l-1}:

    step size      s_l = ||Delta_l|| / (||h_{l-1}|| + eps)                                   l = 1..L
    direction      c_l = <Delta_l, Delta_{l-1}> / (||Delta_l|| ||Delta_{l-1}|| + eps)       l = 2..L (c_1 = NaN)

Two norms and one dot product per layer: O(d), independent of the vocabulary size V.

Note: Hugging Face's ``output_hidden_states`` puts the *final-normed* state in its last slot (for Llama and GPT-2),
not the raw residual stream h_L. :func:`residual_stream` returns the raw h_0..h_L (a hook on the last block).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from icml26.harness import validate as v

from .adapters import get_adapter

# helper functions

def _as_stack(hidden_states: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    if torch.is_tensor(hidden_states):
        hs = hidden_states
    elif isinstance(hidden_states, (list, tuple)):
        if not all(torch.is_tensor(h) for h in hidden_states):
            raise TypeError("hidden_states must be a tensor [L+1, ..., d] or a sequence of tensors")
        shapes = {tuple(h.shape) for h in hidden_states}
        if len(shapes) != 1:
            raise ValueError(f"all hidden states must share one shape, got {sorted(shapes)}")
        hs = torch.stack(list(hidden_states))
    else:
        raise TypeError(f"hidden_states must be a tensor or a sequence of tensors, got {type(hidden_states).__name__}")
    if hs.dim() < 2 or hs.shape[0] < 2:
        raise ValueError(f"need at least two states (h_0 and h_1) stacked on dim 0, got shape {tuple(hs.shape)}")
    if not hs.is_floating_point():
        raise TypeError(f"hidden states must be floating point, got {hs.dtype}")
    if hs.numel() == 0:
        raise ValueError(f"hidden states are empty (shape {tuple(hs.shape)}); the hidden size d and every "
                         "batch dimension must be >= 1")
    if not torch.isfinite(hs).all():
        raise ValueError("hidden states contain NaN or inf")
    return hs


def _check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _validate_ids(input_ids: torch.Tensor, vocab_size: int, max_positions: int | None = None,
                  extra: int = 0) -> torch.Tensor:
    if not torch.is_tensor(input_ids):
        raise TypeError(f"input_ids must be a LongTensor [batch, seq], got {type(input_ids).__name__}")
    if input_ids.dtype not in (torch.long, torch.int, torch.int32, torch.int64):
        raise TypeError(f"input_ids must hold integer token ids, got {input_ids.dtype}")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq], got shape {tuple(input_ids.shape)}")
    if input_ids.numel() == 0:
        raise ValueError(f"empty prompt: input_ids has shape {tuple(input_ids.shape)}; pass at least one token per row")
    if int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}), got [{int(input_ids.min())}, {int(input_ids.max())}]")
    if max_positions is not None and input_ids.shape[1] + extra > max_positions:
        what = f"{input_ids.shape[1]} prompt tokens" + (f" + {extra} new tokens" if extra else "")
        raise ValueError(f"{what} exceed the model's {max_positions} positions; shorten the input")
    return input_ids.long()


# main functions

def trajectory_geometry(hidden_states: Sequence[torch.Tensor] | torch.Tensor,
                        eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Step sizes s and direction cosines c of a trajectory of L+1 states [A19].

    Args:
        hidden_states: h_0..h_L, a tensor [L+1, ..., d] or a sequence of L+1 tensors [..., d] (raw residual
            stream; see :func:`residual_stream`).
        eps: guards the divisions.

    Returns:
        ``(step, cos)``, each [L, ...]; row l-1 holds s_l and c_l. ``cos[0]`` is NaN (c_1 needs Delta_0).
    """
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and 0 < eps < math.inf):
        raise ValueError(f"eps must be a positive finite number, got {eps!r}")
    hs = _as_stack(hidden_states).float()
    delta = hs[1:] - hs[:-1]                                  # Delta_l, l = 1..L
    dnorm = delta.norm(dim=-1)
    step = dnorm / (hs[:-1].norm(dim=-1) + eps)               # s_l
    cos = torch.full_like(step, math.nan)
    cos[1:] = (delta[1:] * delta[:-1]).sum(-1) / (dnorm[1:] * dnorm[:-1] + eps)   # c_l, l >= 2
    return step, cos


@torch.no_grad()
def residual_stream(model: nn.Module, input_ids: torch.Tensor, *,
                    with_logits: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Raw residual stream h_0..h_L [L+1, B, T, d] and the model's own logits [B, T, V] from one forward pass.

    With ``with_logits=False`` only the backbone runs (no LM head) and the logits are ``None``: the early-exit
    wrapper applies the head itself, once per token, at each token's exit layer.

    Raises ``ValueError`` when the model does not return hidden states (``output_hidden_states`` unsupported).
    """
    adapter = get_adapter(model)
    _check_flag("with_logits", with_logits)
    input_ids = _validate_ids(input_ids, adapter.vocab_size, adapter.max_positions)
    captured: list[torch.Tensor] = []
    hook = adapter.blocks[-1].register_forward_hook(lambda mod, inp, out: captured.append(out if torch.is_tensor(out) else out[0]))
    net = model if with_logits else adapter.backbone
    try:
        out = net(input_ids=input_ids, output_hidden_states=True, use_cache=False)
    except TypeError as err:
        raise ValueError(f"{type(model).__name__} does not support output_hidden_states; early exit needs the "
                         f"per-layer hidden states ({err})") from err
    finally:
        hook.remove()
    hs = getattr(out, "hidden_states", None)
    if hs is None or len(hs) != adapter.num_layers + 1 or not captured:
        raise ValueError(f"{type(model).__name__} returned no per-layer hidden states (got "
                         f"{None if hs is None else len(hs)}, expected {adapter.num_layers + 1}); early exit needs "
                         "a model that supports output_hidden_states=True")
    return torch.stack([*hs[:-1], captured[-1]]), (out.logits if with_logits else None)


@dataclass
class Trajectory:
    """Everything an exit rule looks at, for a batch of token positions.

    ``hidden`` [L+1, B, T, d] raw residual stream; ``logits`` [B, T, V] full-depth logits (``None`` when collected
    with ``with_logits=False``); ``step``, ``cos``
    [L, B, T]; logit-lens statistics of h_1..h_L (row l-1 = layer l): ``layer_argmax``, ``max_prob``,
    ``entropy`` [L, B, T] (``None`` unless ``with_lens``). ``layer_argmax[-1]`` is the full-depth argmax.
    """

    hidden: torch.Tensor
    logits: torch.Tensor | None
    step: torch.Tensor
    cos: torch.Tensor
    layer_argmax: torch.Tensor | None = None
    max_prob: torch.Tensor | None = None
    entropy: torch.Tensor | None = None

    @property
    def num_layers(self) -> int:
        return self.step.shape[0]

    def __repr__(self) -> str:
        L, B, T = self.step.shape[:3] if self.step.dim() >= 3 else (*self.step.shape, 1)
        return (f"Trajectory(layers={L}, batch={B}, seq={T}, hidden={self.hidden.shape[-1]}, "
                f"logits={self.logits is not None}, lens={self.layer_argmax is not None})")


@torch.no_grad()
def collect_trajectory(model: nn.Module, input_ids: torch.Tensor, *, with_lens: bool = True,
                       with_logits: bool = True, eps: float = 1e-6) -> Trajectory:
    """Run ``model`` once at full depth and collect the trajectory geometry (+ logit-lens statistics) [A19].

    ``with_lens`` decodes every layer through the head (what a confidence exit pays, O(dV) per layer);
    ``with_logits=False`` runs the backbone only, so without the lens the head never runs.
    """
    adapter = get_adapter(model)
    _check_flag("with_lens", with_lens)
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and 0 < eps < math.inf):
        raise ValueError(f"eps must be a positive finite number, got {eps!r}")
    hidden, logits = residual_stream(model, input_ids, with_logits=with_logits)
    step, cos = trajectory_geometry(hidden, eps=eps)
    traj = Trajectory(hidden=hidden, logits=logits, step=step, cos=cos)
    if with_lens:
        # lens statistics in row chunks: [rows, T, V] logits at a time, not [L, B, T, V]
        B, T = hidden.shape[1], hidden.shape[2]
        rows = max(1, _LENS_CHUNK // max(1, T * adapter.vocab_size))
        stats = []
        for layer in range(1, hidden.shape[0]):
            parts = []
            for r in range(0, B, rows):
                if layer == hidden.shape[0] - 1 and logits is not None:
                    lg = logits[r:r + rows]
                else:
                    lg = adapter.lens(hidden[layer, r:r + rows])
                parts.append(_lens_stats(lg.float()))
            stats.append(tuple(torch.cat(z) for z in zip(*parts)))
        traj.layer_argmax, traj.max_prob, traj.entropy = (torch.stack(z) for z in zip(*stats))
    return traj


_LENS_CHUNK = 1 << 23   # logits entries decoded at once by the logit lens (memory bound, our choice)


def _lens_stats(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    logp = logits.log_softmax(-1)
    top, arg = logp.max(-1)
    return arg, top.exp(), -(logp.exp() * logp).sum(-1)


def two_phase_profile(step: torch.Tensor, cos: torch.Tensor, *, first_layer: int = 2) -> dict[str, torch.Tensor | int | float]:
    """Per-layer medians and quartiles of s_l and c_l, and the transition layer [A19].

    The transition statistics use layers l >= ``first_layer`` only (default 2): s_1 = ||Delta_1|| / ||h_0|| divides
    by the norm of the token embedding, which in small models is tiny, so s_1 is huge and would make "the largest
    drop" the trivial drop from layer 1 to layer 2 (our choice; c_1 is undefined anyway).

    Transition layer l* = argmax_{l > first_layer} [log med s_{l-1} - log med s_l] (the largest one-layer drop in log
    step size; our choice). ``sharpness`` is that drop over the sum of all positive one-layer drops (1 = a single
    step); it is NaN when fewer than three drops exist (L - first_layer < 3): with two drops the larger one always
    carries at least half of the decrease, so the statistic could not fail. ``n_drops`` says how many there were.
    The medians are returned for every layer 1..L (row l-1 = layer l).
    """
    for name, t in (("step", step), ("cos", cos)):
        if not torch.is_tensor(t) or not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor [L, ...] (from trajectory_geometry), "
                            f"got {v.describe(t)}")
    if step.shape != cos.shape or step.dim() < 2:
        raise ValueError("step and cos must share a shape [L, ...] with L >= 1")
    if step.numel() == 0:
        raise ValueError(f"step and cos are empty (shape {tuple(step.shape)}); pass at least one token")
    v.finite("step", step)
    if float(step.min()) < 0:
        raise ValueError(f"step sizes must be >= 0 (norm ratios), got a minimum of {float(step.min())}")
    if bool(torch.isinf(cos).any()):
        raise ValueError("cos has infinite entries; cosines lie in [-1, 1] (NaN only where undefined)")
    if isinstance(first_layer, bool) or not isinstance(first_layer, int) or not 1 <= first_layer <= step.shape[0]:
        raise ValueError(f"first_layer must be an int in 1..{step.shape[0]}, got {first_layer!r}")
    s = step.flatten(1).float()
    c = cos.flatten(1).float()
    q = torch.tensor([0.25, 0.5, 0.75])
    sq = torch.quantile(s, q, dim=1)
    cq = torch.full_like(sq, math.nan)
    if c.shape[0] > 1:
        cq[:, 1:] = torch.nanquantile(c[1:], q, dim=1)         # c_1 is undefined
    drops = -(sq[1, first_layer - 1:].log().diff())            # drop into layer l, l = first_layer+1..L
    if drops.numel() == 0:
        transition, sharp = first_layer, float("nan")
    else:
        transition = int(drops.argmax()) + first_layer + 1
        pos = drops.clamp(min=0).sum()
        sharp = float(drops.max().clamp(min=0) / pos) if pos > 0 and drops.numel() >= 3 else float("nan")
    return {"median_step": sq[1], "q25_step": sq[0], "q75_step": sq[2],
            "median_cos": cq[1], "q25_cos": cq[0], "q75_cos": cq[2],
            "transition_layer": transition, "sharpness": sharp, "n_drops": int(drops.numel()),
            "first_layer": first_layer}
