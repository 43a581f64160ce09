"""Calibrating drop thresholds on calibration tokens [A09].

Single threshold: the tau whose share of droppable pairs (all but each token's top pair) with w < tau equals
the target pair-drop rate, over the routing weights of every MoE layer on the calibration batch (one global
tau, our choice). Dual threshold: a grid over tau_lo; for each, tau_hi solves

    target = P(w < tau_lo) + (1 - rho) * P(tau_lo <= w < tau_hi)          (rho = major_fraction)

on the same weights, and the pair with the lowest summed relative output MSE of the MoE layers (each layer on its
own captured inputs) wins. tau_lo = tau_hi (the single threshold) is in the grid, so calibration never prefers
a dual pair that is worse on the calibration data.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

from icml26.harness import validate as v

from .moe import SparseMoE, _check_tokens, moe_layers
from .policies import DropPolicy, DualThresholdDrop, ThresholdDrop


@contextmanager
def capture_moe_inputs(layers: list[SparseMoE]) -> Iterator[list[list[torch.Tensor]]]:
    """Record the input of every call of each layer (flattened to ``[N, d]``) while the context is open."""
    layers = _check_layers(layers)
    store: list[list[torch.Tensor]] = [[] for _ in layers]
    hooks = [m.register_forward_pre_hook(lambda mod, args, i=i: store[i].append(args[0].detach().reshape(-1, mod.hidden_size)))
             for i, m in enumerate(layers)]
    try:
        yield store
    finally:
        for h in hooks:
            h.remove()


@torch.no_grad()
def moe_inputs(model: nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    """The hidden states entering each SparseMoE of ``model`` on ``ids`` (no dropping), each ``[N, d]``."""
    layers = moe_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no SparseMoE layer; convert it first with convert_hf_moe(model)")
    _check_ids("ids", ids, model)
    saved = [m.drop_policy for m in layers]
    for m in layers:
        m.drop_policy = None
    try:
        with capture_moe_inputs(layers) as store:
            model(input_ids=ids, use_cache=False)
    finally:
        for m, p in zip(layers, saved):
            m.drop_policy = p
    return [torch.cat(s) for s in store]


@dataclass
class Calibration:
    """A calibrated policy and what it did on the calibration data."""

    policy: DropPolicy
    compute_drop: float
    mse: float                  # summed relative output MSE over layers on the calibration inputs
    grid: list[dict[str, float]]

    def __post_init__(self) -> None:
        if not isinstance(self.policy, DropPolicy):
            raise TypeError(f"policy must be a DropPolicy, got {v.describe(self.policy)}")
        v.non_negative("compute_drop", self.compute_drop)
        v.non_negative("mse", self.mse)
        if not isinstance(self.grid, list):
            raise TypeError(f"grid must be a list of dicts, got {v.describe(self.grid)}")


def _droppable_weights(layers: list[SparseMoE], xs: list[torch.Tensor]) -> tuple[torch.Tensor, int]:
    ws, total = [], 0
    for m, x in zip(layers, xs):
        w, _ = m.route(x)
        ws.append(w[:, 1:].reshape(-1).float())  # the top pair is always kept
        total += w.numel()
    return torch.cat(ws), total


@torch.no_grad()
def _layer_error(layers: list[SparseMoE], xs: list[torch.Tensor], refs: list[torch.Tensor], policy: DropPolicy) -> tuple[float, float]:
    err, dropped, pairs = 0.0, 0.0, 0.0
    for m, x, ref in zip(layers, xs, refs):
        saved, m.drop_policy = m.drop_policy, policy
        try:
            y = m.output(x)
        finally:
            m.drop_policy = saved
        err += float(((y - ref) ** 2).mean() / (ref ** 2).mean())
        dropped += m.last_stats["compute_drop"] * m.last_stats["pairs"]
        pairs += m.last_stats["pairs"]
    return err, dropped / pairs


@torch.no_grad()
def calibrate_drop(model: nn.Module, calib_ids: torch.Tensor, target_drop: float, *, dual: bool = False,
                   grid_size: int = 12) -> Calibration:
    """Thresholds that drop ``target_drop`` of the routed expert compute of ``model`` on ``calib_ids``
    (one global tau or (tau_lo, tau_hi) for all layers; see the module doc).

    Raises ``ValueError`` when the target cannot be reached without leaving a token with no expert (the top
    pair of every token is kept, so at most 1 - 1/(kP) of the pairs can be dropped).
    """
    _check_target(target_drop)
    _check_options(dual, grid_size)
    layers = moe_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no SparseMoE layer; convert it first with convert_hf_moe(model)")
    _check_ids("calib_ids", calib_ids, model)
    return calibrate_layers(layers, moe_inputs(model, calib_ids), target_drop, dual=dual, grid_size=grid_size)


def _check_target(target_drop: float) -> None:
    v.in_range("target_drop", target_drop, 0.0, 1.0, high_open=True)


def _check_options(dual: bool, grid_size: int) -> None:
    if not isinstance(dual, bool):
        raise TypeError(f"dual must be True or False, got {v.describe(dual)}")
    v.positive_int("grid_size", grid_size)


def _check_layers(layers) -> list[SparseMoE]:
    if isinstance(layers, nn.Module):
        raise TypeError("layers must be a list of SparseMoE layers, not one module; pass moe_layers(model)")
    layers = list(v.non_empty("layers", list(layers)))
    for m in layers:
        if not isinstance(m, SparseMoE):
            raise TypeError(f"layers must hold SparseMoE layers, got a {type(m).__name__}")
    return layers


def _check_ids(name: str, ids, model: nn.Module) -> None:
    """Token ids ``[batch, seq]`` (integers in [0, vocab) when the model says its vocabulary size)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids [batch, seq], got {v.describe(ids)}")
    v.ndim(name, ids, 2)
    v.non_empty(name, ids)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(vocab, int):
        v.indices(name, ids, vocab)
    elif ids.is_floating_point():
        raise TypeError(f"{name} must hold integer token ids, got a {ids.dtype} tensor")


@torch.no_grad()
def calibrate_layers(layers: list[SparseMoE], xs: list[torch.Tensor], target_drop: float, *, dual: bool = False,
                     grid_size: int = 12) -> Calibration:
    """:func:`calibrate_drop` on given layers and their captured inputs ``xs`` (each ``[N, d]``)."""
    _check_target(target_drop)
    _check_options(dual, grid_size)
    layers = _check_layers(layers)
    if isinstance(xs, torch.Tensor) or len(xs) != len(layers):
        raise ValueError(f"xs must be a list with one input batch per layer ({len(layers)}), got "
                         f"{v.describe(xs) if isinstance(xs, torch.Tensor) else len(xs)}")
    xs = [_check_tokens(x, m.hidden_size, f"xs[{i}]") for i, (m, x) in enumerate(zip(layers, xs))]
    w, total = _droppable_weights(layers, xs)
    if target_drop > w.numel() / total + 1e-9:
        raise ValueError(f"target_drop={target_drop} would leave tokens with no expert: keeping each token's top "
                         f"expert, at most {w.numel() / total:.3g} of the pairs can be dropped; lower the target")
    refs = []
    for m, x in zip(layers, xs):
        saved, m.drop_policy = m.drop_policy, None
        refs.append(m.output(x))
        m.drop_policy = saved
    ws = torch.sort(w).values
    n_drop = target_drop * total                    # pairs to drop, counted over all pairs

    def quantile_tau(count: float) -> float:
        """Smallest tau with #(w < tau) >= count."""
        c = int(math.ceil(count - 1e-9))
        if c <= 0:
            return 0.0
        return float(ws[min(c, len(ws)) - 1]) + 1e-7 if c <= len(ws) else 1.0

    tau = min(1.0, quantile_tau(n_drop))
    single = ThresholdDrop(tau)
    err, drop = _layer_error(layers, xs, refs, single)
    grid = [{"tau_lo": tau, "tau_hi": tau, "compute_drop": drop, "mse": err}]
    if not dual:
        return Calibration(single, drop, err, grid)
    rho = layers[0].major_fraction
    best = Calibration(DualThresholdDrop(tau, tau), drop, err, grid)
    for frac in torch.linspace(0.0, 1.0, grid_size + 1)[:-1].tolist():
        c_lo = frac * n_drop                       # pairs fully dropped; the rest of the target from major-only
        c_hi = c_lo + (n_drop - c_lo) / (1.0 - rho)
        if c_hi > len(ws):
            continue
        lo, hi = quantile_tau(c_lo), min(1.0, quantile_tau(c_hi))
        pol = DualThresholdDrop(min(lo, hi), hi)
        e, d = _layer_error(layers, xs, refs, pol)
        grid.append({"tau_lo": pol.tau_lo, "tau_hi": pol.tau_hi, "compute_drop": d, "mse": e})
        if e < best.mse:
            best = Calibration(pol, d, e, grid)
    best.grid = grid
    return best


__all__ = ["capture_moe_inputs", "moe_inputs", "calibrate_drop", "calibrate_layers", "Calibration"]
