"""The evidence rules of the harness (issue "Verdicts that are evidence"): controls, strongest baselines,
seed-invariant claims, power, and timing that survives load."""

import math
import time

import pytest

from icml26.cli import last_verdict
from icml26.harness import Claim, aggregate_claims, compare_times, verdict_counts, without_control
from icml26.harness.intervals import n_needed, power
from icml26.harness.timing import TimedComparison

F = "the comparison fails"


def claim(m, r=None, op=">", **kw):
    return Claim("s", measured=m, op=op, reference=r, falsifier=F, **kw)


# 1. controls

def test_control_that_passes_too_makes_the_claim_inconclusive():
    c = claim(0.95, 0.9, bar=True, control=0.93, control_arm="untrained model")
    assert c.verdict == "inconclusive" and "control passes too" in c.reason
    assert c.control_verdict == "holds"
    ok = claim(0.95, 0.9, bar=True, control=0.5, control_arm="untrained model")
    assert ok.verdict == "holds" and ok.control_verdict == "does not hold" and ok.reason == ""
    # the control does not rescue a method that fails its own test
    assert claim(0.85, 0.9, bar=True, control=0.5, control_arm="untrained").verdict == "does not hold"


def test_control_paired_interval_decides_whether_the_control_passes():
    # the control's point value passes, but its per-instance interval contains 0: it is not shown to pass
    c = claim(0.95, 0.9, control=0.91, control_arm="random", control_paired=[0.2, -0.2, 0.05, -0.03])
    assert c.control_verdict == "inconclusive" and c.verdict == "holds"


def test_fixed_bar_claim_without_control_is_refused():
    with pytest.raises(ValueError, match="fixed bar"):
        claim(0.95, 0.9, bar=True)
    with pytest.raises(ValueError, match="fixed bar"):
        Claim("band", measured=1.5, op="in", reference=(1.3, 1.7), falsifier=F)  # bands are fixed bars
    # allowed with a reason why no control exists, with a control, or as a check
    claim(0.95, 0.9, bar=True, control_arm="none: theory against an exact simulation")
    Claim("band", measured=1.5, op="in", reference=(1.3, 1.7), falsifier=F, control=1.0, control_arm="no Levy area")
    Claim("band", measured=1.5, op="in", reference=(1.3, 1.7), kind="check")
    with pytest.raises(ValueError, match="control_arm"):
        claim(0.95, 0.9, control=0.5)


def test_control_over_seeds():
    passes = [[claim(0.9 + 0.01 * s, 0.5, bar=True, control=0.8 + 0.01 * s, control_arm="untrained").to_dict()]
              for s in range(3)]
    agg = aggregate_claims(passes)[0]
    assert agg["verdict"] == "inconclusive" and "control passes too" in agg["reason"]
    assert agg["control_verdict"] == "holds"
    fails = [[claim(0.9 + 0.01 * s, 0.5, bar=True, control=0.3 + 0.01 * s, control_arm="untrained").to_dict()]
             for s in range(3)]
    agg = aggregate_claims(fails)[0]
    assert agg["verdict"] == "holds" and agg["control_verdict"] == "does not hold"
    assert math.isclose(agg["control"], 0.31)
    nan = [[claim(0.9, 0.5, bar=True, control=c, control_arm="untrained").to_dict()] for c in (0.3, float("nan"))]
    assert aggregate_claims(nan)[0]["verdict"] == "inconclusive"


# 2. strongest baseline

def test_strongest_baseline_is_the_reference_for_the_direction():
    up = claim(0.8, baselines={"keyword": 0.71, "random": 0.09})
    assert up.reference == 0.71 and up.strongest_baseline == "keyword" and up.baseline == "keyword"
    assert up.verdict == "holds"
    down = claim(0.5, op="<", baselines={"ULA": 0.6, "SRK-LD": 0.4})
    assert down.reference == 0.4 and down.strongest_baseline == "SRK-LD" and down.verdict == "does not hold"
    d = up.to_dict()
    assert d["strongest_baseline"] == "keyword" and d["baselines"] == {"keyword": 0.71, "random": 0.09}
    assert Claim.from_dict(d).to_dict() == d
    with pytest.raises(ValueError, match="not both"):
        claim(0.8, 0.7, baselines={"a": 0.1})
    with pytest.raises(ValueError, match="non-empty"):
        claim(0.8, baselines={})


def test_paired_by_baseline_uses_the_strongest():
    c = claim(0.8, baselines={"keyword": 0.7, "random": 0.1},
              paired={"keyword": [0.3, -0.3, 0.1], "random": [0.7, 0.7, 0.6]})
    assert c.verdict == "inconclusive"  # the keyword differences straddle 0


def test_control_paired_by_baseline_uses_the_strongest():
    """The control's per-instance differences are taken against the same (strongest) baseline as the method's."""
    c = claim(0.8, baselines={"keyword": 0.7, "random": 0.1}, paired={"keyword": [0.1, 0.12, 0.09], "random": [0.7] * 3},
              control=0.72, control_arm="untrained",
              control_paired={"keyword": [0.02, 0.021, 0.022], "random": [0.6, 0.62, 0.61]})
    assert c.control_paired == [0.02, 0.021, 0.022]
    assert c.verdict == "inconclusive" and "control passes too" in c.reason
    with pytest.raises(ValueError, match="control_paired names"):
        claim(0.8, baselines={"keyword": 0.7}, control=0.1, control_arm="untrained", control_paired={"other": [0.1]})
    with pytest.raises(ValueError, match="control_paired is a dict"):
        claim(0.8, 0.7, control=0.1, control_arm="untrained", control_paired={"keyword": [0.1]})


def test_strongest_baseline_over_seeds_is_chosen_on_the_means():
    seeds = [[claim(0.8, baselines={"a": 0.75 if s else 0.5, "b": 0.6}).to_dict()] for s in range(3)]
    agg = aggregate_claims(seeds)[0]
    assert agg["strongest_baseline"] == "a" and math.isclose(agg["reference"], (0.5 + 0.75 + 0.75) / 3)


# 3. seed-invariant claims

def test_seed_invariant_claims_are_counted_apart():
    same = aggregate_claims([[claim(2.0, 1.0).to_dict()] for _ in range(3)])[0]
    assert same["seed_invariant"] and same["verdict"] == "holds"
    varies = aggregate_claims([[claim(2.0 + 0.1 * s, 1.0).to_dict()] for s in range(3)])[0]
    assert not varies["seed_invariant"]
    check = aggregate_claims([[Claim("c", 1.0, ">=", 1.0, kind="check").to_dict()] for _ in range(3)])[0]
    counts = verdict_counts([same, varies, check])
    assert counts == {"claims": {"holds": 1}, "seed-invariant": {"holds": 1}, "checks": {"holds": 1}}
    assert without_control([same, varies, check]) == 2
    summary = {"claims": [same, varies, check], "crashed": [], "seeds": [0, 1, 2], "budget": "quick"}
    text = last_verdict(summary)
    assert "seed-invariant: " in text and "2 without a control" in text


# 4. power

def test_n_needed_matches_the_t_interval():
    # effect 1, sd 2: the smallest n with t(0.975, n-1) * 2 / sqrt(n) < 1 is 18 (t(.975,17)=2.110, 2*2.110/4.243=0.995)
    assert n_needed(1.0, 2.0) == 18
    assert n_needed(1.0, 0.0) == 2
    assert n_needed(0.0, 1.0) is None
    assert n_needed(0.01, 1.0) is None  # not within 100
    p = power([0.1, -0.05, 0.3])
    assert p["n"] == 3 and p["unit"] == "seeds" and p["needed"] is not None and p["needed"] > 3


def test_power_on_a_known_effect_recovers_the_seed_count():
    import numpy as np

    rng = np.random.default_rng(0)
    z = rng.standard_normal(400)
    diffs = list(0.5 + 1.0 * (z - z.mean()) / z.std(ddof=1))  # mean 0.5, sd 1 exactly
    p = power(diffs)
    assert p["needed"] == n_needed(0.5, 1.0) == 18  # t(.975,17)*1/sqrt(18) = 0.497 < 0.5


def test_inconclusive_aggregate_reports_power():
    rows = [[claim(m, 1.0).to_dict()] for m in (1.2, 0.9, 1.3)]
    agg = aggregate_claims(rows)[0]
    assert agg["verdict"] == "inconclusive"
    assert agg["power"]["unit"] == "seeds" and agg["power"]["n"] == 3
    assert agg["power"]["interval"][0] < 0 < agg["power"]["interval"][1]
    assert "power" not in aggregate_claims([[claim(m, 1.0).to_dict()] for m in (2.0, 2.1, 2.2)])[0]
    single = claim(1.1, 1.0, paired=[0.3, -0.2, 0.1]).to_dict()
    assert single["verdict"] == "inconclusive" and single["power"]["unit"] == "instances"


# 6. timing

def test_timing_claim_with_drifting_same_work_control_is_inconclusive():
    tc = TimedComparison(method=[1.0] * 5, baseline=[2.0] * 5, control=[2.4] * 5)
    assert not tc.stable and math.isclose(tc.control_ratio, 1.2)
    c = tc.claim("2x faster", ">=", 1.5, falsifier=F, control_arm="none: a speed-up over a same-run baseline")
    assert c.verdict == "inconclusive" and "timing unstable" in c.reason
    stable = TimedComparison(method=[1.0, 1.01, 0.99, 1.0, 1.02], baseline=[2.0, 2.02, 1.99, 2.01, 2.0],
                             control=[2.01, 2.0, 2.0, 1.99, 2.02])
    c = stable.claim("2x faster", ">=", 1.5, falsifier=F, control_arm="none: same-run baseline")
    assert stable.stable and c.verdict == "holds"
    rows = [[TimedComparison([1.0] * 3, [2.0] * 3, [2.0 * k] * 3).claim(
        "t", ">=", 1.5, falsifier=F, control_arm="none").to_dict()] for k in (1.2, 1.15, 1.25)]
    assert aggregate_claims(rows)[0]["verdict"] == "inconclusive"


def test_a_timing_effect_far_beyond_the_drift_is_decided_anyway():
    """B12's OCMB ran ~500x faster than PC while the same-work ratio read 0.88: no drift of that size can flip
    it, so it is decided; the same drift on a close call (2x against a 1.5x bar under a 1.2 drift) is not."""
    big = TimedComparison(method=[0.002] * 5, baseline=[1.0] * 5, control=[0.88] * 5)
    c = big.claim("faster", "<", 1.0, as_="ratio", falsifier=F, control_arm="none: same-run baseline")
    assert not big.stable and c.verdict == "holds"
    noisy = TimedComparison(method=[0.002, 3.0, 0.002, 0.002, 2.5], baseline=[1.0] * 5, control=[0.88] * 5)
    c = noisy.claim("faster", "<", 1.0, as_="ratio", falsifier=F, control_arm="none")
    assert c.verdict == "inconclusive" and "interval" in c.reason  # the median is robust, the repeats are not
    slow = TimedComparison(method=[2.0] * 5, baseline=[1.0] * 5, control=[0.88] * 5)
    assert slow.claim("faster", "<", 1.0, as_="ratio", falsifier=F, control_arm="none").verdict == "does not hold"
    rows = [[TimedComparison([0.002] * 3, [1.0] * 3, [k] * 3).claim(
        "t", "<", 1.0, as_="ratio", falsifier=F, control_arm="none").to_dict()] for k in (0.88, 0.93, 0.90)]
    assert aggregate_claims(rows)[0]["verdict"] == "holds"
    from icml26.harness.report import control_text

    shown = control_text(aggregate_claims(rows)[0])
    assert shown.startswith("same-work ratio 0.900 (") and "unstable" in shown  # the median over seeds is shown
    close = [[TimedComparison([0.9] * 3, [1.0] * 3, [k] * 3).claim(
        "t", "<", 1.0, as_="ratio", falsifier=F, control_arm="none").to_dict()] for k in (0.88, 0.93, 0.90)]
    agg = aggregate_claims(close)[0]
    assert agg["verdict"] == "inconclusive" and agg["reason"].startswith("timing unstable")


def test_intervals_print_the_digits_that_tell_their_ends_apart_and_rounding_noise_as_a_point():
    from icml26.harness.report import fmt_n

    assert fmt_n(1.001, [1.00055, 1.00153], 5) == "1.001 [1.001, 1.002]"  # A09's loss ratios: not "the same"
    assert fmt_n(0.95, [0.9499999999999995, 0.9500000000000002], 3) == "0.95 (same on all 3 seeds)"  # B06's bar
    assert fmt_n(6e-13, [4.4e-13, 7.7e-13], 5) == "6e-13 [4.4e-13, 7.7e-13]"  # B09's round-off checks differ by seed


def test_the_control_verdict_of_a_failing_claim_is_the_mean_controls_not_the_first_seeds():
    """A13's quantile row printed the 5-seed control mean -0.3 with seed 0's "holds" (its control was 1)."""
    rows = [[Claim("q", m, ">=", 0.8, falsifier=F, control=ctl, control_arm="init").to_dict()]
            for m, ctl in ((0.5, 1.0), (0.4, -0.5), (0.6, -0.8))]
    agg = aggregate_claims(rows)[0]
    # seed 0's control (1.0) passes; the mean (-0.1) fails, but its interval over seeds reaches the bar
    assert agg["verdict"] == "does not hold" and agg["control_verdict"] == "inconclusive"
    tight = [[Claim("q", m, ">=", 0.8, falsifier=F, control=ctl, control_arm="init").to_dict()]
             for m, ctl in ((0.5, 0.1), (0.4, 0.0), (0.6, 0.2))]
    assert aggregate_claims(tight)[0]["control_verdict"] == "does not hold"


def test_a_control_must_clearly_fail_over_seeds():
    """A08's rate claim: the method's slope -1.12 clears <= -0.5, the nominal policy's -0.43 [-0.70, -0.15] fails on
    the mean but its interval reaches the bar, so it is not shown to fail and the claim is not decided."""
    rows = [[Claim("rate", m, "<=", -0.5, bar=True, falsifier=F, control=ctl, control_arm="nominal").to_dict()]
            for m, ctl in ((-1.45, -0.2), (-0.92, -0.45), (-0.98, -0.62), (-1.06, -0.35), (-1.2, -0.51))]
    agg = aggregate_claims(rows)[0]
    assert agg["verdict"] == "inconclusive" and "control does not clearly fail" in agg["reason"]
    assert agg["control_verdict"] == "inconclusive" and "power" not in agg
    clear = [[Claim("rate", m, "<=", -0.5, bar=True, falsifier=F, control=ctl, control_arm="nominal").to_dict()]
             for m, ctl in ((-1.45, -0.2), (-0.92, -0.25), (-0.98, -0.22), (-1.06, -0.15), (-1.2, -0.31))]
    agg = aggregate_claims(clear)[0]
    assert agg["verdict"] == "holds" and agg["control_verdict"] == "does not hold"
    # a band: the control's mean lies outside it, but its interval crosses the edge
    band = [[Claim("order", m, "in", (1.3, 1.7), falsifier=F, control=ctl, control_arm="no Levy area").to_dict()]
            for m, ctl in ((1.5, 1.1), (1.52, 1.4), (1.49, 1.0))]
    agg = aggregate_claims(band)[0]
    assert agg["control_verdict"] == "inconclusive" and agg["verdict"] == "inconclusive"
    band_clear = [[Claim("order", m, "in", (1.3, 1.7), falsifier=F, control=ctl, control_arm="no Levy").to_dict()]
                  for m, ctl in ((1.5, 1.0), (1.52, 1.01), (1.49, 0.99))]
    assert aggregate_claims(band_clear)[0]["verdict"] == "holds"
    # a control equal to a fixed bar on every seed is decided by that number (a tie fails a strict test)
    tie = [[Claim("above", m, ">", 0.5, bar=True, falsifier=F, control=0.5, control_arm="random").to_dict()]
           for m in (0.9, 0.91, 0.92)]
    agg = aggregate_claims(tie)[0]
    assert agg["verdict"] == "holds" and agg["control_verdict"] == "does not hold"


def test_the_reference_is_averaged_over_the_seeds_the_measurement_is():
    rows = [[Claim("x", m, "<", r, falsifier=F, control_arm="none: same-run baseline").to_dict()]
            for m, r in ((0.2, 0.3), (0.2, 0.3), (float("nan"), 0.0))]
    agg = aggregate_claims(rows)[0]
    assert agg["reference"] == pytest.approx(0.3) and agg["verdict"] == "inconclusive"


def test_a_value_off_the_reference_only_by_rounding_counts_as_equal():
    """B12's oracle F1 of 54/60 came out as 0.8999999999999999 and was judged outside [0.9, 1]."""
    from icml26.harness.outcome import compare

    assert compare(0.8999999999999999, "in", (0.9, 1.0)) and compare(0.8999999999999999, ">=", 0.9)
    assert not compare(0.9 + 1e-15, ">", 0.9) and not compare(0.899, "in", (0.9, 1.0))
    assert compare(5e-13, "<", 1e-12) and compare(2.22e-16, "<", 1e-12) and compare(0.0, "<", 1e-12)  # A06's checks
    assert not compare(1e-12, "<", 1e-12) and compare(1e-300, ">", 0.0)


def test_compare_times_measures_cpu_time_and_same_work():
    def busy(n):
        def f():
            s = 0
            for i in range(n):
                s += i
            return s
        return f

    tc = compare_times(busy(20_000), busy(80_000), repeats=5, clock="cpu")
    assert len(tc.method) == len(tc.baseline) == len(tc.control) == 5
    assert tc.speedup > 1.5  # 4x less work
    # sleeping costs no CPU time: a CPU-time comparison is blind to it, as it is to other processes' load
    tc = compare_times(lambda: time.sleep(0.01), busy(20_000), repeats=3, clock="cpu")
    assert tc.ratio < 0.5
    with pytest.raises(ValueError, match="repeats"):
        compare_times(busy(1), busy(1), repeats=2)
    with pytest.raises(ValueError, match="clock"):
        compare_times(busy(1), busy(1), clock="gpu")  # type: ignore[arg-type]


def test_compare_times_same_work_control_is_not_biased_by_a_warm_cache(monkeypatch):
    """Work that fills the cache runs faster straight after a call on the same data. No order may hand that
    advantage to the same-work copy B' (its ratio must stay 1 on a perfectly stable machine) or to the method.
    The earlier M B B' / B' B M order ran B' after B or after itself every repeat: its ratio read 0.9 here."""
    from icml26.harness import timing

    clock = {"t": 0.0}
    last = {"data": None}

    def work(data, cost):
        def f():
            clock["t"] += cost * (0.8 if last["data"] == data else 1.0)  # 20% cheaper on a warm cache
            last["data"] = data
        return f

    monkeypatch.setitem(timing.CLOCKS, "cpu", lambda: clock["t"])
    tc = compare_times(work("m", 1.0), work("b", 2.0), repeats=8, clock="cpu")
    assert tc.control_ratio == pytest.approx(1.0) and tc.stable
    assert tc.speedup == pytest.approx(2.0)  # neither arm is ever timed warm
    assert timing.REPEAT_ORDER == ("method", "baseline", "method", "control")


# the report and the SQLite index show the new fields

def test_report_and_index_show_controls_baselines_power_and_seed_invariant(tmp_path):
    import sqlite3

    from icml26.harness.report import build_report
    from icml26.harness.store import ResultStore

    store = ResultStore(tmp_path)
    for seed in range(3):
        claims = [
            Claim("beats the keyword baseline", 0.9 + 0.01 * seed, ">", falsifier=F,
                  baselines={"keyword": 0.71, "random": 0.09}).to_dict(),
            Claim("AUROC above 0.9", 0.95 + 0.01 * seed, ">", 0.9, bar=True, control=0.93 + 0.01 * seed,
                  control_arm="untrained GNN", falsifier=F).to_dict(),
            Claim("undecided effect", 1.0 + (0.2, -0.1, 0.15)[seed], ">", 1.0, falsifier=F).to_dict(),
            Claim("same on every seed", 2.0, ">", 1.0, falsifier=F).to_dict(),
        ]
        store.save({"run_id": f"A04-{seed}", "batch": "b1", "paper": "A04", "budget": "quick", "seed": seed,
                    "status": "ok", "started": 1.7e9 + seed, "error": None, "wall_time": 1.0, "tables": {},
                    "figures": [], "env": {}, "claims": claims, "metrics": {}})
    index = build_report(tmp_path).read_text()
    page = (tmp_path / "report" / "A04.html").read_text()
    for text in ("strongest of 2 baselines: keyword", "others: random 0.09", "untrained GNN",
                 "the control passes too", "Seed-invariant claims", "would decide it", "Claims without a control"):
        assert text in index, text
    assert "control (same test)" in page and "seed-invariant" in page
    md = (tmp_path / "report.md").read_text()
    assert "Seed-invariant claims" in md and "untrained GNN" in md
    db = sqlite3.connect(store.reindex())
    rows = dict(db.execute("select statement, seed_invariant from verdicts").fetchall())
    assert rows == {"beats the keyword baseline": 0, "AUROC above 0.9": 0, "undecided effect": 0,
                    "same on every seed": 1}
    verdict, reason = db.execute("select verdict, reason from verdicts where statement = 'AUROC above 0.9'").fetchone()
    assert verdict == "inconclusive" and "control passes too" in reason
    (sb,) = db.execute("select strongest_baseline from claims where statement = 'beats the keyword baseline'"
                       " limit 1").fetchone()
    assert sb == "keyword"


def test_counts_table_counts_seed_invariant_claims_apart(tmp_path):
    from typer.testing import CliRunner

    from icml26.cli import app
    from icml26.harness.store import ResultStore

    store = ResultStore(tmp_path)
    for seed in range(3):
        claims = [claim(2.0, 1.0).to_dict(), claim(2.0 + 0.1 * seed, 1.0).to_dict(),
                  Claim("c", 1.0, ">=", 1.0, kind="check").to_dict()]
        store.save({"run_id": f"A03-{seed}", "batch": "b1", "paper": "A03", "budget": "standard", "seed": seed,
                    "status": "ok", "started": 1.7e9 + seed, "error": None, "wall_time": 1.0, "tables": {},
                    "figures": [], "env": {}, "claims": [dict(c, statement=f"{c['statement']}{i}")
                                                         for i, c in enumerate(claims)], "metrics": {}})
    r = CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--counts"])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if line.startswith("| A03"))
    assert row == "| A03 | 1 / 0 / 0 | 1 / 0 / 0 | 1 / 0 / 0 | 2 | standard, 3 seeds |"
    assert "| total | 1 / 0 / 0 | 1 / 0 / 0 | 1 / 0 / 0 | 2 | |" in r.output


def test_unstable_timing_is_the_reason_even_when_the_interval_also_contains_0():
    """A drifting machine makes the per-repeat interval meaningless too, so 'timing unstable' is what is said."""
    c = Claim("faster", measured=0.98, op=">", reference=1.0, paired=[-0.1, 0.05, 0.02, -0.03],
              timing_control=1.18, falsifier="not faster")
    assert c.verdict == "inconclusive" and c.reason.startswith("timing unstable")


def test_markdown_tables_of_one_paper_come_from_its_newest_batch(tmp_path):
    """`icml26 report --markdown ID` prints the README tables from the records: the newest batch only, its
    command, seeds and wall times, per-seed values, the strongest baseline, the control and why a claim is
    undecided; an id without records is refused with the ids that have some."""
    from typer.testing import CliRunner

    from icml26.cli import app
    from icml26.harness.store import ResultStore

    store = ResultStore(tmp_path)

    def save(batch, seed, m, started):
        claims = [claim(m, None, baselines={"keyword": 1.0, "random": 0.1}).to_dict(),
                  Claim("undecided | piped", measured=1.0 + (0.3 if seed % 2 else -0.2), op=">",
                        reference=1.0 + 0.01 * seed,
                        falsifier=F, paired=[-0.1, -0.3, -0.2] if seed == 0 else None).to_dict(),
                  Claim("exact", 0.0, "<=", 1e-9, kind="check").to_dict()]
        store.save({"run_id": f"A03-{batch}-{seed}", "batch": batch, "paper": "A03", "budget": "standard",
                    "seed": seed, "status": "ok", "started": started, "error": None, "wall_time": 40.0 + seed,
                    "cpu_time": 30.0,
                    "tables": {}, "figures": [], "env": {"command": "icml26 reproduce A03 --budget standard --seeds 3",
                                                          "git": {"commit": "abcdef1234567890", "dirty": False}},
                    "claims": claims, "metrics": {}})

    save("old", 0, 9.0, 1.6e9)
    for seed in range(3):
        save("new", seed, 2.0 + 0.1 * seed, 1.7e9 + seed)
    r = CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--markdown", "a03"])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "seeds 0–2 (3 ok)" in out and "s0 40 s (CPU 30 s); s1 41 s (CPU 30 s); s2 42 s (CPU 30 s)" in out
    assert "abcdef123456" in out and "Command: `icml26 reproduce A03 --budget standard --seeds 3`." in out
    assert "9 (" not in out  # the older batch is not mixed in
    row = next(line for line in out.splitlines() if line.startswith("| s |"))
    assert "strongest of 2 baselines: keyword" in row and "s0: 2 (holds); s1: 2.1 (holds)" in row
    paired = next(line for line in out.splitlines() if line.startswith("| undecided"))
    assert "s0: 0.8 vs 1 (paired [-0.4484, 0.04841]) (inconclusive); s1: 1.3 vs 1.01 (" in paired  # per seed
    assert " vs " not in row  # a reference equal on every seed is not repeated per seed
    assert "undecided \\| piped" in out and "over 3 seeds" in out  # the pipe is escaped; power is shown
    assert "**Checks" in out and "| exact |" in out
    assert "claims decided over seeds holds 1, does not hold 0, inconclusive 1" in out
    bad = CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--markdown", "B11"])
    assert bad.exit_code == 2 and "papers with records: A03" in bad.output
    both = CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--markdown", "A03", "--counts"])
    assert both.exit_code == 2
    assert CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--markdown", ""]).exit_code == 2
    # a crashed seed is named with its cost; a batch where every seed crashed is refused, with the error's last line
    for seed, status in ((0, "ok"), (1, "error")):
        store.save({"run_id": f"A08-{seed}", "batch": "c", "paper": "A08", "budget": "quick", "seed": seed,
                    "status": status, "started": 1.8e9, "error": None if status == "ok" else "Trace\nValueError: x",
                    "wall_time": 5.0, "cpu_time": 4.0, "tables": {}, "figures": [], "env": {},
                    "claims": [claim(2.0, 1.0).to_dict()] if status == "ok" else [], "metrics": {}})
    out = CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--markdown", "A08"]).output
    assert "crashed on 1" in out and "s1 5 s (CPU 4 s), crashed" in out
    assert "`icml26 reproduce A08 --budget quick --seeds 2` (the recorded command line is missing)" in out
    store.save({"run_id": "A08-2", "batch": "d", "paper": "A08", "budget": "quick", "seed": 0, "status": "error",
                "started": 1.9e9, "error": "Traceback\nRuntimeError: boom", "wall_time": 1.0, "tables": {},
                "figures": [], "env": {}, "claims": [], "metrics": {}})
    gone = CliRunner().invoke(app, ["report", "--out", str(tmp_path), "--markdown", "A08"])
    assert gone.exit_code == 2 and "no seed of A08's newest batch finished" in gone.output and "boom" in gone.output


def test_the_markdown_command_is_the_one_paper_command_without_the_out_folder():
    """A batch run with other papers (and an ``--out`` folder on someone's machine) is shown as the one-paper
    command that reruns the table, with the batch's command beside it minus its folder."""
    from icml26.harness.report import _command_line

    ran = ["/some/venv/bin/icml26 reproduce A03 B19 --budget standard --seeds 5 --jobs 2 --out /x/runs --no-report"]
    line = _command_line("A03", "standard", 5, ran)
    assert line == ("Command: `icml26 reproduce A03 --budget standard --seeds 5` (run as `icml26 reproduce A03 B19 "
                    "--budget standard --seeds 5 --jobs 2 --no-report`).")
    assert "/x/runs" not in _command_line("A03", "quick", 1, ["icml26 reproduce A03 --budget quick --out=/x/r"])


def test_the_markdown_command_names_the_first_seed_when_the_seeds_do_not_start_at_0():
    """Seeds 8..12 (a testbed checked on seeds its choice never saw) rerun with ``--first-seed 8``; seeds with a gap
    cannot be one CLI command, and the line says how to rerun them instead of naming a wrong range."""
    from icml26.harness.report import _command_line

    ran = ["icml26 reproduce B07 --budget standard --seeds 5 --first-seed 8"]
    assert _command_line("B07", "standard", [8, 9, 10, 11, 12], ran) == \
        "Command: `icml26 reproduce B07 --budget standard --seeds 5 --first-seed 8`."
    assert _command_line("B07", "standard", [0, 1, 2], []).startswith(
        "Command: `icml26 reproduce B07 --budget standard --seeds 3`")
    gappy = _command_line("B07", "quick", [0, 2], ran)
    assert "seeds=[0, 2]" in gappy and "--first-seed" in gappy and "0, 2" in gappy


def test_a_label_with_a_per_seed_number_is_marked_as_the_first_seeds():
    """A paper that writes a number into its baseline label ("Fast-dLLM (8.32)") would show seed 0's number next
    to the mean over seeds; the aggregate says whose text it is."""
    rows = [[claim(m, r, baseline=f"Fast-dLLM ({r:.2f})", note=f"n = {i}").to_dict()]
            for i, (m, r) in enumerate(((9.0, 8.32), (9.1, 7.9), (9.2, 7.96)))]
    agg = aggregate_claims(rows)[0]
    assert agg["baseline"].startswith("Fast-dLLM (8.32)") and "first seed's text" in agg["baseline"]
    assert "first seed's text" in agg["note"]
    same = aggregate_claims([[claim(m, 1.0, baseline="ERM").to_dict()] for m in (2.0, 2.1)])[0]
    assert same["baseline"] == "ERM"
