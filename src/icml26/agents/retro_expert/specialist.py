"""The specialist of [B06]: a reaction-centre / template scorer that distils chemistry into a decision space.

For a product P every retro template is applied at every matching centre (``retro_outcomes``); each outcome
c = (template t, centre (i, j), reactants R) is scored pointwise by an MLP on

    x(P, c) = [ Morgan(P) | Morgan env. of the centre atoms in P (radius 1) | sum_r Morgan(r in R) | onehot(t) ]

trained as a binary classifier (truth vs other outcomes on the training reactions). The decision space
D(P) = the top-k outcomes by score s(c | P) [B06, step 1]. Our choices: 256-bit count fingerprints of radius 2,
one hidden layer of 64 units (scikit-learn's MLPClassifier).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdFingerprintGenerator

from icml26.harness import validate as v

from .chemistry import (
    TEMPLATES,
    Centre,
    ReactantSet,
    ReactionTemplate,
    _canonical_and_order,
    _templates,
    _to_input,
    check_centre,
    check_reactants,
    retro_outcomes,
)
from .data import Reaction

FP_BITS = 256


@dataclass(frozen=True)
class Candidate:
    """One entry of the decision space: template id, centre atoms, reactant set, specialist score."""

    template_id: int
    centre: Centre
    reactants: ReactantSet
    score: float

    def __post_init__(self) -> None:
        v.non_negative_int("template_id", self.template_id)
        object.__setattr__(self, "centre", check_centre("centre", self.centre))
        object.__setattr__(self, "reactants", check_reactants("reactants", self.reactants))
        object.__setattr__(self, "score", v.finite_number("score", self.score))


# helper functions

@lru_cache(maxsize=1)
def _gen(radius: int = 2):
    return rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=FP_BITS)


@lru_cache(maxsize=100_000)
def _fp(smiles: str) -> np.ndarray:
    return _gen().GetCountFingerprintAsNumPy(Chem.MolFromSmiles(smiles)).astype(np.float32)


@lru_cache(maxsize=1)
def _centre_gen():
    return rdFingerprintGenerator.GetMorganGenerator(radius=1, fpSize=FP_BITS)


def _centre_fp(mol: Chem.Mol, centre: Centre) -> np.ndarray:
    return _centre_gen().GetCountFingerprintAsNumPy(mol, fromAtoms=list(centre)).astype(np.float32)


def candidate_features(product: str, outcomes: list[tuple[int, Centre, ReactantSet]], n_templates: int
                       ) -> np.ndarray:
    """x(P, c) for each outcome c, shape [len(outcomes), 3 * FP_BITS + n_templates]; log1p of the counts."""
    mol = Chem.MolFromSmiles(product)
    p = _fp(product)
    rows = []
    for t, c, rs in outcomes:
        onehot = np.zeros(n_templates, np.float32)
        onehot[t] = 1.0
        rows.append(np.concatenate([p, _centre_fp(mol, c), np.sum([_fp(r) for r in rs], axis=0), onehot]))
    return np.log1p(np.stack(rows)) if rows else np.zeros((0, 3 * FP_BITS + n_templates), np.float32)


@lru_cache(maxsize=50_000)
def _outcomes_and_features(product: str, templates: tuple[ReactionTemplate, ...]):
    outs = retro_outcomes(product, templates)
    return outs, candidate_features(product, outs, len(templates))


def _reactions(name: str, reactions) -> None:
    if not isinstance(reactions, (list, tuple)):
        raise TypeError(f"{name} must be a list of Reaction, got {v.describe(reactions)}")
    v.non_empty(name, reactions)
    bad = next((r for r in reactions if not isinstance(r, Reaction)), None)
    if bad is not None:
        raise TypeError(f"{name} must hold Reaction objects (load_reaction_set(...).train), got {v.describe(bad)}")


# main class

class SpecialistModel:
    """Pointwise template/centre scorer; ``decision_space(P, k)`` returns the top-k candidates [B06].

    scikit-learn style: ``__init__`` stores parameters, ``fit`` learns ``mlp_`` and returns ``self``.
    """

    def __init__(self, k: int = 5, *, hidden: int = 64, max_iter: int = 60, random_state: int = 0,
                 templates: tuple[ReactionTemplate, ...] = TEMPLATES):
        v.positive_int("k (decision-space size)", k)
        v.positive_int("hidden", hidden)
        v.positive_int("max_iter", max_iter)
        v.non_negative_int("random_state", random_state)
        templates = _templates(templates)
        self.k, self.hidden, self.max_iter, self.random_state, self.templates = k, hidden, max_iter, random_state, templates

    def fit(self, reactions: list[Reaction]) -> "SpecialistModel":
        from sklearn.neural_network import MLPClassifier

        _reactions("reactions", reactions)
        xs, ys = [], []
        for r in reactions:
            outs, feats = _outcomes_and_features(r.product, self.templates)
            if not outs:
                continue
            xs.append(feats)
            ys.append([int(t == r.template_id and rs == r.reactants) for t, _, rs in outs])
        x, y = np.concatenate(xs), np.concatenate(ys)
        if y.min() == y.max():
            raise ValueError("training outcomes are all of one class; pass more reactions")
        import warnings

        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.mlp_ = MLPClassifier(hidden_layer_sizes=(self.hidden,), max_iter=self.max_iter, alpha=1e-3,
                                      random_state=self.random_state).fit(x, y)
        return self

    def decision_space(self, product: str, k: int | None = None) -> list[Candidate]:
        """D(P): the top-``k`` (default ``self.k``) retro outcomes by specialist score, best first (ties broken
        by template id, centre and reactants, so the order is deterministic)."""
        return self.decision_spaces([product], k)[0]

    def decision_spaces(self, products: list[str], k: int | None = None) -> list[list[Candidate]]:
        """:meth:`decision_space` for many products with one batched MLP call."""
        v.require_fitted(self, "mlp_", fit="fit(train_reactions)")
        k = self.k if k is None else v.positive_int("k", k)
        if isinstance(products, str) or not isinstance(products, (list, tuple)):
            raise TypeError(f"products must be a list of SMILES strings, got {v.describe(products)}")
        canon = [_canonical_and_order(p, "product") for p in products]
        smis = [c for c, _ in canon]
        pairs = [_outcomes_and_features(s, self.templates) for s in smis]
        outs = [o for o, _ in pairs]
        feats = [f for o, f in pairs if o]
        if not feats:
            return [[] for _ in smis]
        scores = iter(np.split(self.mlp_.predict_proba(np.concatenate(feats))[:, 1],
                               np.cumsum([len(o) for o in outs if o])[:-1]))
        res = []
        for o, (_, atoms) in zip(outs, canon):
            if not o:
                res.append([])
                continue
            s = next(scores)
            order = sorted(range(len(o)), key=lambda i: (-s[i], o[i]))[:k]
            # centres in the caller's atom order (identity for canonical SMILES)
            res.append([Candidate(o[i][0], _to_input(atoms, o[i][1]), o[i][2], float(s[i])) for i in order])
        return res


def cross_fitted_decision_spaces(reactions: list[Reaction], *, n_folds: int = 2, seed: int = 0,
                                 **params) -> list[list[Candidate]]:
    """Out-of-fold decision spaces for the reasoner's training reactions: each fold's D(P) comes from a specialist
    fitted on the other folds, so the reasoner trains on scores as honest as the ones it sees at test time
    (a specialist scoring its own training data is over-confident). Our choice, standard stacking practice."""
    _reactions("reactions", reactions)
    n_folds = v.positive_int("n_folds", n_folds, minimum=2)
    if n_folds > len(reactions):
        raise ValueError(f"n_folds ({n_folds}) cannot exceed the number of reactions ({len(reactions)})")
    v.non_negative_int("seed", seed)
    v.keys("params", params, ("k", "hidden", "max_iter", "templates"))
    fold = np.random.default_rng(seed).permutation(len(reactions)) % n_folds
    out: list[list[Candidate]] = [[] for _ in reactions]
    for f in range(n_folds):
        sp = SpecialistModel(random_state=seed + f, **params).fit([r for r, g in zip(reactions, fold) if g != f])
        idx = [i for i in range(len(reactions)) if fold[i] == f]
        for i, d in zip(idx, sp.decision_spaces([reactions[i].product for i in idx])):
            out[i] = d
    return out
