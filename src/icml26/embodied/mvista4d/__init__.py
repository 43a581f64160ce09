"""MVISTA-4D: view-consistent multi-view RGBD world model with test-time action inference [B15].

Wang et al., "MVISTA-4D: View-Consistent 4D World Model with Test-Time Action Inference for Robotic
Manipulation" (ICML 2026, arXiv 2602.09878). Toy-scale: a ray-cast tabletop simulator, a small multi-view RGBD
generator with a geometric warp prior and RGB<->depth fusion, a trajectory VAE, test-time latent optimisation
through an action-conditioned world model, and a residual inverse-dynamics model.
"""

from .actions import (
    ActionConditionedWorldModel,
    InverseDynamics,
    ResidualIDM,
    TrajectoryVAE,
    WindowInverseDynamics,
    infer_actions,
)
from .generator import MultiViewRGBDGenerator, camera_embedding, generator_loss, psnr
from .geometry import (
    Camera,
    backproject,
    chamfer_distance,
    completeness,
    fscore,
    fuse_views,
    look_at_camera,
    project,
    splat_zbuffer,
    warp_rgbd,
)
from .sim import TabletopState, random_states, render_rgbd, rollout, scripted_demos, step, success

__all__ = [
    "Camera", "look_at_camera", "backproject", "project", "splat_zbuffer", "warp_rgbd", "fuse_views",
    "chamfer_distance", "completeness", "fscore", "TabletopState", "random_states", "render_rgbd", "step", "rollout",
    "success", "scripted_demos", "MultiViewRGBDGenerator", "camera_embedding", "generator_loss", "psnr",
    "TrajectoryVAE", "ActionConditionedWorldModel", "infer_actions", "ResidualIDM", "InverseDynamics",
    "WindowInverseDynamics",
]
