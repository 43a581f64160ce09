"""Aggregating seeds: mean, 95% interval, and a claim's verdict over seeds.

Rules (documented in the README and in :func:`aggregate_claims`): a claim's verdict over seeds is its comparison
applied to the *mean* measurement and the *mean* reference (with ``baselines``, the baseline strongest on the
means), downgraded to ``inconclusive`` when any seed is not finite, when the 95% t-interval of the paired
difference (measured - reference) contains 0, for a band claim (``op="in"``) when the interval of the
measurement crosses an edge of the band, when the control passes the same test on the aggregate, or when a timed
claim's same-work control drifted. A claim whose measured value and reference are the same on every seed is
``seed-invariant``: one piece of evidence, counted apart from claims decided over seeds.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .intervals import Summary, power, summarize
from .outcome import compare, drift_robust

#: relative / absolute tolerance under which per-seed values count as the same number
_SAME_RTOL, _SAME_ATOL = 1e-9, 1e-12
#: the bucket of verdict_counts for claims whose numbers are identical on every seed
SEED_INVARIANT = "seed-invariant"


def _same(values: Sequence[float]) -> bool:
    x = np.asarray(values, dtype=float)
    return bool(x.size >= 2 and np.all(np.isfinite(x)) and np.allclose(x, x[0], rtol=_SAME_RTOL, atol=_SAME_ATOL))


def _strongest(group: Sequence[dict[str, Any]], op: str) -> tuple[str | None, dict[str, float]]:
    """The baseline with the strongest mean over seeds for ``op``, and every baseline's mean."""
    names: list[str] = []
    for c in group:
        names += [k for k in (c.get("baselines") or {}) if k not in names]
    if not names:
        return None, {}
    means = {k: summarize([_f((c.get("baselines") or {}).get(k)) for c in group]).mean for k in names}
    finite = {k: v for k, v in means.items() if math.isfinite(v)}
    if not finite:
        return names[0], means
    pick = max if op in (">", ">=") else min
    return pick(finite, key=lambda k: finite[k]), means


def aggregate_claims(per_seed: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Aggregate claim dicts (``Claim.to_dict``) from several seeds, matched by statement.

    Rules, in order:

    1. A claim with any non-finite seed (measured, or a reference that is not a band) is ``inconclusive``;
       ``n_finite``/``n_seeds`` say how many seeds were usable. One finite seed never decides for three.
    2. One seed: that seed's own verdict (which already honours ``paired``, the control and the timing control).
    3. Two or more: the comparison on the means (with ``baselines``: against the baseline strongest on the means,
       per seed that baseline's value), downgraded to ``inconclusive`` when the 95% t-interval of the paired
       difference (measured - reference) contains 0, or, for a band, when the measurement's interval crosses an
       edge. A *claim* (not a check) whose measured value equals its reference exactly on every seed is
       ``inconclusive``: the comparison cannot separate the two sides.
    4. Control: when the claim holds so far and carries a control, the same rule is applied to the control's
       values (against the same per-seed reference); if the control holds too, the claim is ``inconclusive``
       ("the control passes too"). The control must *clearly* fail: when its own interval over seeds reaches the
       bar (the paired interval of control - reference contains 0, or it crosses a band's edge), the claim is
       ``inconclusive`` too ("the control does not clearly fail"). A control that is not finite on some seed
       cannot show that it fails: also ``inconclusive``.
    5. Timing: a claim carrying ``timing_control`` is ``inconclusive`` when the median same-work ratio over seeds is
       more than its tolerance from 1.
    6. ``seed_invariant``: measured and reference identical on every seed (n >= 2). The verdict is the one that
       number gives, but it is one piece of evidence: :func:`verdict_counts` counts it apart.

    Every inconclusive claim gets ``power``: the interval of (measured - reference) over seeds and how many seeds
    the observed effect would need to be decided at 95% (see :func:`icml26.harness.intervals.power`).
    """
    if not per_seed:
        return []
    out = []
    for first in per_seed[0]:
        group = [c for claims in per_seed for c in claims if c["statement"] == first["statement"]]
        out.append(_aggregate_one(first, group))
    return out


def _aggregate_one(first: dict[str, Any], group: Sequence[dict[str, Any]]) -> dict[str, Any]:
    op = first["op"]
    band = op == "in"
    meas = [_f(c["measured"]) for c in group]
    row = dict(first)
    row["kind"] = first.get("kind", "claim")
    for key in ("baseline", "note"):  # labels that embed a per-seed number would read as the mean over seeds
        labels = {str(c.get(key) or "") for c in group}
        if len(labels) > 1 and first.get(key):
            row[key] = f"{first[key]} [the first seed's text; it differs by seed]"
    strongest, base_means = (None, {}) if band else _strongest(group, op)
    if strongest is not None:
        refs = [_f((c.get("baselines") or {}).get(strongest)) for c in group]
        row["strongest_baseline"] = strongest
        row["baselines"] = base_means
        if not first.get("baseline") or first.get("baseline") == first.get("strongest_baseline"):
            row["baseline"] = strongest
    else:
        refs = [] if band else [_f(c["reference"]) for c in group]
    finite = [math.isfinite(m) and (band or math.isfinite(r)) for m, r in zip(meas, refs or meas)]
    ms = summarize(meas)
    row["measured"] = ms.mean
    row["measured_ci"] = [ms.lo, ms.hi]
    row["n_seeds"] = len(group)
    row["n_finite"] = int(sum(finite))
    row["seed_verdicts"] = [c["verdict"] for c in group]
    row["seed_measured"] = [c["measured"] for c in group]
    row["seed_paired_ci"] = [c.get("paired_ci") for c in group]  # what decided each seed, where it was paired
    row["seed_reference"] = None if band else refs  # each seed's own reference (a same-run baseline moves with it)
    tcs = [_f(c["timing_control"]) for c in group if c.get("timing_control") is not None]
    if tcs:  # the median same-work ratio over seeds (what the timing rule judges), not the first seed's
        row["timing_control"] = float(np.median(tcs)) if all(math.isfinite(t) for t in tcs) else math.nan
    invariant = len(group) >= 2 and all(finite) and _same(meas) and (band or _same(refs))
    row["seed_invariant"] = invariant
    reason = ""
    h: bool | None
    diffs: list[float] = []
    effect: float | None = None
    if band:
        lo, hi = first["reference"]
        row["reference"] = [lo, hi]
        h = compare(ms.mean, "in", (lo, hi))
        if h is not None and ms.n >= 2 and not invariant and (ms.lo < lo <= ms.hi or ms.lo <= hi < ms.hi):
            h, reason = None, "the interval over seeds crosses an edge of the band"
        diffs = [m - (lo if abs(m - lo) < abs(m - hi) else hi) for m in meas]  # distance to the nearest edge
        effect = min(abs(ms.mean - lo), abs(ms.mean - hi)) if math.isfinite(ms.mean) else None
    else:
        # the reference over the same seeds as the measured mean (a seed whose measurement is not finite drops out
        # of both; A16's reference once averaged 5 seeds against a measured mean over 4)
        rs = summarize([r for r, m in zip(refs, meas) if math.isfinite(m)] or refs)
        row["reference"] = rs.mean
        row["reference_ci"] = [rs.lo, rs.hi]
        h = compare(ms.mean, op, rs.mean)
        diffs = [m - r for m, r in zip(meas, refs)]
        if h is not None and len(group) >= 2:
            ds = summarize(diffs)
            row["difference_ci"] = [ds.lo, ds.hi]
            if ds.lo == ds.hi == 0.0:
                if row["kind"] == "claim":
                    h, reason = None, "measured equals the reference on every seed"
            elif ds.lo <= 0.0 <= ds.hi:
                h, reason = None, "the interval of (measured − reference) over seeds contains 0"
    if not all(finite):
        h, reason = None, f"{len(group) - int(sum(finite))} of {len(group)} seeds not finite"
    if len(group) >= 2 and h is not None and tcs:
        h, reason = _timing_rule(row["timing_control"], float(first.get("timing_tolerance") or 0.05), h, reason,
                                 ms.mean, op, (lo, hi) if band else row["reference"])
    if len(group) >= 2 and h:
        h, reason = _control_rule(row, group, refs, band, h, reason)
    elif any(c.get("control") is not None for c in group):
        if len(group) >= 2:  # the control's own verdict over seeds (the claim did not pass, so it cannot undo it)
            _control_rule(row, group, refs, band, False, reason)
        else:
            row["control"] = _f(group[0].get("control"))
    if len(group) == 1:
        row["verdict"] = group[0]["verdict"] if all(finite) else "inconclusive"
        row["reason"] = group[0].get("reason", "") if all(finite) else reason
    else:
        row["verdict"] = "inconclusive" if h is None else ("holds" if h else "does not hold")
        row["reason"] = reason if h is None else ""
    undecided_by_spread = not str(row["reason"]).startswith(("the control", "timing unstable"))
    if row["verdict"] == "inconclusive" and len(group) >= 2 and undecided_by_spread:
        row["power"] = power(diffs, unit="seeds", effect=effect)
    elif len(group) >= 2:
        row.pop("power", None)
    return row


def _timing_rule(med: float, tol: float, h: bool, reason: str, measured: float, op: str,
                 reference: Any) -> tuple[bool | None, str]:
    """The over-seeds timing rule on the median same-work ratio ``med`` (NaN when a seed's is not finite)."""
    if not (math.isfinite(med) and abs(med - 1.0) <= tol):
        if math.isfinite(med) and drift_robust(measured, op, reference, med) == h:  # type: ignore[arg-type]
            return h, reason  # the effect is far larger than the drift (outcome.drift_robust)
        return None, f"timing unstable (median same-work ratio {med:.3f} over seeds, not within {tol:g} of 1)"
    return h, reason


def _control_rule(row: dict[str, Any], group: Sequence[dict[str, Any]], refs: list[float], band: bool,
                  h: bool, reason: str) -> tuple[bool | None, str]:
    ctrl = [c.get("control") for c in group]
    if all(c is None for c in ctrl):
        return h, reason
    vals = [_f(c) for c in ctrl]
    cs = summarize(vals)
    row["control"] = cs.mean
    row["control_ci"] = [cs.lo, cs.hi]
    arm = group[0].get("control_arm") or "control"
    if not all(math.isfinite(v) for v in vals):
        row["control_verdict"] = "inconclusive"
        return None, f"the control ({arm}) is not finite on every seed, so it cannot show that it fails"
    # symmetric with the method's own rule: the control must clearly pass or clearly fail over seeds. A control
    # whose mean fails but whose interval reaches the bar has not been shown to fail (A08's nominal-policy slope
    # -0.43 [-0.70, -0.15] against <= -0.5 once let the rate claim hold)
    if band:
        lo, hi = row["reference"]
        hc = compare(cs.mean, "in", (lo, hi))
        if hc is not None and (cs.lo < lo <= cs.hi or cs.lo <= hi < cs.hi) and not _same(vals):
            hc = None
    else:
        hc = compare(cs.mean, row["op"], row["reference"])
        cd = summarize([v - r for v, r in zip(vals, refs)])
        row["control_difference_ci"] = [cd.lo, cd.hi]
        if hc is not None and cd.lo <= 0.0 <= cd.hi and not cd.lo == cd.hi == 0.0:
            hc = None
    row["control_verdict"] = "inconclusive" if hc is None else ("holds" if hc else "does not hold")
    if not h:
        return h, reason
    if hc:
        return None, f"the control passes too ({arm}: {cs.mean:.4g})"
    if hc is None:
        return None, (f"the control does not clearly fail ({arm}: {cs.mean:.4g} [{cs.lo:.4g}, {cs.hi:.4g}] "
                      "over seeds reaches the claim's bar)")
    return h, reason


def verdict_counts(claims: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``{"claims": {verdict: n}, "seed-invariant": {verdict: n}, "checks": {verdict: n}}``.

    Claims decided over seeds, claims whose numbers were the same on every seed (one piece of evidence however
    many seeds ran) and checks are counted apart.
    """
    out: dict[str, dict[str, int]] = {"claims": {}, SEED_INVARIANT: {}, "checks": {}}
    for c in claims:
        if c.get("kind") == "check":
            bucket = out["checks"]
        elif c.get("seed_invariant"):
            bucket = out[SEED_INVARIANT]
        else:
            bucket = out["claims"]
        bucket[c["verdict"]] = bucket.get(c["verdict"], 0) + 1
    return out


def without_control(claims: Sequence[dict[str, Any]]) -> int:
    """How many refutable claims carry no control (checks are not counted)."""
    return sum(1 for c in claims if c.get("kind", "claim") == "claim" and c.get("control") is None)


def aggregate_metrics(per_seed: Sequence[dict[str, float]]) -> dict[str, dict[str, Any]]:
    keys: list[str] = []
    for m in per_seed:
        keys += [k for k in m if k not in keys]
    return {k: summarize([_f(m.get(k)) for m in per_seed]).to_dict() for k in keys}


def _f(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


__all__ = ["Summary", "summarize", "aggregate_claims", "aggregate_metrics", "verdict_counts", "without_control",
           "SEED_INVARIANT", "power"]
