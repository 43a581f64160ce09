"""[B07] HeRL: hindsight-experience-guided reinforcement learning with rubric rewards (arXiv 2603.20046).

GRPO whose failing groups are revised by the same policy under guidance prompts built from the satisfied and unmet
rubrics; the best revision replaces a random slot of its group and is trained with the shaped off-policy loss
-A rho/(rho+gamma); revised candidates get an improvement bonus. Shared GRPO core: ``icml26.testbeds.grpo``.
"""

from .gradient import batch_gradients, direction_study
from .herl import (
    DEFAULT_TEMPLATE,
    Augmented,
    HeRLConfig,
    HeRLTrainer,
    assemble,
    augment_group,
    build_guidance_prompt,
    entropy_bonus,
    herl_policy_loss,
    select_hindsight,
    shaping,
    test_time_refine,
    text_guide,
)
from .rubrics import (
    AllOf,
    Contains,
    Excludes,
    LengthBetween,
    ListVerifier,
    Rubric,
    RubricList,
    RubricResult,
    RubricVerifier,
    TokenAt,
)
from .task import SFTConfig, TaskConfig, load_sft_policy, make_guide, make_prompts, make_rubrics

__all__ = [
    "AllOf", "Augmented", "Contains", "DEFAULT_TEMPLATE", "Excludes", "HeRLConfig", "HeRLTrainer", "LengthBetween",
    "ListVerifier", "Rubric", "RubricList", "RubricResult", "RubricVerifier", "SFTConfig", "TaskConfig", "TokenAt",
    "assemble", "augment_group", "batch_gradients", "build_guidance_prompt", "direction_study", "entropy_bonus",
    "herl_policy_loss", "load_sft_policy", "make_guide", "make_prompts", "make_rubrics", "select_hindsight",
    "shaping", "test_time_refine", "text_guide",
]
