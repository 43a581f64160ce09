"""[A05] Information-open vs information-closed synthetic-data loops: a generation-training loop with filters
(binary verifier, graded rubric, imitation, majority vote), exact task-information measures, and the Gaussian,
categorical and modular-addition testbeds."""

from .information import (closed_loop_gaussian_information, discrete_mutual_information, entropy,
                          gaussian_information_estimate, gaussian_kl, self_consuming_categorical,
                          self_consuming_gaussian)
from .loop import ImitationTarget, MajorityVoteFilter, RubricWeighting, SyntheticDataLoop, VerifierFilter
from .tasks import GaussianMeanTask, TabularPolicy, circular_distance, modular_addition, task_information

__all__ = [
    "GaussianMeanTask", "ImitationTarget", "MajorityVoteFilter", "RubricWeighting", "SyntheticDataLoop",
    "TabularPolicy", "VerifierFilter", "circular_distance", "task_information", "closed_loop_gaussian_information",
    "discrete_mutual_information", "entropy", "gaussian_information_estimate", "gaussian_kl", "modular_addition",
    "self_consuming_categorical", "self_consuming_gaussian",
]
