"""QuantumBoost, classically [B10]: Barak-Hardt-Kale smooth boosting with lazy approximate KL projections.

Paper: "QuantumBoost: A lazy, yet fast, quantum algorithm for learning with weak hypotheses", Abbas, Chen,
Nguyen, de Wolf (arXiv 2510.05089). The quantum subroutines are replaced by classical sampling; their cost
appears only in an analytic query-count model (``QueryCounter``, ``quantum_model_*``).
"""

from .boost import PROJECTIONS, BoostingTrace, LazyProjectionBoost, bhk_rounds, boost
from .projection import ApproxProjection, approx_kl_project_dense, generalized_kl, kl_project_dense
from .queries import QueryCounter, classical_estimate_queries, quantum_estimate_queries, quantum_sample_queries
from .stump import DecisionStump

__all__ = [
    "LazyProjectionBoost", "boost", "BoostingTrace", "bhk_rounds", "PROJECTIONS",
    "kl_project_dense", "approx_kl_project_dense", "ApproxProjection", "generalized_kl",
    "QueryCounter", "classical_estimate_queries", "quantum_estimate_queries", "quantum_sample_queries",
    "DecisionStump",
]
