"""Compute allocation over a pool of learning curves [A16]: uniform (leftovers redistributed), random search,
successive halving (SH) with three ranking criteria, and asynchronous SH (ASHA, minimal sequential driver).

SH (eta, R): rung r trains every survivor up to c_r = c_max eta^(r - R) (``rungs="absolute"``, the default and the
spec's rungs: the same compute for every survivor, capped at its own full compute) or up to the fraction
eta^(r - R) of its own full training (``rungs="fraction"``), at least to its first recorded point; r = 0..R. It
resumes from the checkpoint and charges only the increment; after rung r < R it keeps ceil(n_r / eta) survivors
ranked by the criterion:

- ``"current"`` (SH-only): the last observed loss;
- ``"power_law"``: each curve's own fit L = E + A c^-alpha extrapolated to its full compute;
- ``"gp"``: the pooled GP's lower confidence bound exp(mu - kappa sigma) at the full compute;
- ``"random"``: a seeded random ranking (the control: the halving schedule with the ranking switched off).

``n_rungs="auto"`` plans with an upper bound (every rung's survivors the costliest configurations), so the plan
always fits the budget; what it leaves is spent after the last rung in the order of the final ranking, the same
way for every criterion. Every strategy stops as soon as the next increment would exceed the budget B (it then
advances the current configuration as far as the remaining budget allows), so the spend never exceeds B.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from icml26.harness import validate as v

from .pool import LearningCurvePool, _check_compute
from .surrogates import GPCurveSurrogate, PowerLawCurveSurrogate

CRITERIA = ("current", "power_law", "gp", "random")
RUNGS = ("absolute", "fraction")


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

    def __post_init__(self) -> None:
        self.budget = v.positive("budget", self.budget)
        self.compute_used = v.non_negative("compute_used", self.compute_used)
        if not isinstance(self.curves, list):
            raise TypeError(f"curves must be a list of (compute, loss) pairs, got {v.describe(self.curves)}")


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
        if not isinstance(redistribute, bool):
            raise TypeError(f"redistribute must be True or False, got {v.describe(redistribute)}")
        self.redistribute = redistribute

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
        self.seed = v.non_negative_int("seed", seed)

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
        n_rungs: R + 1 rungs; ``"auto"`` (default) picks the fewest rungs whose plan fits the budget when the
            survivors of every rung are the costliest configurations (an upper bound, so the plan always fits).
        criterion: ``"current"`` (SH-only), ``"power_law"``, ``"gp"``, or ``"random"`` (control: random ranking).
        kappa: GP optimism, rank by exp(mu - kappa sigma).
        seed: random state of the GP fit and of the random ranking.
        rungs: ``"absolute"`` (default; the spec's rungs): rung r trains every survivor to the same compute
            c_r = c_max eta^(r - R) (c_max the largest configuration's full compute), capped at its own full
            compute; ``"fraction"``: rung r trains every survivor to eta^(r - R) of its *own* full compute. Both
            train a survivor to at least its first recorded point (``pool.first_compute(k)`` when the pool has it).
        spend_leftover: after the last rung, spend what is left of the budget the same way for every criterion:
            configurations in the order of the final ranking (the last survivors, then the last eliminated, best
            first, then those eliminated a rung earlier, ...), each trained to its full compute.
    """

    def __init__(self, *, eta: float = 2.0, n_rungs: int | str = "auto", criterion: str = "current",
                 kappa: float = 1.0, seed: int = 0, rungs: str = "absolute", spend_leftover: bool = True) -> None:
        if isinstance(eta, bool) or not isinstance(eta, numbers.Real) or not math.isfinite(eta) or eta <= 1:
            raise ValueError(f"eta must be a finite number > 1, got {eta!r}")
        if n_rungs != "auto":
            n_rungs = v.positive_int("n_rungs ('auto' or an int >= 1)", n_rungs)
        v.one_of("criterion", criterion, CRITERIA)
        kappa = v.non_negative("kappa", kappa)
        seed = v.non_negative_int("seed", seed)
        v.one_of("rungs", rungs, RUNGS)
        if not isinstance(spend_leftover, bool):
            raise TypeError(f"spend_leftover must be True or False, got {v.describe(spend_leftover)}")
        self.eta, self.n_rungs, self.criterion, self.kappa, self.seed = float(eta), n_rungs, criterion, kappa, seed
        self.rungs, self.spend_leftover = rungs, spend_leftover

    @property
    def name(self) -> str:
        return {"current": "SH", "power_law": "SH+power-law", "gp": "SH+GP", "random": "SH+random-rank"}[self.criterion]

    def fractions(self, n_rungs: int | None = None) -> np.ndarray:
        """Rung budgets as fractions eta^(r - R) of c_max (``rungs="absolute"``) or of each configuration's own
        full compute (``"fraction"``)."""
        n = int(self.n_rungs if n_rungs is None else n_rungs)
        return self.eta ** (np.arange(n) - (n - 1))

    def targets(self, full: np.ndarray, n_rungs: int, first: np.ndarray | None = None) -> np.ndarray:
        """[n_rungs, K] cumulative compute each configuration is trained to at each rung it reaches."""
        full = np.asarray(full, dtype=float)
        fr = self.fractions(n_rungs)[:, None]
        if self.rungs == "absolute":
            t = fr * np.full_like(full, full.max())[None]
        else:
            t = fr * full[None]
        if first is not None:
            t = np.maximum(t, np.asarray(first, dtype=float)[None])
        return np.minimum(t, full[None])

    def plan_cost(self, full: np.ndarray, n_rungs: int, first: np.ndarray | None = None) -> float:
        """An upper bound on the compute of the SH plan with ``n_rungs`` rungs: at every rung, the increments of
        the costliest ``n_r`` configurations (whichever survive, the plan costs no more)."""
        full = np.asarray(full, dtype=float)
        t = self.targets(full, n_rungs, first)
        prev, n, cost = np.zeros_like(full), len(full), 0.0
        for r in range(n_rungs):
            inc = np.sort(t[r] - prev)[::-1]
            cost += float(inc[:n].sum())
            prev, n = t[r], math.ceil(n / self.eta)
        return cost

    def _full_first(self, pool: LearningCurvePool) -> tuple[np.ndarray, np.ndarray | None]:
        full = np.array([pool.full_compute(k) for k in range(pool.n_configs)])
        fc = getattr(pool, "first_compute", None)
        first = np.array([fc(k) for k in range(pool.n_configs)]) if callable(fc) else None
        return full, first

    def plan(self, pool: LearningCurvePool, budget: float) -> int:
        """The number of rungs used for ``budget`` (``n_rungs``, or the fewest whose plan fits under ``"auto"``;
        when none up to 40 fits, the cheapest of them)."""
        if self.n_rungs != "auto":
            return int(self.n_rungs)
        b = _check_budget(pool, budget)
        full, first = self._full_first(pool)
        costs = []
        for n in range(1, 41):
            costs.append(self.plan_cost(full, n, first))
            if costs[-1] <= b:
                return n
        return int(np.argmin(costs)) + 1

    def scores(self, pool: LearningCurvePool, survivors: list[int]) -> np.ndarray:
        """Ranking scores (lower is better) of ``survivors`` under the criterion. A survivor with no observed
        point is ranked last by ``"current"`` and ``"power_law"`` (the GP predicts it from its features)."""
        full = np.array([pool.full_compute(k) for k in survivors])
        if self.criterion == "random":   # the control: halving with the ranking switched off
            return np.random.default_rng([self.seed, len(survivors)]).random(len(survivors))
        seen = [len(pool.observed(k)[1]) > 0 for k in survivors]
        if self.criterion == "current":
            return np.array([pool.observed(k)[1][-1] if ok else np.inf for k, ok in zip(survivors, seen)])
        if self.criterion == "power_law":
            return np.array([PowerLawCurveSurrogate().fit(*pool.observed(k)).predict(f)[0] if ok else np.inf
                             for k, f, ok in zip(survivors, full, seen)], dtype=float)
        curves = [pool.observed(k) for k in range(pool.n_configs)]   # all observed points, pooled
        gp = GPCurveSurrogate(random_state=self.seed).fit(pool.features, curves)
        return gp.lower_bound(pool.features[survivors], full, self.kappa)

    def run(self, pool: LearningCurvePool, budget: float) -> AllocationResult:
        b = _check_budget(pool, budget)
        survivors, left, sizes = list(range(pool.n_configs)), b, []
        n_rungs = self.plan(pool, b)
        full, first = self._full_first(pool)
        target = self.targets(full, n_rungs, first)
        reserve: list[int] = []          # eliminated configurations, the most recent elimination first (best first)
        out = False
        for r in range(n_rungs):
            sizes.append(len(survivors))
            for k in survivors:
                charged, out = _spend(pool, k, float(target[r, k]), left)
                left -= charged
                if out:
                    break
            if out or r == n_rungs - 1:
                break
            s = self.scores(pool, survivors)
            keep = math.ceil(len(survivors) / self.eta)
            ranked = [survivors[i] for i in np.argsort(s, kind="stable")]
            survivors, reserve = ranked[:keep], ranked[keep:] + reserve
        if self.spend_leftover and not out:
            for k in survivors + reserve:
                charged, out = _spend(pool, k, pool.full_compute(k), left)
                left -= charged
                if out:
                    break
        return _result(self.name, pool, b, sizes, used=b - left)


class ASHA:
    """Asynchronous successive halving (Li et al. 2020), run by one sequential worker over a finite pool.

    Rungs as in :class:`SuccessiveHalving` (default ``rungs="fraction"``: ASHA's resource is each trial's own
    training steps, as in Li et al.). Each job: promote the best not-yet-promoted configuration of the
    highest rung r < R that lies in the top floor(n_r / eta) of rung r; otherwise start the next new
    configuration (seeded order) at rung 0; stop when no job is left or the budget runs out. What is left of the
    budget when no job is left is spent as :class:`SuccessiveHalving` spends it (``spend_leftover``): the
    configurations of the highest rung first, best first, each trained to its full compute.
    """

    def __init__(self, *, eta: float = 2.0, n_rungs: int | str = "auto", seed: int = 0,
                 rungs: str = "fraction", spend_leftover: bool = True) -> None:
        self.sh = SuccessiveHalving(eta=eta, n_rungs=n_rungs, rungs=rungs, spend_leftover=spend_leftover)
        self.seed = v.non_negative_int("seed", seed)

    def run(self, pool: LearningCurvePool, budget: float) -> AllocationResult:
        b = _check_budget(pool, budget)
        n_rungs, eta = self.sh.plan(pool, b), self.sh.eta
        full, first = self.sh._full_first(pool)
        target = self.sh.targets(full, n_rungs, first)
        order = list(np.random.default_rng(self.seed).permutation(pool.n_configs))
        rungs: list[dict[int, float]] = [dict() for _ in range(n_rungs)]     # rung -> {config: loss there}
        promoted: list[set[int]] = [set() for _ in range(n_rungs)]
        left = b
        while True:
            job = None
            for r in range(n_rungs - 2, -1, -1):
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
            charged, out = _spend(pool, k, float(target[r, k]), left)
            left -= charged
            if out:
                break
            obs = pool.observed(k)[1]
            rungs[r][k] = float(obs[-1]) if len(obs) else math.inf
        if self.sh.spend_leftover and not out:      # as SuccessiveHalving: the highest rung first, best first
            ranked = [k for r in range(n_rungs - 1, -1, -1) for k in sorted(rungs[r], key=rungs[r].get)]
            for k in dict.fromkeys(ranked):
                charged, out = _spend(pool, k, pool.full_compute(k), left)
                left -= charged
                if out:
                    break
        return _result("ASHA", pool, b, [len(x) for x in rungs], used=b - left)


__all__ = ["AllocationResult", "UniformAllocation", "RandomSearch", "SuccessiveHalving", "ASHA", "CRITERIA", "RUNGS"]
