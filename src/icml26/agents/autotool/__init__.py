"""[B18] AutoTool: embedding-anchored dynamic tool selection and KL-regularised Plackett–Luce ranking.

Public API:
- Plackett–Luce: :func:`plackett_luce_log_prob`, :func:`sample_plackett_luce` (Gumbel-top-k),
  :func:`rank_by_returns`, :func:`kl_pl_loss` (PL-DPO; equals DPO's sigmoid loss at K = 2).
- Selection: :class:`AutoToolPolicy` (any HF causal LM + :class:`AnchorToolSelector` over a per-episode
  inventory, or the :class:`ClosedSetToolSelector` baseline), :class:`ToolEncoder`, :func:`tiny_llama`.
- Environment: :func:`build_catalog`, :func:`sample_tasks`, :class:`ToolEnv` (arithmetic / lookup / string tools
  with textual descriptions; seen and unseen tools).
- Training: :class:`AutoToolTrainer` (``phase1_sft``, ``phase1_rl`` with the shared GRPO core, ``phase2_rank``),
  :func:`evaluate`.
"""

from .env import EnvState, Tasks, ToolCatalog, ToolEnv, build_catalog, sample_tasks
from .plackett_luce import kl_pl_loss, plackett_luce_log_prob, rank_by_returns, sample_plackett_luce
from .policy import AnchorToolSelector, AutoToolPolicy, ClosedSetToolSelector, ToolEncoder, tiny_llama
from .trainer import AutoToolConfig, AutoToolTrainer, evaluate, expert_choice, rollout

__all__ = [
    "plackett_luce_log_prob", "sample_plackett_luce", "rank_by_returns", "kl_pl_loss",
    "ToolEncoder", "AnchorToolSelector", "ClosedSetToolSelector", "AutoToolPolicy", "tiny_llama",
    "ToolCatalog", "build_catalog", "Tasks", "sample_tasks", "EnvState", "ToolEnv",
    "AutoToolConfig", "AutoToolTrainer", "evaluate", "expert_choice", "rollout",
]
