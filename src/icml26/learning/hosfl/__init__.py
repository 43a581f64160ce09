"""[A12] HO-SFL: hybrid-order split federated learning, zeroth-order clients and first-order server (arXiv 2603.14773)."""

from .hosfl import (
    FOSFL,
    HOSFL,
    ZOFL,
    FrozenClientSFL,
    RoundStats,
    SavedActivationCounter,
    SplitModel,
    count_saved_activation_bytes,
    directional_derivatives,
    perturbation_seed,
    sample_directions,
    zo_combine,
    zo_directional_scalars,
)

__all__ = ["FOSFL", "HOSFL", "ZOFL", "FrozenClientSFL", "RoundStats", "SavedActivationCounter", "SplitModel",
           "count_saved_activation_bytes", "directional_derivatives", "perturbation_seed", "sample_directions",
           "zo_combine", "zo_directional_scalars"]
