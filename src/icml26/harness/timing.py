"""Timing helpers shared by reproductions: speed is always a ratio measured in one run.

:func:`compare_times` is the one helper every timed *claim* uses (DESIGN.md, "Timed comparisons"):

- the method and the baseline run **interleaved** and **repeated**, each repeat ``M B M B'``, so drift in machine
  load hits every arm alike and no timed call follows a call on its own data: B and B' each follow a method call
  and precede one, so a cache left warm by the previous call favours neither (an earlier ``M B B' / B' B M`` order
  ran B' straight after B, or after itself, on every repeat: the same-work ratio read 0.90 on work that fills the
  cache, [B09]'s 32 MB updates, and flagged a stable timing as unstable). The method runs twice per repeat; its
  per-repeat time is the mean of the two;
- each call is timed with the process's **CPU time** (``time.process_time``: all threads of this process, not
  other processes' load) where the work is single-threaded or its cost is the point, or with **wall time** where
  parallelism is the point (``clock="wall"``);
- a **same-work control**: the baseline is timed a second time (B') in every repeat. The ratio B'/B should be 1;
  when its median is more than ``tolerance`` away from 1, the timing is unstable and a claim made from it is
  ``inconclusive`` ("timing unstable") instead of deciding on noise;
- the verdict comes from the **paired interval over repeats**: :meth:`TimedComparison.claim` hands the per-repeat
  ratios to :class:`~icml26.harness.Claim` as ``paired``, so a ratio whose interval straddles the bar is
  undecided.

:func:`interleaved_times` and :func:`median_ratio` stay for tables of many arms (speed-up vs depth); a claim
decided from them should go through :func:`compare_times` instead.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

log = logging.getLogger(__name__)

Clock = Literal["cpu", "wall"]
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
#: how far from 1 the same-work control ratio may be before a timing is called unstable
TIMING_TOLERANCE = 0.05
#: the calls of one repeat: the baseline (B) and its same-work copy (B') each between two method calls
REPEAT_ORDER = ("method", "baseline", "method", "control")


def interleaved_times(fns: Mapping[str, Callable[[], object]], n_iter: int = 20, warmup: int = 3,
                      clock: Clock = "wall") -> dict[str, list[float]]:
    """Time several callables interleaved (ABAB...) so machine drift hits all of them equally.

    Returns name -> list of ``n_iter`` times in seconds (``clock="wall"``: ``time.perf_counter``; ``"cpu"``:
    ``time.process_time``).
    """
    if n_iter < 1 or warmup < 0:
        raise ValueError("n_iter must be >= 1 and warmup >= 0")
    now = _clock(clock)
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(n_iter):
        for name, fn in fns.items():
            t0 = now()
            fn()
            times[name].append(now() - t0)
    return times


def median_ratio(times: Mapping[str, list[float]], num: str, den: str) -> float:
    """median(times[num]) / median(times[den])."""
    return statistics.median(times[num]) / statistics.median(times[den])


def timed(fn: Callable[[], object], reps: int = 3, warmup: int = 1) -> float:
    """Minimum wall time of ``reps`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@dataclass
class TimedComparison:
    """Per-repeat times of a method, its baseline and the baseline timed again (the same-work control).

    ``ratios``: per repeat, method time / baseline time (below 1: the method is faster).
    ``speedups``: per repeat, baseline time / method time (above 1: the method is faster).
    ``control_ratio``: median over repeats of (baseline again / baseline); 1 on a stable machine.
    """

    method: list[float]
    baseline: list[float]
    control: list[float]
    clock: Clock = "cpu"
    tolerance: float = TIMING_TOLERANCE

    @property
    def ratios(self) -> list[float]:
        return [m / b if b > 0 else float("nan") for m, b in zip(self.method, self.baseline)]

    @property
    def speedups(self) -> list[float]:
        return [b / m if m > 0 else float("nan") for m, b in zip(self.method, self.baseline)]

    @property
    def ratio(self) -> float:
        """median(method) / median(baseline)."""
        return _safe_div(statistics.median(self.method), statistics.median(self.baseline))

    @property
    def speedup(self) -> float:
        """median(baseline) / median(method)."""
        return _safe_div(statistics.median(self.baseline), statistics.median(self.method))

    @property
    def control_ratio(self) -> float:
        return statistics.median([c / b if b > 0 else float("nan") for c, b in zip(self.control, self.baseline)])

    @property
    def stable(self) -> bool:
        """Whether the same-work control ratio is within ``tolerance`` of 1."""
        r = self.control_ratio
        return math.isfinite(r) and abs(r - 1.0) <= self.tolerance

    def claim(self, statement: str, op: str, reference: float, *, as_: Literal["speedup", "ratio"] = "speedup",
              **kwargs: Any) -> Any:
        """A :class:`~icml26.harness.Claim` on the speed-up (``as_="speedup"``: baseline / method) or the cost
        ratio (``"ratio"``: method / baseline), paired over repeats against ``reference`` and carrying the
        same-work control, so an unstable timing is inconclusive rather than a verdict."""
        from .outcome import Claim

        per = self.speedups if as_ == "speedup" else self.ratios
        value = self.speedup if as_ == "speedup" else self.ratio
        kwargs.setdefault("metric", f"{'speed-up' if as_ == 'speedup' else 'cost ratio'} ({self.clock} time, "
                                    f"median of {len(self.method)} interleaved repeats)")
        return Claim(statement, value, op, reference,  # type: ignore[arg-type]
                     paired=[p - float(reference) for p in per], timing_control=self.control_ratio,
                     timing_tolerance=self.tolerance, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {"clock": self.clock, "ratio": self.ratio, "speedup": self.speedup,
                "control_ratio": self.control_ratio, "stable": self.stable, "repeats": len(self.method)}


def compare_times(method: Callable[[], object], baseline: Callable[[], object], *, repeats: int = 7,
                  warmup: int = 1, clock: Clock = "cpu", tolerance: float = TIMING_TOLERANCE) -> TimedComparison:
    """Time ``method`` against ``baseline``, interleaved and repeated (``M B M B'`` per repeat), with the baseline
    timed twice per repeat as a same-work control. See the module docstring for the rules; returns a
    :class:`TimedComparison`.

    Args:
        method, baseline: zero-argument callables doing one unit of the work being compared.
        repeats: timed repeats of each (the paired interval is over these); at least 3.
        warmup: untimed calls of each before timing starts.
        clock: ``"cpu"`` (process CPU time, insensitive to other processes' load) or ``"wall"``.
        tolerance: how far from 1 the same-work ratio may drift before the timing is called unstable.
    """
    if not callable(method) or not callable(baseline):
        raise TypeError("method and baseline must be zero-argument callables")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 3:
        raise ValueError(f"repeats must be an int >= 3 (the paired interval needs them), got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise ValueError(f"tolerance must be a number in (0, 1), got {tolerance!r}")
    now = _clock(clock)
    for _ in range(warmup):
        method()
        baseline()
    arms: dict[str, list[float]] = {"method": [], "baseline": [], "control": []}
    fns = {"method": method, "baseline": baseline, "control": baseline}
    for _ in range(repeats):
        pair = []
        for name in REPEAT_ORDER:
            t0 = now()
            fns[name]()
            dt = now() - t0
            if name == "method":
                pair.append(dt)
            else:
                arms[name].append(dt)
        arms["method"].append(sum(pair) / len(pair))
    result = TimedComparison(arms["method"], arms["baseline"], arms["control"], clock=clock, tolerance=float(tolerance))
    log.info("timed %s against %s over %d repeats (%s time): ratio %.3g, same-work control %.3g%s",
             getattr(method, "__name__", "method"), getattr(baseline, "__name__", "baseline"), repeats, clock,
             result.ratio, result.control_ratio, "" if result.stable else " (unstable)")
    return result


def _clock(clock: str) -> Callable[[], float]:
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}; use 'cpu' (process CPU time) or 'wall' (elapsed time)")
    return CLOCKS[clock]


def _safe_div(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


__all__ = ["interleaved_times", "median_ratio", "timed", "compare_times", "TimedComparison", "TIMING_TOLERANCE"]
