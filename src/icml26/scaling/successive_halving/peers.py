"""Optuna's pruners and Ray Tune's ASHA scheduler on the same pool and budget [A16 peers].

Optuna: ``SuccessiveHalvingPruner`` (optuna's asynchronous SH) and ``HyperbandPruner``. Ray Tune:
``ray.tune.schedulers.ASHAScheduler``, whose decisions (``on_trial_add`` / ``on_trial_result``) are driven
directly, one trial at a time, without starting Ray: the scheduler is Ray's own code, only the trial runner is
ours. In both, trials take configurations in a seeded order, report the loss at every recorded point
(step = point index) and stop when pruned; the run stops when the budget is spent."""

from __future__ import annotations

import math

import numpy as np

from icml26.harness import validate as v

from .allocation import AllocationResult, _check_budget, _result, _spend
from .pool import TablePool


def optuna_allocation(pool: TablePool, budget: float, *, pruner: str = "sh", eta: int = 2,
                      n_rungs: int = 5, seed: int = 0) -> AllocationResult:
    """Run optuna's ``"sh"`` (SuccessiveHalvingPruner) or ``"hyperband"`` pruner over ``pool`` within ``budget``.

    The resource is the recorded point index 1..T; min resource = T / eta^(n_rungs - 1), as SH's first rung.
    """
    if not isinstance(pool, TablePool):
        raise TypeError(f"pool must be a TablePool (optuna steps through its recorded points), got {type(pool).__name__}")
    b = _check_budget(pool, budget)
    v.one_of("pruner", pruner, ("sh", "hyperband"))
    eta = v.positive_int("eta", eta, minimum=2)
    n_rungs = v.positive_int("n_rungs", n_rungs)
    seed = v.non_negative_int("seed", seed)
    optuna = v.require_package("optuna", "peers", purpose="optuna's pruners")
    n_points = pool.table.n_points
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


def ray_asha_allocation(pool: TablePool, budget: float, *, eta: int = 2, n_rungs: int = 5,
                        seed: int = 0) -> AllocationResult:
    """Run Ray Tune's ``ASHAScheduler`` (one bracket, ``grace_period`` = T / eta^(n_rungs - 1), ``max_t`` = T)
    over ``pool`` within ``budget``, sequentially: each trial reports its loss at every recorded point until the
    scheduler answers STOP or its curve ends. Needs ``ray[tune]`` importable (Ray plus pyarrow)."""
    if not isinstance(pool, TablePool):
        raise TypeError(f"pool must be a TablePool (the trials step through its recorded points), got {type(pool).__name__}")
    b = _check_budget(pool, budget)
    eta = v.positive_int("eta", eta, minimum=2)
    n_rungs = v.positive_int("n_rungs", n_rungs)
    seed = v.non_negative_int("seed", seed)
    v.require_package("pyarrow", "ray", purpose="Ray Tune's ASHAScheduler")
    schedulers = v.require_package("ray.tune.schedulers", "ray", purpose="Ray Tune's ASHAScheduler")
    ASHAScheduler, TrialScheduler = schedulers.ASHAScheduler, schedulers.TrialScheduler
    n_points = pool.table.n_points
    grace = max(1, int(n_points // eta ** (n_rungs - 1)))
    sched = ASHAScheduler(time_attr="step", metric="loss", mode="min", max_t=n_points, grace_period=grace,
                          reduction_factor=eta, brackets=1)

    class _Trial:  # the scheduler only reads trial_id
        def __init__(self, trial_id: str) -> None:
            self.trial_id = trial_id

    left, out = b, False
    for k in np.random.default_rng(seed).permutation(pool.n_configs):
        trial = _Trial(f"cfg{int(k)}")
        sched.on_trial_add(None, trial)
        last = math.inf
        for j in range(1, n_points + 1):
            charged, out = _spend(pool, int(k), float(pool.table.compute[k, j - 1]), left)
            left -= charged
            obs = pool.observed(int(k))[1]
            if out or not len(obs):
                break
            last = float(obs[-1])
            if sched.on_trial_result(None, trial, {"step": j, "loss": last}) == TrialScheduler.STOP:
                break
        sched.on_trial_complete(None, trial, {"step": j, "loss": last})
        if out:
            break
    return _result("ray-tune-ASHA", pool, b, used=b - left)


def ray_tune_available() -> bool:
    try:
        from ray.tune.schedulers import ASHAScheduler  # noqa: F401
    except Exception:  # ray missing, or ray.tune missing pyarrow
        return False
    return True


__all__ = ["optuna_allocation", "ray_asha_allocation", "ray_tune_available"]
