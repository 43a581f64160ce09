"""[A17] UniFast-HGR / OptFast-HGR: a scalable HGR maximal-correlation surrogate in local-batch Gram space.

Scores (maximise) and losses (minimise, ``nn.Module``), with the baselines Soft-HGR, whitened HGR / DCCA and
InfoNCE, and a cost-vs-K benchmark helper.
"""

from .benchmark import benchmark_loss_scaling, loglog_slope
from .losses import (
    DCCALoss,
    InfoNCELoss,
    OptFastHGRLoss,
    SoftHGRLoss,
    UniFastHGRLoss,
    canonical_correlations,
    cosine_features,
    info_nce_loss,
    optfast_hgr,
    rademacher_probes,
    soft_hgr,
    unifast_hgr,
    whitened_hgr,
)

__all__ = [
    "unifast_hgr", "optfast_hgr", "soft_hgr", "whitened_hgr", "canonical_correlations", "info_nce_loss",
    "cosine_features", "rademacher_probes",
    "UniFastHGRLoss", "OptFastHGRLoss", "SoftHGRLoss", "DCCALoss", "InfoNCELoss",
    "benchmark_loss_scaling", "loglog_slope",
]
