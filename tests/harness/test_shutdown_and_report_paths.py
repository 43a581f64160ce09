"""Reliability: SIGTERM ends a pooled run cleanly; the report never links a figure outside the output folder."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icml26.harness.report import build_report
from icml26.harness.store import ResultStore


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    st = Path(f"/proc/{pid}/stat")
    return not (st.exists() and st.read_text().split()[2] == "Z")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc and ps")
def test_sigterm_during_a_pooled_run_leaves_no_process_behind(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "icml26", "reproduce", "A03", "A08", "--budget", "quick",
                             "--seeds", "2", "--jobs", "2", "--out", str(tmp_path / "runs")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:  # the two pool workers (plus the resource tracker)
        time.sleep(0.5)
        workers = [c for c in _children(proc.pid)]
    assert len(workers) >= 2, "the pool never started"
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (out, err)
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    time.sleep(1.0)
    left = [w for w in workers if _alive(w)]
    assert not left, f"processes left behind: {left}"


def test_report_refuses_figure_paths_outside_the_output_folder(tmp_path):
    store = ResultStore(tmp_path)
    store.save({"run_id": "r0", "batch": "b", "paper": "A03", "budget": "quick", "seed": 0, "status": "ok",
                "started": 1.7e9, "wall_time": 1.0, "error": None, "metrics": {}, "tables": {}, "env": {},
                "figures": [{"name": "escape", "path": "../../../../etc/passwd"},
                            {"name": "absolute", "path": "/etc/passwd"},
                            {"name": "gone", "path": "figures/A03/missing.png"}],
                "claims": []})
    page = (build_report(tmp_path).parent / "A03.html").read_text()
    assert "etc/passwd" not in page
    assert page.count("its path is not inside the output folder") == 2
    assert "figure file missing" in page and "<img src='../figures/A03/missing.png'" not in page


def test_report_folder_name_taken_by_a_file_is_one_clear_line(tmp_path):
    from typer.testing import CliRunner

    from icml26.cli import app

    store = ResultStore(tmp_path)
    store.save({"run_id": "r0", "batch": "b", "paper": "A03", "budget": "quick", "seed": 0, "status": "ok",
                "started": 1.7e9, "wall_time": 1.0, "error": None, "metrics": {}, "tables": {}, "env": {},
                "figures": [], "claims": []})
    (tmp_path / "report").write_text("not a folder")
    r = CliRunner().invoke(app, ["report", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "is a file" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("cmd", [["prepare", "A19", "--dry-run"], ["reproduce", "A19", "--budget", "quick"]])
def test_cache_path_that_is_a_file_is_one_clear_line(tmp_path, monkeypatch, cmd):
    from typer.testing import CliRunner

    from icml26.cli import app

    blocker = tmp_path / "cachefile"
    blocker.write_text("x")
    monkeypatch.setenv("ICML26_CACHE", str(blocker))
    r = CliRunner().invoke(app, [*cmd, "--out", str(tmp_path / "runs")] if cmd[0] == "reproduce" else cmd)
    assert r.exit_code == 2, r.output
    assert "ICML26_CACHE" in r.output and "Traceback" not in r.output


def test_a_record_nested_too_deep_is_skipped_with_a_warning(tmp_path, caplog):
    store = ResultStore(tmp_path)
    store.records_dir.mkdir(parents=True)
    (store.records_dir / "A03-quick-seed0-deep.json").write_text("[" * 200_000 + "]" * 200_000)
    with caplog.at_level("WARNING"):
        assert store.records() == []           # no RecursionError out of json
    assert "RecursionError" in caplog.text and "fix or delete the file" in caplog.text


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_sigterm_during_a_testbed_build_leaves_no_partial_folder(tmp_path):
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, PYTHONUNBUFFERED="1", ICML26_CACHE=str(cache_dir))
    proc = subprocess.Popen([sys.executable, "-m", "icml26", "prepare", "A14", "--budget", "quick"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(cache_dir.rglob(".*.tmp*")):  # the build folder exists
        time.sleep(0.2)
    assert list(cache_dir.rglob(".*.tmp*")), "the build never started"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (out, err)
    assert "interrupted by SIGTERM while building testbed" in err and "Traceback" not in err
    assert not list(cache_dir.rglob(".*.tmp*")), "a partial build folder was left behind"
