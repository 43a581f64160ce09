"""[A15] Swordsman: entropy-driven adaptive block partition for efficient diffusion LMs (arXiv 2602.04399)."""

from .swordsman import SwordsmanDecoder, dynamic_threshold, entropy_shift_boundary, token_entropy

__all__ = ["SwordsmanDecoder", "entropy_shift_boundary", "dynamic_threshold", "token_entropy"]
