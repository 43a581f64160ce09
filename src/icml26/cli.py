"""``icml26 list | show | prepare | reproduce | report`` (typer + rich).

Start-up stays light: ``list``, ``show`` and every input error import neither torch nor any paper (whether a
paper is implemented is read from the files on disk, see :mod:`icml26.catalog`). The runner, the report, the
statistics and the testbeds are imported inside the commands that use them.

Output: results on stdout; progress, log lines and errors on stderr. One line per job start and end, also
when stderr is not a terminal (then a heartbeat line every 10 s while jobs run). Testbed builds log what they
train and how far they are (logger ``icml26.testbeds``, shown at INFO by default); ``-v`` shows INFO logs of
everything. Hugging Face's progress bars and advisory/deprecation warnings are silenced unless ``-v``.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__
from .catalog import PAPERS, Paper, get_paper, implemented
from .harness.budget import Budget

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Working implementations of ICML 2026 papers, with reproductions that check their claims.")
console = Console(width=None if Console().is_terminal else 160)  # wide tables when piped to a file or CI log
err = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 160)
VERDICT_STYLE = {"holds": "green", "does not hold": "red", "inconclusive": "yellow"}
BUDGETS = tuple(b.value for b in Budget)  # icml26.harness imports lazily, so this loads no scipy
HEARTBEAT_S = 10.0
log = logging.getLogger("icml26.cli")


def fail(msg: str) -> None:
    err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False)
    raise typer.Exit(code=2)


def warn(msg: str) -> None:
    err.print(f"[bold yellow]warning:[/] {escape(msg)}", highlight=False)


# logging and third-party noise

class _ConsoleHandler(logging.Handler):
    """Log records as plain lines on the stderr console (printed above a live progress bar, not through it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            err.print(self.format(record), markup=False, highlight=False, soft_wrap=True)
        except Exception:  # noqa: BLE001 - logging must never break a command
            self.handleError(record)


def setup_logging(verbose: bool = False) -> None:
    """INFO lines from ``icml26.testbeds`` (testbed builds) always; INFO from everything with ``verbose``."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, _ConsoleHandler)]:
        root.removeHandler(h)
    h = _ConsoleHandler()
    h.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    root.addHandler(h)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("icml26").setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("icml26.testbeds").setLevel(logging.INFO)
    logging.captureWarnings(True)
    quiet_third_party(verbose)


def quiet_third_party(verbose: bool = False) -> None:
    """Silence Hugging Face's loading bars and advisory/deprecation warnings, here and in job processes.

    Environment variables are read when ``transformers``/``huggingface_hub`` are imported, which happens
    later (in this process or in a spawned job), so they cover both; ``setdefault`` leaves a user's own
    settings alone. With ``verbose`` only the progress bars stay off.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if verbose:
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")
    for cat in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=cat)
    if "transformers" in sys.modules:  # already imported: the environment came too late for it
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"icml26 {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="INFO logs of everything (default: testbed builds only)."),
) -> None:
    """Working implementations of ICML 2026 papers, with reproductions that check their claims."""
    setup_logging(verbose)


# input checks (no heavy imports)

MAX_SEEDS = 1000  # `--seeds` above this is refused (1e12 seeds once ran out of memory after 30 s)

def out_path(out: str) -> Path:
    """``--out`` as a Path; an empty value is refused (``Path("")`` would silently mean the current folder)."""
    if not out or not out.strip():
        fail("--out is empty; give a folder, e.g. --out runs")
    return Path(out)


def parse_budget(budget: str) -> str:
    b = str(budget).strip().lower()
    if b not in BUDGETS:
        fail(f"unknown budget {budget!r}; choose one of: {', '.join(BUDGETS)}")
    return b


def resolve_papers(paper_ids: Optional[List[str]], all_: bool, *, default_all: bool = False) -> list[Paper]:
    """Catalogue entries for the ids (case-insensitive, slugs too), each once, implemented ones only."""
    if all_ and paper_ids:
        fail("give paper ids or --all, not both")
    if not paper_ids:
        if all_ or default_all:
            return implemented()
        fail("give paper ids (e.g. `icml26 reproduce A03`) or --all")
    papers: list[Paper] = []
    for i in paper_ids or []:
        try:
            p = get_paper(i)
        except (ValueError, TypeError) as e:
            fail(str(e))
        if p in papers:
            warn(f"{p.id} is given more than once; it runs once")
            continue
        papers.append(p)
    planned = [p.id for p in papers if not p.implemented]
    if planned:
        fail(f"{', '.join(planned)} {'is' if len(planned) == 1 else 'are'} planned, not implemented yet; "
             f"implemented: {', '.join(p.id for p in implemented())}")
    return papers


def check_cache() -> None:
    """Exit 2 with one line when the testbed cache folder (``ICML26_CACHE``) cannot be created or written."""
    from .testbeds.cache import cache_root

    try:
        root = cache_root()
    except ValueError as e:
        fail(str(e))
    if not os.access(root, os.W_OK | os.X_OK):
        fail(f"the testbed cache folder {str(root)!r} is not writable; set ICML26_CACHE to a folder you can write")


# commands

@app.command("list")
def list_papers(out: str = typer.Option("runs", help="Output folder to read last verdicts from.")) -> None:
    """A table of the 38 papers: id, area, method, status, last verdict (claims and checks counted apart)."""
    root = out_path(out)
    last: dict[str, dict[str, Any]] = {}
    if (root / "records").is_dir():  # reading records needs the statistics (scipy); skip when there are none
        from .harness.runner import summarize_records
        from .harness.store import ResultStore

        last = {pid: summarize_records(recs)[pid] for pid, recs in ResultStore(root).latest_batches().items()}
    t = Table(title=f"icml26 — {len(implemented())} of {len(PAPERS)} papers implemented")
    for col in ("id", "area", "method", "status"):
        t.add_column(col, no_wrap=col != "method")
    t.add_column("last verdict", no_wrap=bool(last))
    for p in PAPERS:
        t.add_row(p.id, p.area, p.method, "[green]implemented[/]" if p.implemented else "[dim]planned[/]",
                  last_verdict(last.get(p.id)))
    console.print(t)


def last_verdict(s: dict[str, Any] | None) -> str:
    """``claims: 3 holds, 1 inconclusive; seed-invariant: 1 holds; checks: 2 holds; 2 without a control (standard,
    3 seeds)``; ``—`` when never run. Seed-invariant claims (the same number on every seed) are counted apart."""
    if s is None:
        return "—"
    if s["crashed"] and not s["claims"]:
        return "[red]crashed[/]"
    from .harness.stats import verdict_counts, without_control

    counts = verdict_counts(s["claims"])
    parts = []
    for kind in ("claims", "seed-invariant", "checks"):
        if counts[kind]:
            parts.append(f"{kind}: " + ", ".join(f"[{VERDICT_STYLE.get(v, 'white')}]{n} {v}[/]"
                                                 for v, n in counts[kind].items()))
    n_nc = without_control(s["claims"])
    if n_nc:
        parts.append(f"{n_nc} without a control")
    n = len(s["seeds"])
    crashed = f", {len(s['crashed'])} crashed" if s["crashed"] else ""
    return "; ".join(parts) + f" ({s['budget']}, {n} seed{'s' if n != 1 else ''}{crashed})"


@app.command()
def show(paper_id: str = typer.Argument(..., help="Paper id, e.g. A03.")) -> None:
    """Abstract, claims, where the code is, how to use it and how to reproduce it."""
    try:
        p = get_paper(paper_id)
    except (ValueError, TypeError) as e:
        fail(str(e))
    from rich.markdown import Markdown
    from rich.markup import escape

    from .harness.text import latex_to_text, markdown_to_text

    def plain(s: str) -> str:
        return escape(markdown_to_text(latex_to_text(s)))

    console.rule(f"[bold]{p.id} — {p.method}")
    console.print(f"[bold]Reference:[/] {p.reference}\n[bold]Area:[/] {p.area}   [bold]Status:[/] {p.status}")
    console.print(f"\n[bold]Headline claim:[/] {plain(p.claim)}\n\n[bold]Abstract[/]\n{plain(p.abstract)}\n")
    if not p.implemented:
        console.print(f"[dim]Planned: will live in {p.code_path}, tested in {p.test_path}.[/]")
        return
    console.print(f"[bold]Code:[/] {p.code_path}  ([bold]tests:[/] {p.test_path})")
    needs = p.testbeds("standard")
    if needs:
        console.print(f"[bold]Trained testbeds (standard budget):[/] {', '.join(needs)} "
                      f"(built once; `icml26 prepare {p.id}` pays that up front)")
    console.print(f"[bold]Reproduce:[/] icml26 reproduce {p.id} --budget standard --seeds 3\n")
    if p.readme:
        console.print(Markdown(p.readme))


@app.command()
def prepare(
    paper_ids: Optional[List[str]] = typer.Argument(None, help="Paper ids (default: every implemented paper)."),
    budget: str = typer.Option("standard", help="The budget whose testbeds to build: quick, standard or full."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say what would be built and what it costs."),
) -> None:
    """Build (train once, then cache) every testbed the given papers' reproductions need at BUDGET."""
    b = parse_budget(budget)
    papers = resolve_papers(paper_ids, False, default_all=True)
    check_cache()
    from .testbeds.registry import testbeds_for

    needed = testbeds_for([p.id for p in papers], b)
    if not needed:
        console.print(f"Nothing to build: {', '.join(p.id for p in papers)} need{'s' if len(papers) == 1 else ''} "
                      f"no trained testbed at the {b} budget.")
        return
    built = build_testbeds(needed, {p.id: p.testbeds(b) for p in papers}, dry_run=dry_run)
    if dry_run:
        return
    console.print(f"Ready: {', '.join(t.name for t in needed)} "
                  f"({len(built)} built now, {len(needed) - len(built)} already cached).")


@app.command()
def reproduce(
    paper_ids: Optional[List[str]] = typer.Argument(None, help="Paper ids, e.g. A03 A17."),
    all_: bool = typer.Option(False, "--all", help="Every implemented paper."),
    budget: str = typer.Option("standard", help="quick (<=30 s), standard (<=3 min) or full."),
    seeds: int = typer.Option(1, help="Number of seeds (K..K+N-1, K = --first-seed); claims are aggregated over "
                                       "them."),
    first_seed: int = typer.Option(0, "--first-seed", help="The first seed K: run seeds K..K+N-1, e.g. seeds no "
                                   "earlier run looked at (a testbed chosen on seeds 0-7 checked on 8-12)."),
    jobs: Optional[int] = typer.Option(None, help="Parallel jobs (default: number of cores)."),
    backend: str = typer.Option("local", help="local (process pool) or ray."),
    ray_address: Optional[str] = typer.Option(None, help="Join this Ray cluster instead of starting a local Ray."),
    out: str = typer.Option("runs", help="Output folder for run records, figures and the report."),
    report: bool = typer.Option(True, help="Build the HTML report afterwards."),
) -> None:
    """Run reproductions, print claim vs measurement, and write the report."""
    b = parse_budget(budget)
    root = out_path(out)
    if seeds < 1:
        fail(f"--seeds must be >= 1, got {seeds}")
    if seeds > MAX_SEEDS:
        fail(f"--seeds {seeds} is more than {MAX_SEEDS}; a power estimate that asks for more says 'not within 100', "
             "so more seeds will not decide the claim")
    if first_seed < 0:
        fail(f"--first-seed must be >= 0, got {first_seed}")
    if first_seed > 2**31 - 1 - seeds:
        fail(f"--first-seed {first_seed} is too large: seeds must stay below 2**31 (numpy's and torch's seed range)")
    seed_list = list(range(first_seed, first_seed + seeds))
    if jobs is not None and jobs < 1:
        fail(f"--jobs must be >= 1, got {jobs}")
    if backend not in ("local", "ray"):
        fail(f"unknown backend {backend!r}; choose one of: local, ray")
    papers = resolve_papers(paper_ids, all_)
    from .harness.store import check_writable

    try:
        check_writable(root)
    except ValueError as e:
        fail(str(e))
    if backend == "local" or not ray_address:  # jobs on this machine share its testbed cache: fill it first
        check_cache()
        from .testbeds.registry import testbeds_for

        needed = testbeds_for([p.id for p in papers], b, seed_list)
        if needed:
            build_testbeds(needed, {p.id: p.testbeds(b) for p in papers}, verbose_table=False)
    result = run_with_progress([p.id for p in papers], b, seed_list, jobs, backend, root, ray_address)
    print_claims(result.summaries())
    if report:
        from .harness.report import build_report

        console.print(f"\nReport: {build_report(root).resolve()}")
    if result.crashed:
        from .harness.runner import error_summary, missing_extra

        for r in result.crashed:
            if missing_extra(r["error"]):  # the message says what to install; its traceback is in the run record
                err.print(f"[red]{r['paper']} seed {r['seed']} crashed:[/] {escape(error_summary(r['error']))}",
                          highlight=False)
            else:
                err.print(f"[red]{r['paper']} seed {r['seed']} crashed:[/]\n{escape(str(r['error']))}", highlight=False)
        raise typer.Exit(code=1)


@app.command("report")
def report_cmd(out: list[str] = typer.Option(["runs"], help="Output folder(s) holding run records."),
               counts: bool = typer.Option(False, "--counts", help="Print the per-paper verdict counts (claims "
                                           "decided over seeds, seed-invariant, checks, without a control) of "
                                           "the newest batch of each paper in OUT, as the Markdown table the "
                                           "README's totals come from; builds no report."),
               markdown: str | None = typer.Option(None, "--markdown", metavar="ID",
                                            help="Print paper ID's claims and checks from its newest batch in OUT "
                                            "as the Markdown tables of its README (command, seeds, wall time per "
                                            "seed, code commit, per-seed values, why undecided); builds no "
                                            "report.")) -> None:
    """Build the static HTML report from the run records in OUT (or, with --counts, print the counts table, or with
    --markdown ID one paper's README tables)."""
    roots = [out_path(o) for o in out]
    for o, root in zip(out, roots):
        if not (root / "records").is_dir():
            fail(f"no run records in {o!r}; run `icml26 reproduce ... --out {o}` first")
    if counts and markdown is not None:
        fail("give --counts or --markdown ID, not both")
    if markdown is not None:
        from .catalog import get_paper
        from .harness.report import paper_markdown

        try:
            pid = get_paper(markdown).id
            text = paper_markdown(roots, pid)
        except (KeyError, ValueError) as e:
            fail(str(e.args[0]) if e.args else str(e))
        console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)
        return
    if counts:
        from .harness.report import counts_table

        console.print(counts_table(roots), markup=False, highlight=False, soft_wrap=True)
        return
    if len(roots) > 1:
        fail("give one --out to build a report (several are allowed only with --counts)")
    root = roots[0]
    from .harness.report import build_report
    from .harness.store import check_writable

    try:
        check_writable(root)
    except ValueError as e:
        fail(str(e))
    try:
        index = build_report(root)
    except ValueError as e:
        fail(str(e))
    console.print(f"Report: {index.resolve()}")


# testbeds

def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


def build_testbeds(needed: list, users: dict[str, tuple[str, ...]], dry_run: bool = False,
                   verbose_table: bool = True) -> list:
    """Build the testbeds in ``needed`` that are not cached, stating the one-time cost first, with a progress
    bar (terminal) or log lines at least every 10 s (otherwise). Returns the testbeds built now (with
    ``dry_run``: the ones that would be built, building nothing)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .testbeds.cache import cache_root
    from .testbeds.progress import listening

    todo = [t for t in needed if not t.is_cached()]
    if not todo and not verbose_table:
        err.print(f"Testbeds cached: {', '.join(tb.name for tb in needed)}.", highlight=False)
        return []
    t = Table(title="Trained testbeds", title_justify="left")
    for col in ("testbed", "what", "needed by", "status"):
        t.add_column(col)
    for tb in needed:
        by = ", ".join(pid for pid, names in users.items() if tb.name in names)
        cost = f"~{_duration(tb.est_cpu_s)} CPU" + (f" (~{_duration(tb.est_wall_s)} on {tb.threads} cores)"
                                                    if tb.threads > 1 else "")
        t.add_row(tb.name, tb.description, by, f"to build, {cost}" if tb in todo else "[green]cached[/]")
    err.print(t)
    if not todo:
        if dry_run:
            err.print(f"Nothing to build: all {len(needed)} testbeds are cached.")
        return []
    est, wall = sum(tb.est_cpu_s for tb in todo), sum(tb.est_wall_s for tb in todo)
    spread = f" (about {_duration(wall)} wall: some train on 2 threads)" if wall < est - 1 else ""
    err.print(f"One-time cost: {len(todo)} testbed{'s' if len(todo) > 1 else ''} to train, about {_duration(est)} "
              f"of CPU on one idle core{spread} (more under load); cached afterwards under {cache_root()}.",
              highlight=False)
    if dry_run:
        return todo
    from .testbeds import cache

    t0, before = time.perf_counter(), cache.builds_done
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, disable=not err.is_terminal) as progress:
        bars: dict[str, Any] = {}

        def on_step(name: str, done: int, total: int, message: str) -> None:
            if name not in bars:
                bars[name] = progress.add_task(message, total=total or None)
            progress.update(bars[name], completed=done, total=total or None, description=message)

        from .harness.runner import _sigterm_raises, _Stop

        with listening(on_step), _sigterm_raises():  # SIGTERM unwinds the build, so its tmp folder is removed
            for i, tb in enumerate(todo, 1):
                err.print(f"[{i}/{len(todo)}] building {tb.name} ({tb.description})", highlight=False)
                try:
                    tb.build()
                except (_Stop, KeyboardInterrupt) as e:
                    sig = "SIGTERM" if isinstance(e, _Stop) else "SIGINT"
                    err.print(f"interrupted by {sig} while building testbed {tb.name}; its partial build was removed "
                              f"({i - 1} of {len(todo)} testbeds built)", highlight=False)
                    raise typer.Exit(code=143 if sig == "SIGTERM" else 130) from None
                except Exception as e:  # noqa: BLE001 - say which testbed failed, then stop
                    err.print(f"[bold red]error:[/] building testbed {tb.name} failed: {escape(f'{type(e).__name__}: {e}')}")
                    raise typer.Exit(code=1) from None
    built = cache.builds_done - before
    reused = len(todo) - min(built, len(todo))
    msg = f"Built {built} testbed{'s' if built != 1 else ''} in {_duration(time.perf_counter() - t0)}"
    if reused:
        msg += f"; reused {reused} that another process built meanwhile"
    err.print(msg + ".")
    return todo


# running jobs

def run_with_progress(ids: list[str], budget: str, seeds: list[int], jobs: int | None, backend: str, out: Path,
                      ray_address: str | None) -> Any:
    """Run the jobs with one line per job start and end (terminal or not), a bar on a terminal, and a heartbeat
    line every 10 s when stderr is not a terminal.

    Start lines come from the runner's ``on_job_start`` (the local runner hands a job out when a worker is free;
    on Ray they mark submission, and Ray schedules on its own).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .harness.runner import Interrupted, run_reproductions

    plan = [(pid, s) for pid in ids for s in seeds]
    width = max(1, min(jobs or os.cpu_count() or 1, len(plan)))
    lock = threading.Lock()
    state: dict[str, Any] = {"started": [], "done": set(), "last": time.monotonic(), "t0": time.monotonic()}
    stop = threading.Event()

    def say(msg: str) -> None:
        err.print(msg, highlight=False)
        state["last"] = time.monotonic()

    def on_job_start(job: Any) -> None:
        with lock:
            state["started"].append((job.paper, job.seed))
            say(f"  start {job.paper} seed {job.seed} ({len(state['started'])}/{len(plan)})")

    def heartbeat() -> None:
        while not stop.wait(1.0):
            with lock:
                if time.monotonic() - state["last"] >= HEARTBEAT_S:
                    running = [f"{p} seed {s}" for p, s in state["started"] if (p, s) not in state["done"]]
                    where = f"; running: {', '.join(running)}" if running else ""
                    say(f"  ... {len(state['done'])}/{len(plan)} jobs done, "
                        f"{time.monotonic() - state['t0']:.0f} s elapsed{where}")

    which = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}" + (f" from {seeds[0]}" if seeds and seeds[0] else "")
    err.print(f"Running {len(plan)} job{'s' if len(plan) != 1 else ''} ({', '.join(ids)} × {which}, {budget} "
              f"budget), {width} at a time on {backend}.", highlight=False)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, disable=not err.is_terminal) as progress:
        task = progress.add_task(f"reproducing ({budget})", total=len(plan))

        def on_start(total: int) -> None:
            with lock:
                progress.update(task, total=total)
                state["t0"] = time.monotonic()

        def on_done(rec: dict) -> None:
            with lock:
                state["done"].add((rec["paper"], rec["seed"]))
                mark = "ok" if rec["status"] == "ok" else "[red]crashed[/]"
                wall = rec.get("wall_time")
                say(f"  done  {rec['paper']} seed {rec['seed']}: {mark} "
                    f"({wall:.1f} s) ({len(state['done'])}/{len(plan)})" if wall is not None else
                    f"  done  {rec['paper']} seed {rec['seed']}: {mark}")
                progress.advance(task)

        beat = threading.Thread(target=heartbeat, daemon=True)
        if not err.is_terminal:
            beat.start()
        try:
            return run_reproductions(ids, budget, seeds, jobs=jobs, backend=backend, out=out, ray_address=ray_address,
                                     on_start=on_start, on_done=on_done, on_job_start=on_job_start)
        except ValueError as e:
            fail(str(e))
        except Interrupted as e:
            stop.set()
            err.print(str(e), highlight=False)
            raise typer.Exit(e.exit_code) from None
        finally:
            stop.set()


# the claims table

def _n(x: Any, digits: int = 4) -> str:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "—" if x is None else str(x)
    return f"{f:.{digits}g}" if math.isfinite(f) else "—"


def _finite(*xs: Any) -> bool:
    try:
        return all(x is not None and math.isfinite(float(x)) for x in xs)
    except (TypeError, ValueError):
        return False


def measured_cell(c: dict[str, Any]) -> str:
    """The measurement with its interval over seeds; ``one seed`` (not a degenerate ``[x, x]``) for one seed, and
    ``n_finite/n seeds finite`` when some seed gave no finite number."""
    n = int(c.get("n_seeds", 1) or 1)
    n_fin = int(c.get("n_finite", n) if c.get("n_finite") is not None else n)
    s = _n(c.get("measured"))
    ci = c.get("measured_ci") or []
    if n_fin < n:
        return f"{s} ({n_fin}/{n} seeds finite)"
    if n >= 2 and len(ci) == 2 and _finite(*ci) and ci[0] != ci[1]:
        s += f" [{_n(ci[0], 3)}, {_n(ci[1], 3)}]"
    elif n >= 2:
        s += " (equal on every seed)"
    s += ", one seed" if n == 1 else f", n = {n}"
    pci = c.get("paired_ci")
    if n == 1 and pci and len(pci) == 2 and _finite(*pci):
        s += f"; per-instance Δ [{_n(pci[0], 3)}, {_n(pci[1], 3)}]"
    return s


def reference_cell(c: dict[str, Any]) -> str:
    ref = c.get("reference")
    if c.get("op") == "in" and isinstance(ref, (list, tuple)) and len(ref) == 2:
        s = f"in [{_n(ref[0])}, {_n(ref[1])}]"
    else:
        s = f"{c.get('op', '?')} {_n(ref)}"
        rci = c.get("reference_ci") or []
        if len(rci) == 2 and _finite(*rci) and rci[0] != rci[1]:
            s += f" [{_n(rci[0], 3)}, {_n(rci[1], 3)}]"
    s += f" ({c['baseline']})" if c.get("baseline") else ""
    others = {k: v for k, v in (c.get("baselines") or {}).items() if k != c.get("strongest_baseline")}
    if c.get("strongest_baseline"):
        s += f"; strongest of {len(others) + 1}" + (": others " + ", ".join(f"{k} {_n(v)}" for k, v in others.items())
                                                    if others else "")
    return s


def control_cell(c: dict[str, Any]) -> str:
    """The control's value and verdict under the same test, or why none exists."""
    if c.get("control") is None:
        arm = c.get("control_arm") or ""
        return arm if arm else "—"
    s = f"{_n(c['control'])} ({c.get('control_arm') or 'control'})"
    if c.get("control_verdict"):
        s += f": {c['control_verdict']}"
    return s


def verdict_cell(c: dict[str, Any]) -> str:
    """The verdict, with why an undecided claim is undecided and what would decide it."""
    v = c.get("verdict", "inconclusive")
    s = _verdict(v)
    if c.get("seed_invariant"):
        s += " (seed-invariant: one piece of evidence)"
    if v == "inconclusive":
        if c.get("reason"):
            s += f"; {c['reason']}"
        p = c.get("power")
        if p and p.get("interval") and _finite(*p["interval"]):
            lo, hi = p["interval"]
            s += (f"; Δ [{_n(lo, 3)}, {_n(hi, 3)}]" if lo != hi else f"; Δ {_n(lo, 3)} on every one") + f", {p['text']}"
    return s


def _verdict(v: str) -> str:
    return f"[{VERDICT_STYLE.get(v, 'white')}]{v}[/]"


def print_claims(summaries: dict) -> None:
    """Claims (refutable, with their falsifiers) and checks (true by construction) in two tables, then the
    verdict counts of each, counted apart."""
    from .harness.stats import verdict_counts, without_control

    claims = Table(title="Claims (verdicts computed from this run's measurements against same-run baselines)",
                   show_lines=True)
    for col in ("paper", "claim", "would not hold if", "paper's figure", "measured", "reference (baseline)", "control",
                "verdict"):
        claims.add_column(col, overflow="fold")
    checks = Table(title="Checks (true by construction or by a theorem; reported, not counted as evidence)",
                   show_lines=True)
    for col in ("paper", "check", "measured", "reference", "verdict"):
        checks.add_column(col, overflow="fold")
    everything: list[dict[str, Any]] = []
    for pid, s in summaries.items():
        if s["crashed"]:
            claims.add_row(pid, f"crashed on seeds {s['crashed']}", "", "", "", "", "", "[red]crashed[/]")
        for c in s["claims"]:
            everything.append(c)
            if c.get("kind") == "check":
                checks.add_row(pid, c["statement"], measured_cell(c), reference_cell(c), _verdict(c["verdict"]))
            else:
                claims.add_row(pid, c["statement"], c.get("falsifier") or "(not stated)", c.get("paper") or "—",
                               measured_cell(c), reference_cell(c), control_cell(c), verdict_cell(c))
    console.print(claims)
    if checks.row_count:
        console.print(checks)
    counts = verdict_counts(everything)
    labels = {"claims": "Claims decided over seeds", "seed-invariant": "Seed-invariant claims (the same number on "
              "every seed: one piece of evidence each)", "checks": "Checks"}
    for kind in ("claims", "seed-invariant", "checks"):
        total = sum(counts[kind].values())
        if kind == "seed-invariant" and not total:
            continue
        detail = ", ".join(f"[{VERDICT_STYLE.get(v, 'white')}]{n} {v}[/]" for v, n in counts[kind].items()) or "none"
        console.print(f"{labels[kind]}: {total} ({detail})")
    n_nc = without_control(everything)
    if n_nc:
        console.print(f"{n_nc} of {sum(counts['claims'].values()) + sum(counts['seed-invariant'].values())} claims "
                      "carry no control (fine against a same-run baseline)")
    skipped = [(pid, m) for pid, s in summaries.items() for m in s.get("missing_peers") or []]
    if skipped:
        from rich.markup import escape

        console.print("[yellow]Skipped because an optional package is not installed:[/]")
        for pid, m in skipped:
            console.print(escape(f"  {pid}: {m.get('what')} (needs {m.get('module')}: "
                                 f"pip install 'icml26[{m.get('extra')}]')"))

if __name__ == "__main__":  # pragma: no cover
    app()
