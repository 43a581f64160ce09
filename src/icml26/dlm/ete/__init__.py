"""[B01] Explore-Then-Exploit (ETE) decoding for diffusion LMs and the bits-to-rounds bound (arXiv 2511.21103)."""

from .ete import (
    ExploreThenExploitDecoder,
    bits_to_rounds_report,
    check_ete_invariants,
    replay_surprisal,
    spaced_top_k,
)

__all__ = ["ExploreThenExploitDecoder", "bits_to_rounds_report", "check_ete_invariants", "replay_surprisal",
           "spaced_top_k"]
