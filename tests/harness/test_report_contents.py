"""The report: provenance, claims vs checks, falsifiers, links, honest intervals, folded tables, readable math."""

import re

import pytest

from icml26.harness.report import build_report, fmt_n, latex_to_text, why_section
from icml26.harness.store import ResultStore

ENV = {"icml26": "0.1.0", "python": "3.11.7", "torch": "2.13.0", "numpy": "2.2.6", "machine": "x86_64", "cpus": 2,
       "os": "Linux-6", "cpu_model": "Test CPU", "device": "cpu", "git": {"commit": "abcdef1234567890", "dirty": False},
       "command": "icml26 reproduce A03 --seeds 3", "versions": {"scipy": "1.13.1"}}


def claim(statement, measured, op, reference, kind="claim", falsifier="the opposite outcome"):
    from icml26.harness.outcome import compare

    h = compare(measured, op, reference) if measured is not None else None
    return {"statement": statement, "measured": measured, "op": op, "reference": reference, "baseline": "base",
            "metric": "m", "paper": None, "note": "", "kind": kind, "falsifier": falsifier if kind == "claim" else "",
            "verdict": "inconclusive" if h is None else ("holds" if h else "does not hold"), "paired": None,
            "paired_ci": None}


def record(paper, seed, claims, batch="b1", metrics=None):
    return {"run_id": f"{paper}-{seed}", "batch": batch, "paper": paper, "budget": "quick", "seed": seed,
            "status": "ok", "started": 1.7e9 + seed, "error": None, "wall_time": 2.0, "tables": {},
            "figures": [], "env": ENV, "claims": claims, "metrics": metrics or {"loss": 1.0 + seed}}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    store = ResultStore(out)
    many_metrics = {f"metric_{i}": float(i) for i in range(20)}
    for seed in range(3):
        store.save(record("A03", seed, [
            claim("error drops", 0.1 + 0.01 * seed, "<", 1.0, falsifier="error at or above the baseline's"),
            claim("faster than baseline", 2.0 + 0.1 * seed, "<", 1.0, falsifier="time at or above the baseline's"),
            claim("finite only sometimes", None if seed else 0.5, "<", 1.0, falsifier="value at or above 1"),
            claim("exact by construction", 0.0, "<=", 1e-12, kind="check"),
        ], metrics=many_metrics))
    store.save(record("A08", 0, [claim("one seed only", 0.5, "<", 1.0, falsifier="at or above 1")]))
    index = build_report(out, command="icml26 reproduce A03 A08 --budget quick")
    return out, index.read_text(), (index.parent / "A03.html").read_text(), (index.parent / "A08.html").read_text()


def _section(page, title):
    start = page.index(title)
    end = min([i for i in (page.find("<h2", start + 1), page.find("<details", start + 1)) if i > 0] or [len(page)])
    return page[start:end]


def test_provenance_block(report):
    out, index, a03, _ = report
    for text in ("Provenance", "abcdef123456", "torch 2.13.0", "numpy 2.2.6", "python 3.11.7", "icml26 0.1.0",
                 "icml26 reproduce A03 A08 --budget quick", "quick", "0–2", "Test CPU", "2 CPUs"):
        assert text in index, text
    assert "abcdef123456" in a03 and "scipy 1.13.1" in index
    md = (out / "report.md").read_text()
    assert "abcdef123456" in md and "it would not hold if" in md


def test_verdict_counts_separate_claims_and_checks(report):
    _, index, _, _ = report
    counts = index[index.index("<h2>Verdicts</h2>"):index.index("Papers")]
    claims_part, checks_part = counts.split("<b>Checks</b>")
    # A03: 1 holds, 1 does not hold, 1 inconclusive (NaN seeds); A08: 1 holds (one seed)
    assert "holds 2<" in claims_part and "does not hold 1<" in claims_part and "inconclusive 1<" in claims_part
    assert "holds 1<" in checks_part and "does not hold 0<" in checks_part


def test_claims_show_falsifiers_and_checks_are_apart(report):
    _, index, a03, _ = report
    claims = _section(a03, "<h2>Claims</h2>")
    assert "time at or above the baseline&#x27;s" in claims
    assert "exact by construction" not in claims
    checks = a03[a03.index("Checks (true by construction"):]
    assert "exact by construction" in checks
    assert re.search(r"<details><summary>Checks", a03)  # folded
    assert "exact by construction" in index[index.index("Checks (not counted)"):]


def test_intervals_are_honest(report):
    _, index, a03, a08 = report
    assert "(one seed)" in a08 and "(one seed)" in index and "n = 1" not in index
    for page in (index, a03, a08):
        ours = re.sub(r"<section class='readme'.*?</section>", "", page, flags=re.S)  # the README is quoted as is
        assert not re.search(r"\[([-\d.e]+), \1\]", ours), "degenerate [x, x] interval"
    assert "1/3 seeds finite" in a03 and "1/3 seeds finite" in index


def test_long_tables_fold(report):
    _, _, a03, _ = report
    assert re.search(r"<details><summary>Metrics \(mean \[95% CI\] over seeds\) \(20 rows\)", a03)


def test_links_to_arxiv_code_and_readme_section(report):
    _, index, a03, _ = report
    assert "https://arxiv.org/abs/2605.07939" in index and "src/icml26/sampling/srk_lmc/" in index
    m = re.search(r"href='A03\.html#(readme-[\w-]+)'>why: README", index)
    assert m, "a claim that does not hold links to the README section that explains it"
    assert f"id=\"{m.group(1)}\"" in a03  # the anchor exists on the paper page


def test_math_is_plain_text(report):
    _, _, a03, _ = report
    assert "𝒲₂" in a03 and "\\mathcal" not in a03 and "$" not in re.sub(r"<style>.*?</style>", "", a03, flags=re.S)


@pytest.mark.parametrize("tex, text", [
    (r"a $\chi^2$ test", "a χ² test"),
    (r"rate $O(d^{\frac32} h^{\frac32})$", "rate O(d^(3/2) h^(3/2))"),
    (r"$\mathcal{W}_2$-distance", "𝒲₂-distance"),
    (r"$b\in\mathbb{R}$ and $\ell_0$", "b∈ℝ and ℓ₀"),
    (r"$\Omega(\sqrt{T})$", "Ω(√T)"),
    (r"$98.7\%$ of Runge--Kutta", "98.7% of Runge–Kutta"),
    ("costs $5 and $10", "costs $5 and $10"),
    (r"Mixtral-8$\times$7B and a 1.19$\times$ speed-up", "Mixtral-8×7B and a 1.19× speed-up"),   # A09's abstract
    (r"with ($<$0.5\%) accuracy loss", "with (<0.5%) accuracy loss"),
    ("no math here", "no math here"),
])
def test_latex_to_text(tex, text):
    assert latex_to_text(tex) == text


def test_why_section_prefers_the_explanation():
    readme = "# X\n## Method\ntext\n## What reproduces\n| a | b |\n### Claim 2\nThe speed-up does not hold at toy scale.\n"
    # the title's introduction may say what does not hold (B09's does); the link goes to a section, not the title
    assert why_section("# B09 title\nthe bound does not hold everywhere\n## Results\nthe gap does not hold\n") == \
        ("Results", "readme-results")
    assert why_section(readme) == ("Claim 2", "readme-claim-2")
    assert why_section("# X\n## What reproduces\nall hold\n") == ("What reproduces", "readme-what-reproduces")
    assert why_section("# X\n## Method\n") is None


def test_fmt_n():
    assert fmt_n(1.0, [1.0, 1.0], 1) == "1 (one seed)"
    assert fmt_n(1.0, [0.5, 1.5], 3) == "1 [0.5, 1.5]"
    assert fmt_n(1.0, [1.0, 1.0], 3) == "1 (same on all 3 seeds)"
    assert fmt_n(float("nan"), None, 0) == "—"


def test_crashed_only_paper_gets_a_page(tmp_path):
    store = ResultStore(tmp_path)
    rec = record("A03", 0, [])
    rec.update(status="error", error="Traceback: boom", metrics={})
    store.save(rec)
    index = build_report(tmp_path)
    page = (index.parent / "A03.html").read_text()
    assert "Crashed seeds" in page and "boom" in page and "1 of 1 seeds crashed" in index.read_text()


def test_markdown_in_text_a_reader_sees():
    from icml26.harness.text import markdown_emphasis_html, markdown_to_text

    assert markdown_to_text("Reproduction (`reproduce.py`)") == "Reproduction (reproduce.py)"       # A02's link text
    assert markdown_to_text("the *dimension-dependent* gap, **bold**, [docs](x.md)") == \
        "the dimension-dependent gap, bold, docs"
    assert markdown_emphasis_html("the *dimension-dependent* gap") == "the <em>dimension-dependent</em> gap"  # B09
    assert markdown_emphasis_html("a * b * c and 2*3") == "a * b * c and 2*3"


def test_quick_and_standard_verdicts_are_counted_apart(tmp_path):
    store = ResultStore(tmp_path)
    store.save(record("A03", 0, [claim("error drops", 0.1, "<", 1.0, falsifier="error at or above")]))
    std = record("A08", 0, [claim("slower", 2.0, "<", 1.0, falsifier="time at or above")])
    std["budget"] = "standard"
    store.save(std)
    index = build_report(tmp_path).read_text()
    assert "counted per budget" in index
    assert re.search(r"<b>quick budget</b> \(1 paper\): claims <span class=.holds.>holds 1</span>", index)
    assert re.search(r"<b>standard budget</b> \(1 paper\): claims <span class=.holds.>holds 0</span> <span class=.does-not-hold.>does not hold 1</span>", index)
    md = (tmp_path / "report.md").read_text()
    assert "**quick budget** (1 papers)" in md and "**standard budget** (1 papers)" in md
