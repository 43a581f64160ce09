"""Reaction templates, canonical reactant sets and rationale verification for [B06] Retro-Expert.

A *retro template* is an RDKit reaction SMARTS ``product pattern >> reactant patterns``. Applied to a product P
it yields outcomes (centre, reactant set): the centre is the pair of product atoms whose bond the template breaks
(the atoms carrying the template's two centre map numbers), the reactant set is the sorted tuple of canonical
SMILES of the sanitised fragments (order-invariant). The leaving group is fixed per template (chloride; our
choice), so a (template, centre) pair determines the reactant set; a centre can still be broken by several
templates (a CH2-N bond by reductive amination or by N-alkylation), and which is true is a question of what the
chemist has in stock.

A *rationale* (template id, centre, reactants) is **executable** (``verify_rationale``) when RDKit, running the
stated template on P, produces the stated reactants at the stated centre: r_ground = 1 [B06, KGPO reward].
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rdkit import Chem, RDLogger
from rdkit.Chem import AllChem

from icml26.harness import validate as v

RDLogger.DisableLog("rdApp.*")

ReactantSet = tuple[str, ...]
Centre = tuple[int, int]

_AMINE_P = "[N;!$(N-[C,S]=[O,S,N]);!$(N=*);!$(N#*);!$(N-[!#6;!#1]);!$([N+])"   # product-side amine N
_AMINE_R = _AMINE_P + ";!H0"                                                        # reactant-side: has an H


# helper functions

def canonical_smiles(smiles: str, *, what: str = "molecule") -> str:
    """Canonical SMILES of ``smiles`` with atom-map numbers cleared (an atom-mapped, USPTO-style
    ``[CH3:1][C:2](=[O:3])[OH:4]`` and ``CC(=O)O`` give the same string); ``ValueError`` naming the molecule when
    RDKit cannot parse it."""
    return _canonical_and_order(smiles, what)[0]


def canonical_atom_order(smiles: str) -> tuple[int, ...]:
    """For each atom of ``canonical_smiles(smiles)`` (in RDKit's parse order of that string), the index of the same
    atom in ``smiles`` as given: ``order[k]`` is the input atom that canonical atom ``k`` is. Identity when
    ``smiles`` is already canonical. Centres returned by the public functions are in the input's atom order."""
    return _canonical_and_order(smiles, "molecule")[1]


@lru_cache(maxsize=200_000)
def _canonical_and_order_cached(smiles: str) -> tuple[str, tuple[int, ...]] | None:
    mol = Chem.MolFromSmiles(smiles) if smiles.strip() else None
    if mol is None:
        return None
    mapped = any(a.GetAtomMapNum() for a in mol.GetAtoms())
    for a in mol.GetAtoms():
        a.SetAtomMapNum(0)
    smi = Chem.MolToSmiles(mol)
    order = tuple(int(i) for i in mol.GetPropsAsDict(True, True)["_smilesAtomOutputOrder"])
    if mapped:                           # re-parse: explicit [CH3] brackets become plain atoms
        mol = Chem.MolFromSmiles(smi)
        smi = Chem.MolToSmiles(mol)
        order2 = mol.GetPropsAsDict(True, True)["_smilesAtomOutputOrder"]
        order = tuple(order[int(k)] for k in order2)
    return smi, order


def _canonical_and_order(smiles: str, what: str) -> tuple[str, tuple[int, ...]]:
    if not isinstance(what, str):
        raise TypeError(f"what must be a string naming the molecule, got {v.describe(what)}")
    if not isinstance(smiles, str):
        raise TypeError(f"{what} must be a SMILES string, got {type(smiles).__name__}")
    out = _canonical_and_order_cached(smiles)
    if out is None:
        raise ValueError(f"invalid SMILES for {what}: {smiles!r} (RDKit cannot parse it); pass a valid SMILES "
                         "string such as 'CC(=O)Nc1ccccc1'")
    return out


def _to_input(order: tuple[int, ...], centre: "Centre") -> "Centre":
    a, b = order[centre[0]], order[centre[1]]
    return (min(a, b), max(a, b))


def reactant_set(smiles: "str | list[str] | tuple[str, ...]") -> ReactantSet:
    """Order-invariant canonical form of a reactant set ('A.B' or ['A', 'B']): sorted canonical SMILES."""
    if not isinstance(smiles, (str, list, tuple)):
        raise TypeError(f"smiles must be 'A.B' or a list of SMILES strings, got {v.describe(smiles)}")
    parts = smiles.split(".") if isinstance(smiles, str) else list(smiles)
    if not parts or (isinstance(smiles, str) and not smiles.strip()):
        raise ValueError("the reactant set is empty; pass at least one SMILES")
    return tuple(sorted(canonical_smiles(s, what="reactant") for s in parts))


def _mol(product: str) -> Chem.Mol:
    canonical_smiles(product, what="product")
    return Chem.MolFromSmiles(product)


# main class

@dataclass(frozen=True)
class ReactionTemplate:
    """One reaction class: retro SMARTS variants (one per leaving group) and forward SMARTS for data generation.

    ``centre_maps`` are the two map numbers whose atoms form the bond made in the forward direction.
    """

    name: str
    retro: tuple[str, ...]
    forward: tuple[str, ...]
    centre_maps: tuple[int, int]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"name must be a non-empty string, got {v.describe(self.name)}")
        for field in ("retro", "forward"):
            val = getattr(self, field)
            if isinstance(val, str) or not isinstance(val, (tuple, list)) or not val:
                raise TypeError(f"{field} must be a non-empty tuple of reaction SMARTS, got {v.describe(val)}")
            for sm in val:
                try:
                    ok = isinstance(sm, str) and ">>" in sm and _rxn(sm) is not None
                except Exception:   # RDKit raises several parse errors
                    ok = False
                if not ok:
                    raise ValueError(f"{field} holds {sm!r}, not a reaction SMARTS RDKit can parse "
                                     "('reactant patterns>>product patterns')")
            object.__setattr__(self, field, tuple(val))
        cm = self.centre_maps
        if not (isinstance(cm, (tuple, list)) and len(cm) == 2):
            raise TypeError(f"centre_maps must be two atom-map numbers, got {v.describe(cm)}")
        for m in cm:
            v.positive_int("centre_maps entry", m)
        if cm[0] == cm[1]:
            raise ValueError(f"centre_maps must name two different map numbers, got {tuple(cm)}")
        object.__setattr__(self, "centre_maps", tuple(int(m) for m in cm))

    def apply(self, product: str) -> list[tuple[Centre, ReactantSet]]:
        """All (centre, reactant set) outcomes of the retro template on ``product`` (deduplicated, sorted). The
        centre's atom indices are those of ``product`` as given (RDKit's parse order of the caller's SMILES)."""
        smi, order = _canonical_and_order(product, "product")
        return sorted((_to_input(order, c), r) for c, r in _apply(self, smi))

    def run_forward(self, reactants: "tuple[str, ...] | list[str]") -> list[str]:
        """Canonical products of the forward template on the two reactants (either order), deduplicated."""
        if isinstance(reactants, str) or not isinstance(reactants, (tuple, list)):
            raise TypeError(f"reactants must be a list of SMILES (one per role), got {v.describe(reactants)}")
        n_roles = _rxn(self.forward[0]).GetNumReactantTemplates()
        if len(reactants) != n_roles:
            raise ValueError(f"{self.name} takes {n_roles} reactants, got {len(reactants)}")
        mols = [_mol(r) for r in reactants]
        out: set[str] = set()
        for sm in self.forward:
            rxn = _rxn(sm)
            for order in (mols, mols[::-1]):
                for prods in rxn.RunReactants(tuple(order)):
                    smi = _sanitised(prods)
                    if smi is not None and len(smi) == 1:
                        out.add(smi[0])
        return sorted(out)


@lru_cache(maxsize=None)
def _rxn(smarts: str):
    rxn = AllChem.ReactionFromSmarts(smarts)
    rxn.Initialize()
    return rxn


def _sanitised(mols) -> list[str] | None:
    try:
        out = []
        for m in mols:
            m = Chem.Mol(m)
            Chem.SanitizeMol(m)
            out.append(Chem.MolToSmiles(m))
        return [Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in out]   # re-canonicalise from a clean parse
    except Exception:   # RDKit raises several sanitisation errors; an unsanitisable outcome is simply no outcome
        return None


@lru_cache(maxsize=200_000)
def _apply(tpl: ReactionTemplate, product: str) -> tuple[tuple[Centre, ReactantSet], ...]:
    mol = Chem.MolFromSmiles(product)
    out: set[tuple[Centre, ReactantSet]] = set()
    for sm in tpl.retro:
        for prods in _rxn(sm).RunReactants((mol,)):
            idx = {a.GetIntProp("old_mapno"): a.GetIntProp("react_atom_idx")
                   for m in prods for a in m.GetAtoms() if a.HasProp("old_mapno")}
            smi = _sanitised(prods)
            if smi is None or any(k not in idx for k in tpl.centre_maps):
                continue
            i, j = idx[tpl.centre_maps[0]], idx[tpl.centre_maps[1]]
            out.add(((min(i, j), max(i, j)), tuple(sorted(smi))))
    return tuple(sorted(out))


TEMPLATES: tuple[ReactionTemplate, ...] = (
    ReactionTemplate(
        "amide coupling",
        ("[C:1](=[O:2])-;!@[N;!$(N=*);!$(N#*);!$([N+]):3]>>[C:1](=[O:2])[OH].[N:3]",),
        (f"[C:1](=[O:2])[OH].{_AMINE_R}:3]>>[C:1](=[O:2])-[N:3]",),
        (1, 3)),
    ReactionTemplate(
        "esterification",
        ("[C:1](=[O:2])-;!@[O;X2:3]-[#6:4]>>[C:1](=[O:2])[OH].[O:3]-[#6:4]",),
        ("[C:1](=[O:2])[OH].[OX2H1;!$(OC=O):3]-[#6:4]>>[C:1](=[O:2])-[O:3]-[#6:4]",),
        (1, 3)),
    ReactionTemplate(
        "reductive amination",
        (f"[#6:4]-[CH2;!R:1]-;!@{_AMINE_P}:2]>>[#6:4]-[CH1:1]=O.[N:2]",),
        (f"[#6:4]-[CH1;!R:1]=O.{_AMINE_R}:2]>>[#6:4]-[CH2:1]-[N:2]",),
        (1, 2)),
    ReactionTemplate(
        "N-alkylation",
        (f"[CH2;X4:1]-;!@{_AMINE_P}:2]>>[CH2:1]Cl.[N:2]",),
        (f"[CH2;X4:1]Cl.{_AMINE_R}:2]>>[CH2:1]-[N:2]",),
        (1, 2)),
    ReactionTemplate(
        "Williamson ether",
        ("[CH2;X4:1]-;!@[O;X2;!$(OC=O):2]-[#6:3]>>[CH2:1]Cl.[O:2]-[#6:3]",),
        ("[CH2;X4:1]Cl.[OX2H1;!$(OC=O):2]-[#6:3]>>[CH2:1]-[O:2]-[#6:3]",),
        (1, 2)),
    ReactionTemplate(
        "SNAr amination",
        (f"[c:1]-;!@{_AMINE_P}:2]>>[c:1]Cl.[N:2]",),
        (f"[c:1]Cl.{_AMINE_R}:2]>>[c:1]-[N:2]",),
        (1, 2)),
)
TEMPLATE_NAMES = tuple(t.name for t in TEMPLATES)


@dataclass(frozen=True)
class Rationale:
    """What the reasoner states: reaction class (template id), centre (two product atoms) and its answer."""

    template_id: int
    centre: Centre
    reactants: ReactantSet

    def __post_init__(self) -> None:
        v.non_negative_int("template_id", self.template_id)
        object.__setattr__(self, "centre", check_centre("centre", self.centre))
        object.__setattr__(self, "reactants", check_reactants("reactants", self.reactants))


def check_centre(name: str, centre) -> "Centre":
    """Two non-negative atom indices (a tuple); ``TypeError`` / ``ValueError`` naming ``name`` otherwise."""
    if isinstance(centre, str) or not isinstance(centre, (tuple, list)) or len(centre) != 2:
        raise TypeError(f"{name} must be two atom indices (i, j), got {v.describe(centre)}")
    return tuple(v.non_negative_int(f"{name} atom index", a) for a in centre)


def check_reactants(name: str, reactants) -> "ReactantSet":
    """A non-empty tuple of SMILES strings (not canonicalised here)."""
    if isinstance(reactants, str) or not isinstance(reactants, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of SMILES strings, got {v.describe(reactants)}")
    v.non_empty(name, reactants)
    if not all(isinstance(r, str) for r in reactants):
        raise TypeError(f"{name} must hold SMILES strings, got {v.describe(reactants)}")
    return tuple(reactants)


def _templates(templates) -> tuple[ReactionTemplate, ...]:
    if not isinstance(templates, (tuple, list)) or not templates or not all(
            isinstance(t, ReactionTemplate) for t in templates):
        raise TypeError(f"templates must be a non-empty tuple of ReactionTemplate, got {v.describe(templates)}")
    return tuple(templates)


def retro_outcomes(product: str, templates: tuple[ReactionTemplate, ...] = TEMPLATES
                   ) -> list[tuple[int, Centre, ReactantSet]]:
    """Every (template id, centre, reactants) the templates produce on ``product``; ValueError names a bad SMILES.
    Centres are atom indices of ``product`` as given."""
    templates = _templates(templates)
    smi, order = _canonical_and_order(product, "product")
    return [(t, _to_input(order, c), r) for t, tpl in enumerate(templates) for c, r in _apply(tpl, smi)]


def verify_rationale(product: str, rationale: Rationale, templates: tuple[ReactionTemplate, ...] = TEMPLATES
                     ) -> bool:
    """r_ground [B06]: True iff executing template ``rationale.template_id`` at ``rationale.centre`` on the
    product gives exactly ``rationale.reactants`` (as canonical, order-invariant sets). ``rationale.centre`` holds
    atom indices of ``product`` as given (RDKit's parse order of that SMILES)."""
    if not isinstance(rationale, Rationale):
        raise TypeError(f"rationale must be a Rationale(template_id, centre, reactants), got {v.describe(rationale)}")
    templates = _templates(templates)
    smi, order = _canonical_and_order(product, "product")
    t = rationale.template_id
    if not (isinstance(t, int) and 0 <= t < len(templates)):
        return False
    c = tuple(sorted(int(a) for a in rationale.centre))
    want = reactant_set(list(rationale.reactants))      # canonical, maps cleared, order-invariant
    return any(_to_input(order, cc) == c and rr == want for cc, rr in _apply(templates[t], smi))
