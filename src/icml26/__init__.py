"""icml26 — working, tested implementations of ICML 2026 papers, each with a reproduction
that checks the paper's headline claim and says plainly whether it holds.

    >>> from icml26.catalog import PAPERS, get_paper
    >>> get_paper("A03").method
"""

__version__ = "0.1.0"
