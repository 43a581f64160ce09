"""HALD phase schedules [A10] (settings of the official ``validate/train_fkd.py``).

    S1: Hard(E_h) -> Soft(E_s)
    S2..S5: alternating blocks of n epochs, Hard first (S2, S4) or Soft first (S3, S5), until both budgets are
            spent (the last block of each kind takes the remainder)
    S6 (default): Soft(E_s/2) -> Hard(E_h) -> Soft(E_s - E_s/2)
    S7: Hard(E_h/2) -> Soft(E_s) -> Hard(E_h - E_h/2)
    S8: Soft(E_s) -> Hard(E_h)
"""

from __future__ import annotations

__all__ = ["hald_schedule", "SETTINGS"]

SETTINGS = ("S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "soft", "hard")
_ALT_DEFAULT_N = {"S2": 1, "S3": 1, "S4": 10, "S5": 10}  # our choice where the block length is not given


def _merge(phases: list[tuple[str, int]]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for ph, e in phases:
        if e <= 0:
            continue
        if out and out[-1][0] == ph:
            out[-1] = (ph, out[-1][1] + e)
        else:
            out.append((ph, e))
    return out


def hald_schedule(setting: str = "S6", soft_epochs: int = 100, hard_epochs: int = 200,
                  n: int | None = None) -> list[tuple[str, int]]:
    """Phases as [("soft" | "hard", epochs), ...]; epochs sum to soft_epochs + hard_epochs [A10].

    ``setting="soft"`` / ``"hard"`` give the single-phase baselines (soft-only uses only ``soft_epochs``,
    hard-only only ``hard_epochs``). ``n`` is the block length of the alternating settings S2-S5.
    """
    if not isinstance(setting, str) or setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {', '.join(SETTINGS)}")
    for name, v in (("soft_epochs", soft_epochs), ("hard_epochs", hard_epochs)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    if soft_epochs + hard_epochs == 0:
        raise ValueError("soft_epochs + hard_epochs must be positive")
    s, h = soft_epochs, hard_epochs
    if setting == "soft":
        return _merge([("soft", s)])
    if setting == "hard":
        return _merge([("hard", h)])
    if setting == "S1":
        return _merge([("hard", h), ("soft", s)])
    if setting == "S6":
        return _merge([("soft", s // 2), ("hard", h), ("soft", s - s // 2)])
    if setting == "S7":
        return _merge([("hard", h // 2), ("soft", s), ("hard", h - h // 2)])
    if setting == "S8":
        return _merge([("soft", s), ("hard", h)])
    n = _ALT_DEFAULT_N[setting] if n is None else n
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (block length) must be a positive int, got {n!r}")
    left = {"hard": h, "soft": s}
    turn = "hard" if setting in ("S2", "S4") else "soft"
    phases = []
    while left["hard"] + left["soft"] > 0:
        e = min(n, left[turn]) if left[turn] > 0 else 0
        phases.append((turn, e))
        left[turn] -= e
        other = "soft" if turn == "hard" else "hard"
        turn = other if left[other] > 0 else turn
    return _merge(phases)
