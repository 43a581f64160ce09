"""Intervals and power: the statistics a single claim and an aggregate over seeds both need.

Kept apart from :mod:`.outcome` (which decides one claim) and :mod:`.stats` (which aggregates seeds) so neither
imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats as _st

#: the largest number of seeds (or instances) a power estimate looks at before it says "not within"
MAX_NEEDED = 100


@dataclass
class Summary:
    mean: float
    lo: float
    hi: float
    n: int
    sd: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        f = lambda x: x if math.isfinite(x) else None  # noqa: E731
        return {"mean": f(self.mean), "lo": f(self.lo), "hi": f(self.hi), "n": self.n}


def finite_array(values: Sequence[Any]) -> np.ndarray:
    """The finite numbers of ``values`` as a float array (None, NaN and inf dropped)."""
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return np.asarray(out, dtype=float)


def summarize(values: Sequence[float], level: float = 0.95) -> Summary:
    """Mean and t-interval of the finite values (interval collapses to the mean for n = 1)."""
    x = finite_array(values)
    if x.size == 0:
        return Summary(float("nan"), float("nan"), float("nan"), 0)
    m = float(x.mean())
    if x.size == 1:
        return Summary(m, m, m, 1, 0.0)
    sd = float(x.std(ddof=1))
    half = float(_st.t.ppf(0.5 + level / 2, x.size - 1) * sd / math.sqrt(x.size))
    return Summary(m, m - half, m + half, int(x.size), sd)


def n_needed(effect: float, sd: float, level: float = 0.95, max_n: int = MAX_NEEDED) -> int | None:
    """The smallest n >= 2 at which a t-interval of half-width ``t(n-1) * sd / sqrt(n)`` around a mean of size
    ``effect`` would exclude 0 (at ``level``), taking ``sd`` as the spread seen so far.

    ``None`` when no n up to ``max_n`` would do it (an effect near 0: more seeds will not decide it), or when
    ``effect``/``sd`` are not finite. ``sd == 0`` with a non-zero effect needs only 2.
    """
    if not (math.isfinite(effect) and math.isfinite(sd)) or sd < 0:
        return None
    e = abs(effect)
    if e == 0.0:
        return None
    if sd == 0.0:
        return 2
    ns = np.arange(2, max_n + 1)
    half = _st.t.ppf(0.5 + level / 2, ns - 1) * sd / np.sqrt(ns)
    ok = np.nonzero(half < e)[0]
    return int(ns[ok[0]]) if ok.size else None


def power(diffs: Sequence[float], unit: str = "seeds", level: float = 0.95, max_n: int = MAX_NEEDED,
          effect: float | None = None) -> dict[str, Any]:
    """What an undecided comparison would need: the interval of the differences now, and how many ``unit``
    (seeds or instances) the observed mean effect would need to be decided at ``level``.

    ``effect`` overrides the mean difference as the distance to decide (a band claim: distance to the nearest
    edge). Returns ``{"unit", "n", "mean", "interval", "sd", "needed", "text"}``; ``needed`` is None when the
    effect is ~0 relative to its spread ("not within 100").
    """
    s = summarize(diffs, level)
    e = s.mean if effect is None else effect
    need = n_needed(e, s.sd, level, max_n) if s.n >= 2 else None
    if s.n < 2:
        text = f"one {unit[:-1] if unit.endswith('s') else unit}: no spread to estimate power from"
    elif need is None:
        text = f"not within {max_n} {unit} (mean effect {e:.3g}, sd {s.sd:.3g})"
    elif need <= s.n:
        text = f"about {need} {unit} at this effect and spread (have {s.n})"
    else:
        text = f"about {need} {unit} would decide it (have {s.n})"
    f = lambda x: x if math.isfinite(x) else None  # noqa: E731
    return {"unit": unit, "n": s.n, "mean": f(s.mean), "interval": [f(s.lo), f(s.hi)], "sd": f(s.sd),
            "needed": need, "text": text}


__all__ = ["Summary", "summarize", "finite_array", "n_needed", "power", "MAX_NEEDED"]
