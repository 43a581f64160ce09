"""Lazy imports of OCMB's optional peers [B12]: lingam, causal-learn and pgmpy live in the ``causal`` extra.

``import icml26.decisions.ocmb`` never imports them; a function that needs one imports it on first use and,
when it is missing, raises ImportError naming the extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

CAUSAL_EXTRA = "pip install 'icml26[causal]'"


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` (e.g. ``"causallearn.search.ConstraintBased.PC"``) for ``what``, or raise ImportError
    saying that ``what`` needs the causal extra."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{what} needs the causal extra: {CAUSAL_EXTRA} "
                          f"(could not import {module.split('.')[0]!r}: {err})") from None
