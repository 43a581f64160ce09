"""Result store: one JSON record per run under ``<out>/records/``, indexed in SQLite.

The JSON records are the source of truth; ``index.sqlite`` is rebuilt from them whenever it is missing or
stale, so deleting it is always safe. Records and figures are written atomically (temp file + rename).
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

RECORDS = "records"
FIGURES = "figures"
INDEX = "index.sqlite"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees a half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_writable(out: Path) -> Path:
    """Create ``out`` if needed and make sure files can be written there; raise ``ValueError`` if not."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".write-test.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise ValueError(f"output folder {str(out)!r} is not writable ({e.strerror or e}); pass --out to a folder you can write") from None
    return out


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
        """Write one run record; returns its path."""
        name = f"{record['paper']}-{record['budget']}-seed{record['seed']}-{record['run_id']}.json"
        path = self.records_dir / name
        atomic_write_bytes(path, json.dumps(record, indent=1, default=_json_default).encode())
        return path

    def records(self) -> list[dict[str, Any]]:
        """All records, oldest first (by start time)."""
        out = []
        if not self.records_dir.is_dir():
            return out
        for p in sorted(self.records_dir.glob("*.json")):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, json.JSONDecodeError):
                continue  # a foreign or damaged file never breaks the report
        out.sort(key=lambda r: (r.get("started", 0.0), r.get("run_id", "")))
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
        """Rebuild ``index.sqlite`` (one row per run, one row per claim) from the JSON records."""
        db = self.root / INDEX
        tmp = self.root / f".{INDEX}.tmp"
        if tmp.exists():
            tmp.unlink()
        con = sqlite3.connect(tmp)
        with con:
            con.execute("create table runs (run_id text primary key, batch text, paper text, budget text, seed int,"
                        " status text, started real, wall_time real, path text)")
            con.execute("create table claims (run_id text, idx int, statement text, measured real, op text,"
                        " reference text, verdict text)")
            for p in sorted(self.records_dir.glob("*.json")) if self.records_dir.is_dir() else []:
                try:
                    r = json.loads(p.read_text())
                except (OSError, json.JSONDecodeError):
                    continue
                con.execute("insert or replace into runs values (?,?,?,?,?,?,?,?,?)",
                            (r["run_id"], r.get("batch"), r["paper"], r["budget"], r["seed"], r["status"],
                             r.get("started"), r.get("wall_time"), p.name))
                con.executemany("insert into claims values (?,?,?,?,?,?,?)",
                                [(r["run_id"], i, c["statement"], c["measured"], c["op"], json.dumps(c["reference"]),
                                  c["verdict"]) for i, c in enumerate(r.get("claims", []))])
        con.close()
        os.replace(tmp, db)
        return db


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
    return [r for r in records if r.get("status") == "ok"]
