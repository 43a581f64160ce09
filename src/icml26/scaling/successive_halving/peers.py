"""Optuna's pruners on the same pool and budget [A16 peers]: ``SuccessiveHalvingPruner`` (optuna's asynchronous
SH) and ``HyperbandPruner``. Trials take configurations in a seeded order; each reports its loss at every
recorded point (step = point index) and stops when pruned; the run stops when the budget is spent."""

from __future__ import annotations

import math

import numpy as np

from .allocation import AllocationResult, _check_budget, _result, _spend
from .pool import TablePool


def optuna_allocation(pool: TablePool, budget: float, *, pruner: str = "sh", eta: int = 2,
                      n_rungs: int = 5, seed: int = 0) -> AllocationResult:
    """Run optuna's ``"sh"`` (SuccessiveHalvingPruner) or ``"hyperband"`` pruner over ``pool`` within ``budget``.

    The resource is the recorded point index 1..T; min resource = T / eta^(n_rungs - 1), as SH's first rung.
    """
    import optuna

    if not isinstance(pool, TablePool):
        raise TypeError(f"pool must be a TablePool (optuna steps through its recorded points), got {type(pool).__name__}")
    b = _check_budget(pool, budget)
    n_points = pool.table.n_points
    if pruner not in ("sh", "hyperband"):
        raise ValueError(f"unknown pruner {pruner!r}; use 'sh' or 'hyperband'")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    min_r = max(1, int(n_points // eta ** (n_rungs - 1)))
    p = (optuna.pruners.SuccessiveHalvingPruner(min_resource=min_r, reduction_factor=eta)
         if pruner == "sh" else
         optuna.pruners.HyperbandPruner(min_resource=min_r, max_resource=n_points, reduction_factor=eta))
    study = optuna.create_study(direction="minimize", pruner=p, sampler=optuna.samplers.RandomSampler(seed=seed),
                                study_name=f"a16-{pruner}-{seed}")
    left, out = b, False
    for k in np.random.default_rng(seed).permutation(pool.n_configs):
        trial = study.ask()
        state, last = None, math.inf
        for j in range(1, n_points + 1):
            charged, out = _spend(pool, int(k), float(pool.table.compute[k, j - 1]), left)
            left -= charged
            obs = pool.observed(int(k))[1]
            if len(obs):
                last = float(obs[-1])
                trial.report(last, step=j)
            if out:
                break
            if trial.should_prune():
                state = optuna.trial.TrialState.PRUNED
                break
        study.tell(trial, last if state is None and math.isfinite(last) else None,
                   state=state or (optuna.trial.TrialState.COMPLETE if math.isfinite(last) else optuna.trial.TrialState.FAIL))
        if out:
            break
    return _result(f"optuna-{pruner}", pool, b, used=b - left)


__all__ = ["optuna_allocation"]
