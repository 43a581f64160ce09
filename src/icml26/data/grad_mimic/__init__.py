"""[A11] Grad-Mimic: mimic-score online re-weighting and offline data filters (arXiv 2501.06708)."""

from .mimic import (
    GradMimic,
    MimicScoreLog,
    gradmimic_weights,
    last_linear_mimic_scores,
    mimic_scores,
    per_sample_grads,
)

__all__ = ["GradMimic", "MimicScoreLog", "gradmimic_weights", "last_linear_mimic_scores", "mimic_scores",
           "per_sample_grads"]
