"""[A06] Dropout at the edge of chaos: mean-field maps with dropout, universality classes, dropout schedules."""

from .meanfield import (
                        ACTIVATIONS,
                        RELU_A,
                        Activation,
                        c_fixed_point,
                        c_map,
                        c_trajectory,
                        chi_c,
                        critical_sigma_w,
                        depth_scale,
                        fit_exponents,
                        get_activation,
                        q_fixed_point,
                        q_map,
                        scaling_collapse,
)
from .mixer import make_mixer
from .schedules import DropoutProfile, DropoutTimeScheduler, ScheduledDropout, dropout_layers, init_critical, make_mlp
from .simulate import fit_depth_scale, fit_window, simulate_correlations

__all__ = ["ACTIVATIONS", "RELU_A", "Activation", "c_fixed_point", "c_map", "c_trajectory", "chi_c",
           "critical_sigma_w", "depth_scale", "fit_exponents", "get_activation", "q_fixed_point", "q_map",
           "scaling_collapse", "DropoutProfile", "DropoutTimeScheduler", "ScheduledDropout", "dropout_layers",
           "init_critical", "make_mlp", "make_mixer", "fit_depth_scale", "fit_window", "simulate_correlations"]
