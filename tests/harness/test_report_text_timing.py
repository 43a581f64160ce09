"""The report's control cell of a timed claim says plainly whether the same-work ratio is stable."""

from icml26.harness.report import control_text


def test_timing_control_text_says_stable_or_unstable_without_contradiction():
    unstable = control_text({"control": None, "timing_control": 0.930, "timing_tolerance": 0.05})
    stable = control_text({"control": None, "timing_control": 1.02, "timing_tolerance": 0.05})
    assert "unstable, more than 0.05 from 1" in unstable and "within" not in unstable
    assert "stable, within 0.05 of 1" in stable and "unstable" not in stable
