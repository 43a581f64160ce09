"""SRK-LMC: Hessian-free stochastic Runge-Kutta Langevin Monte Carlo, strong order 1.5 with 2 gradients [A03].

Yang & Wang, "Accelerating Langevin Monte Carlo via Efficient Stochastic Runge-Kutta Methods beyond
Log-Concavity" (ICML 2026, arXiv 2605.07939). Baselines: SRK-LD of Li et al. (2019) (3 gradients) and ULA (1).
"""

from .metrics import w2_1d, w2_gaussian
from .samplers import (
    METHODS,
    SRK_LD,
    SRK_LMC,
    TABLEAUS,
    ULA,
    GradCounter,
    Tableau,
    aggregate_increments,
    brownian_increments,
    rk_step,
    sample,
    srk_ld_step,
    srk_lmc_step,
    step_fn,
    ula_step,
)
from .targets import Gaussian, SymmetricMixture

__all__ = [
    "METHODS", "TABLEAUS", "Tableau", "ULA", "SRK_LMC", "SRK_LD", "GradCounter", "brownian_increments",
    "aggregate_increments", "rk_step", "ula_step", "srk_lmc_step", "srk_ld_step", "step_fn", "sample",
    "Gaussian", "SymmetricMixture", "w2_gaussian", "w2_1d",
]
