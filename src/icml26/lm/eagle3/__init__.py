"""[B04] SpecForge / EAGLE-3: a draft head on fused target features, trained with training-time test, and
greedy speculative decoding (chain or static tree) verified against the target with the KV cache.

"SpecForge: A Flexible and Efficient Open-Source Training Framework for Speculative Decoding" (Li, Wang, Zhu
et al., 2026); the method it trains is EAGLE-3 (Li et al., arXiv 2503.01840).
"""

from .decoding import DEFAULT_TREE, SpecOutput, SpecStats, StaticTree, chain_tree, eagle3_generate, greedy_generate
from .draft import DraftCache, Eagle3Config, Eagle3Draft, build_draft_vocab, default_aux_layers, token_counts
from .ttt import Eagle3Trainer, capture_aux_hidden_states, eagle3_ttt_loss, regenerate_responses

__all__ = [
    "Eagle3Draft", "Eagle3Config", "DraftCache", "default_aux_layers", "build_draft_vocab", "token_counts",
    "capture_aux_hidden_states", "regenerate_responses", "eagle3_ttt_loss", "Eagle3Trainer",
    "eagle3_generate", "greedy_generate", "SpecStats", "SpecOutput", "StaticTree", "chain_tree", "DEFAULT_TREE",
]
