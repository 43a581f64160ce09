"""Budgets: how big a reproduction runs.

A reproduction keeps one small dataclass of sizes per budget at the top of its file and picks
with ``budget.pick(SIZES)``; no ``if quick:`` anywhere else.
"""

from __future__ import annotations

from enum import Enum
from typing import Mapping, TypeVar

T = TypeVar("T")


class Budget(str, Enum):
    """``quick`` <= 30 s (tests), ``standard`` <= 3 min (CLI default), ``full`` as big as the paper allows."""

    QUICK = "quick"
    STANDARD = "standard"
    FULL = "full"

    @property
    def seconds(self) -> float | None:
        """Target wall time on 2 CPU cores (``None``: no limit)."""
        return {"quick": 30.0, "standard": 180.0, "full": None}[self.value]

    @classmethod
    def parse(cls, value: "str | Budget") -> "Budget":
        if isinstance(value, Budget):
            return value
        if not isinstance(value, str):
            raise TypeError(f"budget must be a str or Budget, got {type(value).__name__}")
        try:
            return cls(value.strip().lower())
        except ValueError:
            names = ", ".join(b.value for b in cls)
            raise ValueError(f"unknown budget {value!r}; choose one of: {names}") from None

    def pick(self, sizes: Mapping["Budget | str", T]) -> T:
        """Return ``sizes[self]``; keys may be ``Budget`` members or their names."""
        for key in (self, self.value):
            if key in sizes:
                return sizes[key]  # type: ignore[index]
        raise KeyError(f"no sizes defined for budget {self.value!r}")

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value
