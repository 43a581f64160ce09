"""[A09] Mining tensor/neuron-level sparsity in Mixture-of-Experts: complete expert partition for post-training,
(dual-)threshold token-expert dropping with partial partition and reconstruction for inference.

    >>> from icml26.lm.moe_sparsity import SparseMoE, ThresholdDrop, partition_experts
    >>> moe = SparseMoE(128, 256, num_experts=8, top_k=2)
    >>> moe.drop_policy = ThresholdDrop(0.2)          # drop (token, expert) pairs with routing weight < 0.2
"""

from .calibrate import Calibration, calibrate_drop, calibrate_layers, capture_moe_inputs, moe_inputs
from .moe import SUPPORTED_HF_BLOCKS, SparseMoE, SwiGLU, convert_hf_moe, model_stats, moe_layers, set_drop_policy
from .partition import neuron_importance, partition_experts, permute_neurons, reconstruct_experts
from .policies import (
    CapacityDrop,
    DropPolicy,
    DualThresholdDrop,
    RandomDrop,
    RatioSkip,
    ThresholdDrop,
    TopKPartial,
    TopKReduce,
)
from .posttrain import post_train
from .testbed import MOE_2L, MOE_4L, OLMOE_2L, OLMOE_4L, MoELMConfig, OlmoeLMConfig, load_moe_lm

__all__ = ["SparseMoE", "SwiGLU", "convert_hf_moe", "moe_layers", "set_drop_policy", "model_stats",
           "SUPPORTED_HF_BLOCKS", "partition_experts", "permute_neurons", "neuron_importance", "reconstruct_experts",
           "DropPolicy", "ThresholdDrop", "DualThresholdDrop", "RandomDrop", "TopKReduce", "TopKPartial", "RatioSkip",
           "CapacityDrop",
           "calibrate_drop", "calibrate_layers", "Calibration", "capture_moe_inputs", "moe_inputs", "post_train", "MoELMConfig",
           "OlmoeLMConfig", "MOE_4L", "MOE_2L", "OLMOE_4L", "OLMOE_2L", "load_moe_lm"]
