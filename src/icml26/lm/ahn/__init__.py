"""[A07] Artificial Hippocampus Networks: a sliding-window KV cache (lossless short-term memory) plus a learnable
RNN (Gated DeltaNet, DeltaNet or Mamba2-style) that compresses out-of-window tokens into a fixed-size state.

"Artificial Hippocampus Networks for Efficient Long-Context Modeling" (Fang, Yu, Zhong, Ye, Xiong, Wei;
ByteDance Seed; arXiv 2510.07318).
"""

from .attention import attended_keys, attention_flops, decoder_flops, kv_cache_bytes, sliding_window_mask
from .distill import DistillResult, self_distill_ahn
from .memory import (
                     AHNMemory,
                     DeltaNetMemory,
                     GatedDeltaNetMemory,
                     Mamba2Memory,
                     chunk_memory_rule,
                     memory_read,
                     memory_step,
)
from .model import AHNCache, AHNConfig, AHNModel, AHNOutput, augment_with_ahn
from .testbed import COPY_2L, COPY_4L, CopyLMConfig, load_copy_lm, plant_copies

__all__ = [
    "sliding_window_mask", "attended_keys", "attention_flops", "decoder_flops", "kv_cache_bytes",
    "AHNMemory", "GatedDeltaNetMemory", "DeltaNetMemory", "Mamba2Memory", "chunk_memory_rule", "memory_step",
    "memory_read",
    "AHNConfig", "AHNModel", "AHNOutput", "AHNCache", "augment_with_ahn",
    "self_distill_ahn", "DistillResult",
    "CopyLMConfig", "COPY_4L", "COPY_2L", "load_copy_lm", "plant_copies",
]
