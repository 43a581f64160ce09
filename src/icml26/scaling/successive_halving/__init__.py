"""[A16] Successive halving with parametric / non-parametric learning-curve surrogates for scaling-law compute
allocation (Schram, Hiller, Beck, Cohn; arXiv 2605.17234).

    >>> from icml26.scaling.successive_halving import SuccessiveHalving, TablePool, synthetic_curve_pool
    >>> pool = TablePool(synthetic_curve_pool(seed=0))
    >>> res = SuccessiveHalving(criterion="gp").run(pool, budget=0.2 * pool.exhaustive_compute)
"""

from icml26.testbeds.learning_curves import CurveTable, SyntheticCurveConfig

from .allocation import ASHA, CRITERIA, RUNGS, AllocationResult, RandomSearch, SuccessiveHalving, UniformAllocation
from .peers import optuna_allocation
from .pool import LearningCurvePool, TablePool, synthetic_curve_pool
from .surrogates import (
                         GPCurveSurrogate,
                         PowerLawCurveSurrogate,
                         PowerLawFit,
                         ScalingLawFit,
                         fit_power_law,
                         fit_scaling_law,
                         loss_compute_frontier,
)

__all__ = ["CurveTable", "SyntheticCurveConfig", "synthetic_curve_pool", "LearningCurvePool", "TablePool",
           "AllocationResult", "UniformAllocation", "RandomSearch", "SuccessiveHalving", "ASHA", "CRITERIA", "RUNGS",
           "optuna_allocation",
           "PowerLawFit", "fit_power_law", "PowerLawCurveSurrogate", "GPCurveSurrogate", "ScalingLawFit",
           "fit_scaling_law", "loss_compute_frontier"]
