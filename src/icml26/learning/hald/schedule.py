"""HALD phase schedules [A10] (the settings of the official ``validate/train_fkd.py``).

    S1: Hard(E_h) -> Soft(E_s)
    S2..S5 (official ``generate_epoch_plan``): the E = E_h + E_s epochs are cut into blocks of n (S2, S4) or
            2n (S3, S5) epochs, the last block taking the remainder, and the blocks alternate Hard, Soft, ...
            from Hard (S2, S3) or from Soft (S4, S5). The alternation ignores the E_h / E_s split: each kind gets
            about half of E. ``alternation="budgeted"`` keeps the same start and block length but spends each
            budget exactly (the last block of each kind takes its remainder; our variant, not the paper's).
    S6 (default): Soft(E_s/2) -> Hard(E_h) -> Soft(E_s - E_s/2)
    S7: Hard(E_h/2) -> Soft(E_s) -> Hard(E_h - E_h/2)
    S8: Soft(E_s) -> Hard(E_h)
"""

from __future__ import annotations

__all__ = ["hald_schedule", "SETTINGS", "ALTERNATIONS"]

SETTINGS = ("S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "soft", "hard")
ALTERNATIONS = ("official", "budgeted")
# official train_fkd.py: block length multiplier and the kind of the first block
_ALT = {"S2": (1, "hard"), "S3": (2, "hard"), "S4": (1, "soft"), "S5": (2, "soft")}


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


def _other(kind: str) -> str:
    return "soft" if kind == "hard" else "hard"


def hald_schedule(setting: str = "S6", soft_epochs: int = 100, hard_epochs: int = 200,
                  n: int | None = None, alternation: str = "official") -> list[tuple[str, int]]:
    """Phases as [("soft" | "hard", epochs), ...]; epochs sum to soft_epochs + hard_epochs [A10].

    ``setting="soft"`` / ``"hard"`` give the single-phase baselines (soft-only uses only ``soft_epochs``,
    hard-only only ``hard_epochs``). ``n`` is the official ``--n`` of the alternating settings S2-S5 (required
    there, as in the official code: blocks of n epochs for S2/S4, 2n for S3/S5). ``alternation``:
    ``"official"`` (the official plan: alternate over the total, ignoring the split) or ``"budgeted"`` (spend
    ``hard_epochs`` and ``soft_epochs`` exactly).
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
    if alternation not in ALTERNATIONS:
        raise ValueError(f"alternation must be one of {ALTERNATIONS}, got {alternation!r}")
    if n is None:
        raise ValueError(f"setting {setting} alternates blocks of n epochs: pass n (the official --n; it has no "
                         "default there either)")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (block length) must be a positive int, got {n!r}")
    mult, turn = _ALT[setting]
    block = mult * n
    if alternation == "official":  # generate_epoch_plan(block, E, start): [block] * (E // block) + [E % block]
        total = s + h
        lengths = [block] * (total // block) + ([total % block] if total % block else [])
        return _merge([("hard" if (i % 2 == 0) == (turn == "hard") else "soft", e) for i, e in enumerate(lengths)])
    left = {"hard": h, "soft": s}
    phases = []
    while left["hard"] + left["soft"] > 0:
        e = min(block, left[turn])
        phases.append((turn, e))
        left[turn] -= e
        turn = _other(turn) if left[_other(turn)] > 0 else turn
    return _merge(phases)
