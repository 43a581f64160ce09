"""[B12] OCMB: ordering-constrained Markov-blanket causal discovery.

"Global Directional Priors with Local Statistical Validation for Scalable Causal Discovery" (ICML 2026).
An ordering backbone proposes a topological order and parent scores; a constrained IAMB then validates each
node's Markov blanket with CI tests only inside a small ordering-constrained candidate set, so conditioning
sets stay bounded even around hubs.

The peers (lingam, causal-learn, pgmpy) are the optional ``causal`` extra and are imported only by the
functions that need them.
"""

from .baselines import ordered_regression
from .ci import CITester, DSeparation, FisherZ, KnnCMI, fisher_z_pvalue, knn_cmi
from .ocmb import OCMB, candidate_sets, constrained_iamb, prune_spouses
from .ordering import eqvar_order, lingam_order, ols_parent_scores, oracle_order, random_order, stein_order
from .simulate import (
                       GAUSSIAN_NETWORKS,
                       BundledNetwork,
                       graph_metrics,
                       load_bundled_bn,
                       scale_free_dag,
                       simulate_sem,
                       topological_order,
                       varsortability,
)

__all__ = [
    "OCMB", "candidate_sets", "constrained_iamb", "prune_spouses", "ordered_regression",
    "FisherZ", "KnnCMI", "DSeparation", "CITester", "fisher_z_pvalue", "knn_cmi",
    "eqvar_order", "lingam_order", "stein_order", "oracle_order", "random_order", "ols_parent_scores",
    "scale_free_dag", "simulate_sem", "load_bundled_bn", "BundledNetwork", "GAUSSIAN_NETWORKS",
    "graph_metrics", "topological_order", "varsortability",
]
