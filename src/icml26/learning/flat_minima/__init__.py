"""[B19] Sharpness-aware pretraining mitigates catastrophic forgetting: SAM, large-LR and short-anneal WSD
schedules, forgetting after fine-tuning and after int4 quantization, Hessian sharpness.

    >>> from icml26.learning.flat_minima import SAM, wsd_schedule, quantize_rtn, hessian_top_eig, forgetting_report
"""

from .analysis import (
                       ForgettingReport,
                       evaluate_loss,
                       forgetting_report,
                       hessian_top_eig,
                       quantize_rtn,
                       rtn_quantize_tensor,
)
from .sam import SAM
from .schedules import large_lr_schedule, short_anneal_schedule, wsd_multiplier, wsd_schedule

__all__ = [
    "SAM", "wsd_schedule", "wsd_multiplier", "large_lr_schedule", "short_anneal_schedule", "quantize_rtn",
    "rtn_quantize_tensor", "hessian_top_eig", "evaluate_loss", "forgetting_report", "ForgettingReport",
]
