"""The code corpus: the running interpreter's standard-library ``.py`` files (no download).

Files are sorted by path and split by a hash of the relative path: 95% train / 5% validation. ``asyncio/`` and
``email/`` are held out as a separate "downstream" domain. Test folders are skipped (some builds leave them out).
"""

from __future__ import annotations

import hashlib
import sysconfig
from functools import lru_cache
from pathlib import Path
from typing import Literal

Split = Literal["train", "val", "heldout"]
HELDOUT_DIRS = ("asyncio", "email")
SKIP_PARTS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@lru_cache(maxsize=None)
def _files() -> tuple[tuple[str, Path], ...]:
    root = stdlib_root()
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if SKIP_PARTS.intersection(rel.parts):
            continue
        out.append((rel.as_posix(), p))
    if not out:
        raise RuntimeError(f"no standard-library .py files found under {root}")
    return tuple(out)


def split_of(rel: str) -> Split:
    if rel.split("/", 1)[0] in HELDOUT_DIRS:
        return "heldout"
    bucket = int(hashlib.sha256(rel.encode()).hexdigest(), 16) % 100
    return "val" if bucket < 5 else "train"


def corpus_files(split: Split = "train") -> list[str]:
    """Relative paths of the files in ``split``, sorted."""
    if split not in ("train", "val", "heldout"):
        raise ValueError(f"unknown split {split!r}; use 'train', 'val' or 'heldout'")
    return [rel for rel, _ in _files() if split_of(rel) == split]


def corpus_texts(split: Split = "train", max_bytes: int | None = None) -> list[str]:
    """File contents of ``split`` in a fixed pseudo-random order (by path hash, so a prefix is a fair sample of
    the whole split), stopping once ``max_bytes`` characters are collected."""
    paths = dict(_files())
    texts, total = [], 0
    for rel in sorted(corpus_files(split), key=lambda r: hashlib.sha256(r.encode()).hexdigest()):
        t = paths[rel].read_text(encoding="utf-8", errors="replace")
        texts.append(t)
        total += len(t)
        if max_bytes is not None and total >= max_bytes:
            break
    return texts
