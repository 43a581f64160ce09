"""Result store: one JSON record per run under ``<out>/records/``, indexed in SQLite.

The JSON records are the source of truth; ``index.sqlite`` is rebuilt from them whenever it is missing or
stale, so deleting it is always safe. Records and figures are written atomically (temp file + rename) and are
world-readable as the umask allows (0644 under the usual umask 022), not private like a bare temp file.

A record that cannot be read or does not have the shape of a run record (truncated JSON, ``[]``, ``{}``, a
record without ``status`` or ``paper``, a claim without a verdict) is skipped with a warning that names the
file: one damaged file never breaks ``records()``, ``latest_batches()``, ``reindex()``, a summary or the report.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

log = logging.getLogger(__name__)

RECORDS = "records"
FIGURES = "figures"
INDEX = "index.sqlite"

# what every run record must carry, and the type each field must have
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "run_id": str, "paper": str, "budget": str, "seed": int, "status": str,
}
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "batch": (str, type(None)), "started": (int, float, type(None)), "wall_time": (int, float, type(None)),
    "cpu_time": (int, float, type(None)), "error": (str, type(None)), "metrics": dict, "claims": list, "tables": dict, "figures": list,
    "env": dict, "notes": (str, type(None)), "missing_peers": list,
}
_CLAIM_REQUIRED = ("statement", "measured", "op", "reference", "verdict")
_OPS = ("<", "<=", ">", ">=", "in")
_warned: set[tuple[str, float]] = set()


# helper functions

@lru_cache(maxsize=1)
def _umask() -> int:
    """The process umask, read without changing it where /proc allows (``os.umask`` is set-and-return)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode() -> int:
    """Mode for a new output file: ``0o666`` minus the umask (0644 under umask 022), as ``open()`` would give."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """Mode for a new folder: ``0o777`` minus the umask (0755 under umask 022), as ``mkdir`` would give."""
    return 0o777 & ~_umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees a half-written file).

    The file gets the mode a plain ``open(path, "wb")`` would give (``0o666 & ~umask``), not the 0600 of the
    temporary file it is written through, so records, figures and reports can be shared.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_writable(out: str | Path) -> Path:
    """Create ``out`` if needed and make sure files can be written there; raise ``ValueError`` if not."""
    if out is None or (isinstance(out, str) and not out.strip()):
        raise ValueError("the output folder is empty; pass --out to a folder name, e.g. --out runs")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".write-test.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise ValueError(f"output folder {str(out)!r} is not writable ({e.strerror or e}); pass --out to a folder you can write") from None
    return out


_BUDGETS = ("quick", "standard", "full")


def _paper_ids() -> frozenset[str]:
    from ..catalog import PAPERS

    return frozenset(p.id for p in PAPERS)


def record_problem(r: Any) -> str | None:
    """Why ``r`` is not a usable run record (``None`` when it is): a missing or mistyped field, a bad claim."""
    if not isinstance(r, dict):
        return f"expected a JSON object (a run record), found {type(r).__name__}"
    for key, typ in _REQUIRED.items():
        if key not in r:
            return f"missing field {key!r}"
        if not isinstance(r[key], typ) or isinstance(r[key], bool):
            return f"field {key!r} should be {_tname(typ)}, found {type(r[key]).__name__}"
    for key, typ in _OPTIONAL.items():
        if key in r and not isinstance(r[key], typ):
            return f"field {key!r} should be {_tname(typ)}, found {type(r[key]).__name__}"
    if isinstance(r.get("started"), float) and not math.isfinite(r["started"]):
        return "field 'started' is not a finite time"
    if r["budget"] not in _BUDGETS:
        return f"unknown budget {r['budget']!r} (expected one of {', '.join(_BUDGETS)})"
    if r["status"] not in ("ok", "error"):
        return f"unknown status {r['status']!r} (expected 'ok' or 'error')"
    if r.get("paper") not in _paper_ids():
        return f"paper {r.get('paper')!r} is not in the catalogue"
    for i, c in enumerate(r.get("claims") or []):
        if not isinstance(c, dict):
            return f"claim {i} should be an object, found {type(c).__name__}"
        miss = [k for k in _CLAIM_REQUIRED if k not in c]
        if miss:
            return f"claim {i} is missing {', '.join(map(repr, miss))}"
        if not isinstance(c["statement"], str) or not isinstance(c["verdict"], str) or c["op"] not in _OPS:
            return f"claim {i} has a malformed statement, verdict or op"
        ref = c["reference"]
        if c["op"] == "in" and not (isinstance(ref, list) and len(ref) == 2):
            return f"claim {i} is a band (op 'in') without a [lo, hi] reference"
        if c["op"] != "in" and not isinstance(ref, (int, float, type(None))):
            return f"claim {i} has a non-numeric reference"
        if not isinstance(c["measured"], (int, float, type(None))):
            return f"claim {i} has a non-numeric measurement"
    for i, f in enumerate(r.get("figures") or []):
        if not (isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("path"), str)):
            return f"figure {i} should be an object with 'name' and 'path'"
    for name, rows in (r.get("tables") or {}).items():
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            return f"table {name!r} should be a list of row objects"
    return None


def valid_records(records: Iterable[Any], source: str = "records") -> list[dict[str, Any]]:
    """The usable run records of ``records``; each unusable one is skipped with a warning."""
    out = []
    for i, r in enumerate(records):
        why = record_problem(r)
        if why is None:
            out.append(r)
        else:
            name = r.get("run_id") if isinstance(r, dict) and isinstance(r.get("run_id"), str) else f"#{i}"
            log.warning("skipping run record %s in %s: %s", name, source, why)
    return out


def _tname(typ: type | tuple[type, ...]) -> str:
    types = typ if isinstance(typ, tuple) else (typ,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def _warn_once(path: Path, why: str) -> None:
    """Warn once per damaged file (and again if the file changes), so repeated reads do not flood the log."""
    try:
        key = (str(path), path.stat().st_mtime)
    except OSError:
        key = (str(path), 0.0)
    if key not in _warned:
        _warned.add(key)
        log.warning("skipping run record %s: %s (fix or delete the file)", path, why)


# main class

@dataclass
class ResultStore:
    """Reads and writes run records under ``root``."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    @property
    def records_dir(self) -> Path:
        return self.root / RECORDS

    @property
    def figures_dir(self) -> Path:
        return self.root / FIGURES

    def save(self, record: dict[str, Any]) -> Path:
        """Write one run record; returns its path. Raises ``ValueError`` for a record of the wrong shape."""
        why = record_problem(record)
        if why is not None:
            raise ValueError(f"not a run record: {why}")
        name = f"{record['paper']}-{record['budget']}-seed{record['seed']}-{record['run_id']}.json"
        path = self.records_dir / name
        atomic_write_bytes(path, json.dumps(record, indent=1, default=_json_default).encode())
        return path

    def load(self, path: Path) -> dict[str, Any] | None:
        """One record, or ``None`` (with a warning naming the file) when it is unreadable or malformed."""
        try:
            r = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nested too deep
            _warn_once(Path(path), f"not readable JSON ({type(e).__name__}: {e})")
            return None
        why = record_problem(r)
        if why is not None:
            _warn_once(Path(path), why)
            return None
        return r

    def _paths(self) -> list[Path]:
        return sorted(self.records_dir.glob("*.json")) if self.records_dir.is_dir() else []

    def _loaded(self) -> list[tuple[Path, dict[str, Any]]]:
        return [(p, r) for p in self._paths() if (r := self.load(p)) is not None]

    def records(self) -> list[dict[str, Any]]:
        """All usable records, oldest first (by start time); damaged files are skipped with a warning."""
        out = [r for _, r in self._loaded()]
        out.sort(key=lambda r: (r.get("started") or 0.0, r["run_id"]))
        return out

    def latest_batches(self) -> dict[str, list[dict[str, Any]]]:
        """Per paper, the records of its most recent batch (one CLI invocation: same batch id)."""
        by_paper: dict[str, list[dict[str, Any]]] = {}
        for r in self.records():
            by_paper.setdefault(r["paper"], []).append(r)
        latest = {}
        for paper, recs in by_paper.items():
            batch = recs[-1].get("batch")
            latest[paper] = [r for r in recs if r.get("batch") == batch]
        return latest

    def reindex(self) -> Path:
        """Rebuild ``index.sqlite`` from the usable JSON records: ``runs`` (one row per run), ``claims`` (one row per
        claim per run, with its control and strongest baseline) and ``verdicts`` (one row per claim per batch: the
        verdict over that batch's seeds, ``seed_invariant`` marking claims with the same number on every seed)."""
        db = self.root / INDEX
        tmp = self.root / f".{INDEX}.tmp"
        if tmp.exists():
            tmp.unlink()
        con = sqlite3.connect(tmp)
        try:
            with con:
                con.execute("create table runs (run_id text primary key, batch text, paper text, budget text, seed int,"
                            " status text, started real, wall_time real, path text)")
                con.execute("create table claims (run_id text, idx int, statement text, kind text, measured real,"
                            " op text, reference text, verdict text, falsifier text, reason text,"
                            " strongest_baseline text, control real, control_arm text, control_verdict text, bar int)")
                con.execute("create table verdicts (batch text, paper text, budget text, n_seeds int, statement text,"
                            " kind text, seed_invariant int, verdict text, reason text, has_control int,"
                            " seeds_needed int)")
                loaded = self._loaded()
                for p, r in loaded:
                    con.execute("insert or replace into runs values (?,?,?,?,?,?,?,?,?)",
                                (r["run_id"], r.get("batch"), r["paper"], r["budget"], r["seed"], r["status"],
                                 r.get("started"), r.get("wall_time"), p.name))
                    con.execute("delete from claims where run_id = ?", (r["run_id"],))
                    con.executemany("insert into claims values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                    [(r["run_id"], i, c["statement"], c.get("kind", "claim"), c["measured"], c["op"],
                                      json.dumps(c["reference"]), c["verdict"], c.get("falsifier"), c.get("reason"),
                                      c.get("strongest_baseline"), c.get("control"), c.get("control_arm"),
                                      c.get("control_verdict"), int(bool(c.get("bar"))))
                                     for i, c in enumerate(r.get("claims") or [])])
                con.executemany("insert into verdicts values (?,?,?,?,?,?,?,?,?,?,?)", _verdict_rows(loaded))
        finally:
            con.close()
        os.chmod(tmp, file_mode())
        os.replace(tmp, db)
        return db


def _verdict_rows(loaded: list[tuple[Path, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """One row per (batch, paper, claim): the verdict over that batch's seeds, seed-invariant entries marked."""
    from .stats import aggregate_claims

    groups: dict[tuple[Any, str], list[dict[str, Any]]] = {}
    for _, r in loaded:
        if r.get("status") == "ok":
            groups.setdefault((r.get("batch"), r["paper"]), []).append(r)
    rows = []
    for (batch, paper), recs in groups.items():
        recs.sort(key=lambda r: r["seed"])
        for c in aggregate_claims([r.get("claims") or [] for r in recs]):
            rows.append((batch, paper, recs[0]["budget"], len(recs), c["statement"], c.get("kind", "claim"),
                         int(bool(c.get("seed_invariant"))), c["verdict"], c.get("reason"),
                         int(c.get("control") is not None), (c.get("power") or {}).get("needed")))
    return rows


def _json_default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, Path):
        return str(o)
    return str(o)


def iter_ok(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if isinstance(r, dict) and r.get("status") == "ok"]


__all__ = ["ResultStore", "atomic_write_bytes", "check_writable", "record_problem", "valid_records", "file_mode",
           "dir_mode", "iter_ok", "RECORDS", "FIGURES", "INDEX"]
