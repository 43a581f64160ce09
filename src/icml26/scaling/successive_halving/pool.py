"""Learning-curve pools with exact compute accounting [A16].

A pool holds K configurations. ``advance(k, to_compute)`` trains configuration k (resuming from where it
stopped) up to cumulative compute ``to_compute`` and charges only the increment; it returns the newly observed
``(compute, loss)`` points. :class:`TablePool` replays recorded curves (a :class:`CurveTable`): the points of a
curve with compute <= ``to_compute`` are revealed, and the charge is the compute of the last revealed point minus
what the configuration had already been charged, so the spend is exact on the recorded grid.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np

from icml26.harness import validate as v
from icml26.testbeds.learning_curves import CurveTable, SyntheticCurveConfig
from icml26.testbeds.learning_curves import synthetic_curve_pool as _synthetic_curve_pool


@runtime_checkable
class LearningCurvePool(Protocol):
    """What an allocation strategy needs from a pool of configurations."""

    n_configs: int
    features: np.ndarray

    def full_compute(self, k: int) -> float: ...
    def cost_to(self, k: int, to_compute: float) -> float: ...
    def affordable(self, k: int, budget: float) -> float: ...
    def advance(self, k: int, to_compute: float) -> list[tuple[float, float]]: ...
    def observed(self, k: int) -> tuple[np.ndarray, np.ndarray]: ...


def _check_compute(x: float, name: str = "to_compute") -> float:
    if isinstance(x, np.generic) and np.issubdtype(type(x), np.number):
        x = x.item()
    try:
        value = v.finite_number(name, x)
    except TypeError:
        raise TypeError(f"{name} must be a number (FLOPs), got {v.describe(x)}") from None
    except ValueError:
        raise ValueError(f"{name} must be a finite, non-negative amount of compute (FLOPs), got {x}") from None
    if value < 0:
        raise ValueError(f"{name} must be a finite, non-negative amount of compute (FLOPs), got {x}")
    return value


def synthetic_curve_pool(cfg: SyntheticCurveConfig = SyntheticCurveConfig(), seed: int = 0,
                         noise: float | None = None) -> CurveTable:
    """Chinchilla-form synthetic learning curves (the shared testbed's ``synthetic_curve_pool``) with its arguments
    checked: one curve per (size, learning rate) of ``cfg``, noise drawn from ``seed`` (``noise`` overrides
    ``cfg.noise``)."""
    if not isinstance(cfg, SyntheticCurveConfig):
        raise TypeError(f"cfg must be a SyntheticCurveConfig, got {v.describe(cfg)}")
    for name in ("E", "A", "B", "a", "b", "tokens", "lr0", "lr_width", "warmup_tokens"):
        v.positive(f"cfg.{name}", getattr(cfg, name))
    for name in ("lr_shift", "warmup_bump", "noise"):
        v.non_negative(f"cfg.{name}", getattr(cfg, name))
    v.positive_int("cfg.n_points", cfg.n_points)
    for name in ("sizes", "lrs"):
        values = v.finite(f"cfg.{name}", v.non_empty(f"cfg.{name}", getattr(cfg, name)))
        if np.any(np.asarray(values, dtype=float) <= 0):
            raise ValueError(f"cfg.{name} must be positive, got {getattr(cfg, name)!r}")
    seed = v.non_negative_int("seed", seed)
    if noise is not None:
        noise = v.non_negative("noise", noise)
    return _synthetic_curve_pool(cfg, seed=seed, noise=noise)


class TablePool:
    """A :class:`LearningCurvePool` backed by recorded curves.

    Attributes after use: ``spent`` (total compute charged), ``charged`` (per configuration), ``revealed``
    (number of points observed per configuration), ``log`` (``(spent, best loss so far)`` after each advance,
    the anytime curve).
    """

    def __init__(self, table: CurveTable) -> None:
        if not isinstance(table, CurveTable):
            raise TypeError(f"table must be a CurveTable, got {type(table).__name__}")
        self.table = table
        self.n_configs = table.n_curves
        self.features = table.features
        self.revealed = np.zeros(self.n_configs, dtype=int)
        self.charged = np.zeros(self.n_configs)
        self.spent = 0.0
        self.best = math.inf
        self.log: list[tuple[float, float]] = []

    def _k(self, k: int) -> int:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) < self.n_configs:
            raise ValueError(f"configuration index must be an int in [0, {self.n_configs}), got {k!r}")
        return int(k)

    def full_compute(self, k: int) -> float:
        """Compute of configuration k's whole recorded curve."""
        return float(self.table.compute[self._k(k), -1])

    def first_compute(self, k: int) -> float:
        """Compute of configuration k's first recorded point (the least a rung can train it to and see a loss)."""
        return float(self.table.compute[self._k(k), 0])

    def _last_index(self, k: int, to_compute: float) -> int:
        """Number of points of curve k with compute <= to_compute (relative tolerance 1e-9)."""
        return int(np.searchsorted(self.table.compute[k], to_compute * (1 + 1e-9), side="right"))

    def cost_to(self, k: int, to_compute: float) -> float:
        """Compute that ``advance(k, to_compute)`` would charge."""
        k, c = self._k(k), _check_compute(to_compute)
        n = max(self._last_index(k, c), self.revealed[k])
        return float(self.table.compute[k, n - 1] - self.charged[k]) if n else 0.0

    def affordable(self, k: int, budget: float) -> float:
        """The furthest recorded compute of curve k reachable by spending at most ``budget`` more."""
        k, b = self._k(k), _check_compute(budget, "budget")
        n = self._last_index(k, self.charged[k] + b)
        return float(self.table.compute[k, n - 1]) if n else 0.0

    def advance(self, k: int, to_compute: float) -> list[tuple[float, float]]:
        """Resume configuration k up to ``to_compute`` (capped at its full curve); return the new points."""
        k, c = self._k(k), _check_compute(to_compute)
        n = self._last_index(k, c)
        if n <= self.revealed[k]:
            return []
        new = slice(self.revealed[k], n)
        pts = list(zip(self.table.compute[k, new].tolist(), self.table.loss[k, new].tolist()))
        cost = self.table.compute[k, n - 1] - self.charged[k]
        self.charged[k] += cost
        self.spent += cost
        self.revealed[k] = n
        self.best = min(self.best, float(self.table.loss[k, new].min()))
        self.log.append((self.spent, self.best))
        return pts

    def observed(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """All points of configuration k observed so far: ``(compute, loss)``."""
        k = self._k(k)
        return self.table.compute[k, : self.revealed[k]], self.table.loss[k, : self.revealed[k]]

    @property
    def exhaustive_compute(self) -> float:
        """Compute of training every configuration to the end (the exhaustive sweep)."""
        return float(self.table.compute[:, -1].sum())


__all__ = ["LearningCurvePool", "TablePool", "synthetic_curve_pool"]
