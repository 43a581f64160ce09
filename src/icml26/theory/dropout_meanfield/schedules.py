"""Dropout schedules over depth and over training time, as drop-in ``torch.nn`` pieces [A06].

Reading 1 (depth): a fixed budget sum_l p_l = L p_bar over L dropout layers. Constant: p_l = p_bar. Front-loaded
(linear): p_l = linspace(p_max, 2 p_bar - p_max) (non-increasing; dropout near the input reaches the most
downstream layers). Saturated: p_l in {0, p_max} with the first layers at p_max (one layer takes the remainder so
the budget is exact). Back-loaded: the reverse of front-loaded.

Reading 2 (time): the same profiles over T training steps (integral p(t) dt = T p_bar), applied to every
``ScheduledDropout`` of a model by ``DropoutTimeScheduler.step()``, like ``torch.optim.lr_scheduler``.
"""

from __future__ import annotations

import math
from typing import Callable, Literal, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from icml26.harness import validate as v

__all__ = ["ScheduledDropout", "DropoutProfile", "DropoutTimeScheduler", "make_mlp", "dropout_layers",
           "init_critical"]


def _check_rate(p: float, name: str = "p") -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(p).__name__}")
    p = float(p)
    if not (math.isfinite(p) and 0.0 <= p < 1.0):
        raise ValueError(f"{name} must be a dropout rate in [0, 1), got {p}")
    return p


def _check_rates(name: str, rates: Sequence[float], what: str) -> list[float]:
    """A non-empty sequence of dropout rates in [0, 1)."""
    arr = v.finite(name, rates)
    v.ndim(name, arr, 1)
    v.non_empty(name, arr)
    out = [_check_rate(float(p), f"{name} entry") for p in np.asarray(arr, dtype=float)]
    if not out:
        raise ValueError(f"{name} needs one rate per {what} (at least one)")
    return out


class ScheduledDropout(nn.Module):
    """Inverted dropout whose rate ``p`` can be reassigned at any time (validated to [0, 1)).

    Train: x * m / (1 - p), m ~ Bernoulli(1 - p) (E[out] = x). Eval: identity.
    """

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = p

    @property
    def p(self) -> float:
        return self._p

    @p.setter
    def p(self, value: float) -> None:
        self._p = _check_rate(value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self._p == 0.0:
            return x
        return F.dropout(x, self._p, training=True)

    def extra_repr(self) -> str:
        return f"p={self._p:.4g}"


class DropoutProfile:
    """Per-layer (or per-step) dropout rates with an exact budget: mean(p) = p_bar, every p in [0, 1)."""

    @staticmethod
    def _validate(n: int, p_bar: float, p_max: float | None) -> float:
        v.positive_int("n (layers or steps)", n)
        p_bar = _check_rate(p_bar, "p_bar")
        p_max = 2 * p_bar if p_max is None else _check_rate(p_max, "p_max")
        if p_max >= 1.0:
            raise ValueError(f"p_max = {p_max} must be < 1 (default 2 p_bar); lower p_bar or pass p_max")
        if p_max < p_bar:
            raise ValueError(f"p_max = {p_max} must be >= p_bar = {p_bar}")
        return p_max

    @staticmethod
    def constant(n: int, p_bar: float) -> np.ndarray:
        DropoutProfile._validate(n, p_bar, p_bar)
        return np.full(n, float(p_bar))

    @staticmethod
    def front_loaded(n: int, p_bar: float, p_max: float | None = None,
                     kind: Literal["linear", "saturated"] = "linear") -> np.ndarray:
        """Non-increasing profile with mean p_bar: linear p_max -> 2 p_bar - p_max, or saturated {p_max, 0}."""
        p_max = DropoutProfile._validate(n, p_bar, p_max)
        if kind == "linear":
            if 2 * p_bar - p_max < -1e-15:
                raise ValueError(f"linear profile needs p_max <= 2 p_bar ({2 * p_bar}), got {p_max}")
            if n == 1:
                return np.array([float(p_bar)])
            return np.clip(np.linspace(p_max, 2 * p_bar - p_max, n), 0.0, None)
        if kind == "saturated":
            if p_max == 0.0:
                return np.zeros(n)
            total = n * p_bar
            k = int(math.floor(total / p_max + 1e-12))
            out = np.zeros(n)
            out[:k] = p_max
            if k < n:
                out[k] = total - k * p_max
            return out
        raise ValueError(f"kind must be 'linear' or 'saturated', got {kind!r}")

    @staticmethod
    def back_loaded(n: int, p_bar: float, p_max: float | None = None,
                    kind: Literal["linear", "saturated"] = "linear") -> np.ndarray:
        """The front-loaded profile reversed (non-decreasing)."""
        return DropoutProfile.front_loaded(n, p_bar, p_max, kind)[::-1].copy()

    @staticmethod
    def make(name: str, n: int, p_bar: float, p_max: float | None = None,
             kind: Literal["linear", "saturated"] = "linear") -> np.ndarray:
        """``name`` in {"constant", "front", "back"}."""
        v.one_of("name", name, ("constant", "front", "back"))
        if name == "constant":
            return DropoutProfile.constant(n, p_bar)
        if name == "front":
            return DropoutProfile.front_loaded(n, p_bar, p_max, kind)
        if name == "back":
            return DropoutProfile.back_loaded(n, p_bar, p_max, kind)
        raise ValueError(f"profile name must be 'constant', 'front' or 'back', got {name!r}")


def dropout_layers(model: nn.Module) -> list[ScheduledDropout]:
    """The model's ``ScheduledDropout`` modules in definition order."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return [m for m in model.modules() if isinstance(m, ScheduledDropout)]


class DropoutTimeScheduler:
    """Sets every ``ScheduledDropout`` of ``model`` to the rate of the current step; call ``step()`` once per
    optimiser step (like ``torch.optim.lr_scheduler``).

    ``schedule``: a sequence of per-step rates (e.g. ``DropoutProfile.front_loaded(total_steps, 0.2)``) or a
    callable step -> rate. ``depth_profile`` (optional, one multiplier per dropout layer, mean 1) combines both
    readings: layer l gets min(p(t) * depth_profile[l], 0.99).
    """

    def __init__(self, model: nn.Module, schedule: Sequence[float] | Callable[[int], float],
                 depth_profile: Sequence[float] | None = None) -> None:
        self.layers = dropout_layers(model)
        if not callable(schedule):
            v.non_empty("schedule", schedule)
        if not self.layers:
            raise ValueError("the model has no ScheduledDropout modules to schedule; build it with make_mlp or "
                             "insert ScheduledDropout layers")
        if callable(schedule):
            self._fn = schedule
            self.total_steps = None
        else:
            rates = _check_rates("schedule", schedule, "step")
            self._fn = lambda t: rates[min(t, len(rates) - 1)]
            self.total_steps = len(rates)
        if depth_profile is not None:
            dp = np.asarray(v.finite("depth_profile", depth_profile), dtype=float)
            if dp.shape != (len(self.layers),) or (dp < 0).any():
                raise ValueError(f"depth_profile must hold {len(self.layers)} non-negative multipliers (one per "
                                 f"ScheduledDropout), got {v.describe(depth_profile)}")
            self.depth_profile = dp
        else:
            self.depth_profile = np.ones(len(self.layers))
        self.last_step = 0
        self._apply()

    def _apply(self) -> None:
        p = _check_rate(float(self._fn(self.last_step)), "schedule rate")
        for m, d in zip(self.layers, self.depth_profile):
            m.p = min(p * float(d), 0.99)

    def step(self) -> None:
        self.last_step += 1
        self._apply()

    def current(self) -> list[float]:
        return [m.p for m in self.layers]


_ACTS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def init_critical(model: nn.Module, sw2: float, sb2: float) -> None:
    """W ~ N(0, sw2 / fan_in), b ~ N(0, sb2) for every ``nn.Linear`` (mean-field initialisation)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    v.positive("sw2", sw2)
    v.non_negative("sb2", sb2)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, math.sqrt(sw2 / m.in_features))
                if m.bias is not None:
                    m.bias.normal_(0.0, math.sqrt(sb2)) if sb2 > 0 else m.bias.zero_()


def make_mlp(in_dim: int, out_dim: int, dropout_profile: Sequence[float], width: int = 256,
             act: Literal["relu", "tanh"] = "relu",
             init: Literal["critical", "critical_no_dropout", "default"] = "critical",
             sb2: float = 0.05, init_rates: Sequence[float] | None = None) -> nn.Sequential:
    """MLP with one hidden layer per entry of ``dropout_profile``: [Linear, act, ScheduledDropout(p_l)] x L, Linear.

    ``init="critical"`` (default): critical *with* dropout, layer by layer. A Linear that reads the output of
    ``ScheduledDropout(p)`` (keep rho = 1 - p) gets sigma_w^2 with chi_1 = 1 at that keep: ReLU sigma_w^2 = 2 rho,
    sigma_b = 0 (q preserved exactly, q+ = (sigma_w^2 / rho) E[relu(sqrt(q) z)^2] = q); tanh
    ``critical_sigma_w("tanh", sb2, rho)``. The first Linear (no dropout before it) gets the p = 0 value.
    ``init="critical_no_dropout"``: every layer at the p = 0 critical point (ReLU He init sigma_w^2 = 2; tanh
    chi_1 = 1 without dropout), which dropout then detunes. ``init="default"``: PyTorch's own init.
    The rates at build time decide the init, unless ``init_rates`` (one rate per hidden layer) is given: then
    those rates decide it. Arms compared at one mean rate p_bar should share one init: build every schedule at
    p_bar with ``init_rates=DropoutProfile.constant(L, p_bar)`` (and a time schedule, which changes the rates
    later, likewise), so only the schedule differs.
    """
    for name, val in (("in_dim", in_dim), ("out_dim", out_dim), ("width", width)):
        v.positive_int(name, val)
    v.one_of("act", act, sorted(_ACTS))
    v.one_of("init", init, ("critical", "critical_no_dropout", "default"))
    v.non_negative("sb2", sb2)
    rates = _check_rates("dropout_profile", dropout_profile, "hidden layer")
    init_by = rates if init_rates is None else _check_rates("init_rates", init_rates, "hidden layer")
    if len(init_by) != len(rates):
        raise ValueError(f"init_rates must hold one rate per hidden layer ({len(rates)}), got {len(init_by)}")
    layers: list[nn.Module] = []
    d = in_dim
    for p in rates:
        layers += [nn.Linear(d, width), _ACTS[act](), ScheduledDropout(p)]
        d = width
    layers.append(nn.Linear(d, out_dim))
    model = nn.Sequential(*layers)
    if init == "default":
        return model
    from .meanfield import critical_sigma_w
    linears = [m for m in model if isinstance(m, nn.Linear)]
    keeps = [1.0] + [1.0 - p for p in init_by]                   # keep of the dropout feeding each Linear
    if init == "critical_no_dropout":
        keeps = [1.0] * len(linears)
    for lin, keep in zip(linears, keeps):
        if act == "relu":
            init_critical(lin, 2.0 * keep, 0.0)
        else:
            init_critical(lin, critical_sigma_w("tanh", sb2, keep), sb2)
    return model
