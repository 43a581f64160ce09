"""On-disk cache for trained testbed artefacts.

Artefacts live under ``$ICML26_CACHE`` (default ``~/.cache/icml26``) in ``<kind>/<hash of config>/``. They are
built in a temporary folder and renamed into place (atomic), under a file lock so that two processes asking
for the same artefact build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator


def cache_root() -> Path:
    root = Path(os.environ.get("ICML26_CACHE") or Path.home() / ".cache" / "icml26")
    root.mkdir(parents=True, exist_ok=True)
    return root


def config_hash(config: Any) -> str:
    """Stable short hash of a JSON-serialisable config (dataclasses: pass ``asdict(cfg)``)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached_dir(kind: str, config: Any, build: Callable[[Path], None]) -> Path:
    """Return the folder holding the artefact for ``config``, building it with ``build(tmp_dir)`` if absent.

    ``build`` writes everything into the folder it is given; the folder is renamed into place only when
    ``build`` returns, so a crash never leaves a half-written artefact behind.
    """
    final = cache_root() / kind / config_hash(config)
    if (final / ".complete").exists():
        return final
    with file_lock(cache_root() / kind / f".{final.name}.lock"):
        if (final / ".complete").exists():  # built by another process while we waited
            return final
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.tmp"))
        try:
            build(tmp)
            (tmp / "icml26_config.json").write_text(json.dumps(config, sort_keys=True, indent=1, default=str))
            (tmp / ".complete").touch()
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final
