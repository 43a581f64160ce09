"""icml26 — working, tested implementations of ICML 2026 papers, each with a reproduction
that checks the paper's headline claim and says plainly whether it holds.

    >>> from icml26.catalog import get_paper
    >>> get_paper("A03").method
    'SRK-LMC: Hessian-free stochastic Runge-Kutta Langevin Monte Carlo'

Importing ``icml26`` is cheap (no torch); each paper lives in ``icml26.<area>.<slug>`` and is imported on use.
The command line is ``icml26`` (or ``python -m icml26``).
"""

__version__ = "0.1.0"  # keep equal to pyproject's version (tests/harness/test_cli_conventions.py checks it)
__all__ = ["__version__"]
