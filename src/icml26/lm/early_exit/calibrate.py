"""Scoring exit rules and calibrating their thresholds to a target agreement [A19].

The paper does not give its thresholds. Our choice: grid-search on a calibration split and keep the rule that
saves the most block FLOPs while its argmax agrees with the full-depth argmax on >= ``target_agreement`` of the
tokens (or, with ``target_flops_saved``, the most faithful rule that saves at least that much). Every grid holds
a "never exit" rule, so the search always has an answer. Grids (our choice):

    geometric    tau_step in quantiles 5%, 10%, ..., 90% of s_l (layers >= max(l_min, 2)) x tau_cos in
                 {0, 0.1, 0.3, 0.5, 0.7, 0.8, 0.9}; ablations: step-only (tau_cos = -1), cosine-only (tau_step = inf)
    max-prob     tau_prob in 126 quantiles 30%..99.5% of the lens max-probability
    entropy      tau in 126 quantiles 0.5%..70% of the lens entropy
    static       layer in 1..L

Same search budget: the geometric grid holds 18 x 7 = 126 threshold pairs plus "never exit", and each confidence
grid holds the same number of thresholds (126, plus "never exit"), so no rule wins by a finer search; all are
searched on the same calibration tokens. (Quantiles that coincide are merged, so a grid may come out smaller.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import nn

from .criteria import (
    ConfidenceExitCriterion,
    EntropyExitCriterion,
    ExitCriterion,
    GeometricExitCriterion,
    StaticExit,
    default_min_layer,
)
from .geometry import Trajectory, collect_trajectory

GEOMETRIC_STEP_QUANTILES = tuple(np.round(np.arange(0.05, 0.901, 0.05), 2))
GEOMETRIC_COS_GRID = (0.0, 0.1, 0.3, 0.5, 0.7, 0.8, 0.9)
GRID_POINTS = len(GEOMETRIC_STEP_QUANTILES) * len(GEOMETRIC_COS_GRID)   # thresholds per family (same search budget)


@dataclass
class ExitEvaluation:
    """``agreement`` with the full-depth argmax, top-1 ``accuracy`` against ``targets`` (NaN without targets),
    ``flops_fraction`` = mean(l_exit) / L, and ``flops_saved`` = 1 - flops_fraction."""

    agreement: float
    accuracy: float
    flops_fraction: float

    @property
    def flops_saved(self) -> float:
        return 1.0 - self.flops_fraction


@dataclass
class Calibration:
    """The chosen ``criterion``, its scores on the calibration split, and the whole ``grid`` (row dicts)."""

    criterion: ExitCriterion
    evaluation: ExitEvaluation
    grid: list[dict] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        e = self.evaluation
        return (f"Calibration({self.criterion!r}, agreement={e.agreement:.4f}, flops_saved={e.flops_saved:.4f}, "
                f"grid=<{len(self.grid)} rules>)")


def _check_traj(traj: object) -> None:
    if not isinstance(traj, Trajectory):
        raise TypeError(f"traj must be a Trajectory (from collect_trajectory), got {type(traj).__name__}")


def evaluate_exit(traj: Trajectory, rule: ExitCriterion | torch.Tensor, targets: torch.Tensor | None = None) -> ExitEvaluation:
    """Score an exit rule (or given exit layers [B, T]) on a trajectory collected ``with_lens``."""
    _check_traj(traj)
    if not isinstance(rule, ExitCriterion) and not torch.is_tensor(rule):
        raise TypeError(f"rule must be an ExitCriterion or a tensor of exit layers [B, T], got {type(rule).__name__}")
    if torch.is_tensor(rule) and (rule.is_floating_point() or rule.is_complex() or rule.dtype == torch.bool):
        raise TypeError(f"exit layers must be integers in 1..L, got a {rule.dtype} tensor")
    if targets is not None:
        if not torch.is_tensor(targets) or targets.is_floating_point() or targets.dtype == torch.bool:
            raise TypeError(f"targets must be an integer tensor of token ids [B, T], got {type(targets).__name__}"
                            + (f" of dtype {targets.dtype}" if torch.is_tensor(targets) else ""))
        vocab = None if traj.logits is None else traj.logits.shape[-1]
        if targets.numel() and (int(targets.min()) < 0 or (vocab is not None and int(targets.max()) >= vocab)):
            raise ValueError(f"targets must be token ids in [0, {vocab if vocab is not None else 'V'}), "
                             f"got [{int(targets.min())}, {int(targets.max())}]")
    if traj.layer_argmax is None:
        raise ValueError("evaluate_exit needs logit-lens predictions; collect the trajectory with with_lens=True")
    exit_layers = rule.exit_layers(traj) if isinstance(rule, ExitCriterion) else rule
    L = traj.num_layers
    if exit_layers.shape != traj.layer_argmax.shape[1:]:
        raise ValueError(f"exit layers must have shape {tuple(traj.layer_argmax.shape[1:])}, got {tuple(exit_layers.shape)}")
    if int(exit_layers.min()) < 1 or int(exit_layers.max()) > L:
        raise ValueError(f"exit layers must lie in 1..{L}")
    pred = traj.layer_argmax.gather(0, (exit_layers - 1)[None]).squeeze(0)
    agreement = float((pred == traj.layer_argmax[-1]).double().mean())
    accuracy = math.nan
    if targets is not None:
        if targets.shape != pred.shape:
            raise ValueError(f"targets must have shape {tuple(pred.shape)}, got {tuple(targets.shape)}")
        accuracy = float((pred == targets).double().mean())
    return ExitEvaluation(agreement, accuracy, float(exit_layers.double().mean() / L))


def default_grid(traj: Trajectory, criterion_cls: type[ExitCriterion] = GeometricExitCriterion, *,
                 min_layer: int | None = None, patience: int = 1,
                 ablation: Literal["step", "cos"] | None = None) -> list[ExitCriterion]:
    """The candidate rules searched by :func:`calibrate_exit` (see the module docstring), "never exit" first."""
    _check_traj(traj)
    L = traj.num_layers
    m = default_min_layer(L) if min_layer is None else min_layer
    if isinstance(m, int) and not isinstance(m, bool) and m > L:
        raise ValueError(f"min_layer={m} exceeds the trajectory's {L} layers")
    if criterion_cls is ConfidenceExitCriterion and traj.max_prob is None or \
            criterion_cls is EntropyExitCriterion and traj.entropy is None:
        raise ValueError(f"a {criterion_cls.__name__} grid needs logit-lens statistics; collect the trajectory "
                         "with with_lens=True")
    kw = dict(min_layer=min_layer, patience=patience)

    def q(x: torch.Tensor, qs) -> list[float]:
        x = x[max(m, 2) - 1:].flatten().float()
        x = x[torch.isfinite(x)]
        if x.numel() == 0:
            return []
        if x.numel() > 1_000_000:  # torch.quantile's input limit; a strided subsample is plenty
            x = x[:: x.numel() // 1_000_000 + 1]
        return sorted({float(v) for v in torch.quantile(x, torch.tensor(qs, dtype=torch.float))})

    if criterion_cls is GeometricExitCriterion:
        steps = q(traj.step, GEOMETRIC_STEP_QUANTILES)
        if ablation == "step":
            grid = [GeometricExitCriterion(s, -1.0, **kw) for s in steps]
        elif ablation == "cos":
            grid = [GeometricExitCriterion(math.inf, c, **kw) for c in GEOMETRIC_COS_GRID]
        elif ablation is None:
            grid = [GeometricExitCriterion(s, c, **kw) for s in steps for c in GEOMETRIC_COS_GRID]
        else:
            raise ValueError(f"unknown ablation {ablation!r}; use None, 'step' or 'cos'")
        return [GeometricExitCriterion(0.0, 1.0, **kw), *grid]
    if ablation is not None:
        raise ValueError("ablation applies to GeometricExitCriterion only")
    if criterion_cls is ConfidenceExitCriterion:
        taus = q(traj.max_prob, np.linspace(0.3, 0.995, GRID_POINTS).tolist())
        return [ConfidenceExitCriterion(1.0, **kw), *(ConfidenceExitCriterion(min(t, 1.0), **kw) for t in taus)]
    if criterion_cls is EntropyExitCriterion:
        taus = q(traj.entropy, np.linspace(0.005, 0.7, GRID_POINTS).tolist())
        return [EntropyExitCriterion(0.0, **kw), *(EntropyExitCriterion(t, **kw) for t in taus)]
    if criterion_cls is StaticExit:
        return [StaticExit(layer) for layer in range(L, 0, -1)]
    raise TypeError(f"no default grid for {criterion_cls!r}; pass candidates=[...] explicitly")


def calibrate_on_trajectory(traj: Trajectory, criterion_cls: type[ExitCriterion] = GeometricExitCriterion, *,
                            target_agreement: float | None = None, target_flops_saved: float | None = None,
                            candidates: list[ExitCriterion] | None = None, min_layer: int | None = None,
                            patience: int = 1, ablation: Literal["step", "cos"] | None = None) -> Calibration:
    """Pick thresholds on a trajectory already collected (see :func:`calibrate_exit`)."""
    _check_traj(traj)
    if target_agreement is not None and target_flops_saved is not None:
        raise ValueError("give at most one of target_agreement and target_flops_saved")
    if target_agreement is None and target_flops_saved is None:
        target_agreement = 0.98
    target = target_agreement if target_agreement is not None else target_flops_saved
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 <= target <= 1.0:
        raise ValueError(f"the target must be a number in [0, 1], got {target!r}")
    if candidates is None:
        candidates = default_grid(traj, criterion_cls, min_layer=min_layer, patience=patience, ablation=ablation)
    if not candidates:
        raise ValueError("no candidate rules to search")
    bad = [type(c).__name__ for c in candidates if not isinstance(c, ExitCriterion)]
    if bad:
        raise TypeError(f"candidates must be ExitCriterion instances, got {sorted(set(bad))}")
    scored = [(c, evaluate_exit(traj, c)) for c in candidates]
    if target_agreement is not None:
        ok = [x for x in scored if x[1].agreement >= target_agreement] or [max(scored, key=lambda x: x[1].agreement)]
        best = max(ok, key=lambda x: (x[1].flops_saved, x[1].agreement))
    else:
        ok = [x for x in scored if x[1].flops_saved >= target_flops_saved - 1e-12]
        best = (max(ok, key=lambda x: (x[1].agreement, x[1].flops_saved)) if ok
                else max(scored, key=lambda x: (x[1].flops_saved, x[1].agreement)))
    grid = [{"rule": repr(c), "agreement": e.agreement, "flops_saved": e.flops_saved} for c, e in scored]
    return Calibration(best[0], best[1], grid)


def calibrate_exit(model: nn.Module, calib_ids: torch.Tensor,
                   criterion_cls: type[ExitCriterion] = GeometricExitCriterion, *,
                   target_agreement: float | None = None, target_flops_saved: float | None = None,
                   min_layer: int | None = None, patience: int = 1,
                   ablation: Literal["step", "cos"] | None = None) -> Calibration:
    """Calibrate an exit rule's thresholds on ``calib_ids`` [B, T] [A19].

    Maximises FLOPs saved subject to agreement with the full-depth argmax >= ``target_agreement`` (default 0.98),
    or, given ``target_flops_saved`` instead, maximises agreement subject to FLOPs saved >= it.
    """
    traj = collect_trajectory(model, calib_ids, with_lens=True)
    return calibrate_on_trajectory(traj, criterion_cls, target_agreement=target_agreement,
                                   target_flops_saved=target_flops_saved, min_layer=min_layer, patience=patience,
                                   ablation=ablation)
