"""[B06] Retro-Expert: a specialist decision space + a reasoner policy + knowledge-grounded policy optimisation.

    >>> from icml26.agents.retro_expert import make_synthetic_reactions, SpecialistModel, verify_rationale
"""

from .chemistry import (
    TEMPLATE_NAMES,
    TEMPLATES,
    Rationale,
    ReactionTemplate,
    canonical_atom_order,
    canonical_smiles,
    reactant_set,
    retro_outcomes,
    verify_rationale,
)
from .data import Reaction, ReactionSet, Stock, building_blocks, load_reaction_set, make_stock, make_synthetic_reactions
from .kgpo import (
    EvalResult,
    Example,
    KGPOConfig,
    KGPOTrainer,
    RewardWeights,
    evaluate_policy,
    execute,
    judge,
    kgpo_reward,
    sft_train,
)
from .reasoner import (
    GrammarConstrainedLM,
    Vocab,
    build_tokenizer,
    ds_prompt,
    grammar_bias,
    grounded_completion,
    make_policy,
    parse_completion,
    product_prompt,
)
from .specialist import Candidate, SpecialistModel, cross_fitted_decision_spaces


def topk_exact_match(preds: list[list[tuple[str, ...]]], truths: list[tuple[str, ...]], k: int) -> float:
    """Fraction of products whose true reactant set is among the first ``k`` predicted sets [B06 metric]."""
    from icml26.harness import validate as v

    for name, val in (("preds", preds), ("truths", truths)):
        if not isinstance(val, (list, tuple)):
            raise TypeError(f"{name} must be a list (one entry per product), got {v.describe(val)}")
    if not all(isinstance(p, (list, tuple)) for p in preds):
        raise TypeError("preds must be a list of ranked lists of reactant sets (one list per product)")
    v.same_length(preds=preds, truths=truths)
    k = v.positive_int("k", k)
    if not truths:
        return float("nan")
    return sum(t in p[:k] for p, t in zip(preds, truths)) / len(truths)


__all__ = ["TEMPLATES", "TEMPLATE_NAMES", "ReactionTemplate", "Rationale", "canonical_atom_order", "canonical_smiles", "reactant_set",
           "retro_outcomes", "verify_rationale", "Reaction", "ReactionSet", "Stock", "make_stock", "building_blocks", "load_reaction_set",
           "make_synthetic_reactions", "Candidate", "SpecialistModel", "cross_fitted_decision_spaces", "Vocab",
           "build_tokenizer", "make_policy", "ds_prompt", "product_prompt", "grounded_completion", "parse_completion",
           "grammar_bias", "GrammarConstrainedLM", "RewardWeights", "Example", "KGPOConfig", "KGPOTrainer",
           "kgpo_reward", "judge", "execute", "sft_train", "evaluate_policy", "EvalResult", "topk_exact_match"]
