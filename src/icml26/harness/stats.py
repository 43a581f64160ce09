"""Aggregating seeds: mean, 95% interval, and a claim's verdict over seeds.

Rule (documented in the README): a claim's verdict over seeds is its comparison applied to the *mean*
measurement and the *mean* reference. With two or more seeds it is downgraded to ``inconclusive`` when the
95% t-interval of the paired difference (measured - reference) contains 0 — i.e. the seeds cannot tell the
two sides apart. For a band claim (``op="in"``) it is inconclusive when the interval of the measurement
crosses an edge of the band.
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
    """Aggregate claim dicts (``Claim.to_dict``) from several seeds, matched by position and statement."""
    if not per_seed:
        return []
    out = []
    for i, first in enumerate(per_seed[0]):
        group = [claims[i] for claims in per_seed if i < len(claims) and claims[i]["statement"] == first["statement"]]
        meas = [_f(c["measured"]) for c in group]
        ms = summarize(meas)
        row = dict(first)
        row["measured"] = ms.mean
        row["measured_ci"] = [ms.lo, ms.hi]
        row["n_seeds"] = ms.n
        row["seed_verdicts"] = [c["verdict"] for c in group]
        if first["op"] == "in":
            lo, hi = first["reference"]
            h = compare(ms.mean, "in", (lo, hi))
            if h is not None and ms.n >= 2 and (ms.lo < lo <= ms.hi or ms.lo <= hi < ms.hi):
                h = None
            row["reference"] = [lo, hi]
        else:
            refs = [_f(c["reference"]) for c in group]
            rs = summarize(refs)
            row["reference"] = rs.mean
            row["reference_ci"] = [rs.lo, rs.hi]
            h = compare(ms.mean, first["op"], rs.mean)
            if h is not None and ms.n >= 2:
                ds = summarize([m - r for m, r in zip(meas, refs)])
                if ds.n >= 2 and ds.lo <= 0.0 <= ds.hi and not (ds.lo == ds.hi == 0.0):
                    h = None
        row["verdict"] = "inconclusive" if h is None else ("holds" if h else "does not hold")
        out.append(row)
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


__all__ = ["Summary", "summarize", "aggregate_claims", "aggregate_metrics", "Claim"]
