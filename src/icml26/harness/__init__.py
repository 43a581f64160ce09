"""What every reproduction shares: budgets, claims, outcomes, seeds, timing, the runner, the store, the report."""

from .budget import Budget
from .outcome import Claim, Outcome, compare
from .seeding import seed_everything
from .stats import aggregate_claims, aggregate_metrics, summarize, verdict_counts
from .threads import limit_threads
from .timing import interleaved_times, median_ratio, timed

__all__ = [
    "Budget", "Claim", "Outcome", "compare", "seed_everything", "aggregate_claims", "aggregate_metrics",
    "summarize", "verdict_counts", "limit_threads", "interleaved_times", "median_ratio", "timed",
]
