"""[A02] DMFT of NNGP / random-feature regression dynamics on power-law spectra: mode-wise theory of the
generalisation error under gradient flow (with weight decay), Langevin dynamics and the Bayesian GP limit, checked against exact simulation."""

from .simulate import (
                       draw_problem,
                       gp_posterior_error,
                       ridge_weights,
                       sample_langevin_error,
                       simulate_generalization_curve,
                       simulate_run,
)
from .theory import (
                       PowerLawTask,
                       bayes_limit,
                       dmft_generalization_curve,
                       gradient_flow_infinite_data,
                       optimal_stopping_time,
                       renormalized_ridge,
                       ridge_equivalent,
)

__all__ = ["PowerLawTask", "renormalized_ridge", "ridge_equivalent", "dmft_generalization_curve",
           "gradient_flow_infinite_data", "optimal_stopping_time", "draw_problem", "simulate_run",
           "simulate_generalization_curve", "ridge_weights", "bayes_limit", "sample_langevin_error",
           "gp_posterior_error"]
