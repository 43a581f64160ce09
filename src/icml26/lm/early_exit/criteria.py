"""Exit rules: the geometric criterion of [A19] and the baselines it is compared with.

Every rule answers, per token and per layer l = 1..L, "has the iteration converged at layer l?". A token exits at

    l_exit = min { l >= l_min : the test passes at layers l-patience+1, ..., l }      (L if there is none)

and is decoded as lm_head(final_norm(h_{l_exit})). Tests:

    geometric [A19]   s_l < tau_step  and  c_l > tau_cos          O(d) per layer
    max-probability   max_v softmax(lens(h_l))_v > tau_prob        O(d V) per layer
    entropy           H(softmax(lens(h_l))) < tau_entropy          O(d V) per layer
    static            l_exit = layer for every token
    oracle            earliest l after which the lens argmax equals the final argmax at every deeper layer

Each rule works in two modes that give the same exits: batched over a :class:`Trajectory` (``exit_layers``) and
streaming, one layer at a time during decoding (``update`` with an :class:`ExitState`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from .geometry import Trajectory

Lens = Callable[[torch.Tensor], torch.Tensor]


# helper functions

def _check_number(name: str, value, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value) or not lo <= value <= hi:
        raise ValueError(f"{name} must lie in [{lo}, {hi}], got {value}")
    return value


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return value


def default_min_layer(num_layers: int) -> int:
    """l_min = ceil(L / 4) (our choice)."""
    return max(1, math.ceil(num_layers / 4))


def _check_layers_tensor(name: str, value, *, dtype_kind: str) -> None:
    if not torch.is_tensor(value):
        raise TypeError(f"{name} must be a tensor [L, ...], got {type(value).__name__}")
    if dtype_kind == "bool" and value.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor (the per-layer test), got {value.dtype}")
    if dtype_kind == "int" and (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool):
        raise TypeError(f"{name} must hold integer token ids, got {value.dtype}")
    if value.dim() < 1 or value.shape[0] < 1:
        raise ValueError(f"{name} must be [L, ...] with L >= 1 layers on dim 0, got shape {tuple(value.shape)}")


def first_exit(passes: torch.Tensor, min_layer: int, patience: int = 1) -> torch.Tensor:
    """l_exit per token from the per-layer tests ``passes`` [L, ...] (bool); L where no layer qualifies."""
    _check_layers_tensor("passes", passes, dtype_kind="bool")
    L = passes.shape[0]
    _check_int("min_layer", min_layer, 1)
    if min_layer > L:
        raise ValueError(f"min_layer={min_layer} exceeds the {L} layers of passes")
    _check_int("patience", patience, 1)
    run = torch.zeros(passes.shape[1:], dtype=torch.long, device=passes.device)
    exit_layer = torch.full_like(run, L)
    found = torch.zeros_like(run, dtype=torch.bool)
    for layer in range(1, L + 1):
        run = torch.where(passes[layer - 1], run + 1, 0)
        hit = ~found & (run >= patience) & (layer >= min_layer)
        exit_layer = torch.where(hit, layer, exit_layer)
        found |= hit
    return exit_layer


def oracle_exit_layers(layer_argmax: torch.Tensor) -> torch.Tensor:
    """Earliest l >= 1 such that the lens argmax at every layer l..L equals the final argmax [L, ...] -> [...]."""
    _check_layers_tensor("layer_argmax", layer_argmax, dtype_kind="int")
    agree = layer_argmax == layer_argmax[-1]
    # suffix-AND: agrees at this layer and at all deeper ones
    suffix = agree.flip(0).long().cumprod(0).flip(0).bool()
    L = layer_argmax.shape[0]
    return L - suffix.long().sum(0) + 1


@dataclass
class ExitState:
    """Streaming state of a batch of tokens while the blocks run one at a time."""

    num_layers: int
    layer: int                     # blocks applied so far
    run: torch.Tensor              # consecutive passing layers [B]
    done: torch.Tensor             # exited [B]
    exit_layer: torch.Tensor       # l_exit, L while not exited [B]
    delta_prev: torch.Tensor | None = None

    @classmethod
    def start(cls, batch: int, num_layers: int, device=None) -> "ExitState":
        _check_int("batch", batch, 1)
        _check_int("num_layers", num_layers, 1)
        z = torch.zeros(batch, dtype=torch.long, device=device)
        return cls(num_layers, 0, z, z.bool(), torch.full_like(z, num_layers))


# main classes

class ExitCriterion:
    """Base class: a per-layer convergence test plus l_min and patience."""

    needs_lens = False

    def __init__(self, *, min_layer: int | None = None, patience: int = 1):
        if min_layer is not None:
            _check_int("min_layer", min_layer, 1)
        self.min_layer = min_layer
        self.patience = _check_int("patience", patience, 1)

    def resolve_min_layer(self, num_layers: int) -> int:
        m = default_min_layer(num_layers) if self.min_layer is None else self.min_layer
        if m > num_layers:
            raise ValueError(f"min_layer={m} exceeds the model's {num_layers} layers")
        return m

    def passes(self, traj: Trajectory) -> torch.Tensor:
        """The per-layer test on a whole trajectory: bool [L, B, T]."""
        raise NotImplementedError

    def layer_test(self, h_prev: torch.Tensor, h_new: torch.Tensor, delta_prev: torch.Tensor | None,
                   lens: Lens | None) -> torch.Tensor:
        """The test at one layer for a batch of states [..., d] -> bool [...]: the per-layer decision overhead."""
        raise NotImplementedError

    def exit_layers(self, traj: Trajectory) -> torch.Tensor:
        """l_exit for every token of ``traj`` [B, T] (values in 1..L)."""
        if not isinstance(traj, Trajectory):
            raise TypeError(f"traj must be a Trajectory (from collect_trajectory), got {type(traj).__name__}")
        return first_exit(self.passes(traj), self.resolve_min_layer(traj.num_layers), self.patience)

    def update(self, state: ExitState, h_prev: torch.Tensor, h_new: torch.Tensor, lens: Lens | None = None) -> torch.Tensor:
        """Streaming: block ``state.layer + 1`` took ``h_prev`` [B, d] to ``h_new``; returns the ``done`` mask."""
        if not isinstance(state, ExitState):
            raise TypeError(f"state must be an ExitState (ExitState.start(batch, num_layers)), got {type(state).__name__}")
        for name, h in (("h_prev", h_prev), ("h_new", h_new)):
            if not torch.is_tensor(h) or not h.is_floating_point():
                raise TypeError(f"{name} must be a floating-point tensor [B, d], got {type(h).__name__}")
        if h_prev.shape != h_new.shape or h_new.dim() < 1 or h_new.shape[0] != state.run.shape[0]:
            raise ValueError(f"h_prev and h_new must both be [B, d] with B = {state.run.shape[0]} (the state's batch), "
                             f"got {tuple(h_prev.shape)} and {tuple(h_new.shape)}")
        if state.layer >= state.num_layers:
            raise ValueError(f"the state has already seen all {state.num_layers} layers; start a new ExitState per token")
        if lens is not None and not callable(lens):
            raise TypeError(f"lens must be callable (states -> logits) or None, got {type(lens).__name__}")
        if not bool(torch.isfinite(h_new).all()):
            raise ValueError("h_new contains NaN or inf; the exit test would silently never pass")
        state.layer += 1
        ok = self.layer_test(h_prev, h_new, state.delta_prev, lens)
        state.run = torch.where(ok, state.run + 1, 0)
        hit = ~state.done & (state.run >= self.patience) & (state.layer >= self.resolve_min_layer(state.num_layers))
        state.exit_layer = torch.where(hit, state.layer, state.exit_layer)
        state.done = state.done | hit
        state.delta_prev = h_new - h_prev
        return state.done

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class GeometricExitCriterion(ExitCriterion):
    """Exit when the step size vanishes and the direction stabilises: s_l < tau_step and c_l > tau_cos [A19].

    ``tau_step = 0`` disables exiting (s_l >= 0); ``tau_cos = -1`` is the step-only ablation, ``tau_step = inf``
    the cosine-only ablation.
    """

    def __init__(self, tau_step: float, tau_cos: float, *, min_layer: int | None = None, patience: int = 1,
                 eps: float = 1e-6):
        super().__init__(min_layer=min_layer, patience=patience)
        self.tau_step = _check_number("tau_step", tau_step, 0.0, math.inf)
        self.tau_cos = _check_number("tau_cos", tau_cos, -1.0, 1.0)
        self.eps = _check_number("eps", eps, 1e-30, 1.0)

    @classmethod
    def disabled(cls) -> "GeometricExitCriterion":
        """A criterion that never exits (tau_step = 0): every token runs all L layers."""
        return cls(0.0, 1.0)

    def decide(self, step: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
        """l_exit from step sizes and cosines [L, ...] (as returned by ``trajectory_geometry``)."""
        for name, t in (("step", step), ("cos", cos)):
            if not torch.is_tensor(t) or not t.is_floating_point():
                raise TypeError(f"{name} must be a floating-point tensor [L, ...] (from trajectory_geometry), "
                                f"got {type(t).__name__}")
        if step.shape != cos.shape:
            raise ValueError(f"step and cos must share a shape, got {tuple(step.shape)} and {tuple(cos.shape)}")
        if step.dim() < 1 or step.shape[0] < 1:
            raise ValueError(f"step and cos must be [L, ...] with L >= 1, got shape {tuple(step.shape)}")
        if not bool(torch.isfinite(step).all()):
            raise ValueError("step contains NaN or inf; the exit test would silently never pass")
        return first_exit((step < self.tau_step) & (cos > self.tau_cos), self.resolve_min_layer(step.shape[0]), self.patience)

    def passes(self, traj):
        return (traj.step < self.tau_step) & (traj.cos > self.tau_cos)

    def layer_test(self, h_prev, h_new, delta_prev, lens):
        delta = h_new - h_prev
        dn = delta.norm(dim=-1)
        s = dn / (h_prev.norm(dim=-1) + self.eps)
        if delta_prev is None:
            return torch.zeros_like(s, dtype=torch.bool)      # c_1 is undefined
        c = (delta * delta_prev).sum(-1) / (dn * delta_prev.norm(dim=-1) + self.eps)
        return (s < self.tau_step) & (c > self.tau_cos)


class ConfidenceExitCriterion(ExitCriterion):
    """Max-probability exit (baseline): max_v softmax(lm_head(norm(h_l)))_v > tau_prob. O(d V) per layer."""

    needs_lens = True

    def __init__(self, tau_prob: float, *, min_layer: int | None = None, patience: int = 1):
        super().__init__(min_layer=min_layer, patience=patience)
        self.tau_prob = _check_number("tau_prob", tau_prob, 0.0, 1.0)

    def passes(self, traj):
        if traj.max_prob is None:
            raise ValueError("this trajectory has no logit-lens statistics; collect it with with_lens=True")
        return traj.max_prob > self.tau_prob

    def layer_test(self, h_prev, h_new, delta_prev, lens):
        if lens is None:
            raise ValueError("the confidence exit needs the lens (lm_head after the final norm)")
        return lens(h_new).float().softmax(-1).amax(-1) > self.tau_prob


class EntropyExitCriterion(ExitCriterion):
    """Entropy exit (baseline): H(softmax(lm_head(norm(h_l)))) < tau (nats). O(d V) per layer."""

    needs_lens = True

    def __init__(self, tau: float, *, min_layer: int | None = None, patience: int = 1):
        super().__init__(min_layer=min_layer, patience=patience)
        self.tau = _check_number("tau", tau, 0.0, math.inf)

    def passes(self, traj):
        if traj.entropy is None:
            raise ValueError("this trajectory has no logit-lens statistics; collect it with with_lens=True")
        return traj.entropy < self.tau

    def layer_test(self, h_prev, h_new, delta_prev, lens):
        if lens is None:
            raise ValueError("the entropy exit needs the lens (lm_head after the final norm)")
        logp = lens(h_new).float().log_softmax(-1)
        return -(logp.exp() * logp).sum(-1) < self.tau


class StaticExit(ExitCriterion):
    """Static truncation (baseline): every token exits at ``layer``."""

    def __init__(self, layer: int):
        super().__init__(min_layer=_check_int("layer", layer, 1), patience=1)
        self.layer = layer

    def passes(self, traj):
        self.resolve_min_layer(traj.num_layers)
        return torch.ones_like(traj.step, dtype=torch.bool)

    def layer_test(self, h_prev, h_new, delta_prev, lens):
        return torch.ones(h_new.shape[:-1], dtype=torch.bool, device=h_new.device)
