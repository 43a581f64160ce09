"""SE-kernel GP bandits on the hypersphere: spectrum, maximum information gain, regret rates, GP-UCB [B09].

Iwazaki, "Tighter Regret Lower Bound for Gaussian Process Bandits with Squared Exponential Kernel in
Hypersphere" (ICML 2026, arXiv 2602.17940). The paper's results are theorems (an algorithm-independent regret
lower bound and an O((ln T)^{d+1} (ln ln T)^{-d}) bound on the maximum information gain); this package makes
their checkable parts computable and ships a fast incremental GP-UCB.
"""

from .bandit import (
    GPUCB,
    MaximumVarianceReduction,
    RKHSFunction,
    UniformRandom,
    beta_srinivas,
    rkhs_test_function,
    run_bandit,
)
from .gp import IncrementalGP, refit_posterior
from .information_gain import (
    greedy_information_gain,
    information_gain,
    mig_rate_new,
    mig_rate_old,
    mig_upper_bound,
    regret_lower_rate,
    simple_regret_lower_steps,
)
from .spectrum import (
    check_on_sphere,
    funk_hecke_eigenvalues,
    harmonic_multiplicity,
    poisson_kernel,
    poisson_sphere_eigenvalues,
    sample_sphere,
    se_kernel,
    se_sphere_eigenvalues,
)

__all__ = [
    "harmonic_multiplicity", "se_sphere_eigenvalues", "funk_hecke_eigenvalues", "se_kernel", "sample_sphere",
    "check_on_sphere", "mig_upper_bound", "greedy_information_gain", "information_gain", "mig_rate_new",
    "mig_rate_old", "regret_lower_rate", "simple_regret_lower_steps", "IncrementalGP", "refit_posterior", "GPUCB",
    "MaximumVarianceReduction", "UniformRandom", "RKHSFunction", "rkhs_test_function", "run_bandit",
    "beta_srinivas", "poisson_kernel", "poisson_sphere_eigenvalues",
]
