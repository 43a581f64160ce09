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
    assert all(r["env"].get("command") for r in result.records)  # the driver's command, not the Ray worker's
    assert (tmp_path / "ray" / "index.sqlite").exists()



# an unreachable or wrong Ray head fails fast with a ValueError naming the address (the CLI's exit 2)

import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from icml26.harness.runner import _run_ray, probe_ray_address  # noqa: E402


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_ray_head_fails_fast_naming_the_address(tmp_path):
    address = f"127.0.0.1:{_unused_port()}"
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=address.replace(".", r"\.")):
        run_reproductions(["A03"], "quick", seeds=1, backend="ray", ray_address=address, out=tmp_path)
    assert time.monotonic() - t0 < 30
    assert not ray.is_initialized()
    assert not list(tmp_path.glob("records/*.json"))  # nothing ran


def test_silent_listener_is_not_taken_for_a_ray_head():
    # something accepts connections but never answers (not a gRPC server): no hang past the timeout
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    conns = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    address = f"127.0.0.1:{srv.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="no answer within 1 s"):
            _run_ray([], lambda r: None, address, 1, connect_timeout=1.0)
        assert time.monotonic() - t0 < 5
    finally:
        stop.set()
        th.join()
        for c in conns:
            c.close()
        srv.close()


@pytest.mark.parametrize("bad", ["nohostport", "http://10.0.0.1:6379", "host:99999", ":6379"])
def test_malformed_ray_address_is_refused(bad):
    with pytest.raises(ValueError, match="ray-address"):
        probe_ray_address(bad, 1.0)


def test_probe_accepts_a_real_ray_head():
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        probe_ray_address(ray.get_runtime_context().gcs_address, 5.0)
    finally:
        ray.shutdown()
