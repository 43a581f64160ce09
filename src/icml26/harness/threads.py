"""Thread caps for a block of work: torch's intra-op pool and the BLAS/OpenMP pools (via threadpoolctl).

Tiny models run fastest on one thread (more threads only add synchronisation), and timing comparisons are
steadier on a fixed number of threads. The previous settings are restored on exit.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from threadpoolctl import threadpool_limits


@contextmanager
def limit_threads(n: int = 1) -> Iterator[None]:
    """``with limit_threads(1): ...`` runs the block on at most ``n`` threads (never raises the current count)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"thread count must be a positive int, got {n!r}")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(min(n, before))
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)
