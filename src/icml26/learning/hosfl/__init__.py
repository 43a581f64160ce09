"""[A12] HO-SFL: hybrid-order split federated learning, zeroth-order clients and first-order server (arXiv 2603.14773)."""

from .hosfl import (
    FOSFL,
    HOSFL,
    ZOFL,
    FrozenClientSFL,
    PeakMemoryMeter,
    RoundStats,
    SavedActivationCounter,
    SplitModel,
    count_saved_activation_bytes,
    directional_derivatives,
    peak_memory_bytes,
    perturbation_seed,
    sample_directions,
    zo_combine,
    zo_combine_seeded,
    zo_directional_scalars,
)

__all__ = ["FOSFL", "HOSFL", "ZOFL", "FrozenClientSFL", "RoundStats", "SavedActivationCounter", "PeakMemoryMeter",
           "SplitModel", "count_saved_activation_bytes", "peak_memory_bytes", "directional_derivatives",
           "perturbation_seed", "sample_directions", "zo_combine", "zo_combine_seeded", "zo_directional_scalars"]
