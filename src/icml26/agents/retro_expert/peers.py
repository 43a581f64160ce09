"""Peers for [B06]: rdchiral (stereo-aware template application) on the same retro templates."""

from __future__ import annotations

from icml26.harness.peers import peer_available
from icml26.harness.validate import require_package

from .chemistry import TEMPLATES, ReactionTemplate, reactant_set


def rdchiral_available() -> bool:
    """Whether rdchiral is installed (a run without it says so in its summary, with the extra that adds it)."""
    return peer_available("rdchiral", "peers", "B06's agreement check against rdchiral's template application")


def rdchiral_agreement(products: list[str], templates: tuple[ReactionTemplate, ...] = TEMPLATES) -> float:
    """Fraction of (product, template) pairs where rdchiral's outcome set equals ours (canonical, order-invariant
    reactant sets). Products here carry no stereochemistry, so the two must agree exactly."""
    rdchiral = require_package("rdchiral.main", "peers", purpose="rdchiral_agreement")
    rdchiralReactants, rdchiralReaction, rdchiralRun = (rdchiral.rdchiralReactants, rdchiral.rdchiralReaction,
                                                         rdchiral.rdchiralRun)

    rxns = [rdchiralReaction(t.retro[0]) for t in templates]
    same = total = 0
    for p in products:
        reac = rdchiralReactants(p)
        for t, rxn in zip(templates, rxns):
            theirs = {reactant_set(s) for s in rdchiralRun(rxn, reac)}
            ours = {r for _, r in t.apply(p)}
            same += theirs == ours
            total += 1
    return same / max(total, 1)
