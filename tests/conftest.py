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
