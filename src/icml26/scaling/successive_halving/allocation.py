"""Compute allocation over a pool of learning curves [A16]: uniform (leftovers redistributed), random search,
successive halving (SH) with three ranking
criteria, and asynchronous SH (ASHA, minimal sequential driver).

SH (eta, R): rung r trains every survivor up to the fraction eta^(r - R) of its own full training
(r = 0..R; the resource is training steps, charged in FLOPs), resuming from its checkpoint and charging only the
increment; after rung r < R it keeps ceil(n_r / eta) survivors ranked by the criterion:

- ``"current"`` (SH-only): the last observed loss;
- ``"power_law"``: each curve's own fit L = E + A c^-alpha extrapolated to its full compute;
- ``"gp"``: the pooled GP's lower confidence bound exp(mu - kappa sigma) at the full compute;
- ``"random"``: a seeded random ranking (the control: the halving schedule with the ranking switched off).

Every strategy stops as soon as the next increment would exceed the budget B (it then advances the current
configuration as far as the remaining budget allows), so the spend never exceeds B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .pool import LearningCurvePool, _check_compute
from .surrogates import GPCurveSurrogate, PowerLawCurveSurrogate

CRITERIA = ("current", "power_law", "gp", "random")


@dataclass
class AllocationResult:
    """What an allocation run observed and spent.

    ``curves[k]`` = (compute, loss) observed for configuration k; ``compute_used`` total FLOPs charged (never above
    ``budget``); ``compute_per_config``; ``best_loss``/``best_config`` the lowest observed loss; ``rung_sizes``
    how many configurations entered each rung (SH); ``anytime`` (spent, best loss so far) after each advance.
    """

    method: str
    budget: float
    curves: list[tuple[np.ndarray, np.ndarray]]
    compute_used: float
    compute_per_config: np.ndarray
    best_loss: float
    best_config: int
    rung_sizes: list[int] = field(default_factory=list)
    anytime: list[tuple[float, float]] = field(default_factory=list)


def _result(method: str, pool: LearningCurvePool, budget: float, rung_sizes: list[int] | None = None,
            used: float | None = None) -> AllocationResult:
    curves = [pool.observed(k) for k in range(pool.n_configs)]
    finals = np.array([L.min() if len(L) else np.inf for _, L in curves])
    best = int(np.argmin(finals))
    per = np.array([c[-1] if len(c) else 0.0 for c, _ in curves])
    return AllocationResult(method, budget, curves, float(per.sum()) if used is None else used, per,
                            float(finals[best]), best, list(rung_sizes or []), list(getattr(pool, "log", [])))


def _check_budget(pool: LearningCurvePool, budget: float) -> float:
    if not isinstance(pool, LearningCurvePool):
        raise TypeError(f"pool must implement LearningCurvePool (e.g. TablePool), got {type(pool).__name__}")
    b = _check_compute(budget, "budget")
    if b <= 0:
        raise ValueError(f"budget must be positive compute (FLOPs), got {budget}")
    return b


def _spend(pool: LearningCurvePool, k: int, target: float, left: float) -> tuple[float, bool]:
    """Advance k towards ``target`` within ``left``; returns (charged, whether the budget ran out)."""
    cost = pool.cost_to(k, target)
    if cost <= left:
        pool.advance(k, target)
        return cost, False
    reach = pool.affordable(k, left)
    charged = pool.cost_to(k, reach) if reach > 0 else 0.0
    if reach > 0:
        pool.advance(k, reach)
    return charged, True


class UniformAllocation:
    """Naive uniform allocation [A16 baseline]: every configuration gets an equal share of B, and compute a
    configuration cannot use (its curve ends before its share) is passed on to the others.

    Water-filling: with A the configurations not yet finished and L the budget left, each k in A is advanced to
    ``affordable(k, L / |A|)``; finished ones leave A; repeat until no configuration can advance. Compute left
    over by the recorded grid's rounding is then spent in configuration order, as far as it reaches, so the spend
    is B up to less than one recorded step of one curve (or everything, when B covers the exhaustive sweep).
    ``redistribute=False`` gives the old, wasteful variant (each configuration B / K, leftovers unspent).
    """

    def __init__(self, *, redistribute: bool = True) -> None:
        self.redistribute = bool(redistribute)

    def run(self, pool: LearningCurvePool, budget: float) -> AllocationResult:
        b = _check_budget(pool, budget)
        left = b
        if not self.redistribute:
            share = b / pool.n_configs
            for k in range(pool.n_configs):
                reach = pool.affordable(k, share)
                if reach > 0:
                    left -= pool.cost_to(k, reach)
                    pool.advance(k, reach)
            return _result("uniform (no redistribution)", pool, b, used=b - left)
        active = [k for k in range(pool.n_configs) if pool.cost_to(k, pool.full_compute(k)) > 0]
        while active and left > 0:
            share, moved, still = left / len(active), False, []
            for k in active:
                reach = pool.affordable(k, share)
                cost = pool.cost_to(k, reach) if reach > 0 else 0.0
                if cost > 0:
                    pool.advance(k, reach)
                    left -= cost
                    moved = True
                if pool.cost_to(k, pool.full_compute(k)) > 0:
                    still.append(k)
            active = still
            if not moved:
                break
        for k in active:                       # rounding leftovers: one more step where it fits
            if left <= 0:
                break
            charged, _ = _spend(pool, k, pool.full_compute(k), left)
            left -= charged
        return _result("uniform", pool, b, used=b - left)


class RandomSearch:
    """Random search [baseline]: configurations in a seeded random order, each trained to its full compute,
    until the next one does not fit (it is then advanced as far as the rest of B allows, as every strategy
    here does)."""

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed

    def run(self, pool: LearningCurvePool, budget: float) -> AllocationResult:
        b = _check_budget(pool, budget)
        left = b
        for k in np.random.default_rng(self.seed).permutation(pool.n_configs):
            charged, out = _spend(pool, int(k), pool.full_compute(int(k)), left)
            left -= charged
            if out:
                break
        return _result("random search", pool, b, used=b - left)


class SuccessiveHalving:
    """Successive halving with an optional learning-curve surrogate [A16].

    Args:
        eta: reduction factor (keep ceil(n / eta) per rung).
        n_rungs: R + 1 rungs at fractions eta^(r - R) of each configuration's full training; ``"auto"`` (default)
            picks the fewest rungs whose plan fits the budget when survivors cost the pool's mean per
            configuration (our choice); survivors costlier than the mean can still hit the budget cap.
        criterion: ``"current"`` (SH-only), ``"power_law"``, ``"gp"``, or ``"random"`` (control: random ranking).
        kappa: GP optimism, rank by exp(mu - kappa sigma).
        seed: random state of the GP fit.
    """

    def __init__(self, *, eta: float = 2.0, n_rungs: int | str = "auto", criterion: str = "current",
                 kappa: float = 1.0, seed: int = 0) -> None:
        if not (isinstance(eta, (int, float)) and eta > 1):
            raise ValueError(f"eta must be a number > 1, got {eta!r}")
        if n_rungs != "auto" and not (isinstance(n_rungs, int) and n_rungs >= 1):
            raise ValueError(f"n_rungs must be 'auto' or an int >= 1, got {n_rungs!r}")
        if criterion not in CRITERIA:
            raise ValueError(f"unknown criterion {criterion!r}; use one of {CRITERIA}")
        if not (math.isfinite(kappa) and kappa >= 0):
            raise ValueError(f"kappa must be finite and >= 0, got {kappa}")
        self.eta, self.n_rungs, self.criterion, self.kappa, self.seed = float(eta), n_rungs, criterion, kappa, seed

    @property
    def name(self) -> str:
        return {"current": "SH", "power_law": "SH+power-law", "gp": "SH+GP", "random": "SH+random-rank"}[self.criterion]

    def fractions(self, n_rungs: int | None = None) -> np.ndarray:
        """Rung budgets as fractions of each configuration's full training: eta^(r - R)."""
        n = int(self.n_rungs if n_rungs is None else n_rungs)
        return self.eta ** (np.arange(n) - (n - 1))

    def plan_cost(self, full: np.ndarray, n_rungs: int) -> float:
        """Cost of the SH plan with ``n_rungs`` rungs when every survivor costs the mean of ``full``."""
        full = np.asarray(full, dtype=float)
        fr, n, prev, cost = self.fractions(n_rungs), len(full), 0.0, 0.0
        for f in fr:
            cost += full.mean() * n * (f - prev)
            prev, n = f, math.ceil(n / self.eta)
        return float(cost)

    def plan(self, pool: LearningCurvePool, budget: float) -> int:
        """The number of rungs used for ``budget`` (``n_rungs``, or the fewest that fit under ``"auto"``)."""
        if self.n_rungs != "auto":
            return int(self.n_rungs)
        full = np.array([pool.full_compute(k) for k in range(pool.n_configs)])
        top = max(1, math.ceil(math.log(pool.n_configs, self.eta)) + 1)
        for n in range(1, top + 1):
            if self.plan_cost(full, n) <= budget:
                return n
        return top

    def scores(self, pool: LearningCurvePool, survivors: list[int]) -> np.ndarray:
        """Ranking scores (lower is better) of ``survivors`` under the criterion."""
        full = np.array([pool.full_compute(k) for k in survivors])
        if self.criterion == "current":
            return np.array([pool.observed(k)[1][-1] for k in survivors])
        if self.criterion == "random":   # the control: halving with the ranking switched off
            return np.random.default_rng([self.seed, len(survivors)]).random(len(survivors))
        if self.criterion == "power_law":
            return np.array([PowerLawCurveSurrogate().fit(*pool.observed(k)).predict(f)[0]
                             for k, f in zip(survivors, full)], dtype=float)
        curves = [pool.observed(k) for k in range(pool.n_configs)]   # all observed points, pooled
        gp = GPCurveSurrogate(random_state=self.seed).fit(pool.features, curves)
        return gp.lower_bound(pool.features[survivors], full, self.kappa)

    def run(self, pool: LearningCurvePool, budget: float) -> AllocationResult:
        b = _check_budget(pool, budget)
        survivors, left, sizes = list(range(pool.n_configs)), b, []
        fr = self.fractions(self.plan(pool, b))
        for r, f in enumerate(fr):
            sizes.append(len(survivors))
            out = False
            for k in survivors:
                charged, out = _spend(pool, k, f * pool.full_compute(k), left)
                left -= charged
                if out:
                    break
            if out or r == len(fr) - 1:
                break
            s = self.scores(pool, survivors)
            keep = math.ceil(len(survivors) / self.eta)
            survivors = [survivors[i] for i in np.argsort(s, kind="stable")[:keep]]
        return _result(self.name, pool, b, sizes, used=b - left)


class ASHA:
    """Asynchronous successive halving (Li et al. 2020), run by one sequential worker over a finite pool.

    Rungs as in :class:`SuccessiveHalving`. Each job: promote the best not-yet-promoted configuration of the
    highest rung r < R that lies in the top floor(n_r / eta) of rung r; otherwise start the next new
    configuration (seeded order) at rung 0; stop when no job is left or the budget runs out.
    """

    def __init__(self, *, eta: float = 2.0, n_rungs: int | str = "auto", seed: int = 0) -> None:
        self.sh = SuccessiveHalving(eta=eta, n_rungs=n_rungs)
        self.seed = seed

    def run(self, pool: LearningCurvePool, budget: float) -> AllocationResult:
        b = _check_budget(pool, budget)
        fr, eta = self.sh.fractions(self.sh.plan(pool, b)), self.sh.eta
        order = list(np.random.default_rng(self.seed).permutation(pool.n_configs))
        rungs: list[dict[int, float]] = [dict() for _ in fr]     # rung -> {config: loss there}
        promoted: list[set[int]] = [set() for _ in fr]
        left = b
        while True:
            job = None
            for r in range(len(fr) - 2, -1, -1):
                n_top = int(len(rungs[r]) // eta)
                top = sorted(rungs[r], key=rungs[r].get)[:n_top]
                cand = [k for k in top if k not in promoted[r]]
                if cand:
                    job = (cand[0], r + 1)
                    promoted[r].add(cand[0])
                    break
            if job is None:
                if not order:
                    break
                job = (int(order.pop(0)), 0)
            k, r = job
            charged, out = _spend(pool, k, fr[r] * pool.full_compute(k), left)
            left -= charged
            if out:
                break
            rungs[r][k] = float(pool.observed(k)[1][-1])
        return _result("ASHA", pool, b, [len(x) for x in rungs], used=b - left)


__all__ = ["AllocationResult", "UniformAllocation", "RandomSearch", "SuccessiveHalving", "ASHA", "CRITERIA"]
