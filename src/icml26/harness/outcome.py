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

The evidence rules (so that a claim could have failed):

- **Strongest baseline.** ``baselines={name: value}`` lists every baseline the run measured; the strongest for the
  claim's direction is the reference, and the record names it.
- **Control.** ``control=`` is the same quantity on an arm with the paper's contribution removed (untrained,
  shuffled, random, switched off). The claim holds only if the method passes *and the control fails* the same
  test; a control that passes too makes it ``inconclusive``.
- **Fixed bars.** A reference not measured in the run (``bar=True``; every band ``op="in"`` by default) must carry
  a control, or say in ``control_arm`` why none can exist.
- **Timing.** A timed claim carries ``timing_control`` (the baseline timed against itself, from
  :func:`icml26.harness.compare_times`); a drifting same-work ratio makes it ``inconclusive``, unless the verdict
  is the same with the measurement moved by the square of that drift both ways (``drift_robust``).
- Seed-invariant claims and power estimates are decided over seeds: see :mod:`icml26.harness.stats`.
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
    """``measured op reference``; ``None`` when either side is not a finite number. A measurement within
    floating-point rounding of the reference (relative 1e-12) counts as equal to it: an F1 of 54/60 computed as
    0.8999999999999999 is on the edge of the band [0.9, 1], not outside it."""
    if measured is None or not math.isfinite(float(measured)):
        return None
    if op == "in":
        lo, hi = reference  # type: ignore[misc]
        m = _snap(_snap(float(measured), float(lo)), float(hi))
        return bool(lo <= m <= hi)
    if op not in _OPS:
        raise ValueError(f"unknown comparison {op!r}; use one of <, <=, >, >=, in")
    if reference is None or not math.isfinite(float(reference)):  # type: ignore[arg-type]
        return None
    return bool(_OPS[op](_snap(float(measured), float(reference)), float(reference)))  # type: ignore[arg-type]


def _snap(x: float, ref: float) -> float:
    """``ref`` when ``x`` differs from it only by rounding (relative 1e-12 of the larger of the two; no absolute
    floor, so a check against a tiny bar such as ``< 1e-12`` is not blurred), else ``x``."""
    return ref if math.isfinite(ref) and abs(x - ref) <= 1e-12 * max(abs(ref), abs(x)) else x


def drift_robust(measured: float, op: Op, reference: float | tuple[float, float], timing_control: float) -> bool | None:
    """The verdict of ``measured op reference`` when it survives an unstable timing; else ``None``.

    A same-work ratio ``r`` away from 1 says a timed ratio can be off by a factor ``d = max(r, 1/r)`` from each
    arm, so by up to ``d²`` for a ratio of two arms. A verdict that is the same with the measurement divided and
    multiplied by ``d²`` cannot be an artefact of that drift (B12's ~500× speed-up under a 0.88 same-work ratio);
    any closer call stays ``inconclusive`` ("timing unstable")."""
    if not (math.isfinite(timing_control) and timing_control > 0):
        return None
    d2 = max(timing_control, 1.0 / timing_control) ** 2
    verdicts = {compare(measured * f, op, reference) for f in (d2, 1.0 / d2)}
    return verdicts.pop() if len(verdicts) == 1 else None


@dataclass
class Claim:
    """One headline claim, checked by a measurement from this run.

    Args:
        statement: the claim in the paper's words (shortened).
        measured: the value measured in this run.
        op: how ``measured`` must relate to ``reference`` for the claim to hold.
        reference: the baseline's value measured in the same run, a bound, or a ``(lo, hi)`` band. Leave it out
            when ``baselines`` is given: the strongest of them is the reference.
        baseline: what the reference is (e.g. ``"ULA at equal gradient evaluations"``).
        metric: what ``measured`` is (e.g. ``"W2 of SRK-LMC"``).
        paper: the paper's own figure, if it states one (text, e.g. ``"1.6x"``).
        note: why it may not hold at our scale, or how it was measured.
        falsifier: the outcome that would have refuted it (required for ``kind="claim"``), e.g.
            ``"SRK-LMC's W2 at or above ULA's at equal gradient evaluations"``.
        kind: ``"claim"`` (refutable, counted) or ``"check"`` (true by construction; reported separately).
        paired: optional per-instance differences ``measured_i - reference_i`` over the run's instances; a
            single-seed verdict is inconclusive when their 95% interval contains 0. With ``baselines``, a dict
            ``{name: differences against that baseline}``; the strongest baseline's list is used.
        baselines: ``{name: value}`` of every baseline the run measured for this claim. The reference is the
            strongest for the claim's direction (the largest for ``>``/``>=``, the smallest for ``<``/``<=``);
            the record names it (``strongest_baseline``) and lists the others.
        control: the same quantity measured in the same run on an arm with the paper's contribution removed
            (untrained / random-init model, shuffled labels, random plan, method switched off, unguided prior).
            The claim holds only if the method passes its test *and the control fails it* against the same
            reference; a control that passes too makes the verdict ``inconclusive`` ("the control passes too").
        control_arm: what the control is (required with ``control``); for a fixed-bar claim without a control,
            why none exists (e.g. ``"none: theory against an exact simulation"``).
        control_paired: optional per-instance differences ``control_i - reference_i``. With ``baselines``, a dict
            ``{name: differences against that baseline}`` like ``paired``; the strongest baseline's list is used.
        bar: the reference is a fixed bar (a number not measured in this run: "AUROC > 0.9", "≥ 2 tokens per
            call", a theoretical slope). Default: True for bands (``op="in"``), else False. A fixed-bar claim must
            carry a ``control`` or say in ``control_arm`` why none exists; ``Claim`` refuses it otherwise.
        timing_control: for a timed claim, the same-work control ratio (the baseline timed against itself; see
            :func:`icml26.harness.compare_times`). More than ``timing_tolerance`` from 1 makes the claim
            ``inconclusive`` ("timing unstable").
    """

    statement: str
    measured: float
    op: Op
    reference: float | tuple[float, float] | None = None
    baseline: str = ""
    metric: str = ""
    paper: str | None = None
    note: str = ""
    falsifier: str = ""
    kind: Kind = "claim"
    paired: list[float] | dict[str, list[float]] | None = None
    baselines: dict[str, float] | None = None
    control: float | None = None
    control_arm: str = ""
    control_paired: list[float] | dict[str, list[float]] | None = None
    bar: bool | None = None
    timing_control: float | None = None
    timing_tolerance: float = 0.05
    strongest_baseline: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.statement, str) or not self.statement.strip():
            raise ValueError("Claim needs a non-empty statement (the claim in the paper's words)")
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}; use 'claim' (refutable) or 'check' (true by construction)")
        if self.kind == "claim" and not str(self.falsifier).strip():
            raise ValueError(f"claim {self.statement!r} needs falsifier=...: the outcome that would have made it not hold "
                             "(if no outcome could, it is a check: pass kind='check')")
        if self.op not in ("<", "<=", ">", ">=", "in"):
            raise ValueError(f"unknown comparison {self.op!r}; use one of <, <=, >, >=, in")
        self._resolve_reference()
        for field_name in ("paired", "control_paired"):
            if isinstance(getattr(self, field_name), dict):
                raise ValueError(f"claim {self.statement!r}: {field_name} is a dict of per-baseline differences, which "
                                 "needs baselines=... with the same names")
        if self.paired is not None:
            self.paired = [float(x) for x in self.paired]
        self.measured = float(self.measured)
        if self.bar is None:
            self.bar = self.op == "in"
        self._check_control()
        if self.timing_control is not None:
            self.timing_control = float(self.timing_control)
            if not (isinstance(self.timing_tolerance, (int, float)) and 0 < self.timing_tolerance < 1):
                raise ValueError(f"timing_tolerance must be in (0, 1), got {self.timing_tolerance!r}")

    def _resolve_reference(self) -> None:
        if self.baselines is not None:
            if self.reference is not None:
                raise ValueError(f"claim {self.statement!r}: give reference=... or baselines={{...}}, not both (the "
                                 "strongest baseline is the reference)")
            if self.op == "in":
                raise ValueError("op='in' compares with a band (lo, hi), not with baselines")
            if not isinstance(self.baselines, dict) or not self.baselines:
                raise ValueError(f"claim {self.statement!r}: baselines must be a non-empty dict {{name: value}}")
            self.baselines = {str(k): float(v) for k, v in self.baselines.items()}
            finite = {k: v for k, v in self.baselines.items() if math.isfinite(v)}
            if finite:
                pick = max if self.op in (">", ">=") else min
                name = pick(finite, key=lambda k: finite[k])
            else:
                name = next(iter(self.baselines))
            self.strongest_baseline = name
            self.reference = self.baselines[name]
            if not self.baseline:
                self.baseline = name
            for field_name in ("paired", "control_paired"):
                per_baseline = getattr(self, field_name)
                if isinstance(per_baseline, dict):
                    if set(per_baseline) - set(self.baselines):
                        raise ValueError(f"claim {self.statement!r}: {field_name} names "
                                         f"{sorted(set(per_baseline) - set(self.baselines))} are not in baselines")
                    setattr(self, field_name, per_baseline.get(name))
            return
        if self.reference is None:
            raise ValueError(f"claim {self.statement!r} needs reference=... (a same-run baseline, a bound or a band) "
                             "or baselines={name: value}")
        if self.op == "in":
            if not (isinstance(self.reference, (tuple, list)) and len(self.reference) == 2):
                raise ValueError("op='in' needs reference=(lo, hi)")
            self.reference = (float(self.reference[0]), float(self.reference[1]))
        else:
            self.reference = float(self.reference)  # type: ignore[arg-type]

    def _check_control(self) -> None:
        if self.control is not None:
            self.control = float(self.control)
            if not str(self.control_arm).strip():
                raise ValueError(f"claim {self.statement!r}: control=... needs control_arm='what the control is' "
                                 "(untrained model, shuffled labels, method switched off, ...)")
        if self.control_paired is not None:
            if self.control is None:
                raise ValueError(f"claim {self.statement!r}: control_paired needs control=...")
            self.control_paired = [float(x) for x in self.control_paired]
        if self.kind == "claim" and self.bar and self.control is None and not str(self.control_arm).strip():
            raise ValueError(
                f"claim {self.statement!r} compares with a fixed bar ({_ref_text(self.op, self.reference)}), not with a "
                "baseline measured in this run, so it needs control=... (the same quantity with the paper's contribution "
                "removed: untrained, shuffled, random, switched off), or control_arm='none: <why no control exists>'")

    @property
    def paired_ci(self) -> tuple[float, float] | None:
        """95% t-interval of the mean per-instance difference, or None without ``paired`` (or < 2 finite)."""
        return _ci(self.paired)  # type: ignore[arg-type]

    @property
    def control_verdict(self) -> Verdict | None:
        """The control's own verdict under the claim's test (None without a control)."""
        if self.control is None:
            return None
        h = compare(self.control, self.op, self.reference)  # type: ignore[arg-type]
        ci = _ci(self.control_paired)  # type: ignore[arg-type]  # a list once resolved
        if h is not None and self.op != "in" and ci is not None and ci[0] <= 0.0 <= ci[1]:
            h = None
        return "inconclusive" if h is None else ("holds" if h else "does not hold")

    @property
    def timing_stable(self) -> bool | None:
        if self.timing_control is None:
            return None
        return math.isfinite(self.timing_control) and abs(self.timing_control - 1.0) <= self.timing_tolerance

    def _decide(self) -> tuple[bool | None, str]:
        h = compare(self.measured, self.op, self.reference)  # type: ignore[arg-type]
        if h is None:
            return None, "not a finite number"
        if self.timing_stable is False:  # first: with a drifting machine the interval itself says nothing
            robust = drift_robust(self.measured, self.op, self.reference, self.timing_control)  # type: ignore[arg-type]
            if robust is None:
                return None, (f"timing unstable (same-work ratio {self.timing_control:.3f}, not within "
                              f"{self.timing_tolerance:g} of 1)")
            h = robust  # the effect is far larger than the drift; the paired interval and the control still apply
        ci = self.paired_ci
        if self.op != "in" and ci is not None and ci[0] <= 0.0 <= ci[1]:
            return None, "the per-instance interval of (measured − reference) contains 0"
        if self.op in (">", ">=", "<", "<=") and ci is not None and h == (ci[1] < 0.0 if self.op in (">", ">=")
                                                                          else ci[0] > 0.0):
            return None, (f"the per-instance differences (interval [{ci[0]:.4g}, {ci[1]:.4g}]) point the other way "
                          "from measured vs reference: the measured value is not the instances' mean, so the claim "
                          "disagrees with itself")
        if h and self.control is not None:
            cv = self.control_verdict
            if cv == "holds":
                return None, f"the control passes too ({self.control_arm}: {self.control:.4g})"
        return h, ""

    @property
    def holds(self) -> bool | None:
        """Computed verdict: True / False, or None when the measurement is not a finite number, the per-instance
        paired interval (when given) contains 0, the timing was unstable, or the control passes too."""
        return self._decide()[0]

    @property
    def reason(self) -> str:
        """Why the verdict is inconclusive ("" when it is not)."""
        return self._decide()[1]

    @property
    def verdict(self) -> Verdict:
        h = self.holds
        return "inconclusive" if h is None else ("holds" if h else "does not hold")

    def to_dict(self) -> dict[str, Any]:
        ref = list(self.reference) if isinstance(self.reference, tuple) else self.reference
        d = {
            "statement": self.statement, "measured": _num(self.measured), "op": self.op,
            "reference": _num(ref) if not isinstance(ref, list) else ref, "baseline": self.baseline,
            "metric": self.metric, "paper": self.paper, "note": self.note, "verdict": self.verdict, "kind": self.kind,
            "reason": self.reason, "falsifier": self.falsifier, "bar": bool(self.bar),
            "paired": [_num(x) for x in self.paired] if self.paired else None,  # type: ignore[union-attr]
            "paired_ci": [_num(x) for x in self.paired_ci] if self.paired_ci else None,
            "baselines": {k: _num(v) for k, v in self.baselines.items()} if self.baselines else None,
            "strongest_baseline": self.strongest_baseline or None,
            "control": _num(self.control) if self.control is not None else None,
            "control_arm": self.control_arm, "control_verdict": self.control_verdict,
            "control_paired_ci": [_num(x) for x in ci] if (ci := _ci(self.control_paired)) else None,  # type: ignore[arg-type]
            "timing_control": _num(self.timing_control) if self.timing_control is not None else None,
            "timing_tolerance": self.timing_tolerance if self.timing_control is not None else None,
        }
        if d["verdict"] == "inconclusive" and self.paired and self.op != "in" and "interval" in d["reason"]:
            from .intervals import power

            d["power"] = power(self.paired, unit="instances")  # type: ignore[arg-type]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Claim":
        ref = d["reference"]
        ref = tuple(ref) if isinstance(ref, list) else ref
        nan = float("nan")
        measured = d["measured"] if d["measured"] is not None else nan
        baselines = d.get("baselines")
        kind = d.get("kind", "claim")
        bar = d.get("bar")
        control = d.get("control")
        arm = d.get("control_arm", "") or ""
        if kind == "claim" and (bar if bar is not None else d["op"] == "in") and control is None and not arm:
            arm = "(none recorded)"  # an old record from before controls: readable, not re-judged
        return cls(statement=d["statement"], measured=measured, op=d["op"],
                   reference=None if baselines else (nan if ref is None else ref),
                   baseline=d.get("baseline", ""), metric=d.get("metric", ""), paper=d.get("paper"),
                   note=d.get("note", ""), falsifier=d.get("falsifier", "") or "(not stated)", kind=kind,
                   paired=[nan if x is None else x for x in d["paired"]] if d.get("paired") else None,
                   baselines={k: nan if v is None else v for k, v in baselines.items()} if baselines else None,
                   control=control, control_arm=arm, bar=bar,
                   timing_control=d.get("timing_control"), timing_tolerance=d.get("timing_tolerance") or 0.05)


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


def _ci(values: list[float] | None) -> tuple[float, float] | None:
    """95% t-interval of the mean of ``values``; None when fewer than 2 are finite."""
    if not values:
        return None
    from .intervals import summarize

    s = summarize(values)
    return (s.lo, s.hi) if s.n >= 2 else None


def _ref_text(op: str, reference: Any) -> str:
    if op == "in" and isinstance(reference, (tuple, list)):
        return f"in [{reference[0]:g}, {reference[1]:g}]"
    return f"{op} {reference}"


def _num(x: Any) -> Any:
    """JSON-safe number: NaN/inf become None."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return x
    return f if math.isfinite(f) else None
