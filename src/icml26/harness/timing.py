"""Timing helpers shared by reproductions: speed is always a ratio measured in one run."""

from __future__ import annotations

import statistics
import time
from typing import Callable, Mapping


def interleaved_times(fns: Mapping[str, Callable[[], object]], n_iter: int = 20, warmup: int = 3) -> dict[str, list[float]]:
    """Time several callables interleaved (ABAB...) so machine drift hits all of them equally.

    Returns name -> list of ``n_iter`` wall times in seconds (``time.perf_counter``).
    """
    if n_iter < 1 or warmup < 0:
        raise ValueError("n_iter must be >= 1 and warmup >= 0")
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(n_iter):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
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
