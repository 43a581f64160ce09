"""SkillNet: hierarchical skill modelling routing a mixture of experts [B05].

"SkillNet: Hierarchical Skill Modeling for Compositional Generalization in Vision-Language Action Models"
(ICML 2026; official code: VIPL-VSU/SkillNet, JAX). Implemented so far: the motion-code hierarchy and the
skill-conditioned MoE layer; the policy and the reproduction are not written yet (see README.md).
"""

from .hierarchy import (
    RELEASED_CENTERS, RELEASED_WEIGHTS, Skill, SkillHierarchy, assign_motion_cluster, motion_code_distance,
    validate_motion_code,
)
from .moe import GatedFFN, SkillConditionedMoE, routing_similarity

__all__ = [
    "RELEASED_CENTERS", "RELEASED_WEIGHTS", "Skill", "SkillHierarchy", "assign_motion_cluster",
    "motion_code_distance", "validate_motion_code", "GatedFFN", "SkillConditionedMoE", "routing_similarity",
]
