"""Spectral position and spectral reach of the empirical NTK [A13].

Nikolaou, Scheunemann, Krippendorf, Tovey, Holm, "Spectral Reach: Understanding Neural Scaling as Progress
into the Spectral Tail" (arXiv 2605.31244). SP = (r^T K r / |r|^2) / (Tr K / n): which eNTK eigenvalues the
current residual r (and hence the loss reduction) sits on; computed matrix-free (one VJP + per-sample
gradients), with an exact dense decomposition for small models and a training-loop tracker.
"""

from icml26.testbeds.ntk import NTKOperator, empirical_ntk, ntk_topk, ntk_trace

from .models import TwoLayerMLP, teacher_student_data
from .spectral import (
    SpectralDecomposition,
    SpectralPositionTracker,
    residual,
    spectral_decomposition,
    spectral_position,
)

__all__ = [
    "spectral_position", "spectral_decomposition", "SpectralDecomposition", "SpectralPositionTracker", "residual",
    "empirical_ntk", "NTKOperator", "ntk_topk", "ntk_trace", "TwoLayerMLP", "teacher_student_data",
]
