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

from .moe import SparseMoE, moe_layers
from .policies import DropPolicy, DualThresholdDrop, ThresholdDrop


@contextmanager
def capture_moe_inputs(layers: list[SparseMoE]) -> Iterator[list[list[torch.Tensor]]]:
    """Record the input of every call of each layer (flattened to ``[N, d]``) while the context is open."""
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
            y = m(x)
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
    layers = moe_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no SparseMoE layer; convert it first with convert_hf_moe(model)")
    return calibrate_layers(layers, moe_inputs(model, calib_ids), target_drop, dual=dual, grid_size=grid_size)


def _check_target(target_drop: float) -> None:
    if not (isinstance(target_drop, (int, float)) and math.isfinite(target_drop) and 0.0 <= target_drop < 1.0):
        raise ValueError(f"target_drop must be a fraction in [0, 1), got {target_drop!r}")


@torch.no_grad()
def calibrate_layers(layers: list[SparseMoE], xs: list[torch.Tensor], target_drop: float, *, dual: bool = False,
                     grid_size: int = 12) -> Calibration:
    """:func:`calibrate_drop` on given layers and their captured inputs ``xs`` (each ``[N, d]``)."""
    _check_target(target_drop)
    if len(layers) != len(xs) or not layers:
        raise ValueError("need one input batch per layer (and at least one layer)")
    w, total = _droppable_weights(layers, xs)
    if target_drop > w.numel() / total + 1e-9:
        raise ValueError(f"target_drop={target_drop} would leave tokens with no expert: keeping each token's top "
                         f"expert, at most {w.numel() / total:.3g} of the pairs can be dropped; lower the target")
    refs = []
    for m, x in zip(layers, xs):
        saved, m.drop_policy = m.drop_policy, None
        refs.append(m(x))
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
