"""[A18] CAMEL: a capacity-aware data-mixture law, a loss-to-benchmark law and compute allocation across model
sizes (Li, Gu, Zhang; arXiv 2603.08022).

    >>> from icml26.scaling.camel import CAMELLaw
    >>> law = CAMELLaw().fit(N, R, L, domain_weights=w)      # sizes (n,), mixtures (n, J), losses (n, D)
    >>> r_star = law.optimal_mixture(N_target=10 * N.max())
"""

from .allocation import STRATEGIES, allocate_compute
from .baselines import DataMixingLaw, RegMixBaseline
from .benchmark import LossToBenchmark
from .law import CAMELLaw, check_mixtures, minimize_on_simplex
from .synthetic import SKEWED_WEIGHTS, TRUTHS, PowerMixtureLaw, SyntheticMixtureLaw

__all__ = ["CAMELLaw", "DataMixingLaw", "RegMixBaseline", "LossToBenchmark", "allocate_compute", "STRATEGIES",
           "SyntheticMixtureLaw", "PowerMixtureLaw", "TRUTHS", "SKEWED_WEIGHTS", "check_mixtures", "minimize_on_simplex"]
