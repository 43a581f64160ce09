"""Suite-wide settings: one BLAS/torch thread per test worker (pytest -n 2 already uses both cores;
more threads per worker oversubscribe the CPU and make everything slower)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

try:
    import torch  # noqa: E402

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass


import pytest  # noqa: E402


@pytest.fixture
def threads_during_training(monkeypatch):
    """``seen, after = threads_during_training(module, build)``: runs ``build()`` with torch at 2 threads while
    ``module.train_steps`` records ``(torch threads, deterministic algorithms on)`` instead of training; ``after`` is
    torch's thread count once ``build`` returned (it must be restored). For the testbed builders that must train
    inside ``pinned_training(1)``."""
    import torch

    def run(module, build):
        seen = []
        monkeypatch.setattr(module, "train_steps", lambda *a, **k: seen.append(
            (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())))
        before = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            build()
            return seen, torch.get_num_threads()
        finally:
            torch.set_num_threads(before)
    return run
