"""Claim and Outcome: what a reproduction returns.

A :class:`Claim` pairs a statement from the abstract with a number measured in the run and the rule that
decides it. The verdict is *computed* from the measurement (``measured <op> reference``) and is never stored
as a constant. The reference is normally a baseline measured in the same run (ULA's W2, plain greedy's
time); for bands such as "slope ~ 1.5" it is an interval ``(lo, hi)``.

Two kinds (``kind``):

- ``"claim"``: an empirical statement from the abstract that this run could refute. It must say, in
  ``falsifier``, what outcome would have made it not hold. Only claims count in verdict summaries.
- ``"check"``: a property true by construction or by a theorem (exactness, identity with a baseline when
  switched off, byte accounting). Checks are reported and tested, but never counted as evidence for a claim.

A claim measured over many instances (prompts, graphs, test points) may carry ``paired``: the per-instance
differences ``measured_i - reference_i``. On a single seed the verdict is then ``inconclusive`` when the 95%
t-interval of their mean contains 0, so one lucky average over a handful of instances cannot decide a claim.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Literal

Op = Literal["<", "<=", ">", ">=", "in"]
Verdict = Literal["holds", "does not hold", "inconclusive"]
Kind = Literal["claim", "check"]
KINDS = ("claim", "check")

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
        falsifier: the outcome that would have refuted it (required for ``kind="claim"``), e.g.
            ``"SRK-LMC's W2 at or above ULA's at equal gradient evaluations"``.
        kind: ``"claim"`` (refutable, counted) or ``"check"`` (true by construction; reported separately).
        paired: optional per-instance differences ``measured_i - reference_i`` over the run's instances; a
            single-seed verdict is inconclusive when their 95% interval contains 0.
    """

    statement: str
    measured: float
    op: Op
    reference: float | tuple[float, float]
    baseline: str = ""
    metric: str = ""
    paper: str | None = None
    note: str = ""
    falsifier: str = ""
    kind: Kind = "claim"
    paired: list[float] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}; use 'claim' (refutable) or 'check' (true by construction)")
        if self.kind == "claim" and not str(self.falsifier).strip():
            raise ValueError(f"claim {self.statement!r} needs falsifier=...: the outcome that would have made it not hold "
                             "(if no outcome could, it is a check: pass kind='check')")
        if self.paired is not None:
            self.paired = [float(x) for x in self.paired]
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
    def paired_ci(self) -> tuple[float, float] | None:
        """95% t-interval of the mean per-instance difference, or None without ``paired`` (or < 2 finite)."""
        if not self.paired:
            return None
        from .stats import summarize

        s = summarize(self.paired)
        return (s.lo, s.hi) if s.n >= 2 else None

    @property
    def holds(self) -> bool | None:
        """Computed verdict: True / False, or None when the measurement is not a finite number or the
        per-instance paired interval (when given) contains 0."""
        h = compare(self.measured, self.op, self.reference)
        ci = self.paired_ci
        if h is not None and self.op != "in" and ci is not None and ci[0] <= 0.0 <= ci[1]:
            return None
        return h

    @property
    def verdict(self) -> Verdict:
        h = self.holds
        return "inconclusive" if h is None else ("holds" if h else "does not hold")

    def to_dict(self) -> dict[str, Any]:
        ref = list(self.reference) if isinstance(self.reference, tuple) else self.reference
        return {
            "statement": self.statement, "measured": _num(self.measured), "op": self.op,
            "reference": ref, "baseline": self.baseline, "metric": self.metric,
            "paper": self.paper, "note": self.note, "verdict": self.verdict, "kind": self.kind,
            "falsifier": self.falsifier, "paired": [_num(x) for x in self.paired] if self.paired else None,
            "paired_ci": [_num(x) for x in self.paired_ci] if self.paired_ci else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Claim":
        ref = d["reference"]
        ref = tuple(ref) if isinstance(ref, list) else ref
        measured = d["measured"] if d["measured"] is not None else float("nan")
        return cls(statement=d["statement"], measured=measured, op=d["op"], reference=ref,
                   baseline=d.get("baseline", ""), metric=d.get("metric", ""), paper=d.get("paper"),
                   note=d.get("note", ""), falsifier=d.get("falsifier", "") or "(not stated)",
                   kind=d.get("kind", "claim"),
                   paired=[float("nan") if x is None else x for x in d["paired"]] if d.get("paired") else None)


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
        seen: set[str] = set()
        for c in self.claims:
            if c.statement in seen:
                raise ValueError(f"two claims share the statement {c.statement!r}; seeds are matched by statement, "
                                 "so make each statement unique")
            seen.add(c.statement)

    @property
    def checks(self) -> list[Claim]:
        """The entries of ``claims`` that are checks (true by construction), not refutable claims."""
        return [c for c in self.claims if c.kind == "check"]


def _num(x: Any) -> Any:
    """JSON-safe number: NaN/inf become None."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return x
    return f if math.isfinite(f) else None
