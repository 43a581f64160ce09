"""Synthetic retrosynthesis data for [B06]: forward templates applied to real building blocks.

Building blocks are the molecules of RDKit's bundled ``Data/NCI/first_5K.smi`` (largest fragment, neutral,
<= ``max_block_atoms`` heavy atoms; our choice). A reaction draws a template, one building block per role, runs
the forward template and keeps one random outcome, so every product and every ground truth is a valid,
sanitised molecule, and the forward template on the true reactants reproduces the product by construction.
Reactions whose truth the retro templates cannot recover are dropped and counted (``retro_recall``).

Stock (what a chemist could buy, :class:`Stock`): membership is a function of the molecule alone -- a random
``stock_fraction`` of the whole building-block catalogue, drawn independently of which blocks the reactions use,
and any other molecule with probability ``decoy_fraction`` (a seeded hash of its SMILES: decoys) -- so nothing
about the reactions, the split or the test set enters it (our choice, from the spec). An earlier version drew the
stock from the reactants of all reactions, test truths included. True reactants are still in stock more often
than other candidates' (``stats``: ``test_truth_in_stock``, ``test_other_in_stock``) because every true reactant is
a catalogue molecule by construction of the data (as purchasable reactants are in practice): that is the signal
the reasoner can read and the specialist does not see.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Container
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from rdkit import Chem, RDConfig
from rdkit.Chem.Scaffolds import MurckoScaffold

from icml26.harness import validate as v

from .chemistry import (
    TEMPLATES,
    Centre,
    ReactantSet,
    ReactionTemplate,
    _rxn,
    _sanitised,
    _templates,
    check_centre,
    check_reactants,
    retro_outcomes,
)


@dataclass(frozen=True)
class Reaction:
    """One reaction: canonical product, true reactant set, template id, and the true centre(s)."""

    product: str
    reactants: ReactantSet
    template_id: int
    centres: tuple[Centre, ...]     # every centre at which the true template gives the truth (symmetry)

    def __post_init__(self) -> None:
        if not isinstance(self.product, str) or not self.product.strip():
            raise TypeError(f"product must be a SMILES string, got {v.describe(self.product)}")
        object.__setattr__(self, "reactants", check_reactants("reactants", self.reactants))
        v.non_negative_int("template_id", self.template_id)
        if isinstance(self.centres, str) or not isinstance(self.centres, (tuple, list)):
            raise TypeError(f"centres must be a tuple of (i, j) atom pairs, got {v.describe(self.centres)}")
        object.__setattr__(self, "centres", tuple(check_centre("centres entry", c) for c in self.centres))


@dataclass(frozen=True)
class Stock(Container):
    """Purchasable molecules: ``m in stock`` iff ``m`` is one of the drawn catalogue molecules (``in_catalogue``),
    or ``m`` is not a catalogue molecule and a seeded hash of its SMILES falls below ``decoy_fraction``.
    Depends on the molecule alone, never on a reaction or a split."""

    in_catalogue: frozenset[str]
    catalogue: frozenset[str]
    decoy_fraction: float
    seed: int

    def __post_init__(self) -> None:
        for name in ("in_catalogue", "catalogue"):
            if not isinstance(getattr(self, name), (set, frozenset)):
                raise TypeError(f"{name} must be a (frozen)set of SMILES, got {v.describe(getattr(self, name))}")
        if not self.in_catalogue <= self.catalogue:
            raise ValueError("in_catalogue must be a subset of catalogue (the drawn catalogue molecules)")
        v.probability("decoy_fraction", self.decoy_fraction)
        v.non_negative_int("seed", self.seed)

    def __contains__(self, smiles: object) -> bool:
        if not isinstance(smiles, str):
            return False
        if smiles in self.catalogue:
            return smiles in self.in_catalogue
        return _unit_hash(smiles, self.seed) < self.decoy_fraction


def _unit_hash(smiles: str, seed: int) -> float:
    h = hashlib.blake2b(f"{seed}|{smiles}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0 ** 64


@dataclass
class ReactionSet:
    train: list[Reaction]
    test: list[Reaction]
    stock: Stock
    stats: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("train", "test"):
            rs = getattr(self, name)
            if not isinstance(rs, list) or not all(isinstance(r, Reaction) for r in rs):
                raise TypeError(f"{name} must be a list of Reaction, got {v.describe(rs)}")
        if not isinstance(self.stock, Stock):
            raise TypeError(f"stock must be a Stock (make_stock(...)), got {v.describe(self.stock)}")


# building blocks

def building_blocks(max_block_atoms: int = 20) -> tuple[str, ...]:
    """Canonical, neutral largest fragments of RDKit's NCI sample with at most ``max_block_atoms`` heavy atoms."""
    return _building_blocks(v.positive_int("max_block_atoms", max_block_atoms))


@lru_cache(maxsize=4)
def _building_blocks(max_block_atoms: int) -> tuple[str, ...]:
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
    n = v.positive_int("n (number of reactions)", n, minimum=2)
    seed = v.non_negative_int("seed", seed)
    v.probability("test_fraction", test_fraction, open_=True)
    templates = _templates(templates)
    v.positive_int("max_product_atoms", max_product_atoms)
    v.positive_int("max_block_atoms", max_block_atoms)
    v.probability("stock_fraction", stock_fraction)
    v.probability("decoy_fraction", decoy_fraction)
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

    stock = make_stock(seed=seed, max_block_atoms=max_block_atoms, stock_fraction=stock_fraction,
                       decoy_fraction=decoy_fraction)
    used = {m for r in reactions for m in r.reactants}
    truth_mols = [m for r in test for m in r.reactants]
    other_mols = [m for r in test for _, _, rs in retro_outcomes(r.product, templates) if rs != r.reactants
                  for m in rs]
    stats = {"retro_recall": (tries and n / (n + dropped)), "n_scaffolds": float(len(groups)),
             "n_building_blocks_used": float(len(used)), "n_stock_catalogue": float(len(stock.in_catalogue)),
             "test_truth_in_stock": float(np.mean([m in stock for m in truth_mols])) if truth_mols else float("nan"),
             "test_other_in_stock": float(np.mean([m in stock for m in other_mols])) if other_mols else float("nan")}
    return ReactionSet(train, test, stock, stats)


def make_stock(*, seed: int = 0, max_block_atoms: int = 20, stock_fraction: float = 0.7,
               decoy_fraction: float = 0.2) -> Stock:
    """The :class:`Stock` for ``seed``: ``stock_fraction`` of the catalogue (its own random stream) + hashed decoys."""
    v.non_negative_int("seed", seed)
    v.positive_int("max_block_atoms", max_block_atoms)
    v.probability("stock_fraction", stock_fraction)
    v.probability("decoy_fraction", decoy_fraction)
    catalogue = building_blocks(max_block_atoms)
    keep = np.random.default_rng([seed, 1]).random(len(catalogue)) < stock_fraction
    return Stock(frozenset(m for m, k in zip(catalogue, keep) if k), frozenset(catalogue), float(decoy_fraction),
                 int(seed))


# cached artefact

def load_reaction_set(n: int, *, seed: int = 0, **kwargs) -> ReactionSet:
    """:func:`make_synthetic_reactions`, built once and cached (JSON) with :mod:`icml26.testbeds.cache`."""
    import json
    from pathlib import Path

    from icml26.testbeds.cache import load_cached

    v.positive_int("n (number of reactions)", n, minimum=2)
    v.non_negative_int("seed", seed)
    v.keys("kwargs", kwargs, ("test_fraction", "templates", "max_product_atoms", "max_block_atoms",
                              "stock_fraction", "decoy_fraction"))
    config = {"n": n, "seed": seed, "version": 3, **{k: v for k, v in sorted(kwargs.items()) if k != "templates"},
              "templates": [(t.name, t.retro, t.forward) for t in kwargs.get("templates", TEMPLATES)]}

    def enc(rs: list[Reaction]) -> list:
        return [[r.product, list(r.reactants), r.template_id, [list(c) for c in r.centres]] for r in rs]

    def dec(rows: list) -> list[Reaction]:
        return [Reaction(p, tuple(rs), int(t), tuple(tuple(c) for c in cs)) for p, rs, t, cs in rows]

    def build(folder: Path) -> None:
        data = make_synthetic_reactions(n, seed=seed, **kwargs)
        (folder / "reactions.json").write_text(json.dumps(
            {"train": enc(data.train), "test": enc(data.test), "stock": sorted(data.stock.in_catalogue),
             "catalogue": sorted(data.stock.catalogue), "decoy_fraction": data.stock.decoy_fraction,
             "stock_seed": data.stock.seed, "stats": data.stats}))

    def load(folder: Path) -> ReactionSet:
        d = json.loads((folder / "reactions.json").read_text())
        stock = Stock(frozenset(d["stock"]), frozenset(d["catalogue"]), float(d["decoy_fraction"]), int(d["stock_seed"]))
        return ReactionSet(dec(d["train"]), dec(d["test"]), stock, d["stats"])

    return load_cached("b06_reactions", config, build, load)
