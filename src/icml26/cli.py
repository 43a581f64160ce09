"""``icml26 list | show | reproduce | report`` (typer + rich)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .catalog import PAPERS, get_paper, implemented
from .harness.budget import Budget
from .harness.report import build_report, claim_reference, fmt
from .harness.runner import BACKENDS, run_reproductions, summarize_records
from .harness.store import ResultStore, check_writable

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Working implementations of ICML 2026 papers, with reproductions that check their claims.")
console = Console(width=None if Console().is_terminal else 140)  # wide tables when piped to a file or CI log
err = Console(stderr=True)
VERDICT_STYLE = {"holds": "green", "does not hold": "red", "inconclusive": "yellow"}


def fail(msg: str) -> None:
    err.print(f"[bold red]error:[/] {msg}")
    raise typer.Exit(code=2)


@app.command("list")
def list_papers(out: Path = typer.Option(Path("runs"), help="Output folder to read last verdicts from.")) -> None:
    """A table of the 38 papers: id, area, method, status, last verdict."""
    last = {pid: summarize_records(recs)[pid] for pid, recs in ResultStore(out).latest_batches().items()}
    t = Table(title=f"icml26 — {len(implemented())} of {len(PAPERS)} papers implemented")
    for col in ("id", "area", "method", "status", "last verdict"):
        t.add_column(col)
    for p in PAPERS:
        s = last.get(p.id)
        if s is None:
            verdict = "—"
        elif s["crashed"] and not s["claims"]:
            verdict = "[red]crashed[/]"
        else:
            counts: dict[str, int] = {}
            for c in s["claims"]:
                counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
            verdict = ", ".join(f"[{VERDICT_STYLE[v]}]{n} {v}[/]" for v, n in counts.items()) + f" ({s['budget']})"
        t.add_row(p.id, p.area, p.method, "[green]implemented[/]" if p.implemented else "[dim]planned[/]", verdict)
    console.print(t)


@app.command()
def show(paper_id: str = typer.Argument(..., help="Paper id, e.g. A03.")) -> None:
    """Abstract, claims, where the code is, how to use it and how to reproduce it."""
    try:
        p = get_paper(paper_id)
    except ValueError as e:
        fail(str(e))
    console.rule(f"[bold]{p.id} — {p.method}")
    console.print(f"[bold]Reference:[/] {p.reference}\n[bold]Area:[/] {p.area}   [bold]Status:[/] {p.status}")
    console.print(f"\n[bold]Headline claim:[/] {p.claim}\n\n[bold]Abstract[/]\n{p.abstract}\n")
    if not p.implemented:
        console.print(f"[dim]Planned: will live in {p.code_path}, tested in {p.test_path}.[/]")
        return
    console.print(f"[bold]Code:[/] {p.code_path}  ([bold]tests:[/] {p.test_path})")
    console.print(f"[bold]Reproduce:[/] icml26 reproduce {p.id} --budget standard --seeds 3\n")
    if p.readme:
        console.print(Markdown(p.readme))


@app.command()
def reproduce(
    paper_ids: Optional[List[str]] = typer.Argument(None, help="Paper ids, e.g. A03 A17."),
    all_: bool = typer.Option(False, "--all", help="Every implemented paper."),
    budget: str = typer.Option("standard", help="quick (<=30 s), standard (<=3 min) or full."),
    seeds: int = typer.Option(1, help="Number of seeds (0..N-1); claims are aggregated over them."),
    jobs: Optional[int] = typer.Option(None, help="Parallel jobs (default: number of cores)."),
    backend: str = typer.Option("local", help="local (process pool) or ray."),
    ray_address: Optional[str] = typer.Option(None, help="Join this Ray cluster instead of starting a local Ray."),
    out: Path = typer.Option(Path("runs"), help="Output folder for run records, figures and the report."),
    report: bool = typer.Option(True, help="Build the HTML report afterwards."),
) -> None:
    """Run reproductions, print claim vs measurement, and write the report."""
    try:
        b = Budget.parse(budget)
        if seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {seeds}")
        if jobs is not None and jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {jobs}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
        if all_ and paper_ids:
            raise ValueError("give paper ids or --all, not both")
        if not all_ and not paper_ids:
            raise ValueError("give paper ids (e.g. `icml26 reproduce A03`) or --all")
        papers = implemented() if all_ else [get_paper(i) for i in paper_ids or []]
        planned = [p.id for p in papers if not p.implemented]
        if planned:
            raise ValueError(f"{', '.join(planned)} {'is' if len(planned) == 1 else 'are'} planned, not implemented yet; "
                             f"implemented: {', '.join(p.id for p in implemented())}")
        check_writable(out)
    except ValueError as e:
        fail(str(e))
    logging.basicConfig(level=logging.WARNING)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as progress:
        task = progress.add_task(f"reproducing ({b.value})", total=None)

        def on_start(total: int) -> None:
            progress.update(task, total=total)

        def on_done(rec: dict) -> None:
            mark = "ok" if rec["status"] == "ok" else "[red]crashed[/]"
            progress.console.print(f"  {rec['paper']} seed {rec['seed']}: {mark} ({rec['wall_time']:.1f} s)")
            progress.advance(task)

        result = run_reproductions([p.id for p in papers], b, seeds, jobs=jobs, backend=backend, out=out,
                                   ray_address=ray_address, on_start=on_start, on_done=on_done)
    print_claims(result.summaries())
    if report:
        console.print(f"\nReport: {build_report(out).resolve()}")
    if result.crashed:
        for r in result.crashed:
            err.print(f"[red]{r['paper']} seed {r['seed']} crashed:[/]\n{r['error']}")
        raise typer.Exit(code=1)


@app.command("report")
def report_cmd(out: Path = typer.Option(Path("runs"), help="Output folder holding run records.")) -> None:
    """Build the static HTML report from the run records in OUT."""
    if not (out / "records").is_dir():
        fail(f"no run records in {str(out)!r}; run `icml26 reproduce ... --out {out}` first")
    try:
        check_writable(out)
    except ValueError as e:
        fail(str(e))
    console.print(f"Report: {build_report(out).resolve()}")


def print_claims(summaries: dict) -> None:
    t = Table(title="Claims (verdicts computed from this run's measurements)", show_lines=True)
    for col in ("paper", "claim", "paper's figure", "measured", "reference (baseline)", "verdict"):
        t.add_column(col, overflow="fold")
    for pid, s in summaries.items():
        if s["crashed"]:
            t.add_row(pid, f"crashed on seeds {s['crashed']}", "", "", "", "[red]crashed[/]")
        for c in s["claims"]:
            ref = claim_reference(c) + (f" ({c['baseline']})" if c.get("baseline") else "")
            v = c["verdict"]
            t.add_row(pid, c["statement"], c.get("paper") or "—", fmt(c["measured"], c.get("measured_ci")), ref,
                      f"[{VERDICT_STYLE[v]}]{v}[/]")
    console.print(t)


if __name__ == "__main__":  # pragma: no cover
    app()
