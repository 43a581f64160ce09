"""[A10] HALD: Hard Label for Alleviating Local Semantic Drift in soft-label training with few stored crops.

    >>> from icml26.learning.hald import StoredSoftLabels, RandomResizedCrop, HALDTrainer, hald_schedule
"""

from .labels import RandomResizedCrop, SoftLabelPool, StoredSoftLabels, apply_crops, lvsd_rate
from .losses import cutmix, kd_loss, matched_smoothing, smooth_one_hot, soft_cross_entropy
from .schedule import SETTINGS, hald_schedule
from .trainer import HALDTrainer

__all__ = [
    "StoredSoftLabels", "SoftLabelPool", "RandomResizedCrop", "apply_crops", "lvsd_rate", "kd_loss",
    "smooth_one_hot", "matched_smoothing", "cutmix", "soft_cross_entropy", "hald_schedule", "SETTINGS", "HALDTrainer",
]
