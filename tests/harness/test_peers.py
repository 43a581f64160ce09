"""Optional peers: a missing package is remembered for the run's record, never silently dropped."""

from icml26.harness.peers import missing_peers, peer_available, reset_missing_peers
from icml26.harness.runner import summarize_records


def test_missing_peer_is_recorded_once_and_reset():
    reset_missing_peers()
    assert peer_available("json", "peers", "stdlib") and missing_peers() == []
    for _ in range(2):
        assert not peer_available("no_such_package_xyz", "peers", "a cross-check")
    assert not peer_available("no_such_parent.child", "peers", "a nested module")
    assert missing_peers() == [{"module": "no_such_package_xyz", "extra": "peers", "what": "a cross-check"},
                               {"module": "no_such_parent.child", "extra": "peers", "what": "a nested module"}]
    reset_missing_peers()
    assert missing_peers() == []


def test_summary_lists_each_missing_peer_once_over_seeds():
    m = {"module": "torchsde", "extra": "peers", "what": "the SRK cross-check"}
    recs = [{"run_id": f"r{s}", "batch": "b", "paper": "A03", "budget": "quick", "seed": s, "status": "ok",
             "started": 1.7e9, "wall_time": 1.0, "error": None, "metrics": {}, "claims": [], "tables": {},
             "figures": [], "env": {}, "missing_peers": [m]} for s in range(2)]
    assert summarize_records(recs)["A03"]["missing_peers"] == [m]
