"""Aggregating seeds: mean, 95% interval, and a claim's verdict over seeds.

Rule (documented in the README and in :func:`aggregate_claims`): a claim's verdict over seeds is its
comparison applied to the *mean* measurement and the *mean* reference, downgraded to ``inconclusive`` when any
seed is not finite, when the 95% t-interval of the paired difference (measured - reference) contains 0, or,
for a band claim (``op="in"``), when the interval of the measurement crosses an edge of the band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats as _st

from .outcome import Claim, compare


@dataclass
class Summary:
    mean: float
    lo: float
    hi: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        f = lambda x: x if math.isfinite(x) else None  # noqa: E731
        return {"mean": f(self.mean), "lo": f(self.lo), "hi": f(self.hi), "n": self.n}


def summarize(values: Sequence[float], level: float = 0.95) -> Summary:
    """Mean and t-interval of the finite values (interval collapses to the mean for n = 1)."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(float(v))], dtype=float)
    if x.size == 0:
        return Summary(float("nan"), float("nan"), float("nan"), 0)
    m = float(x.mean())
    if x.size == 1:
        return Summary(m, m, m, 1)
    half = float(_st.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Summary(m, m - half, m + half, int(x.size))


def aggregate_claims(per_seed: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Aggregate claim dicts (``Claim.to_dict``) from several seeds, matched by statement.

    Rules, in order:

    1. A claim with any non-finite seed (measured, or a reference that is not a band) is ``inconclusive``;
       ``n_finite``/``n_seeds`` say how many seeds were usable. One finite seed never decides for three.
    2. One seed: that seed's own verdict (which already honours a per-instance ``paired`` interval).
    3. Two or more: the comparison on the means, downgraded to ``inconclusive`` when the 95% t-interval of the
       paired difference (measured - reference) contains 0, or, for a band, when the measurement's interval
       crosses an edge. A *claim* (not a check) whose measured value equals its reference exactly on every seed
       is ``inconclusive``: the comparison cannot separate the two sides, so it is no evidence either way.
    """
    if not per_seed:
        return []
    out = []
    for first in per_seed[0]:
        group = [c for claims in per_seed for c in claims if c["statement"] == first["statement"]]
        meas = [_f(c["measured"]) for c in group]
        band = first["op"] == "in"
        refs = [_f(c["reference"]) for c in group] if not band else []
        finite = [math.isfinite(m) and (band or math.isfinite(r)) for m, r in zip(meas, refs or meas)]
        ms = summarize(meas)
        row = dict(first)
        row["kind"] = first.get("kind", "claim")
        row["measured"] = ms.mean
        row["measured_ci"] = [ms.lo, ms.hi]
        row["n_seeds"] = len(group)
        row["n_finite"] = int(sum(finite))
        row["seed_verdicts"] = [c["verdict"] for c in group]
        row["seed_measured"] = [c["measured"] for c in group]
        h: bool | None
        if band:
            lo, hi = first["reference"]
            row["reference"] = [lo, hi]
            h = compare(ms.mean, "in", (lo, hi))
            if h is not None and ms.n >= 2 and (ms.lo < lo <= ms.hi or ms.lo <= hi < ms.hi):
                h = None
        else:
            rs = summarize(refs)
            row["reference"] = rs.mean
            row["reference_ci"] = [rs.lo, rs.hi]
            h = compare(ms.mean, first["op"], rs.mean)
            diffs = [m - r for m, r in zip(meas, refs)]
            if h is not None and len(group) >= 2:
                ds = summarize(diffs)
                row["difference_ci"] = [ds.lo, ds.hi]
                if ds.lo == ds.hi == 0.0:
                    if row["kind"] == "claim":
                        h = None
                elif ds.lo <= 0.0 <= ds.hi:
                    h = None
        if not all(finite):
            h = None
        if len(group) == 1:
            row["verdict"] = group[0]["verdict"] if all(finite) else "inconclusive"
        else:
            row["verdict"] = "inconclusive" if h is None else ("holds" if h else "does not hold")
        out.append(row)
    return out


def verdict_counts(claims: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``{"claims": {verdict: n}, "checks": {verdict: n}}``: claims and checks are counted separately."""
    out: dict[str, dict[str, int]] = {"claims": {}, "checks": {}}
    for c in claims:
        bucket = out["checks" if c.get("kind") == "check" else "claims"]
        bucket[c["verdict"]] = bucket.get(c["verdict"], 0) + 1
    return out


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


__all__ = ["Summary", "summarize", "aggregate_claims", "aggregate_metrics", "verdict_counts", "Claim"]
