"""Run (paper x seed) reproduction jobs on a backend and store the records.

Backends:
- ``local``: a process pool over the machine's cores (``jobs=1`` runs in this process).
- ``ray``: the same jobs as Ray tasks; joins ``ray_address`` if given, else starts a local Ray.

A job computes in the worker and returns its record plus its figures as PNG bytes; the driver writes both
to the result store, so workers never need the output folder (true on a Ray cluster too). Nothing in a
paper's folder knows which backend runs it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import math
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from .budget import Budget
from .figures import tidy_figure
from .outcome import Outcome, _num
from .peers import missing_peers, reset_missing_peers
from .provenance import command_line, run_env
from .stats import aggregate_claims, aggregate_metrics
from .store import ResultStore, atomic_write_bytes, check_writable, valid_records

log = logging.getLogger(__name__)
BACKENDS = ("local", "ray")


class Interrupted(Exception):
    """``icml26 reproduce`` was stopped by SIGTERM or SIGINT: the pool's workers were ended, the records of the jobs
    that finished are kept (each is written whole, atomically), nothing partial is."""

    def __init__(self, signame: str, done: int, total: int) -> None:
        super().__init__(f"interrupted by {signame}: {done} of {total} jobs finished and stored; the others were "
                         "stopped")
        self.signame, self.done, self.total = signame, done, total

    @property
    def exit_code(self) -> int:
        return 143 if self.signame == "SIGTERM" else 130


class _Stop(BaseException):
    """Raised in the main thread by the SIGTERM handler (a BaseException, so no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`_Stop` in the main thread (outside the main thread: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Stop()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@dataclass(frozen=True)
class Job:
    paper: str
    module: str  # e.g. "icml26.sampling.srk_lmc.reproduce"
    budget: str
    seed: int
    batch: str
    threads: int = 1


def run_job(job: Job) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Run one reproduction; never raises: a crash becomes a record with ``status="error"``."""
    run_id = uuid.uuid4().hex[:12]
    record: dict[str, Any] = {
        "run_id": run_id, "batch": job.batch, "paper": job.paper, "budget": job.budget, "seed": job.seed,
        "started": time.time(), "status": "ok", "error": None, "metrics": {}, "claims": [], "tables": {},
        "figures": [], "wall_time": None, "cpu_time": None, "env": {},
    }
    pngs: dict[str, bytes] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    log.info("%s seed %s (%s budget, %s threads): started", job.paper, job.seed, job.budget, job.threads)
    reset_missing_peers()
    try:
        _set_threads(job.threads)
        mod = importlib.import_module(job.module)
        outcome = mod.reproduce(Budget.parse(job.budget), job.seed)
        if not isinstance(outcome, Outcome):
            raise TypeError(f"{job.module}.reproduce returned {type(outcome).__name__}, expected Outcome")
        record["metrics"] = {k: _num(v) for k, v in outcome.metrics.items()}
        record["claims"] = [c.to_dict() for c in outcome.claims]
        record["tables"] = {k: [{kk: _num(vv) if isinstance(vv, (int, float)) else str(vv) if vv is not None else None
                                 for kk, vv in row.items()} for row in rows] for k, rows in outcome.tables.items()}
        record["notes"] = outcome.notes
        record["missing_peers"] = missing_peers()
        for name, fig in outcome.figures.items():
            rel = f"figures/{job.paper}/{run_id}-{_safe(name)}.png"
            buf = io.BytesIO()
            tidy_figure(fig)
            fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
            pngs[rel] = buf.getvalue()
            record["figures"].append({"name": name, "path": rel})
            _close(fig)
        record["wall_time"] = outcome.wall_time or (time.perf_counter() - t0)
    except Exception:  # noqa: BLE001 - a crash is data: it is recorded and reported
        record["status"] = "error"
        record["error"] = traceback.format_exc()
        record["wall_time"] = time.perf_counter() - t0
    record["cpu_time"] = time.process_time() - c0  # all threads of this process: what the run cost, whatever the load
    try:
        record["env"] = run_env()  # after the run: it then knows the device torch used
    except Exception:  # noqa: BLE001 - provenance is best effort, never a crash
        pass
    return record, pngs


def run_reproductions(
    papers: Sequence[str],
    budget: Budget | str = Budget.STANDARD,
    seeds: int | Sequence[int] = 1,
    *,
    jobs: int | None = None,
    backend: str = "local",
    out: str | Path = "runs",
    ray_address: str | None = None,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    on_job_start: Callable[[Job], None] | None = None,
) -> "BatchResult":
    """Run every (paper, seed) job and store one JSON record per run under ``out``.

    ``papers`` are catalogue ids (implemented ones); ``seeds`` is a count (seeds 0..N-1) or explicit seeds.
    """
    from ..catalog import get_paper

    budget = Budget.parse(budget)
    seed_list = _seed_list(seeds)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    entries = list({e.id: e for e in (get_paper(p) for p in papers)}.values())  # an id given twice runs once
    if len(entries) < len(papers):
        log.warning("duplicate paper ids given; each paper runs once per seed")
    missing = [p.id for p in entries if not p.implemented]
    if missing:
        raise ValueError(f"not implemented yet (planned): {', '.join(missing)}")
    store = ResultStore(check_writable(Path(out)))
    n_cpu = os.cpu_count() or 1
    total = len(entries) * len(seed_list)
    jobs = max(1, min(jobs or n_cpu, total if total else 1))
    threads = _threads_per_job(n_cpu, jobs)
    batch = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    todo = [Job(p.id, p.module + ".reproduce", budget.value, s, batch, threads) for p in entries for s in seed_list]
    if on_start:
        on_start(total)

    records = execute(todo, store, backend=backend, jobs=jobs, ray_address=ray_address, on_done=on_done,
                      on_job_start=on_job_start)
    store.reindex()
    order = {(j.paper, j.seed): i for i, j in enumerate(todo)}
    records.sort(key=lambda r: order[(r["paper"], r["seed"])])
    return BatchResult(batch=batch, budget=budget.value, records=records, out=store.root)



def execute(
    todo: Sequence[Job],
    store: ResultStore,
    *,
    backend: str = "local",
    jobs: int = 1,
    ray_address: str | None = None,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    on_job_start: Callable[[Job], None] | None = None,
) -> list[dict[str, Any]]:
    """Run ``todo`` on ``backend`` and write each record and its figures to ``store`` as it arrives."""
    records: list[dict[str, Any]] = []

    def collect(result: tuple[dict[str, Any], dict[str, bytes]]) -> None:
        rec, pngs = result
        for rel, data in pngs.items():
            atomic_write_bytes(store.root / rel, data)
        store.save(rec)
        records.append(rec)
        if rec["status"] != "ok":  # one line now; the CLI prints the traceback once, after the summary
            log.error("%s seed %s crashed: %s", rec["paper"], rec["seed"], error_summary(rec["error"]))
        elif log.isEnabledFor(logging.INFO):  # -v: every claim and check of the seed as it arrives
            log.info("%s seed %s (%s) finished in %.1f s: %d claims and checks", rec["paper"], rec["seed"],
                     rec["budget"], rec.get("wall_time") or 0.0, len(rec["claims"]))
            for c in rec["claims"]:
                log.info("  %s %-13s %s (measured %s, %s %s)", "check" if c.get("kind") == "check" else "claim",
                         c.get("verdict"), c.get("statement"), _short(c.get("measured")), c.get("op"),
                         _short(c.get("reference")))
        if on_done:
            on_done(rec)

    def started(job: Job) -> Job:
        if on_job_start:
            on_job_start(job)
        return job

    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    pool: ProcessPoolExecutor | None = None
    try:
        with _sigterm_raises():
            if backend == "ray":
                _run_ray([started(j) for j in todo], collect, ray_address, jobs)  # Ray schedules them itself
            elif jobs == 1:
                for job in todo:
                    collect(run_job(started(job)))
            else:  # at most `jobs` in flight, so a job is handed out when a worker is free to start it
                pending = iter(todo)
                pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"))
                running: set[Future] = set()

                def submit_next() -> None:
                    job = next(pending, None)
                    if job is not None:
                        running.add(pool.submit(run_job, started(job)))  # type: ignore[union-attr]

                for _ in range(jobs):
                    submit_next()
                while running:
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        running.discard(fut)
                        collect(fut.result())
                        submit_next()
                pool.shutdown(wait=True)
                pool = None
    except (_Stop, KeyboardInterrupt) as e:
        if pool is not None:
            _end_pool(pool)
        raise Interrupted("SIGTERM" if isinstance(e, _Stop) else "SIGINT", len(records), len(todo)) from None
    return records


def _end_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a process pool at once: cancel what has not started, end the workers (and their children), reap them."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    # Python 3.11's atexit hook wakes every pool's manager thread through a pipe that the manager may already have
    # closed; on a pool ended like this it printed "OSError: [Errno 9] Bad file descriptor" with a traceback at
    # exit (1 run in ~10). Wait for the manager to finish and take its wake-up pipe out of the hook's list.
    with contextlib.suppress(Exception):
        from concurrent.futures import process as _cfp

        manager = getattr(pool, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=10)
            if not manager.is_alive():
                _cfp._threads_wakeups.pop(manager, None)  # type: ignore[attr-defined]


@dataclass
class BatchResult:
    batch: str
    budget: str
    records: list[dict[str, Any]]
    out: Path

    @property
    def crashed(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["status"] != "ok"]

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Per paper: claims and metrics aggregated over its seeds."""
        return summarize_records(self.records)


def summarize_records(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per paper: its seeds, crashes, claims and metrics aggregated over seeds. A malformed record (not the shape
    of a run record) is skipped with a warning, never a traceback."""
    by_paper: dict[str, list[dict[str, Any]]] = {}
    for r in valid_records(records):
        by_paper.setdefault(r["paper"], []).append(r)
    out = {}
    for paper, recs in by_paper.items():
        ok = sorted([r for r in recs if r["status"] == "ok"], key=lambda r: r["seed"])
        walls = [r["wall_time"] for r in recs if r.get("wall_time") is not None]
        out[paper] = {
            "budget": recs[0]["budget"],
            "seeds": [r["seed"] for r in ok],
            "crashed": [r["seed"] for r in recs if r["status"] != "ok"],
            "errors": [r["error"] for r in recs if r["status"] != "ok"],
            "claims": aggregate_claims([r["claims"] for r in ok]),
            "metrics": aggregate_metrics([r["metrics"] for r in ok]),
            "wall_time": sum(walls) / len(walls) if walls else math.nan,
            "missing_peers": _unique([m for r in ok for m in r.get("missing_peers") or []]),
            "records": ok,
        }
    return out


# helper functions

def _seed_list(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, bool):
        raise TypeError("seeds must be a positive int or a list of ints")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {seeds}")
        return list(range(seeds))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("give at least one seed")
    dup = sorted({s for s in out if out.count(s) > 1})
    if dup:
        raise ValueError(f"seeds {dup} are given more than once; each seed must be distinct, or the interval "
                         "over seeds would count one run twice")
    return out


RAY_CONNECT_TIMEOUT_S = 10.0  # how long joining a Ray head may take before it is called unreachable
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS


def _split_address(address: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``ray://host:port`` -> ``(host, port)``; ``ValueError`` otherwise."""
    rest = address.strip()
    if "://" in rest:
        scheme, rest = rest.split("://", 1)
        if scheme != "ray":
            raise ValueError(f"--ray-address {address!r}: unknown scheme {scheme!r}; give host:port of the Ray head "
                             "(e.g. 10.0.0.5:6379) or ray://host:10001 for Ray Client")
    rest = rest.rstrip("/")
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--ray-address {address!r} is not host:port; give the address printed by `ray start --head` "
                         "(e.g. 10.0.0.5:6379), or leave it out to start a local Ray")
    return host, int(port)


def probe_ray_address(address: str, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Fail fast, with a ``ValueError`` naming ``address``, when no Ray head answers there within ``timeout`` s.

    ``ray.init(address=...)`` retries an unreachable head for minutes; this opens a TCP connection and checks
    that the other side speaks gRPC (HTTP/2: it answers the client preface with a SETTINGS frame), as a Ray
    head's GCS port and a Ray Client server do. ``"auto"`` and ``"local"`` are left to Ray.
    """
    if address in ("auto", "local"):
        return
    if not timeout > 0:
        raise ValueError(f"the Ray connect timeout must be > 0 s, got {timeout}")
    host, port = _split_address(address)
    hint = "check the address (host:port printed by `ray start --head`), that the head is running and that the port is open"
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_HTTP2_PREFACE)
            head = b""
            while len(head) < 9:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout("no answer")
                sock.settimeout(left)
                chunk = sock.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
    except socket.timeout:
        raise ValueError(f"cannot reach a Ray head at {address!r}: no answer within {timeout:g} s; {hint}") from None
    except OSError as e:
        raise ValueError(f"cannot reach a Ray head at {address!r} ({e.strerror or e}); {hint}") from None
    if len(head) < 9 or head[3] != 0x04:  # byte 3 of an HTTP/2 frame header is its type; SETTINGS = 4
        raise ValueError(f"something answers at {address!r} but it is not a Ray head (no gRPC handshake); give the "
                         "GCS port of the head (default 6379) or ray://host:10001 for Ray Client")


def _run_ray(todo: list[Job], collect: Callable, address: str | None, jobs: int,
             connect_timeout: float | None = None) -> None:
    """Run ``todo`` as Ray tasks. Joins ``address`` (probed first: an unreachable head is a ``ValueError`` within
    ``connect_timeout`` s, default ``RAY_CONNECT_TIMEOUT_S`` or ``$ICML26_RAY_CONNECT_TIMEOUT``), else starts a local
    Ray with ``jobs`` CPUs and shuts it down afterwards."""
    try:
        import ray
    except ImportError:
        raise ValueError("the ray backend needs Ray: pip install 'icml26[ray]'") from None
    if connect_timeout is None:
        raw = os.environ.get("ICML26_RAY_CONNECT_TIMEOUT", "")
        try:
            connect_timeout = float(raw) if raw.strip() else RAY_CONNECT_TIMEOUT_S
        except ValueError:
            raise ValueError(f"ICML26_RAY_CONNECT_TIMEOUT must be a number of seconds, got {raw!r}") from None
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True}
        if address:
            probe_ray_address(address, connect_timeout)
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = jobs
        try:
            ray.init(**kwargs)
        except (ConnectionError, TimeoutError, RuntimeError) as e:
            where = f"the Ray head at {address!r}" if address else "a local Ray"
            raise ValueError(f"could not start or join {where}: {e}") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_job)
        pending = [remote.remote(job) for job in todo]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                rec, pngs = ray.get(ref)
                env = rec.setdefault("env", {})
                if env.get("command") is None:  # a Ray worker's own command line says nothing; the driver's does
                    env["command"] = command_line()
                collect((rec, pngs))
    finally:
        if started_here:
            ray.shutdown()


def _threads_per_job(n_cpu: int, jobs: int) -> int:
    """Torch threads per job: ``$OMP_NUM_THREADS`` when the user set it (a shared or loaded machine), else the
    cores divided among the parallel jobs."""
    raw = os.environ.get("OMP_NUM_THREADS", "").strip()
    if raw.isdigit() and int(raw) >= 1:
        return int(raw)
    return max(1, n_cpu // jobs)


def _set_threads(n: int) -> None:
    try:
        import torch

        torch.set_num_threads(max(1, n))
    except ImportError:  # pragma: no cover
        pass


def error_summary(error: Any) -> str:
    """The last line of a recorded traceback (``ExceptionType: message``)."""
    lines = [line for line in str(error or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"


def missing_extra(error: Any) -> bool:
    """Whether a recorded crash is a missing optional package whose message already says what to install."""
    last = error_summary(error)
    return last.startswith(("ImportError", "ModuleNotFoundError")) and "pip install" in last


def _unique(items: list[Any]) -> list[Any]:
    return [m for i, m in enumerate(items) if m not in items[:i]]


def _short(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in x) + "]"
    return str(x)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60]


def _close(fig: Any) -> None:
    try:
        import matplotlib.pyplot as plt

        plt.close(fig)
    except Exception:  # noqa: BLE001
        pass


__all__ = ["Interrupted", "Job", "run_job", "execute", "run_reproductions", "BatchResult", "summarize_records", "BACKENDS",
           "probe_ray_address", "RAY_CONNECT_TIMEOUT_S"]
