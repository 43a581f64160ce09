"""[A14] Skip-It: redundancy measures for layer skipping in vision-language models, skip plans applied with
forward hooks, FastV / ShortGPT baselines, and a tiny digit-VQA vision-language testbed.

    >>> trace = collect_trace(model, inputs, vision_mask)          # h_0..h_L and attention, hooks removed after
    >>> report = RedundancyReport.from_trace(trace, grid=(4, 4), y=labels)
    >>> with apply_skip_plan(model, report.recommend(), vision_mask):
    ...     logits = model(**inputs)
"""

from .measures import (
                       RedundancyReport,
                       adjacent_token_redundancy,
                       block_influence,
                       cross_modal_attention,
                       layer_redundancy,
                       per_example_redundancy,
                       spearman,
                       uniform_vision_share,
                       unique_information_probe,
)
from .skip import BlockCost, SkipPlan, apply_skip_plan, fastv_pruning, plan_flops
from .testbed import VLM_6L, VLM_8L, VLM_QUICK, DigitVQA, TinyVLM, TinyVLMConfig, digit_vqa, load_tiny_vlm
from .trace import HiddenTrace, collect_trace, find_blocks

__all__ = ["HiddenTrace", "collect_trace", "find_blocks", "layer_redundancy", "per_example_redundancy",
           "block_influence", "adjacent_token_redundancy", "cross_modal_attention", "unique_information_probe",
           "RedundancyReport", "spearman", "uniform_vision_share", "SkipPlan", "apply_skip_plan", "fastv_pruning", "BlockCost", "plan_flops",
           "TinyVLM", "TinyVLMConfig", "VLM_QUICK", "VLM_6L", "VLM_8L", "DigitVQA", "digit_vqa", "load_tiny_vlm"]
