"""The runner, store, report and CLI on fake reproductions (fast), and real ones through Ray."""

import json
import re
import sqlite3
import textwrap

import pytest
from typer.testing import CliRunner

from icml26.catalog import PAPERS, get_paper
from icml26.cli import app
from icml26.harness.report import build_report
from icml26.harness.runner import Job, execute, run_job, summarize_records
from icml26.harness.store import ResultStore

PLANNED = "<planned>"  # replaced in the test by the ``planned_paper`` fixture's id (see conftest)

FAKE = textwrap.dedent('''
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from icml26.harness import Budget, Claim, Outcome

    def reproduce(budget: Budget, seed: int) -> Outcome:
        fig, ax = plt.subplots()
        ax.plot([0, 1], [seed, seed + 1])
        m = 1.0 + 0.01 * seed
        return Outcome(metrics={"m": m}, claims=[Claim("m below 2", measured=m, op="<", reference=2.0, baseline="two", falsifier="m at or above 2")],
                       tables={"t": [{"seed": seed, "m": m}]}, figures={"line plot": fig})
''')
BROKEN = "def reproduce(budget, seed):\n    raise RuntimeError('boom')\n"


@pytest.fixture
def fake_modules(tmp_path, monkeypatch):
    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / "fake_repro.py").write_text(FAKE)
    (pkg / "broken_repro.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(pkg))
    return pkg


def jobs_for(module, seeds, paper="A03"):
    return [Job(paper, module, "quick", s, "batch-1") for s in seeds]


def test_run_job_records_a_crash_instead_of_raising(fake_modules):
    rec, pngs = run_job(Job("A03", "broken_repro", "quick", 0, "b"))
    assert rec["status"] == "error" and "boom" in rec["error"] and pngs == {}
    assert rec["cpu_time"] >= 0 and rec["wall_time"] >= 0  # what a crashed run cost is recorded too


def test_execute_store_and_report(fake_modules, tmp_path):
    store = ResultStore(tmp_path / "out")
    recs = execute(jobs_for("fake_repro", [0, 1, 2]), store)
    assert [r["status"] for r in recs] == ["ok"] * 3
    files = sorted((store.root / "records").glob("*.json"))
    assert len(files) == 3
    rec = json.loads(files[0].read_text())
    assert rec["claims"][0]["verdict"] == "holds"
    assert (store.root / rec["figures"][0]["path"]).stat().st_size > 1000  # a real PNG
    db = store.reindex()
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from runs").fetchone()[0] == 3
        assert con.execute("select count(*) from claims where verdict='holds'").fetchone()[0] == 3
    s = summarize_records(recs)["A03"]
    assert s["seeds"] == [0, 1, 2] and s["claims"][0]["verdict"] == "holds"
    assert abs(s["metrics"]["m"]["mean"] - 1.01) < 1e-12
    index = build_report(store.root)
    page = (index.parent / "A03.html").read_text()
    assert "m below 2" in page and "figures/A03/" in page
    html = index.read_text()
    assert all(p.id in html for p in PAPERS)  # planned papers are listed too
    assert (store.root / "report.md").exists()


def test_process_pool_backend_matches_in_process(fake_modules, tmp_path):
    a = execute(jobs_for("fake_repro", [0, 1]), ResultStore(tmp_path / "a"), jobs=2)
    b = execute(jobs_for("fake_repro", [0, 1]), ResultStore(tmp_path / "b"), jobs=1)
    key = lambda rs: sorted((r["seed"], r["metrics"]["m"]) for r in rs)  # noqa: E731
    assert key(a) == key(b)


cli = CliRunner()


def test_cli_list_shows_38_rows():
    r = cli.invoke(app, ["list", "--out", "does-not-exist"])
    assert r.exit_code == 0
    ids = set(re.findall(r"\b([AB]\d\d)\b", r.output))
    assert ids == {p.id for p in PAPERS}


def test_cli_show():
    r = cli.invoke(app, ["show", "A03"])
    assert r.exit_code == 0 and "Langevin" in r.output


@pytest.mark.parametrize("args, message", [
    (["reproduce", "A3"], "did you mean"),
    (["reproduce", PLANNED], "planned"),
    (["reproduce", "--all", "--budget", "fast"], "unknown budget"),
    (["reproduce", "--all", "--seeds", "0"], "--seeds"),
    (["reproduce", "--all", "--seeds", "1000000000000"], "more than 1000"),
    (["reproduce"], "--all"),
    (["show", "Z99"], "unknown paper id"),
])
def test_cli_bad_input_exits_2(args, message, planned_paper):
    r = cli.invoke(app, [planned_paper if a == PLANNED else a for a in args])
    assert r.exit_code == 2
    assert message in r.output


def test_cli_unwritable_out(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = cli.invoke(app, ["reproduce", "--all", "--out", str(blocker / "sub")])
    assert r.exit_code == 2 and "not writable" in r.output


def test_cli_report_without_records(tmp_path):
    r = cli.invoke(app, ["report", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "no run records" in r.output


def test_catalog_matches_index():
    assert len(PAPERS) == 38 and len({p.id for p in PAPERS}) == 38
    assert get_paper("a03").slug == "srk_lmc"
    assert all(p.abstract for p in PAPERS)
