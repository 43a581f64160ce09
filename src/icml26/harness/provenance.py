"""Provenance of a run: package versions, git commit, command line, machine and device. Recorded by the worker
that ran the job (``runner.run_job``) and shown in the report's provenance block."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

_VERSIONED = ("icml26", "torch", "numpy", "scipy", "scikit-learn", "transformers", "matplotlib")


def run_env() -> dict[str, Any]:
    """Provenance of one run, recorded in the worker that ran it: package versions, git commit of the code (when
    it runs from a git checkout), the command line, the machine and the device torch used."""
    from importlib import metadata

    from .. import __version__

    versions: dict[str, str | None] = {}
    for dist in _VERSIONED:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    versions["icml26"] = __version__
    return {"icml26": __version__, "python": platform.python_version(), "torch": versions["torch"],
            "numpy": versions["numpy"], "versions": versions, "machine": platform.machine(), "cpus": os.cpu_count(),
            "os": platform.platform(terse=True), "cpu_model": _cpu_model(), "device": _device(),
            "git": git_state(), "command": command_line()}


def command_line() -> str | None:
    """The command line that started this process (``icml26 reproduce ...``), program name without its folder;
    ``None`` inside a Ray worker, whose own command line says nothing about the run."""
    argv = list(sys.argv)
    if not argv or not argv[0] or argv[0].endswith("default_worker.py"):
        return None
    prog = Path(argv[0]).name
    if prog == "__main__.py":  # python -m <package>
        prog = f"python -m {Path(argv[0]).parent.name}"
    return " ".join([prog, shlex.join(argv[1:])]).strip()


@lru_cache(maxsize=1)
def git_state() -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout this package runs from, or ``None`` (installed wheel,
    no git). Dirty means tracked files differ from the commit."""
    here = Path(__file__).resolve().parent
    root = next((d for d in (here, *here.parents) if (d / ".git").exists()), None)
    if root is None:
        return None
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": dirty} if sha else None


@lru_cache(maxsize=1)
def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _device() -> str:
    """``cuda: <name>`` when the run had torch imported and a GPU visible, else ``cpu`` (torch is never imported
    just to ask)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return f"cuda: {torch.cuda.get_device_name(0)}"
    except Exception:  # noqa: BLE001
        pass
    return "cpu"


__all__ = ["run_env", "command_line", "git_state"]
