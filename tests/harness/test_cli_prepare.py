"""Issue 10 item 2: `icml26 prepare` builds the testbeds papers need, states the cost first, shows progress;
testbed builds log what they train and how far they are; the paper -> testbed map matches the reproductions."""

import logging
import re
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

import icml26.cli as cli_mod
from icml26.catalog import get_paper, implemented
from icml26.cli import app
from icml26.testbeds import progress, registry

PLANNED = "<planned>"  # replaced in the test by the ``planned_paper`` fixture's id (see conftest)


@dataclass(frozen=True)
class TinyDLM(registry.Testbed):
    """The real masked-diffusion-LM build path with a 4-step recipe, so the test takes seconds."""

    def config(self):
        from icml26.testbeds.diffusion_lm.model import DLMTrainConfig

        return DLMTrainConfig(task="t1c", steps=4, pool_size=128, batch_size=8)


runner = CliRunner()


def test_prepare_paper_without_trained_testbed():
    r = runner.invoke(app, ["prepare", "A03", "--budget", "quick"])
    assert r.exit_code == 0, r.output
    assert "Nothing to build: A03 needs no trained testbed at the quick budget" in r.output


@pytest.mark.parametrize("args, message", [
    (["prepare", "Z99"], "unknown paper id"),
    (["prepare", PLANNED], "planned"),
    (["prepare", "A03", "--budget", "fast"], "unknown budget"),
])
def test_prepare_bad_input_exits_2(args, message, planned_paper):
    r = runner.invoke(app, [planned_paper if a == PLANNED else a for a in args])
    assert r.exit_code == 2 and message in r.output


def test_prepare_builds_a_tiny_testbed_once_with_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(progress, "EVERY_S", 0.0)  # a progress line for every step
    monkeypatch.setitem(registry.TESTBEDS, "dlm-tiny", TinyDLM("dlm-tiny", "masked_diffusion_lm", "t1c", "4-step test DLM", 3.0))
    monkeypatch.setitem(registry.NEEDS, "A15", {"quick": ("dlm-tiny",)})
    r = runner.invoke(app, ["prepare", "A15", "--budget", "quick"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = r.output
    # the cost comes first, then what is trained and how far it is, then the summary
    cost, build = out.index("One-time cost: 1 testbed to train, about 3 s"), out.index("building dlm-tiny")
    assert cost < build
    assert "training dlm-t1c-custom once: 4 steps" in out
    assert re.search(r"training dlm-t1c-custom once: step 1/4, loss \d+\.\d+, ~\d+ s left", out)
    assert "training dlm-t1c-custom: done in" in out
    assert "Ready: dlm-tiny (1 built now, 0 already cached)" in out
    assert registry.TESTBEDS["dlm-tiny"].is_cached()
    r = runner.invoke(app, ["prepare", "A15", "--budget", "quick"])
    assert r.exit_code == 0 and "Ready: dlm-tiny (0 built now, 1 already cached)" in r.output
    assert "training" not in r.output


def test_prepare_dry_run_states_the_cost_and_builds_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path / "empty-cache"))
    r = runner.invoke(app, ["prepare", "--budget", "full", "--dry-run"])
    assert r.exit_code == 0, r.output
    needed = [t.name for t in registry.testbeds_for([p.id for p in implemented()], "full")]
    for name in ("small-8L", "small-1L", "small-8L-v1024", "toy-8L", "toy-4L"):
        assert name in r.output and name in needed
    wall = sum(registry.TESTBEDS[n].est_wall_s for n in needed)
    assert f"(about {wall / 60:.1f} min wall: some train on 2 threads)" in r.output
    total = sum(registry.TESTBEDS[n].est_cpu_s for n in needed)
    assert f"One-time cost: {len(needed)} testbeds to train, about {total / 60:.1f} min" in r.output
    assert "building" not in r.output and not list((tmp_path / "empty-cache").glob("*/*"))


def test_build_progress_lines_and_listeners(caplog):
    seen = []
    with caplog.at_level(logging.INFO, logger="icml26.testbeds"), progress.listening(lambda *a: seen.append(a)):
        with progress.BuildProgress(logging.getLogger("icml26.testbeds.t"), "toy", total=3, every_s=0.0) as p:
            for k in range(3):
                p.update(k + 1, loss=2.0 - k)
        with progress.build_phase(logging.getLogger("icml26.testbeds.t"), "tok", "training a tokenizer", every_s=0.05):
            import time

            time.sleep(0.2)
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs[0] == "training toy once: 3 steps (cached afterwards)"
    assert re.fullmatch(r"training toy once: step 1/3, loss 2\.000, ~\d+ s left", msgs[1])
    assert msgs[3].startswith("training toy: done in")
    assert msgs[4] == "training a tokenizer once ..." and msgs[5].startswith("still training a tokenizer (")
    assert msgs[-1].startswith("training a tokenizer: done in")
    assert [s[1] for s in seen if s[0] == "toy"] == [0, 1, 2, 3, 3]
    with pytest.raises(ValueError, match="total"):
        progress.BuildProgress(logging.getLogger("x"), "x", total=0)


def _loads(pid):
    """The testbed loader calls and config names in a paper's source files."""
    folder = get_paper(pid).folder
    text = "\n".join(f.read_text() for f in folder.iterdir() if f.name.endswith(".py"))
    causal = {c for c in re.findall(r"\b(?:TOY|SMALL)_[0-9A-Z_]+\b", text) if not c.endswith("TOKENIZER")} \
        if "load_causal_lm(" in text else set()
    return causal, "load_masked_diffusion_lm(" in text


def test_registry_matches_the_reproductions():
    """A paper is in the registry exactly when its code loads a trained testbed, and with the right models."""
    refs = {t.ref: t.name for t in registry.TESTBEDS.values() if t.kind == "causal_lm"}
    for p in implemented():
        causal, dlm = _loads(p.id)
        listed = {n for names in registry.NEEDS.get(p.id, {}).values() for n in names}
        lms = {n for n in listed if registry.TESTBEDS[n].kind != "artefact"}
        assert bool(causal or dlm) == bool(lms), p.id
        assert {refs[c] for c in causal} == {n for n in lms if registry.TESTBEDS[n].kind == "causal_lm"}, p.id
        assert dlm == any(registry.TESTBEDS[n].kind == "masked_diffusion_lm" for n in lms), p.id
        text = "\n".join(f.read_text() for f in p.folder.iterdir() if f.name.endswith(".py"))
        for n in listed - lms:  # an artefact: the paper's code calls its loader, and the config resolves
            t = registry.TESTBEDS[n]
            assert t.loader.rpartition(":")[2] + "(" in text or t.loader.rpartition(":")[2] in text, (p.id, n)
            assert t.cache_entries()[-1][0] == t.cache_kind, (p.id, n)
    assert set(registry.NEEDS) <= {p.id for p in implemented()}
    assert [t.name for t in registry.testbeds_for(["B04", "A19", "B04"], "full")] == \
        ["small-8L", "small-1L", "toy-4L", "toy-8L"]
    standard_b04 = [t.name for t in registry.testbeds_for(["B04"], "standard")]
    assert standard_b04[-3:] == ["b04-drafts-s0", "b04-drafts-s1", "b04-drafts-s2"]  # per-seed drafts
    assert [t.name for t in registry.testbeds_for(["B04"], "standard", seeds=1)] == standard_b04[:-2]
    assert get_paper("A15").testbeds("quick") == () and get_paper("A15").testbeds("standard") == ("dlm-t1c-strong",)
    with pytest.raises(ValueError, match="unknown budget"):
        registry.testbeds_for(["A03"], "fast")
    assert registry.BUDGETS == cli_mod.BUDGETS


def test_cli_budgets_match_the_harness():
    from icml26.harness import Budget

    assert tuple(b.value for b in Budget) == cli_mod.BUDGETS


def test_reproduce_builds_missing_testbeds_before_its_jobs(tmp_path, monkeypatch):
    """Jobs run in worker processes whose logs are not shown: the CLI builds what they need first, visibly."""
    from icml26.catalog import Paper

    pkg = tmp_path / "mods" / "fakepaper_tb"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "reproduce.py").write_text(
        "from icml26.harness import Claim, Outcome\n"
        "def reproduce(budget, seed):\n"
        "    return Outcome(claims=[Claim('x exact', measured=0.0, op='<=', reference=0.0, kind='check')])\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setattr(Paper, "module", property(lambda self: "fakepaper_tb"))
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(registry.TESTBEDS, "dlm-tiny", TinyDLM("dlm-tiny", "masked_diffusion_lm", "t1c", "4-step test DLM", 3.0))
    monkeypatch.setitem(registry.NEEDS, "A15", {"quick": ("dlm-tiny",)})
    args = ["reproduce", "A15", "--budget", "quick", "--jobs", "1", "--out", str(tmp_path / "runs"), "--no-report"]
    r = runner.invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = r.output
    assert out.index("One-time cost: 1 testbed") < out.index("training dlm-t1c-custom once") < out.index("Running 1 job")
    r = runner.invoke(app, args, catch_exceptions=False)
    assert "Testbeds cached: dlm-tiny." in r.output and "One-time cost" not in r.output
