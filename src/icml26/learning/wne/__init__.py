"""[B16] WNE — Wrapped Normalization Equivariance (Saied & Fleuret, ICML 2026, arXiv 2605.08193).

A parameter-free wrapper that makes any image-to-image backbone normalization equivariant,
f(a*y + b) = a*f(y) + b, by normalizing the input and denormalizing the output; plus the architectural
NE baseline blocks, DnCNN in ordinary / bias-free / NE form, a tiny denoising transformer, and diagnostics.
"""

from .blocks import AffineConv2d, AffineResidual, SortPool
from .models import DnCNN, TinyDenoisingTransformer, make_dncnn
from .wrappers import NormEquivariantWrapper, ScaleEquivariantWrapper, ne_defect, tiled_forward, time_forward

__all__ = [
    "NormEquivariantWrapper", "ScaleEquivariantWrapper", "ne_defect", "tiled_forward", "time_forward",
    "AffineConv2d", "SortPool", "AffineResidual", "DnCNN", "make_dncnn", "TinyDenoisingTransformer",
]
