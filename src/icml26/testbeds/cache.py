"""On-disk cache for trained testbed artefacts.

Artefacts live under ``$ICML26_CACHE`` (default ``~/.cache/icml26``) in ``<kind>/<hash of config>/``. They are
built in a temporary folder and renamed into place (atomic), under a file lock so that two processes asking
for the same artefact build it once.

Integrity: when a build finishes, ``icml26_manifest.json`` (size and SHA-256 of every file) is written, then the
``.complete`` marker, last. Every load checks the sizes (and, once per process, the hashes) against the manifest;
a damaged artefact (a truncated ``model.safetensors``, a deleted file) is rebuilt, and :func:`load_cached` also
rebuilds once when the loader itself fails on the files. When a damaged folder cannot be removed, the error
names the folder to delete. Temporary build folders left behind by crashed builds are removed. Folders and files
get the usual permissions (``0o777``/``0o666`` minus the umask), so a shared cache is readable by everyone.

Code version: the key is the config, but a build also records ``icml26_code.json``, the fingerprint of the code
it ran (:mod:`icml26.testbeds.code_version`: every ``icml26`` function and class the build callable reaches,
docstrings and comments aside). A cached artefact whose recorded fingerprint differs from the current code's is
rebuilt, and the warning names the functions that changed; ``ICML26_CACHE_IGNORE_CODE=1`` reuses it anyway (for a
change you know leaves it alone). An artefact from before code records were kept has nothing to compare with: it is
adopted once under the current code (delete its folder to rebuild it).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

from .code_version import changed, code_fingerprint, fingerprint_hash, stale_entries

log = logging.getLogger(__name__)
T = TypeVar("T")

MANIFEST = "icml26_manifest.json"
COMPLETE = ".complete"
CONFIG = "icml26_config.json"
CODE = "icml26_code.json"
IGNORE_CODE_ENV = "ICML26_CACHE_IGNORE_CODE"
STALE_TMP_S = 3600.0  # a build folder untouched this long, whose build lock is free, is left from a crash
builds_done = 0  # how many artefacts this process has built (the CLI tells "built" from "reused" with it)
_verified: dict[str, float] = {}  # folder -> manifest mtime whose hashes this process has checked


class CacheError(RuntimeError):
    """A cached artefact is damaged and could not be rebuilt; the message names the folder to delete."""


def cache_root() -> Path:
    root = Path(os.environ.get("ICML26_CACHE") or Path.home() / ".cache" / "icml26")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create the testbed cache folder {str(root)!r} ({e.strerror or e}); "
                         "set ICML26_CACHE to a folder you can write") from None
    return root


def config_hash(config: Any) -> str:
    """Stable short hash of a JSON-serialisable config (dataclasses: pass ``asdict(cfg)``)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``; says so (one warning, every 30 s while it lasts) when another process holds
    it, e.g. a concurrent build of the same artefact, instead of waiting in silence."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            what = path.name.removeprefix(".").removesuffix(".lock")
            t0 = time.monotonic()
            next_note = t0 + 30.0
            log.warning("waiting for another process that is building %s/%s; its build will be reused",
                        path.parent.name, what)
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(0.5)
                    if time.monotonic() >= next_note:
                        log.warning("still waiting for %s/%s (%.0f s)", path.parent.name, what, time.monotonic() - t0)
                        next_note += 30.0
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# manifest

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and p.name not in (MANIFEST, COMPLETE) and not p.name.startswith(f".{MANIFEST}."))


def write_manifest(folder: Path) -> Path:
    """Record size and SHA-256 of every file in ``folder`` (the manifest itself and the marker excepted)."""
    entries = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)} for p in _files(folder)}
    path = folder / MANIFEST
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{MANIFEST}.", suffix=".part")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"version": 1, "files": entries}, indent=1, sort_keys=True))
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)  # atomic: a concurrent reader sees no manifest or the whole one
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def manifest_problem(folder: Path, check_hashes: bool = True) -> str | None:
    """Why the artefact in ``folder`` is damaged (``None`` when it matches its manifest)."""
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not an object")
    except FileNotFoundError:
        return "no manifest"
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"unreadable manifest ({e})"
    for rel, want in files.items():
        p = folder / rel
        try:
            size = p.stat().st_size
        except OSError:
            return f"{rel} is missing"
        if size != want.get("size"):
            return f"{rel} has {size} bytes, the manifest says {want.get('size')} (truncated or overwritten)"
    if check_hashes:
        for rel, want in files.items():
            try:
                digest = _sha256(folder / rel)
            except OSError as e:  # removed or replaced by another process meanwhile
                return f"{rel} cannot be read ({e.strerror or e})"
            if digest != want.get("sha256"):
                return f"{rel} does not match its SHA-256 in the manifest"
    return None


def _status(final: Path) -> str | None:
    """``None`` when ``final`` holds a complete, intact artefact; else why not. A folder without its manifest
    cannot be verified (a deleted manifest next to a truncated file looks complete), so it is never adopted: it is
    reported as damaged and rebuilt."""
    if not (final / COMPLETE).exists():
        return "absent" if not final.exists() else "incomplete"
    if not (final / MANIFEST).exists():
        return "no manifest, so its files cannot be verified"
    try:
        mtime = (final / MANIFEST).stat().st_mtime
    except OSError:
        return "no manifest"
    check = _verified.get(str(final)) != mtime
    why = manifest_problem(final, check_hashes=check)
    if why is None and check:
        _verified[str(final)] = mtime
    return why


LEGACY = "built before code fingerprints were recorded"


def _write_code(folder: Path, fp: dict[str, str]) -> None:
    from ..harness.store import atomic_write_bytes

    blob = json.dumps({"version": 1, "fingerprint": fingerprint_hash(fp), "functions": fp}, sort_keys=True, indent=1)
    atomic_write_bytes(folder / CODE, blob.encode())


def _ignoring_code() -> bool:
    return os.environ.get(IGNORE_CODE_ENV, "").strip() not in ("", "0")


def _read_code(final: Path) -> tuple[dict[str, str], str]:
    """(recorded functions, their fingerprint hash) of the artefact in ``final``; ``FileNotFoundError`` when it has
    no record, ``OSError`` / ``ValueError`` / ``KeyError`` / ``TypeError`` when the record is unreadable."""
    rec = json.loads((final / CODE).read_text())
    old, old_hash = rec["functions"], rec["fingerprint"]
    if not isinstance(old, dict):
        raise TypeError("functions is not an object")
    return old, old_hash


def _code_problem(final: Path, fp: dict[str, str]) -> str | None:
    """``None`` when the artefact in ``final`` was built by the code whose fingerprint is ``fp``; else how not."""
    if _ignoring_code():
        return None
    try:
        old, old_hash = _read_code(final)
    except FileNotFoundError:
        return LEGACY if (final / COMPLETE).exists() else None
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"built by code whose fingerprint cannot be read ({e})"
    if old_hash == fingerprint_hash(fp):
        return None
    names = changed(old, fp)
    shown = ", ".join(n.removeprefix("icml26.") for n in names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4
                                                                        else "")
    return f"built by different code ({shown} changed since)"


def _remove(folder: Path, why: str) -> None:
    """Move a damaged artefact out of the way and delete it; ``CacheError`` naming it when that fails."""
    _verified.pop(str(folder), None)
    trash = folder.parent / f".{folder.name}.tmp-damaged-{os.getpid()}-{int(time.time())}"
    try:
        os.replace(folder, trash)
    except FileNotFoundError:
        return
    except OSError as e:
        raise CacheError(f"the cached artefact {str(folder)!r} is damaged ({why}) and could not be removed "
                         f"({e.strerror or e}); delete that folder and run again") from None
    shutil.rmtree(trash, ignore_errors=True)


def _try_lock(path: Path) -> Any:
    """The open, exclusively locked lock file, or ``None`` when someone else holds the lock."""
    try:
        fh = open(path, "a")
    except OSError:
        return None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def clean_stale_builds(kind_dir: Path, own: str | None = None, max_age_s: float = STALE_TMP_S) -> list[Path]:
    """Remove temporary build folders left in ``kind_dir`` by crashed builds; returns what was removed.

    A build folder ``.<hash>.tmp*`` is removed when it belongs to ``own`` (whose lock the caller holds, so no
    build of it is running), or when it is older than ``max_age_s`` and its build lock is free.
    """
    removed: list[Path] = []
    if not kind_dir.is_dir():
        return removed
    now = time.time()
    for p in kind_dir.glob(".*.tmp*"):
        if not p.is_dir():
            continue
        name = p.name[1:].split(".tmp", 1)[0]
        try:
            age = now - p.stat().st_mtime
        except OSError:
            continue
        if name == own:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
        elif age > max_age_s:
            fh = _try_lock(kind_dir / f".{name}.lock")
            if fh is None:
                continue  # a build of that artefact is running now
            try:
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
            finally:
                fh.close()
    for p in removed:
        log.info("removed stale temporary build folder %s", p)
    return removed


# main entry points

def is_cached(kind: str, config: Any) -> bool:
    """Whether an intact artefact for ``config``, built by today's code, is in the cache: complete, matching its
    manifest, and every entry of its recorded code fingerprint unchanged (``code_version.stale_entries``). A
    damaged or code-stale one counts as not cached, since the next load rebuilds it; one from before fingerprints
    counts as cached (the next load adopts it)."""
    final = cache_root() / kind / config_hash(config)
    return _status(final) is None and _recorded_code_problem(final) is None


def _recorded_code_problem(final: Path) -> str | None:
    """Like ``_code_problem`` but from the recorded fingerprint alone (no build callable needed)."""
    if _ignoring_code():
        return None
    try:
        old, _ = _read_code(final)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"built by code whose fingerprint cannot be read ({e})"
    stale = stale_entries(old)
    return f"built by different code ({', '.join(stale[:4])} changed since)" if stale else None


def cached_dir(kind: str, config: Any, build: Callable[[Path], None], code: Sequence[Any] | None = None) -> Path:
    """Return the folder holding the artefact for ``config``, building it with ``build(tmp_dir)`` if absent.

    ``build`` writes everything into the folder it is given; the folder is renamed into place only when
    ``build`` returns, so a crash never leaves a half-written artefact behind. A damaged artefact (files that
    do not match the manifest written at build time) is rebuilt, and so is one built by different code: the
    fingerprint of ``code`` (default: ``build`` and everything it reaches) is recorded at build time and compared
    at every load.
    """
    final = cache_root() / kind / config_hash(config)
    fp = code_fingerprint(*(code if code is not None else (build,)))
    why = _status(final) or _code_problem(final, fp)
    if why is None:
        return final
    if (why == LEGACY or why.startswith("built by")) and not os.access(final.parent, os.W_OK):
        if why != LEGACY:  # a read-only shared cache: it cannot be rebuilt here, so it is used as it is
            log.warning("cached %s artefact %s was %s, but the cache is read-only; using it as built", kind, final,
                        why)
        return final
    with file_lock(cache_root() / kind / f".{final.name}.lock"):
        why = _status(final) or _code_problem(final, fp)
        if why is None:  # built by another process while we waited
            return final
        if why == LEGACY:  # nothing to compare with: adopt it under today's code, once, and say so
            log.info("cached %s artefact %s has no code record (built before they were kept); recording the current "
                     "code's fingerprint for it", kind, final)
            _write_code(final, fp)
            write_manifest(final)
            return final
        if why.startswith("built by"):  # kept until the new build replaces it: an interrupted rebuild loses nothing
            log.warning("cached %s artefact %s was %s; rebuilding it (set %s=1 to reuse it anyway)", kind, final,
                        why, IGNORE_CODE_ENV)
        elif why not in ("absent",):
            log.warning("cached %s artefact %s is damaged (%s); rebuilding it", kind, final, why)
            _remove(final, why)
        clean_stale_builds(final.parent, own=final.name)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.tmp"))
        try:
            os.chmod(tmp, 0o777 & ~_umask())
            build(tmp)
            global builds_done
            builds_done += 1
            (tmp / CONFIG).write_text(json.dumps(config, sort_keys=True, indent=1, default=str))
            _write_code(tmp, fp)
            _share(tmp)  # libraries write some files 0600 (tempfile + rename); a shared cache is readable by all
            write_manifest(tmp)
            (tmp / COMPLETE).touch()  # last: a folder with the marker is complete and has its manifest
            old = final.parent / f".{final.name}.tmp-replaced-{os.getpid()}"
            if final.exists():
                os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
            _verified[str(final)] = (final / MANIFEST).stat().st_mtime
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def load_cached(kind: str, config: Any, build: Callable[[Path], None], load: Callable[[Path], T],
                code: Sequence[Any] | None = None) -> T:
    """``load(cached_dir(kind, config, build))``, rebuilding once when ``load`` fails on the cached files.

    A file that matches its manifest can still be unreadable (a folder from before manifests, a library that
    changed format); then the folder is removed, rebuilt and loaded again. If that fails too, a ``CacheError``
    names the folder.
    """
    folder = cached_dir(kind, config, build, code)
    seen = _mtime(folder / MANIFEST)
    try:
        return load(folder)
    except Exception as e:  # noqa: BLE001 - any loader failure on cached files means a bad artefact
        why = f"{type(e).__name__}: {e}"
        log.warning("loading cached %s artefact %s failed (%s); rebuilding it", kind, folder, why)
    with file_lock(folder.parent / f".{folder.name}.lock"):
        if _mtime(folder / MANIFEST) == seen:  # not rebuilt by another process meanwhile
            _remove(folder, why)
    folder = cached_dir(kind, config, build, code)
    try:
        return load(folder)
    except Exception as e:  # noqa: BLE001
        raise CacheError(f"the cached {kind} artefact {str(folder)!r} cannot be loaded even after a rebuild "
                         f"({type(e).__name__}: {e}); delete that folder and report the error") from e


def _share(folder: Path) -> None:
    """Give every file and folder under ``folder`` the usual permissions (0o666 / 0o777 minus the umask)."""
    mask = _umask()
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~mask)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _umask() -> int:
    from ..harness.store import _umask as umask

    return umask()


__all__ = ["cache_root", "config_hash", "file_lock", "cached_dir", "load_cached", "is_cached", "write_manifest",
           "manifest_problem", "clean_stale_builds", "CacheError"]
