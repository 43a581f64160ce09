"""Extended score (MAD: manifold attracted diffusion) for diffusion models trained on noisy data [B13].

Elbrächter, Alberti, Santacesaria, "MAD: Manifold Attracted Diffusion" (ICML 2026, arXiv 2509.24710).
H_gamma p = (1 + gamma) S(p * g_gamma) + gamma d/dgamma S(p * g_gamma), computed from a standard score model;
a sampler that uses it at inference to remove small off-manifold (noise) variations while keeping large ones.
"""

from .analytic import CircleProduct, GaussianMixture
from .extended import (
    call_score,
    clean_score_fn,
    extended_score,
    score_and_dgamma,
    tweedie_denoiser,
)
from .model import ScoreMLP, train_dsm
from .sampler import ManifoldAttractedSampler

__all__ = [
    "extended_score", "score_and_dgamma", "tweedie_denoiser", "clean_score_fn", "call_score", "GaussianMixture",
    "CircleProduct", "ScoreMLP", "train_dsm", "ManifoldAttractedSampler",
]
