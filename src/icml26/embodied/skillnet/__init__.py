"""SkillNet: hierarchical skill modelling routing a mixture of experts [B05].

"SkillNet: Hierarchical Skill Modeling for Compositional Generalization in Vision-Language Action Models"
(ICML 2026; official code: VIPL-VSU/SkillNet, JAX). The motion-code hierarchy, the skill-conditioned MoE layer,
a behaviour-cloned action-chunk policy with its peers, and a vectorised 2-D verb-object tabletop (README.md).
"""

from .hierarchy import (
    RELEASED_CENTERS,
    RELEASED_WEIGHTS,
    Skill,
    SkillHierarchy,
    assign_motion_cluster,
    motion_code_distance,
    validate_motion_code,
)
from .moe import GatedFFN, SkillConditionedMoE, routing_similarity
from .policy import ARMS, SkillNetPolicy, similarity_loss, train_bc
from .tabletop import OBJECTS, VERBS, TableTop, rollout_expert

__all__ = [
    "RELEASED_CENTERS", "RELEASED_WEIGHTS", "Skill", "SkillHierarchy", "assign_motion_cluster",
    "motion_code_distance", "validate_motion_code", "GatedFFN", "SkillConditionedMoE", "routing_similarity",
    "ARMS", "SkillNetPolicy", "similarity_loss", "train_bc", "OBJECTS", "VERBS", "TableTop", "rollout_expert",
]
