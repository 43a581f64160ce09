"""[A01] (1D) ordered tokens enable efficient test-time search: ordered vs grid tokenizers with prefix readouts,
AR / uniform priors, verifiers, and best-of-N / beam / lookahead search under equal verifier-call budgets."""

from .priors import ARPrior, UniformPrior, train_ar_prior
from .search import SearchResult, beam_search, best_of_n, lookahead_search, planned_verifier_calls
from .tokenizers import GridVQTokenizer, NestedDropoutTokenizer, OrderedPCATokenizer
from .verifiers import HeldOutEvaluator, SklearnClassifierVerifier, fit_logistic_verifier, fit_mlp_verifier

__all__ = [
    "ARPrior", "GridVQTokenizer", "HeldOutEvaluator", "NestedDropoutTokenizer", "OrderedPCATokenizer",
    "SearchResult", "SklearnClassifierVerifier", "UniformPrior", "beam_search", "best_of_n",
    "fit_logistic_verifier", "fit_mlp_verifier", "lookahead_search", "planned_verifier_calls", "train_ar_prior",
]
