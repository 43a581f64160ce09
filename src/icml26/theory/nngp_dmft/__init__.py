"""[A02] DMFT of NNGP / random-feature regression dynamics on power-law spectra: mode-wise theory of the
generalisation error under gradient flow (with weight decay), checked against exact simulation."""

from .simulate import draw_problem, ridge_weights, simulate_generalization_curve, simulate_run
from .theory import (PowerLawTask, dmft_generalization_curve, gradient_flow_infinite_data, optimal_stopping_time,
                     renormalized_ridge, ridge_equivalent)

__all__ = ["PowerLawTask", "renormalized_ridge", "ridge_equivalent", "dmft_generalization_curve",
           "gradient_flow_infinite_data", "optimal_stopping_time", "draw_problem", "simulate_run",
           "simulate_generalization_curve", "ridge_weights"]
