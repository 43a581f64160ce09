"""The result store never tracebacks on a damaged record, and writes files others can read."""

import json
import logging
import os
import stat

import pytest

from icml26.harness.report import build_report
from icml26.harness.runner import summarize_records
from icml26.harness.store import ResultStore, atomic_write_bytes, check_writable, file_mode, record_problem


def good_record(run_id="r1", seed=0, paper="A03", batch="b1", started=1.0):
    return {"run_id": run_id, "batch": batch, "paper": paper, "budget": "quick", "seed": seed, "status": "ok",
            "started": started, "error": None, "metrics": {"w2": 0.1}, "wall_time": 1.0, "tables": {}, "figures": [],
            "env": {}, "claims": [{"statement": "s", "measured": 1.0, "op": "<", "reference": 2.0, "verdict": "holds",
                                   "kind": "claim", "falsifier": "measured at or above reference"}]}


DAMAGED = {
    "empty-list": "[]",
    "empty-object": "{}",
    "truncated": json.dumps(good_record("rx"))[:57],
    "no-status": json.dumps({k: v for k, v in good_record("rs").items() if k != "status"}),
    "no-paper": json.dumps({k: v for k, v in good_record("rp").items() if k != "paper"}),
    "seed-is-text": json.dumps({**good_record("rt"), "seed": "zero"}),
    "claim-without-verdict": json.dumps({**good_record("rc"), "claims": [{"statement": "s", "measured": 1.0, "op": "<",
                                                                        "reference": 2.0}]}),
    "band-without-pair": json.dumps({**good_record("rb"), "claims": [{"statement": "s", "measured": 1.0, "op": "in",
                                                                    "reference": 2.0, "verdict": "holds"}]}),
    "claims-not-list": json.dumps({**good_record("rl"), "claims": {"a": 1}}),
    "binary": b"\xff\xfe\x00garbage",
}


@pytest.fixture
def damaged_store(tmp_path):
    store = ResultStore(tmp_path)
    store.save(good_record())
    for name, text in DAMAGED.items():
        data = text if isinstance(text, bytes) else text.encode()
        (store.records_dir / f"A03-quick-seed0-{name}.json").write_bytes(data)
    return store


def test_damaged_records_are_skipped_with_a_warning_naming_the_file(damaged_store, caplog):
    caplog.set_level(logging.WARNING)
    recs = damaged_store.records()
    assert [r["run_id"] for r in recs] == ["r1"]
    for name in DAMAGED:
        assert any(f"A03-quick-seed0-{name}.json" in m for m in caplog.messages), name
    assert set(damaged_store.latest_batches()) == {"A03"}
    db = damaged_store.reindex()
    import sqlite3

    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from runs").fetchone()[0] == 1
        assert con.execute("select kind, falsifier from claims").fetchall() == [("claim", "measured at or above reference")]


def test_report_and_summary_survive_damaged_records(damaged_store):
    index = build_report(damaged_store.root)
    assert "A03" in index.read_text()
    # a summary given malformed records directly skips them too
    s = summarize_records([good_record(), [], {}, {"paper": "A03"}])
    assert s["A03"]["seeds"] == [0]


def test_record_problem_names_the_field():
    assert record_problem(good_record()) is None
    assert "status" in record_problem({k: v for k, v in good_record().items() if k != "status"})
    assert "JSON object" in record_problem([])
    with pytest.raises(ValueError, match="not a run record"):
        ResultStore("unused").save({"paper": "A03"})


def test_output_files_are_world_readable(tmp_path):
    old = os.umask(0o022)
    try:
        import icml26.harness.store as store_mod

        store_mod._umask.cache_clear()
        assert file_mode() == 0o644
        store = ResultStore(tmp_path)
        rec = store.save(good_record())
        atomic_write_bytes(tmp_path / "figures" / "A03" / "f.png", b"png")
        db = store.reindex()
        index = build_report(tmp_path)
        for p in (rec, tmp_path / "figures" / "A03" / "f.png", db, index, tmp_path / "report.md", index.parent / "A03.html"):
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    finally:
        os.umask(old)
        store_mod._umask.cache_clear()


def test_empty_out_is_refused():
    with pytest.raises(ValueError, match="--out"):
        check_writable("")
