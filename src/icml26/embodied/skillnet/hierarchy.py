"""Skill hierarchy of [B05] SkillNet: motion codes, their weighted distance, motion clusters, skill tokens.

A skill ("verb object") carries a 6-digit motion code; digits (ranges):
    1 contact time (0-2), 2 deformation (0-2), 3 arm fixed-axis rotation (0-1),
    4 object constrained translation (0-2), 5 object fixed-axis rotation (0-1), 6 tool use (0-1).
Distance (released rule, a sum over digits with weights w):
    digits 1, 2, 4:  w_i if exactly one of the two digits is 0, w_i / 2 if both are nonzero and differ, else 0
    digits 3, 5, 6:  w_i if the digits differ, else 0
A code's motion cluster is the nearest of the 12 released centres (ties: first centre in the released order).
Each verb becomes the token triple [motion_cluster, VerbNet class, verb].
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from icml26.harness import validate as check

RELEASED_WEIGHTS = (3.056, 1.539, 1.350, 2.844, 1.039, 2.632)
RELEASED_CENTERS = ("200200", "200100", "100200", "200010", "100100", "201010", "200001", "201201", "000001",
                    "220001", "100001", "200201")
_GRADED = (0, 1, 3)                         # digits whose zero <-> nonzero change costs more than nonzero <-> nonzero
_CODE = re.compile(r"[0-2][0-2][0-1][0-2][0-1][0-1]")


def validate_motion_code(code: str) -> str:
    """Return the code if it is six digits in ranges [0-2][0-2][0-1][0-2][0-1][0-1], else raise ValueError."""
    if not isinstance(code, str):
        raise TypeError(f"a motion code is a 6-character string such as '200200', got {type(code).__name__}")
    if not _CODE.fullmatch(code.strip()):
        raise ValueError(f"invalid motion code {code!r}: expected six digits with ranges "
                         "[0-2][0-2][0-1][0-2][0-1][0-1] (e.g. '200200' for pick)")
    return code.strip()


def _weights(weights: tuple[float, ...]) -> tuple[float, ...]:
    if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__") or len(weights) != 6:
        raise ValueError(f"weights must be 6 finite non-negative numbers, got {check.describe(weights)}")
    return tuple(check.non_negative("weights", w) for w in weights)


def motion_code_distance(a: str, b: str, weights: tuple[float, ...] = RELEASED_WEIGHTS) -> float:
    """Weighted motion-code distance [B05] (see the module docstring)."""
    a, b = validate_motion_code(a), validate_motion_code(b)
    weights = _weights(weights)
    d = 0.0
    for i, (x, y, w) in enumerate(zip(a, b, weights)):
        if x == y:
            continue
        d += w / 2.0 if (i in _GRADED and x != "0" and y != "0") else w
    return d


def assign_motion_cluster(code: str, centers: tuple[str, ...] = RELEASED_CENTERS,
                          weights: tuple[float, ...] = RELEASED_WEIGHTS) -> int:
    """Index of the nearest centre (first one on ties)."""
    code = validate_motion_code(code)
    if isinstance(centers, str):
        raise TypeError(f"centers must be a sequence of motion codes, got the string {centers!r}")
    check.non_empty("centers", centers)
    weights = _weights(weights)
    d = [motion_code_distance(code, c, weights) for c in centers]
    return int(np.argmin(d))


@dataclass(frozen=True)
class Skill:
    verb: str
    motion_code: str
    verbnet_class: str

    def __post_init__(self) -> None:
        if not isinstance(self.verb, str) or not self.verb:
            raise TypeError(f"verb must be a non-empty string, got {check.describe(self.verb)}")
        validate_motion_code(self.motion_code)


class SkillHierarchy:
    """verb -> (motion code, VerbNet class), with token triples [cluster, VerbNet id, verb id] [B05].

    Token ids share one embedding table: clusters 0..C-1, VerbNet classes C..C+K-1, verbs after that.
    """

    def __init__(self, skills: dict[str, tuple[str, str]], centers: tuple[str, ...] = RELEASED_CENTERS):
        if not isinstance(skills, dict):
            raise TypeError(f"skills must be a dict {{verb: (motion_code, verbnet_class)}}, got {type(skills).__name__}")
        if not skills:
            raise ValueError("SkillHierarchy needs at least one verb: {verb: (motion_code, verbnet_class)}")
        for verb, value in skills.items():
            if not isinstance(value, (tuple, list)) or len(value) != 2:
                raise TypeError(f"skills[{verb!r}] must be a pair (motion_code, verbnet_class), got "
                                f"{check.describe(value)}")
        if isinstance(centers, str):
            raise TypeError(f"centers must be a sequence of motion codes, got the string {centers!r}")
        check.non_empty("centers", centers)
        self.centers = tuple(validate_motion_code(c) for c in centers)
        self.skills = {v: Skill(v, validate_motion_code(mc), str(vn)) for v, (mc, vn) in skills.items()}
        self.verbs = list(self.skills)
        self.classes = sorted({s.verbnet_class for s in self.skills.values()})
        self.n_tokens = len(self.centers) + len(self.classes) + len(self.verbs)

    def _get(self, verb: str) -> Skill:
        if verb not in self.skills:
            raise ValueError(f"unknown verb {verb!r}; known verbs: {', '.join(self.verbs)}")
        return self.skills[verb]

    def cluster(self, verb: str) -> int:
        return assign_motion_cluster(self._get(verb).motion_code, self.centers)

    def tokens(self, verb: str) -> list[int]:
        """[motion cluster id, VerbNet class id, verb id] in one shared vocabulary."""
        s = self._get(verb)
        c = len(self.centers)
        return [self.cluster(verb), c + self.classes.index(s.verbnet_class), c + len(self.classes) +
                self.verbs.index(verb)]

    def similarity(self, verbs: list[str] | None = None) -> np.ndarray:
        """Skill similarity S_ij = (same cluster + same VerbNet class + [i = j]) / 3 (our choice)."""
        verbs = self.verbs if verbs is None else verbs
        if isinstance(verbs, str):
            raise TypeError(f"verbs must be a list of verb names, got the string {verbs!r}")
        check.non_empty("verbs", verbs)
        tok = np.array([self.tokens(v) for v in verbs])
        return (tok[:, None, :] == tok[None, :, :]).mean(-1)
