"""Claim and Outcome: what a reproduction returns.

A :class:`Claim` pairs a statement from the abstract with a number measured in the run and the rule that
decides it. The verdict is *computed* from the measurement (``measured <op> reference``) and is never stored
as a constant. The reference is normally a baseline measured in the same run (ULA's W2, plain greedy's
time); for bands such as "slope ~ 1.5" it is an interval ``(lo, hi)``.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Literal

Op = Literal["<", "<=", ">", ">=", "in"]
Verdict = Literal["holds", "does not hold", "inconclusive"]

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def compare(measured: float, op: Op, reference: float | tuple[float, float]) -> bool | None:
    """``measured op reference``; ``None`` when either side is not a finite number."""
    if measured is None or not math.isfinite(float(measured)):
        return None
    if op == "in":
        lo, hi = reference  # type: ignore[misc]
        return bool(lo <= measured <= hi)
    if op not in _OPS:
        raise ValueError(f"unknown comparison {op!r}; use one of <, <=, >, >=, in")
    if reference is None or not math.isfinite(float(reference)):  # type: ignore[arg-type]
        return None
    return bool(_OPS[op](float(measured), float(reference)))  # type: ignore[arg-type]


@dataclass
class Claim:
    """One headline claim, checked by a measurement from this run.

    Args:
        statement: the claim in the paper's words (shortened).
        measured: the value measured in this run.
        op: how ``measured`` must relate to ``reference`` for the claim to hold.
        reference: the baseline's value measured in the same run, a bound, or a ``(lo, hi)`` band.
        baseline: what the reference is (e.g. ``"ULA at equal gradient evaluations"``).
        metric: what ``measured`` is (e.g. ``"W2 of SRK-LMC"``).
        paper: the paper's own figure, if it states one (text, e.g. ``"1.6x"``).
        note: why it may not hold at our scale, or how it was measured.
    """

    statement: str
    measured: float
    op: Op
    reference: float | tuple[float, float]
    baseline: str = ""
    metric: str = ""
    paper: str | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.op not in ("<", "<=", ">", ">=", "in"):
            raise ValueError(f"unknown comparison {self.op!r}; use one of <, <=, >, >=, in")
        if self.op == "in":
            if not (isinstance(self.reference, (tuple, list)) and len(self.reference) == 2):
                raise ValueError("op='in' needs reference=(lo, hi)")
            self.reference = (float(self.reference[0]), float(self.reference[1]))
        else:
            self.reference = float(self.reference)  # type: ignore[arg-type]
        self.measured = float(self.measured)

    @property
    def holds(self) -> bool | None:
        """Computed verdict: True / False, or None when the measurement is not a finite number."""
        return compare(self.measured, self.op, self.reference)

    @property
    def verdict(self) -> Verdict:
        h = self.holds
        return "inconclusive" if h is None else ("holds" if h else "does not hold")

    def to_dict(self) -> dict[str, Any]:
        ref = list(self.reference) if isinstance(self.reference, tuple) else self.reference
        return {
            "statement": self.statement, "measured": _num(self.measured), "op": self.op,
            "reference": ref, "baseline": self.baseline, "metric": self.metric,
            "paper": self.paper, "note": self.note, "verdict": self.verdict,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Claim":
        ref = d["reference"]
        ref = tuple(ref) if isinstance(ref, list) else ref
        measured = d["measured"] if d["measured"] is not None else float("nan")
        return cls(statement=d["statement"], measured=measured, op=d["op"], reference=ref,
                   baseline=d.get("baseline", ""), metric=d.get("metric", ""), paper=d.get("paper"),
                   note=d.get("note", ""))


@dataclass
class Outcome:
    """What ``reproduce(budget, seed)`` returns.

    ``metrics``: name -> number. ``claims``: the checked claims. ``tables``: name -> list of row dicts.
    ``figures``: name -> matplotlib Figure (saved as PNG by the runner). ``wall_time`` is filled in by the
    runner when left at 0.
    """

    metrics: dict[str, float] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    wall_time: float = 0.0
    notes: str = ""

    def __post_init__(self) -> None:
        for c in self.claims:
            if not isinstance(c, Claim):
                raise TypeError(f"Outcome.claims must hold Claim objects, got {type(c).__name__}")


def _num(x: Any) -> Any:
    """JSON-safe number: NaN/inf become None."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return x
    return f if math.isfinite(f) else None
