"""Two real quick reproductions through a local Ray, compared with the local backend."""

import math

import pytest

from icml26.harness.runner import run_reproductions

ray = pytest.importorskip("ray")

PAPERS = ["A03", "A08"]


def test_ray_backend_runs_real_reproductions(tmp_path):
    result = run_reproductions(PAPERS, "quick", seeds=1, backend="ray", jobs=2, out=tmp_path / "ray")
    assert [r["status"] for r in result.records] == ["ok", "ok"], [r["error"] for r in result.records]
    assert not ray.is_initialized()  # the local Ray we started is shut down again
    summaries = result.summaries()
    assert set(summaries) == set(PAPERS)
    for s in summaries.values():
        assert s["claims"] and all(c["verdict"] in ("holds", "does not hold", "inconclusive") for c in s["claims"])
        assert all(math.isfinite(c["measured"]) for c in s["claims"])
    assert len(list((tmp_path / "ray" / "records").glob("*.json"))) == 2
    assert (tmp_path / "ray" / "index.sqlite").exists()

