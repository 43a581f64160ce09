import math

import pytest

from icml26.harness import Budget, Claim, Outcome, aggregate_claims, summarize


def test_claim_verdict_is_computed_from_numbers():
    assert Claim("a < b", measured=1.0, op="<", reference=2.0, kind="check").verdict == "holds"
    assert Claim("a < b", measured=3.0, op="<", reference=2.0, kind="check").verdict == "does not hold"
    assert Claim("band", measured=1.5, op="in", reference=(1.3, 1.7), kind="check").verdict == "holds"
    assert Claim("band", measured=1.0, op="in", reference=(1.3, 1.7), kind="check").verdict == "does not hold"
    assert Claim("nan", measured=float("nan"), op=">", reference=0.0, kind="check").verdict == "inconclusive"


def test_claim_validation():
    with pytest.raises(ValueError, match="comparison"):
        Claim("x", measured=1.0, op="~", reference=1.0, kind="check")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lo, hi"):
        Claim("x", measured=1.0, op="in", reference=1.0, kind="check")
    with pytest.raises(TypeError):
        Outcome(claims=["not a claim"])  # type: ignore[list-item]


def test_claim_roundtrip():
    c = Claim("s", measured=0.5, op=">=", reference=0.25, baseline="b", paper="1.6x", note="n", falsifier="f")
    d = c.to_dict()
    assert Claim.from_dict(d).to_dict() == d


def test_budget_parse_and_pick():
    assert Budget.parse("QUICK") is Budget.QUICK
    assert Budget.QUICK.seconds == 30 and Budget.FULL.seconds is None
    assert Budget.STANDARD.pick({Budget.STANDARD: 3, "quick": 1}) == 3
    assert Budget.QUICK.pick({Budget.STANDARD: 3, "quick": 1}) == 1
    with pytest.raises(ValueError, match="quick, standard, full"):
        Budget.parse("fast")


def test_summarize_interval():
    s = summarize([1.0, 2.0, 3.0])
    assert s.mean == 2.0 and s.n == 3
    # t(0.975, 2) = 4.303, sd = 1, half = 4.303/sqrt(3)
    assert math.isclose(s.hi - s.mean, 4.302652729749464 / math.sqrt(3), rel_tol=1e-9)
    assert summarize([5.0]).lo == 5.0
    assert summarize([]).n == 0


def _c(m, r, op="<", **kw):
    if op == "in":
        kw.setdefault("control_arm", "none: a test of the aggregation rule")
    return Claim("s", measured=m, op=op, reference=r, falsifier="the comparison fails", **kw).to_dict()


def test_aggregate_holds_on_means_and_goes_inconclusive_when_seeds_disagree():
    clear = aggregate_claims([[_c(1.0, 2.0)], [_c(1.1, 2.0)], [_c(0.9, 2.1)]])[0]
    assert clear["verdict"] == "holds" and clear["n_seeds"] == 3
    noisy = aggregate_claims([[_c(1.0, 2.0)], [_c(3.0, 2.0)], [_c(1.5, 2.0)]])[0]
    assert noisy["verdict"] == "inconclusive"  # the interval of the differences contains 0
    wrong = aggregate_claims([[_c(3.0, 2.0)], [_c(3.1, 2.0)], [_c(2.9, 2.1)]])[0]
    assert wrong["verdict"] == "does not hold"
    one = aggregate_claims([[_c(3.0, 2.0)]])[0]
    assert one["verdict"] == "does not hold"


def test_aggregate_band():
    inside = aggregate_claims([[_c(1.50, (1.3, 1.7), "in")], [_c(1.52, (1.3, 1.7), "in")]])[0]
    assert inside["verdict"] == "holds"
    edge = aggregate_claims([[_c(1.2, (1.3, 1.7), "in")], [_c(1.6, (1.3, 1.7), "in")]])[0]
    assert edge["verdict"] == "inconclusive"


def test_limit_threads_caps_and_restores():
    import torch

    from icml26.harness import limit_threads

    before = torch.get_num_threads()
    with limit_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="positive int"):
        with limit_threads(0):
            pass


def test_claim_needs_a_falsifier_and_a_known_kind():
    with pytest.raises(ValueError, match="falsifier"):
        Claim("x", measured=1.0, op="<", reference=2.0)
    with pytest.raises(ValueError, match="kind"):
        Claim("x", measured=1.0, op="<", reference=2.0, falsifier="f", kind="fact")  # type: ignore[arg-type]
    assert Claim("x", measured=0.0, op="<=", reference=0.0, kind="check").verdict == "holds"


def test_nan_seed_makes_a_claim_inconclusive_and_shows_n_finite():
    rows = aggregate_claims([[_c(5.0, 4.0, ">")], [_c(float("nan"), 4.0, ">")], [_c(float("nan"), 4.0, ">")]])
    assert rows[0]["verdict"] == "inconclusive"
    assert rows[0]["n_finite"] == 1 and rows[0]["n_seeds"] == 3
    one_nan_ref = aggregate_claims([[_c(5.0, 4.0, ">")], [_c(5.0, float("nan"), ">")]])[0]
    assert one_nan_ref["verdict"] == "inconclusive" and one_nan_ref["n_finite"] == 1


def test_exact_tie_on_every_seed_is_no_evidence_for_a_claim_but_passes_a_check():
    tie = aggregate_claims([[_c(1.0, 1.0, "<=")], [_c(2.0, 2.0, "<=")]])[0]
    assert tie["verdict"] == "inconclusive"
    check = Claim("s", measured=1.0, op="<=", reference=1.0, kind="check").to_dict()
    assert aggregate_claims([[check], [check]])[0]["verdict"] == "holds"


def test_paired_instances_make_a_noisy_single_seed_inconclusive():
    clear = Claim("s", measured=1.0, op="<", reference=2.0, falsifier="f", paired=[-1.0, -0.9, -1.1, -1.0])
    assert clear.verdict == "holds" and clear.paired_ci[1] < 0
    noisy = Claim("s", measured=1.0, op="<", reference=2.0, falsifier="f", paired=[-3.0, 2.0, -2.5, 0.5])
    assert noisy.verdict == "inconclusive"
    assert Claim.from_dict(noisy.to_dict()).verdict == "inconclusive"


def test_paired_differences_pointing_the_other_way_make_the_claim_inconclusive():
    """A measured value that is not the instances' mean (min of means vs mean of per-instance mins, A14's first
    U-shape) can sit above its reference while every instance sits below: neither verdict is evidence then."""
    up = Claim("s", measured=0.709, op=">", reference=0.700, falsifier="f", paired=[-0.02, -0.018, -0.021, -0.019])
    assert up.verdict == "inconclusive" and "point the other way" in up.reason
    down = Claim("s", measured=0.69, op=">=", reference=0.70, falsifier="f", paired=[0.02, 0.018, 0.021, 0.019])
    assert down.verdict == "inconclusive"
    below = Claim("s", measured=2.0, op="<", reference=1.0, falsifier="f", paired=[-1.0, -0.9, -1.1])
    assert below.verdict == "inconclusive"
    agree = Claim("s", measured=0.72, op=">", reference=0.70, falsifier="f", paired=[0.02, 0.018, 0.021, 0.019])
    assert agree.verdict == "holds"
    against = Claim("s", measured=0.68, op=">", reference=0.70, falsifier="f", paired=[-0.02, -0.018, -0.021])
    assert against.verdict == "does not hold"


def test_outcome_refuses_two_claims_with_one_statement():
    c = Claim("same", measured=1.0, op="<", reference=2.0, falsifier="f")
    with pytest.raises(ValueError, match="statement"):
        Outcome(claims=[c, c])


def test_duplicate_seeds_are_refused():
    from icml26.harness.runner import _seed_list

    with pytest.raises(ValueError, match="more than once"):
        _seed_list([0, 0])
    assert _seed_list([2, 0]) == [2, 0]


def test_threads_per_job_honours_omp_num_threads(monkeypatch):
    from icml26.harness.runner import _threads_per_job

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _threads_per_job(8, 2) == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert _threads_per_job(8, 2) == 4 and _threads_per_job(2, 4) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert _threads_per_job(8, 2) == 4
