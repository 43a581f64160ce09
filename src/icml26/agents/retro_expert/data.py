"""Synthetic retrosynthesis data for [B06]: forward templates applied to real building blocks.

Building blocks are the molecules of RDKit's bundled ``Data/NCI/first_5K.smi`` (largest fragment, neutral,
<= ``max_block_atoms`` heavy atoms; our choice). A reaction draws a template, one building block per role, runs
the forward template and keeps one random outcome, so every product and every ground truth is a valid,
sanitised molecule, and the forward template on the true reactants reproduces the product by construction.
Reactions whose truth the retro templates cannot recover are dropped and counted (``retro_recall``).

Stock: a random ``stock_fraction`` of the building blocks plus a random ``decoy_fraction`` of the other
molecules the retro templates produce (our choice, from the spec) -- a signal the reasoner can read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from rdkit import Chem, RDConfig
from rdkit.Chem.Scaffolds import MurckoScaffold

from .chemistry import TEMPLATES, Centre, ReactantSet, ReactionTemplate, _rxn, _sanitised, retro_outcomes


@dataclass(frozen=True)
class Reaction:
    """One reaction: canonical product, true reactant set, template id, and the true centre(s)."""

    product: str
    reactants: ReactantSet
    template_id: int
    centres: tuple[Centre, ...]     # every centre at which the true template gives the truth (symmetry)


@dataclass
class ReactionSet:
    train: list[Reaction]
    test: list[Reaction]
    stock: frozenset[str]
    stats: dict[str, float] = field(default_factory=dict)


# building blocks

@lru_cache(maxsize=4)
def building_blocks(max_block_atoms: int = 20) -> tuple[str, ...]:
    """Canonical, neutral largest fragments of RDKit's NCI sample with at most ``max_block_atoms`` heavy atoms."""
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    out: set[str] = set()
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            mol = Chem.MolFromSmiles(parts[0]) if parts else None
            if mol is None:
                continue
            mol = max(Chem.GetMolFrags(mol, asMols=True), key=lambda m: m.GetNumHeavyAtoms())
            if not 3 <= mol.GetNumHeavyAtoms() <= max_block_atoms:
                continue
            if any(a.GetFormalCharge() != 0 for a in mol.GetAtoms()):
                continue
            out.add(Chem.MolToSmiles(mol))
    return tuple(sorted(out))


def _roles(tpl: ReactionTemplate, blocks: tuple[str, ...], mols: list) -> list[list[str]]:
    """Building blocks matching each reactant pattern of the (first) forward template."""
    rxn = _rxn(tpl.forward[0])
    return [[b for b, m in zip(blocks, mols) if m.HasSubstructMatch(rxn.GetReactantTemplate(i))]
            for i in range(rxn.GetNumReactantTemplates())]


@lru_cache(maxsize=4)
def _block_roles(templates: tuple[ReactionTemplate, ...], max_block_atoms: int) -> list[list[list[str]]]:
    blocks = building_blocks(max_block_atoms)
    mols = [Chem.MolFromSmiles(b) for b in blocks]
    return [_roles(t, blocks, mols) for t in templates]


def _scaffold(smiles: str) -> str:
    try:
        return MurckoScaffold.MurckoScaffoldSmiles(smiles=smiles)
    except Exception:   # acyclic or odd molecules: their own group
        return smiles


# main function

def make_synthetic_reactions(n: int, *, seed: int = 0, test_fraction: float = 1 / 6,
                             templates: tuple[ReactionTemplate, ...] = TEMPLATES, max_product_atoms: int = 36,
                             max_block_atoms: int = 20, stock_fraction: float = 0.7,
                             decoy_fraction: float = 0.2) -> ReactionSet:
    """``n`` reactions (forward templates on NCI building blocks), split by Bemis-Murcko scaffold.

    Templates are drawn uniformly; within a template, building blocks uniformly per role; among several
    outcomes (several reactive sites) one uniformly. Deterministic in ``seed``.
    """
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2 (number of reactions), got {n!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if not (0.0 <= stock_fraction <= 1.0 and 0.0 <= decoy_fraction <= 1.0):
        raise ValueError("stock_fraction and decoy_fraction must lie in [0, 1]")
    rng = np.random.default_rng(seed)
    roles = _block_roles(templates, max_block_atoms)
    reactions: list[Reaction] = []
    seen: set[str] = set()
    tries = dropped = 0
    while len(reactions) < n:
        tries += 1
        if tries > 50 * n:
            raise RuntimeError(f"could only build {len(reactions)} of {n} reactions; relax max_product_atoms")
        t = int(rng.integers(len(templates)))
        picks = [r[int(rng.integers(len(r)))] for r in roles[t]]
        if len(set(picks)) < len(picks):
            continue
        outs = _rxn(templates[t].forward[0]).RunReactants(tuple(Chem.MolFromSmiles(p) for p in picks))
        prods = sorted({s[0] for o in outs if (s := _sanitised(o)) is not None and len(s) == 1})
        if not prods:
            continue
        product = prods[int(rng.integers(len(prods)))]
        if product in seen or Chem.MolFromSmiles(product).GetNumHeavyAtoms() > max_product_atoms:
            continue
        truth = tuple(sorted(picks))
        centres = tuple(sorted({c for c, r in templates[t].apply(product) if r == truth}))
        if not centres:
            dropped += 1
            continue
        seen.add(product)
        reactions.append(Reaction(product, truth, t, centres))

    # scaffold split: whole scaffold groups go to test until it holds test_fraction of the reactions
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(reactions):
        groups.setdefault(_scaffold(r.product), []).append(i)
    keys = sorted(groups)
    order = rng.permutation(len(keys))
    test_idx: set[int] = set()
    for g in order:
        if len(test_idx) >= test_fraction * n:
            break
        test_idx.update(groups[keys[g]])
    train = [r for i, r in enumerate(reactions) if i not in test_idx]
    test = [r for i, r in enumerate(reactions) if i in test_idx]

    used = sorted({m for r in reactions for m in r.reactants})
    others = sorted({m for r in reactions for _, _, rs in retro_outcomes(r.product, templates) for m in rs} - set(used))
    stock = {m for m in used if rng.random() < stock_fraction} | {m for m in others if rng.random() < decoy_fraction}
    stats = {"retro_recall": (tries and n / (n + dropped)), "n_scaffolds": float(len(groups)),
             "n_building_blocks_used": float(len(used))}
    return ReactionSet(train, test, frozenset(stock), stats)


# cached artefact

def load_reaction_set(n: int, *, seed: int = 0, **kwargs) -> ReactionSet:
    """:func:`make_synthetic_reactions`, built once and cached (JSON) with :mod:`icml26.testbeds.cache`."""
    import json
    from pathlib import Path

    from icml26.testbeds.cache import load_cached

    config = {"n": n, "seed": seed, "version": 1, **{k: v for k, v in sorted(kwargs.items()) if k != "templates"},
              "templates": [(t.name, t.retro, t.forward) for t in kwargs.get("templates", TEMPLATES)]}

    def enc(rs: list[Reaction]) -> list:
        return [[r.product, list(r.reactants), r.template_id, [list(c) for c in r.centres]] for r in rs]

    def dec(rows: list) -> list[Reaction]:
        return [Reaction(p, tuple(rs), int(t), tuple(tuple(c) for c in cs)) for p, rs, t, cs in rows]

    def build(folder: Path) -> None:
        data = make_synthetic_reactions(n, seed=seed, **kwargs)
        (folder / "reactions.json").write_text(json.dumps(
            {"train": enc(data.train), "test": enc(data.test), "stock": sorted(data.stock), "stats": data.stats}))

    def load(folder: Path) -> ReactionSet:
        d = json.loads((folder / "reactions.json").read_text())
        return ReactionSet(dec(d["train"]), dec(d["test"]), frozenset(d["stock"]), d["stats"])

    return load_cached("b06_reactions", config, build, load)
