"""[A19] Geometric early exit: leave the layer stack when the step size vanishes and the direction stabilises.

"Detecting the Semantic Fixed Point: A Geometric Framework for Efficient Inference" (Gu, Qiao, Luo; ICML 2026).
"""

from .adapters import GPT2Adapter, LlamaAdapter, get_adapter
from .calibrate import Calibration, ExitEvaluation, calibrate_exit, calibrate_on_trajectory, default_grid, evaluate_exit
from .criteria import (
                       ConfidenceExitCriterion,
                       EntropyExitCriterion,
                       ExitCriterion,
                       ExitState,
                       GeometricExitCriterion,
                       StaticExit,
                       first_exit,
                       oracle_exit_layers,
)
from .geometry import Trajectory, collect_trajectory, residual_stream, trajectory_geometry, two_phase_profile
from .wrapper import EarlyExitGeneration, EarlyExitOutput, GeometricEarlyExitLM

__all__ = [
    "trajectory_geometry", "residual_stream", "collect_trajectory", "two_phase_profile", "Trajectory",
    "ExitCriterion", "GeometricExitCriterion", "ConfidenceExitCriterion", "EntropyExitCriterion", "StaticExit",
    "ExitState", "first_exit", "oracle_exit_layers",
    "GeometricEarlyExitLM", "EarlyExitOutput", "EarlyExitGeneration",
    "calibrate_exit", "calibrate_on_trajectory", "default_grid", "evaluate_exit", "Calibration", "ExitEvaluation",
    "get_adapter", "LlamaAdapter", "GPT2Adapter",
]
