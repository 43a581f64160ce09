"""[A05] Information-open vs information-closed synthetic-data loops: a generation-training loop with filters
(binary verifier, graded rubric, imitation, majority vote), exact task-information measures, the Gaussian,
categorical, Gaussian-mixture (weighted EM), modular-addition, digits self-training and toy-LM syntax-checker
testbeds, and the simplicity-bias dataset."""

from .information import (
                          closed_loop_gaussian_information,
                          discrete_mutual_information,
                          entropy,
                          gaussian_information_estimate,
                          gaussian_kl,
                          self_consuming_categorical,
                          self_consuming_gaussian,
)
from .lm_syntax import (
                          FormRubric,
                          ImitateReference,
                          MatchedRandomFilter,
                          finetune_on_lines,
                          form_entropy,
                          line_is_valid,
                          line_score,
                          real_lines,
                          reference_lines,
                          sample_lines,
                          statement_kind,
                          syntax_loop,
)
from .loop import (
                          AcceptedRubric,
                          ImitationTarget,
                          MajorityVoteFilter,
                          RubricWeighting,
                          SyntheticDataLoop,
                          VerifierFilter,
)
from .mixture import (
                          MixtureGrid,
                          MixtureModel,
                          accepted_posterior_rubric,
                          bayes_verifier,
                          fit_mixture,
                          initial_fit,
                          interleaved_task,
                          posterior_rubric,
)
from .simplicity import fit_mlp, simplicity_bias_dataset, which_component
from .tasks import (
                          DigitsSelfTraining,
                          GaussianMeanTask,
                          TabularPolicy,
                          circular_distance,
                          modular_addition,
                          task_information,
)

__all__ = [
    "AcceptedRubric", "FormRubric", "MatchedRandomFilter", "real_lines", "accepted_posterior_rubric",
    "DigitsSelfTraining", "GaussianMeanTask", "ImitateReference", "ImitationTarget", "MajorityVoteFilter", "MixtureGrid", "MixtureModel",
    "RubricWeighting", "bayes_verifier", "finetune_on_lines", "form_entropy", "line_is_valid", "line_score",
    "reference_lines", "sample_lines", "statement_kind", "syntax_loop", "fit_mixture", "initial_fit", "interleaved_task", "posterior_rubric",
    "SyntheticDataLoop", "TabularPolicy", "VerifierFilter", "circular_distance", "closed_loop_gaussian_information",
    "discrete_mutual_information", "entropy", "fit_mlp", "gaussian_information_estimate", "gaussian_kl",
    "modular_addition", "self_consuming_categorical", "self_consuming_gaussian", "simplicity_bias_dataset",
    "task_information", "which_component",
]
