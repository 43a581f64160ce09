"""[A08] Distributionally robust assortment optimization under the contextual MNL model (TV / KL / chi-square).

Zhang, Han & Zhou, "Efficient Distributionally Robust Assortment Optimization in MNL Bandits" (ICML 2026).
"""

from .drao import (
    DRAOResult,
    DRAssortment,
    brute_force_robust,
    policy_robust_value,
    solve_drao,
    transformed_revenues,
)
from .duals import (
    DIVERGENCES,
    chi2_robust_value,
    divergence_value,
    kl_robust_value,
    primal_robust_value,
    robust_value,
    tv_robust_value,
    worst_case_distribution,
)
from .mnl import ContextualMNL, choice_probabilities, mnl_assortment, mnl_revenue

__all__ = [
    "DRAssortment", "solve_drao", "DRAOResult", "brute_force_robust", "policy_robust_value",
    "transformed_revenues", "robust_value", "tv_robust_value", "kl_robust_value", "chi2_robust_value",
    "worst_case_distribution", "primal_robust_value", "divergence_value", "DIVERGENCES", "ContextualMNL", "mnl_assortment",
    "mnl_revenue", "choice_probabilities",
]
