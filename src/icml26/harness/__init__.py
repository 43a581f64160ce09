"""What every reproduction shares: budgets, claims, outcomes, seeds, timing, the runner, the store, the report.

Names are imported on first use (PEP 562), so ``from icml26.harness import Budget`` does not load scipy or
torch; the CLI relies on that to start in well under a second.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "Budget": "budget", "Claim": "outcome", "Outcome": "outcome", "compare": "outcome",
    "seed_everything": "seeding", "aggregate_claims": "stats", "aggregate_metrics": "stats",
    "summarize": "stats", "verdict_counts": "stats", "limit_threads": "threads",
    "interleaved_times": "timing", "median_ratio": "timing", "timed": "timing",
    "compare_times": "timing", "TimedComparison": "timing", "TIMING_TOLERANCE": "timing", "power": "intervals",
    "without_control": "stats",
}

__all__ = list(_WHERE)

if TYPE_CHECKING:  # pragma: no cover
    from .budget import Budget
    from .intervals import power
    from .outcome import Claim, Outcome, compare
    from .seeding import seed_everything
    from .stats import aggregate_claims, aggregate_metrics, summarize, verdict_counts, without_control
    from .threads import limit_threads
    from .timing import TIMING_TOLERANCE, TimedComparison, compare_times, interleaved_times, median_ratio, timed


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
