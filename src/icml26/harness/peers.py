"""Optional peers: packages a reproduction runs side by side when they are installed, and says so when not.

A reproduction asks ``peer_available("torchsde", "peers", "A03's torchsde SRK cross-check")`` before running a
peer. When the package is missing the answer is False and the run remembers it; the runner stores the list in the
run record (``missing_peers``) and the CLI's summary names every skipped peer with the extra that installs it, so
a missing package never silently drops a check.
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["peer_available", "missing_peers", "reset_missing_peers"]

_MISSING: list[dict[str, str]] = []


def peer_available(module: str, extra: str, what: str) -> bool:
    """Whether ``module`` can be imported; if not, record that ``what`` was skipped and that
    ``pip install 'icml26[<extra>]'`` enables it."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken install
        found = False
    if not found:
        entry = {"module": module, "extra": extra, "what": what}
        if entry not in _MISSING:
            _MISSING.append(entry)
    return found


def missing_peers() -> list[dict[str, Any]]:
    """The peers skipped since the last :func:`reset_missing_peers` (the runner resets it per run)."""
    return [dict(m) for m in _MISSING]


def reset_missing_peers() -> None:
    _MISSING.clear()
