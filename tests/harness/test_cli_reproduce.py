"""Issue 9's CLI side and issue 10 item 2: the claims table (claims vs checks, falsifiers, n = 1, n_finite/n),
de-duplicated ids, one line per job start and end, a heartbeat when output is not a terminal."""

import logging
import os
import re
import textwrap

import pytest
from typer.testing import CliRunner

import icml26.cli as cli_mod
from icml26.catalog import Paper
from icml26.cli import app, measured_cell

FAKE = textwrap.dedent('''
    import math, os, time
    from icml26.harness import Claim, Outcome

    def reproduce(budget, seed):
        time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
        if os.environ.get("FAKE_MISSING"):
            raise ModuleNotFoundError("the PC baseline needs the causal extra: pip install 'icml26[causal]'")
        if os.environ.get("FAKE_PEER"):
            from icml26.harness.peers import peer_available
            peer_available(os.environ["FAKE_PEER"], "peers", "the fake cross-check")
        nan_on_seed_1 = float("nan") if seed == 1 else 0.5
        return Outcome(metrics={"m": 1.0 + seed}, claims=[
            Claim("fake m below 2", measured=1.0 + 0.1 * seed, op="<", reference=2.0, baseline="two",
                  falsifier="m at or above 2"),
            Claim("fake q below 1", measured=nan_on_seed_1, op="<", reference=1.0, falsifier="q at or above 1"),
            Claim("fake identity exact", measured=0.0, op="<=", reference=1e-9, kind="check"),
        ])
''')


@pytest.fixture
def fake_papers(tmp_path, monkeypatch):
    """Every catalogue paper runs the fake reproduction above (in this process with --jobs 1)."""
    pkg = tmp_path / "mods" / "fakepaper"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "reproduce.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setattr(Paper, "module", property(lambda self: "fakepaper"))
    return tmp_path


runner = CliRunner()


def run(args):
    return runner.invoke(app, args, catch_exceptions=False)


def test_claims_and_checks_apart_with_falsifiers_and_seed_counts(fake_papers):
    out = fake_papers / "runs"
    r = run(["reproduce", "A03", "a03", "A08", "--budget", "quick", "--seeds", "2", "--jobs", "1",
             "--out", str(out), "--no-report"])
    assert r.exit_code == 0, r.output
    text = r.output
    assert "A03 is given more than once; it runs once" in text
    # one line per job start and end, in order, four jobs (A03 once)
    starts = re.findall(r"start (A0\d) seed (\d)", text)
    dones = re.findall(r"done  (A0\d) seed (\d): ok", text)
    assert starts == dones == [("A03", "0"), ("A03", "1"), ("A08", "0"), ("A08", "1")]
    assert "Running 4 jobs" in text
    # claims table shows falsifiers; the check is in its own table; counts are separate
    assert "m at or above 2" in text and "would not hold if" in text
    assert "Checks (true by construction" in text and "fake identity exact" in text
    assert "1/2 seeds finite" in text  # the NaN seed makes the claim inconclusive
    assert re.search(r"Claims decided over seeds: 4 \(2 holds, 2 inconclusive\)", text)
    assert re.search(r"Checks: 2 \(2 holds\)", text)
    # `list` counts claims and checks apart too
    r = run(["list", "--out", str(out)])
    row = next(line for line in r.output.splitlines() if "│ A03 " in line)
    assert "claims: 1 holds, 1 inconclusive; checks: 1 holds; 2 without a control (quick, 2 seeds)" in row


def test_first_seed_runs_seeds_k_to_k_plus_n_minus_1(fake_papers):
    """``--seeds 2 --first-seed 5`` runs seeds 5 and 6 (not 0 and 1), and the Markdown table names that command."""
    from icml26.harness.report import paper_markdown

    out = fake_papers / "runs"
    r = run(["reproduce", "A03", "--budget", "quick", "--seeds", "2", "--first-seed", "5", "--jobs", "1",
             "--out", str(out), "--no-report"])
    assert r.exit_code == 0, r.output
    assert re.findall(r"done  A03 seed (\d): ok", r.output) == ["5", "6"]
    assert "2 seeds from 5" in r.output
    md = paper_markdown([out], "A03")
    assert "seeds 5–6" in md and "--seeds 2 --first-seed 5`" in md
    r = run(["reproduce", "A03", "--budget", "quick", "--first-seed", "-1", "--out", str(out), "--no-report"])
    assert r.exit_code == 2 and "--first-seed must be >= 0" in r.output


def test_one_seed_says_so_not_a_degenerate_interval(fake_papers):
    r = run(["reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "o"), "--no-report"])
    assert r.exit_code == 0, r.output
    assert "1.1, one seed" not in r.output and "1, one seed" in r.output and "n = 1" not in r.output
    assert not re.search(r"\[(\S+), \1\]", r.output)  # no [x, x]


def test_measured_cell_formats():
    assert measured_cell({"measured": 1.5, "measured_ci": [1.5, 1.5], "n_seeds": 1, "n_finite": 1}) == "1.5, one seed"
    assert measured_cell({"measured": 1.5, "measured_ci": [1.0, 2.0], "n_seeds": 3, "n_finite": 3}) == "1.5 [1, 2], n = 3"
    assert measured_cell({"measured": 1.5, "measured_ci": [1.5, 1.5], "n_seeds": 3, "n_finite": 1}) == \
        "1.5 (1/3 seeds finite)"
    assert measured_cell({"measured": 2.0, "measured_ci": [2.0, 2.0], "n_seeds": 2, "n_finite": 2}) == \
        "2 (equal on every seed), n = 2"
    assert "per-instance Δ [0.1, 0.3]" in measured_cell({"measured": 1.0, "n_seeds": 1, "paired_ci": [0.1, 0.3]})


def test_heartbeat_when_not_a_terminal(fake_papers, monkeypatch):
    monkeypatch.setattr(cli_mod, "HEARTBEAT_S", 0.3)
    monkeypatch.setenv("FAKE_SLEEP", "1.5")
    r = run(["reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "h"), "--no-report"])
    assert r.exit_code == 0, r.output
    assert re.search(r"\.\.\. 0/1 jobs done, \d+ s elapsed; running: A03 seed 0", r.output)


def test_crash_exits_1_and_is_marked(fake_papers, monkeypatch):
    monkeypatch.setattr(Paper, "module", property(lambda self: "no_such_fake_module_xyz"))
    r = run(["reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "c"), "--no-report"])
    assert r.exit_code == 1
    assert "done  A03 seed 0: crashed" in r.output and "crashed on seeds [0]" in r.output


def test_hugging_face_noise_is_silenced_for_jobs(fake_papers, monkeypatch):
    for k in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_NO_ADVISORY_WARNINGS"):
        monkeypatch.delenv(k, raising=False)
    run(["list", "--out", str(fake_papers / "none")])
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "error"
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    assert logging.getLogger("icml26.testbeds").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("icml26.lm").getEffectiveLevel() == logging.WARNING


def test_verbose_shows_info_of_everything(fake_papers, monkeypatch):
    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    run(["-v", "list", "--out", str(fake_papers / "none")])
    assert logging.getLogger("icml26.lm").getEffectiveLevel() == logging.INFO
    assert "TRANSFORMERS_VERBOSITY" not in os.environ  # -v leaves Hugging Face's warnings on


def test_process_pool_start_lines_follow_the_pool(fake_papers):
    """With two workers, both jobs start at once; each end line follows its start line."""
    r = run(["reproduce", "A03", "--budget", "quick", "--seeds", "2", "--jobs", "2", "--out", str(fake_papers / "p"),
             "--no-report"])
    assert r.exit_code == 0, r.output
    lines = [ln.strip() for ln in r.output.splitlines() if ln.strip().startswith(("start", "done"))]
    assert lines[:2] == ["start A03 seed 0 (1/2)", "start A03 seed 1 (2/2)"]
    assert sorted(ln.split(":")[0] for ln in lines[2:]) == ["done  A03 seed 0", "done  A03 seed 1"]
    assert "2 at a time on local" in r.output


def test_verbose_shows_each_seed_and_claim_as_it_arrives(fake_papers):
    quiet = run(["reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "q"), "--no-report"])
    loud = run(["-v", "reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "v"),
                "--no-report"])
    assert loud.exit_code == 0, loud.output
    assert "A03 seed 0 (quick) finished in" in loud.output and "finished in" not in quiet.output
    assert re.search(r"claim +holds", loud.output) and "check" in loud.output


def test_a_peer_skipped_for_a_missing_package_is_named_with_its_extra(fake_papers, monkeypatch):
    monkeypatch.setenv("FAKE_PEER", "a_package_that_is_not_installed")
    r = run(["reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "p"), "--no-report"])
    assert r.exit_code == 0, r.output
    assert "Skipped because an optional package is not installed" in r.output
    assert "A03: the fake cross-check (needs a_package_that_is_not_installed: pip install 'icml26[peers]')" in \
        " ".join(r.output.split())
    monkeypatch.setenv("FAKE_PEER", "json")   # installed: nothing skipped
    r = run(["reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "q"), "--no-report"])
    assert "Skipped because" not in r.output


def test_a_missing_extra_is_one_clear_line_not_two_tracebacks(fake_papers, monkeypatch):
    monkeypatch.setenv("FAKE_MISSING", "1")
    r = run(["reproduce", "A03", "--budget", "quick", "--jobs", "1", "--out", str(fake_papers / "m"), "--no-report"])
    assert r.exit_code == 1
    assert "Traceback" not in r.output, r.output
    assert r.output.count("needs the causal extra: pip install 'icml26[causal]'") == 2   # the log line, the summary
