"""Static report from the result store: ``<out>/report/index.html`` (every paper, planned ones too), one page
per reproduced paper with its claims, checks, figures, tables and README, and ``<out>/report.md``. Opens from
disk, no server, no JavaScript.

What it shows, for a reader who was not there:

- **provenance**: when the runs ran, the git commit of the code, package versions, the command, budget, seeds
  and machine, as the workers recorded them (``env`` of each record);
- **verdict counts**, claims and checks separately (checks hold by construction and are never counted as
  evidence); each claim with the outcome that would have refuted it (its falsifier);
- for every paper: its arXiv page, its code folder, and the section of its README that explains a verdict other
  than "holds";
- intervals as they are: "one seed" instead of a degenerate ``[x, x]``, ``n_finite/n`` when non-finite seeds made
  a claim inconclusive; long tables folded in ``<details>``; LaTeX in abstracts shown as Unicode text.
"""

from __future__ import annotations

import html
import logging
import math
import re
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from .runner import summarize_records
from .stats import SEED_INVARIANT, verdict_counts, without_control
from .store import ResultStore, atomic_write_bytes
from .text import latex_to_text, markdown_emphasis_html, markdown_to_text

log = logging.getLogger(__name__)

FOLD_ROWS = 12  # tables longer than this are folded in <details>
VERDICTS = ("holds", "does not hold", "inconclusive")

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em;line-height:1.45}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.holds{background:#dff3df}.does-not-hold{background:#f8dcdc}
.inconclusive{background:#fff4cc}.planned{color:#888}.crashed{background:#f3c0c0}
.check-failed{background:#f3c0c0;font-weight:bold}
.prov th{width:11em}.prov td,.prov th{font-size:13px}.small{font-size:12px;color:#555}
.counts span{display:inline-block;padding:2px 8px;margin:2px;border-radius:3px}
details{margin:1em 0}summary{cursor:pointer;font-weight:600}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}pre{background:#f6f6f6;padding:1em;overflow-x:auto}
code{background:#f6f6f6;padding:0 3px}.readme{border-top:2px solid #ddd;margin-top:2em}
"""
HEAD = "<!doctype html><html lang='en'><head><meta charset='utf-8'><link rel='icon' href='data:,'><title>{title}</title><style>{css}</style></head><body>"


# text: numbers, intervals, LaTeX

def fmt(x: Any, ci: Any = None) -> str:
    """A number with 4 significant digits and, when it is not degenerate, its interval ``[lo, hi]``."""
    if x is None:
        return "—"
    if isinstance(x, (list, tuple)) and len(x) == 2:
        return f"[{fmt(x[0])}, {fmt(x[1])}]"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float)):
        if isinstance(x, float) and not math.isfinite(x):
            return "—"
        s = f"{x:.4g}"
        if _spread(ci):
            s += f" {_iv(ci[0], ci[1])}"
        return s
    return str(x)


def _spread(ci: Any) -> bool:
    """Whether ``ci`` is a finite interval wider than a point (ends that differ only past 3 significant digits
    count: they are printed with the digits that tell them apart, never as "the same on every seed")."""
    if not (ci and len(ci) == 2 and all(_finite(c) for c in ci)):
        return False
    lo, hi = float(ci[0]), float(ci[1])  # ends apart only by float rounding (a t-interval of equal values) are a point
    return abs(hi - lo) > 1e-9 * max(abs(lo), abs(hi))  # relative only: tiny intervals (4e-13..8e-13) are kept


def _iv(lo: float, hi: float) -> str:
    """``[lo, hi]`` at 3 significant digits, or at as many more as it takes for the two ends to differ."""
    for p in range(3, 17):
        a, b = f"{lo:.{p}g}", f"{hi:.{p}g}"
        if a != b:
            return f"[{a}, {b}]"
    return f"[{lo!r}, {hi!r}]"


def fmt_n(x: Any, ci: Any, n: int | None) -> str:
    """A mean with its 95% interval, or ``x (one seed)`` where there is one value and so no interval."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if n is None or n <= 1:
        return f"{fmt(x)} (one seed)"
    if not _spread(ci):
        return f"{fmt(x)} (same on all {n} seeds)" if ci and all(_finite(c) for c in ci) else f"{fmt(x)} (n = {n})"
    return f"{fmt(x)} {_iv(ci[0], ci[1])}"


def claim_reference(c: dict[str, Any]) -> str:
    """``op reference`` of an aggregated claim (the reference's own interval only when it is not degenerate)."""
    return f"{c['op']} {fmt(c['reference'], c.get('reference_ci'))}"


def baselines_text(c: dict[str, Any]) -> str:
    """Which baseline was the strongest, and the others' values; "" for a claim with one reference."""
    name = c.get("strongest_baseline")
    if not name:
        return ""
    others = {k: v for k, v in (c.get("baselines") or {}).items() if k != name}
    s = f"strongest of {len(others) + 1} baselines: {name}"
    if others:
        s += "; others: " + ", ".join(f"{k} {fmt(v)}" for k, v in others.items())
    return s


def control_text(c: dict[str, Any]) -> str:
    """The control arm's value under the claim's own test, or why no control exists; "—" when neither."""
    if c.get("control") is None:
        if _finite(c.get("timing_control")):  # a timed claim: its control is the baseline timed against itself
            tc, tol = float(c["timing_control"]), float(c.get("timing_tolerance") or 0.05)
            ok = abs(tc - 1.0) <= tol
            return (f"same-work ratio {tc:.3f} (the baseline timed against itself): "
                    f"{'stable, within' if ok else 'unstable, more than'} {tol:g} {'of' if ok else 'from'} 1")
        return c.get("control_arm") or "—"
    s = f"{fmt(c['control'], c.get('control_ci'))} ({c.get('control_arm') or 'control'})"
    return s + (f": {c['control_verdict']}" if c.get("control_verdict") else "")


def why_undecided(c: dict[str, Any]) -> str:
    """For an inconclusive claim: the reason, the interval of (measured − reference) and the seeds (or instances)
    the observed effect would need; "" otherwise."""
    if c.get("verdict") != "inconclusive":
        return "seed-invariant: the same number on every seed, one piece of evidence" if c.get("seed_invariant") else ""
    parts = [c["reason"]] if c.get("reason") else []
    p = c.get("power")
    if p and p.get("interval") and all(_finite(x) for x in p["interval"]):
        lo, hi = p["interval"]
        iv = f"Δ {_iv(lo, hi)}" if _spread([lo, hi]) else f"Δ {lo:.3g} on every one"
        parts.append(f"{iv} over {p['n']} {p['unit']}; {p['text']}")
    return "; ".join(parts)


# links

def arxiv_links(reference: str) -> list[tuple[str, str]]:
    """``(label, url)`` for every ``arXiv NNNN.NNNNN`` and ``github owner/name`` in a catalogue reference."""
    out = [(f"arXiv {m}", f"https://arxiv.org/abs/{m}") for m in re.findall(r"arXiv[:\s]+(\d{4}\.\d{4,5})", reference)]
    out += [(f"official code ({m})", f"https://github.com/{m}")
            for m in re.findall(r"github[:\s]+([\w.-]+/[\w.-]+)", reference)]
    return out


def _repo_url() -> str | None:
    """The project's repository URL from the package metadata (``[project.urls]``), if it names one."""
    try:
        from importlib import metadata

        for entry in metadata.metadata("icml26").get_all("Project-URL") or []:
            label, _, url = entry.partition(",")
            if label.strip().lower() in ("repository", "source", "code", "homepage") and url.strip().startswith("http"):
                return url.strip().rstrip("/")
    except Exception:  # noqa: BLE001
        pass
    return None


def _slug(text: str) -> str:
    s = re.sub(r"[^\w\s-]", "", text.lower()).strip()
    return "readme-" + re.sub(r"[\s_]+", "-", s)[:60]


_NOT_HOLD = re.compile(r"(does not|doesn['’]t|do not|did not|not) (hold|reproduce)|fails? to (hold|reproduce)", re.I)


def readme_sections(readme: str) -> list[tuple[int, str, str, str]]:
    """``(level, heading, anchor, body)`` for each Markdown heading of a README (code fences skipped)."""
    out: list[tuple[int, str, str, str]] = []
    body: list[str] = []
    fence = False
    for line in readme.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            if out:
                out[-1] = (*out[-1][:3], "\n".join(body))
            out.append((len(m.group(1)), m.group(2), "", ""))
            body = []
        else:
            body.append(line)
    if out:
        out[-1] = (*out[-1][:3], "\n".join(body))
    seen: dict[str, int] = {}
    result = []
    for level, head, _, text in out:
        a = _slug(latex_to_text(head))
        seen[a] = seen.get(a, 0) + 1
        result.append((level, head, a if seen[a] == 1 else f"{a}-{seen[a] - 1}", text))
    return result


def why_section(readme: str) -> tuple[str, str] | None:
    """``(heading, anchor)`` of the README section that explains a verdict other than "holds": the first section
    that says something does not hold, else the "what reproduces" section."""
    secs = readme_sections(readme)
    for level, head, anchor, body in sorted(secs, key=lambda s: s[0] == 1):  # the title's intro comes last
        if _NOT_HOLD.search(body) or _NOT_HOLD.search(head):
            return head, anchor
    for _, head, anchor, _ in secs:
        if "reproduc" in head.lower():
            return head, anchor
    return None


def render_readme(readme: str) -> str:
    """A paper README as HTML (headings with ``readme-...`` anchors, LaTeX as text, images as their alt text);
    a ``<pre>`` block when no Markdown renderer is installed."""
    e = html.escape
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # pragma: no cover - markdown-it-py comes with rich
        return f"<pre>{e(latex_to_text(readme))}</pre>"
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(readme)
    anchors = iter([a for _, _, a, _ in readme_sections(readme)])
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            t.attrSet("id", next(anchors, _slug(tokens[i + 1].content)))
        if t.type == "inline" and t.children:
            kids = []
            for c in t.children:
                if c.type == "text":
                    c.content = latex_to_text(c.content)
                if c.type == "image":  # README images are relative to the code folder: not reachable from here
                    c.type, c.tag, c.content, c.children = "text", "", f"[figure: {c.content}]", None
                kids.append(c)
            t.children = kids
    return md.renderer.render(tokens, md.options, {})


# provenance

def provenance(records: Sequence[dict[str, Any]], command: str | None = None) -> list[tuple[str, str]]:
    """``(field, value)`` rows describing where the results came from, from what the workers recorded."""
    envs = [r.get("env") or {} for r in records]

    def distinct(values: Iterable[Any]) -> str:
        vals = list(dict.fromkeys(str(v) for v in values if v not in (None, "")))
        return "; ".join(vals) if vals else "not recorded"

    starts = [r["started"] for r in records if _finite(r.get("started"))]
    ends = [r["started"] + r["wall_time"] for r in records if _finite(r.get("started")) and _finite(r.get("wall_time"))]
    when = "not recorded"
    if starts:
        t0 = time.strftime("%Y-%m-%d %H:%M", time.gmtime(min(starts)))
        t1 = time.strftime("%Y-%m-%d %H:%M", time.gmtime(max(ends or starts)))
        when = f"{t0} – {t1} UTC" if t1 != t0 else f"{t0} UTC"
    gits = [g for g in (env.get("git") for env in envs) if isinstance(g, dict) and g.get("commit")]
    if gits:
        code = distinct(f"{g['commit'][:12]}{' with uncommitted changes' if g.get('dirty') else ''}" for g in gits)
    else:
        from .provenance import git_state

        g = git_state()
        code = (f"{g['commit'][:12]}{' with uncommitted changes' if g.get('dirty') else ''} (at report time; the runs "
                "did not record it)") if g else "not recorded (not a git checkout)"
    versions = []
    for pkg in ("icml26", "python", "torch", "numpy"):
        vals = distinct(env.get(pkg) or (env.get("versions") or {}).get(pkg) for env in envs)
        versions.append(f"{pkg} {vals}")
    others = sorted({k for env in envs for k in (env.get("versions") or {}) if k not in ("icml26", "torch", "numpy")})
    for pkg in others:
        versions.append(f"{pkg} {distinct((env.get('versions') or {}).get(pkg) for env in envs)}")
    commands = [command] if command else [env.get("command") for env in envs]
    machine = distinct(", ".join(str(x) for x in (env.get("os"), env.get("machine"),
                                                   f"{env['cpus']} CPUs" if env.get("cpus") else None,
                                                   env.get("cpu_model"), env.get("device")) if x)
                       for env in envs)
    budgets = distinct(r["budget"] for r in records)
    seeds = sorted({r["seed"] for r in records})
    return [
        ("report generated", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
        ("runs", f"{when}; {len(records)} run records, {sum(r['status'] != 'ok' for r in records)} crashed"),
        ("code (git commit)", code),
        ("packages", " · ".join(versions)),
        ("command", distinct(commands)),
        ("budget", budgets),
        ("seeds", _ranges(seeds) if seeds else "none"),
        ("machine", machine),
    ]


def _paired_text(ci: Any) -> str:
    """`` (paired [lo, hi])``: the interval of the quantity a seed's claim paired (per-instance differences
    measured - reference, or per-repeat time ratios for a timed claim; the measured value itself may be another
    statistic, e.g. a ratio of medians), which decided that seed."""
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_finite(x) for x in ci):
        return f" (paired [{fmt(ci[0])}, {fmt(ci[1])}])"
    return ""


def _without_out(command: str) -> str:
    """The recorded command line without its ``--out`` folder (a machine's own path has no place in a README)."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return command
    kept, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w == "--out":
            skip = True
        elif not w.startswith("--out="):
            kept.append(w)
    if kept and kept[0].endswith(("/icml26", "\\icml26")):
        kept[0] = "icml26"
    return shlex.join(kept)


def _command_line(paper: str, budget: str, seeds: int | Sequence[int], commands: Sequence[str]) -> str:
    """``Command: icml26 reproduce ID --budget B --seeds N [--first-seed K]``: the one-paper command that reruns
    this table, and the recorded command when the batch ran as part of a larger one (its ``--out`` folder left
    out). ``seeds``: the count (seeds 0..N-1) or the seeds themselves."""
    xs = list(range(seeds)) if isinstance(seeds, int) else sorted(int(x) for x in seeds)
    own = f"icml26 reproduce {paper} --budget {budget} --seeds {len(xs)}"
    if xs and xs[0]:
        own += f" --first-seed {xs[0]}"
    if xs and xs != list(range(xs[0], xs[0] + len(xs))):  # seeds with gaps (given to `run_reproductions`)
        return (f"Command: `run_reproductions([{paper!r}], {budget!r}, seeds={xs})` from Python (seeds "
                f"{_ranges(xs)} are not one range that `--seeds N --first-seed K` gives).")
    ran = [c for c in dict.fromkeys(_without_out(c) for c in commands) if c != own]
    if not commands:
        return f"Command: `{own}` (the recorded command line is missing)."
    return f"Command: `{own}`" + (f" (run as {'; '.join(f'`{c}`' for c in ran)})." if ran else ".")


def _ranges(xs: Sequence[int]) -> str:
    out, start = [], None
    for i, x in enumerate(xs):
        if start is None:
            start = x
        if i + 1 == len(xs) or xs[i + 1] != x + 1:
            out.append(str(start) if start == x else f"{start}–{x}")
            start = None
    return ", ".join(out)


# main entry point

def build_report(out: str | Path = "runs", *, command: str | None = None) -> Path:
    """Render the report from the newest batch of every paper in ``out``; returns the index path.

    ``command``: the command line to show in the provenance block (default: the one the runs recorded).
    Damaged records are skipped with a warning (see :class:`ResultStore`), never a traceback.
    """
    from ..catalog import PAPERS

    store = ResultStore(Path(out))
    latest = store.latest_batches()
    known = {p.id for p in PAPERS}
    for pid in sorted(set(latest) - known):
        log.warning("records for %r are not in the catalogue; left out of the report", pid)
    summaries = {pid: s for pid, recs in latest.items() if pid in known
                 for s in [summarize_records(recs).get(pid)] if s is not None}
    all_records = [r for pid, recs in latest.items() if pid in summaries for r in recs]
    rdir = store.root / "report"
    if rdir.exists() and not rdir.is_dir():
        raise ValueError(f"{str(rdir)!r} is a file, and the report needs that name for its folder; move the file "
                         "away or give another --out")
    repo = _repo_url()
    prov = provenance(all_records, command)
    all_claims = [c for s in summaries.values() for c in s["claims"]]
    counts = verdict_counts(all_claims)
    readmes = {p.id: (p.readme if p.id in summaries else "") for p in PAPERS}

    e = html.escape
    paper_rows, claim_rows, check_rows = [], [], []
    md_papers, md_claims, md_checks = [], [], []
    for p in PAPERS:
        links = arxiv_links(p.reference)
        code_link = (f"<a href='{e(repo)}/tree/main/{e(p.code_path)}'><code>{e(p.code_path)}</code></a>" if repo
                     else f"<code>{e(p.code_path)}</code>")
        link_html = " · ".join([f"<a href='{e(u)}'>{e(t)}</a>" for t, u in links] + [code_link])
        link_md = " · ".join([f"[{t}]({u})" for t, u in links] + [f"`{p.code_path}`"])
        s = summaries.get(p.id)
        if s is None:
            cls = "" if p.implemented else "planned"
            paper_rows.append(f"<tr class='{cls}'><td>{p.id}</td><td>{e(p.method)}</td><td>{link_html}</td>"
                              f"<td colspan='5'>{e(latex_to_text(p.claim))}</td>"
                              f"<td>{p.status}{'' if not p.implemented else ' (not run)'}</td></tr>")
            md_papers.append(f"| {p.id} | {_md(p.method)} | {link_md} | | | | {p.status} |")
            continue
        why = why_section(readmes[p.id]) if readmes[p.id] else None
        c_counts = verdict_counts(s["claims"])
        claims = [c for c in s["claims"] if c.get("kind", "claim") == "claim"]
        checks = [c for c in s["claims"] if c.get("kind") == "check"]
        status = (f"<span class='crashed'>{len(s['crashed'])} of {len(s['crashed']) + len(s['seeds'])} seeds crashed</span>"
                  if s["crashed"] else "ran")
        paper_rows.append(
            f"<tr><td><a href='{p.id}.html'>{p.id}</a></td><td>{e(p.method)}</td><td>{link_html}</td>"
            f"<td>{_count_html(c_counts['claims'])}</td><td>{_count_html(c_counts[SEED_INVARIANT])}</td>"
            f"<td>{_count_html(c_counts['checks'], checks=True)}</td>"
            f"<td>{e(_ranges(s['seeds']) or '—')}</td><td>{e(s['budget'])}</td><td>{status}</td></tr>")
        md_papers.append(f"| {p.id} | {_md(p.method)} | {link_md} | {_count_text(c_counts['claims'])} | "
                         f"{_count_text(c_counts[SEED_INVARIANT])} | {_count_text(c_counts['checks'])} | "
                         f"{s['budget']}, seeds {_ranges(s['seeds']) or '—'} |")
        for c in claims:
            claim_rows.append(_claim_row(p.id, c, why, index=True))
            md_claims.append(f"| {p.id} | {_md(latex_to_text(c['statement']))} | {_md(latex_to_text(c.get('falsifier') or ''))} | "
                             f"{_md(c.get('paper') or '')} | {fmt_n(c['measured'], c.get('measured_ci'), c.get('n_finite', len(s['seeds'])))} | "
                             f"{_md(claim_reference(c))} | {_md(control_text(c))} | {_md(_verdict_text(c))} |")
        for c in checks:
            check_rows.append(_check_row(p.id, c, index=True))
            md_checks.append(f"| {p.id} | {_md(latex_to_text(c['statement']))} | {fmt(c['measured'])} | "
                             f"{_md(claim_reference(c))} | {_verdict_text(c)} |")
        _paper_page(rdir, p, s, why, link_html, latest[p.id])

    n_impl = sum(p.implemented for p in PAPERS)
    prov_html = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in prov)
    n_papers = f"{len(summaries)} paper{'' if len(summaries) == 1 else 's'}"
    n_nc = without_control(all_claims)
    by_budget: dict[str, list[str]] = {}
    for pid, s in summaries.items():
        by_budget.setdefault(s["budget"], []).append(pid)
    budget_lines = []  # quick and standard results are never added into one total
    if len(by_budget) > 1:
        for b in sorted(by_budget, key=("quick", "standard", "full").index):
            cs = verdict_counts([c for pid in by_budget[b] for c in summaries[pid]["claims"]])
            budget_lines.append((b, len(by_budget[b]), cs))
    counts_html = (f"<p class='counts'><b>Claims decided over seeds</b> ({sum(counts['claims'].values())}, in {n_papers}): "
                   f"{_count_html(counts['claims'], zero=True)}<br><b>Seed-invariant claims</b> (the same number on every "
                   f"seed: one piece of evidence each; {sum(counts[SEED_INVARIANT].values())}): "
                   f"{_count_html(counts[SEED_INVARIANT], zero=True)}<br><b>Checks</b> (true by construction or by a theorem; "
                   f"reported, never counted as evidence): {_count_html(counts['checks'], zero=True, checks=True)}<br>"
                   f"<b>Claims without a control</b>: {n_nc} (fine against a same-run baseline; a fixed bar needs one)</p>")
    if budget_lines:
        counts_html = ("<p class='counts'>These papers ran at different budgets, so their verdicts are counted per "
                       "budget (a quick-budget verdict is not evidence at the standard size):<br>"
                       + "<br>".join(f"<b>{b} budget</b> ({n} paper{'s' if n != 1 else ''}): claims "
                                     f"{_count_html(cs['claims'], zero=True)}; seed-invariant "
                                     f"{_count_html(cs[SEED_INVARIANT], zero=True)}; checks "
                                     f"{_count_html(cs['checks'], zero=True, checks=True)}"
                                     for b, n, cs in budget_lines)
                       + f"<br><b>Claims without a control</b>: {n_nc}</p>")
    claims_head = ("<tr><th>id</th><th>claim</th><th>it would not hold if</th><th>paper's figure</th><th>measured (95% CI)</th>"
                   "<th>reference (same run)</th><th>control (same test)</th><th>measured − reference (95% CI)</th>"
                   "<th>verdict</th></tr>")
    checks_head = "<tr><th>id</th><th>check</th><th>measured</th><th>reference</th><th>verdict</th></tr>"
    index = (HEAD.format(title="icml26 report", css=CSS)
             + "<h1>icml26 — reproductions of ICML 2026 papers</h1>"
             f"<p>{n_impl} of {len(PAPERS)} papers implemented, {len(summaries)} in this report. Verdicts are computed "
             "from measurements against baselines measured in the same run. Over several seeds a claim holds when it "
             "holds on the means, every seed is finite and the 95% interval of (measured − reference) excludes 0; "
             "otherwise it is inconclusive. A claim that does not hold links to the README section that explains why.</p>"
             f"<h2>Provenance</h2><table class='prov'>{prov_html}</table><h2>Verdicts</h2>{counts_html}"
             + _table("Papers", "<tr><th>id</th><th>method</th><th>paper and code</th><th>claims</th>"
                      "<th>seed-invariant</th><th>checks</th>"
                      "<th>seeds</th><th>budget</th><th>status</th></tr>", paper_rows, open_=True)
             + _table("Claims", claims_head, claim_rows, open_=True)
             + _table("Checks (not counted)", checks_head, check_rows, open_=False)
             + "</body></html>")
    atomic_write_bytes(rdir / "index.html", index.encode())

    md = ["# icml26 report", "", "## Provenance", ""] + [f"- **{k}:** {v}" for k, v in prov]
    if budget_lines:
        md += ["", "## Verdicts (per budget: the papers ran at different budgets)", ""]
        md += [f"- **{b} budget** ({n} papers): claims {_count_text(cs['claims'], zero=True)}; seed-invariant "
               f"{_count_text(cs[SEED_INVARIANT], zero=True)}; checks {_count_text(cs['checks'], zero=True)}"
               for b, n, cs in budget_lines]
        md += [f"- **Claims without a control:** {n_nc}", ""]
    else:
        md += ["", "## Verdicts", "", f"- **Claims decided over seeds:** {_count_text(counts['claims'], zero=True)}",
               f"- **Seed-invariant claims** (one piece of evidence each): "
               f"{_count_text(counts[SEED_INVARIANT], zero=True)}",
               f"- **Claims without a control:** {n_nc}",
               f"- **Checks** (true by construction; not counted): {_count_text(counts['checks'], zero=True)}", ""]
    md += [
           "## Papers", "", "| id | method | paper and code | claims | seed-invariant | checks | run |",
           "|---|---|---|---|---|---|---|",
           *md_papers, ""]
    md += _md_fold("Claims", "| id | claim | it would not hold if | paper | measured (95% CI) | reference | control | verdict |",
                   md_claims, fold=False)
    md += _md_fold("Checks (not counted)", "| id | check | measured | reference | verdict |", md_checks)
    atomic_write_bytes(store.root / "report.md", "\n".join(md).encode())
    return rdir / "index.html"


def counts_table(outs: Sequence[str | Path]) -> str:
    """Per paper (the newest batch in any of ``outs``): claims decided over seeds (holds / does not hold /
    inconclusive), seed-invariant claims, checks, claims without a control, seeds and budget; then the totals.
    This is the table the README's totals are copied from."""
    latest = _latest(outs)
    head = ("| id | claims: holds / not / inconclusive | seed-invariant: holds / not / inconclusive | checks: holds / "
            "not / inconclusive | claims without a control | budget, seeds |")
    rows = [head, "|" + "---|" * 6]
    tot = {k: [0, 0, 0] for k in ("claims", SEED_INVARIANT, "checks")}
    tot_nc = 0
    for pid in sorted(latest):
        s = summarize_records(latest[pid]).get(pid)
        if s is None:
            continue
        c = verdict_counts(s["claims"])
        cells = []
        for k in ("claims", SEED_INVARIANT, "checks"):
            v = [c[k].get(x, 0) for x in VERDICTS]
            tot[k] = [a + b for a, b in zip(tot[k], v)]
            cells.append(" / ".join(map(str, v)))
        nc = without_control(s["claims"])
        tot_nc += nc
        rows.append(f"| {pid} | {' | '.join(cells)} | {nc} | {s['budget']}, {len(s['seeds'])} seeds |")
    rows.append(f"| total | {' | '.join(' / '.join(map(str, tot[k])) for k in ('claims', SEED_INVARIANT, 'checks'))}"
                f" | {tot_nc} | |")
    return "\n".join(rows)


def _latest(outs: Sequence[str | Path]) -> dict[str, list[dict[str, Any]]]:
    """Per paper, the records of its newest batch found in any of ``outs``."""
    latest: dict[str, list[dict[str, Any]]] = {}
    for out in outs:
        for pid, recs in ResultStore(Path(out)).latest_batches().items():
            if pid not in latest or max(r.get("started") or 0 for r in recs) > max(r.get("started") or 0
                                                                                 for r in latest[pid]):
                latest[pid] = recs
    return latest


def paper_markdown(outs: Sequence[str | Path], paper: str) -> str:
    """The README table of one paper's newest batch in ``outs``: where it came from (command, budget, seeds, wall
    time per seed, code commit), then its claims (falsifier, mean and 95% interval over seeds, reference and the
    strongest baseline, control, per-seed values, verdict and, when undecided, why and the seeds it would need) and
    its checks. Every number is copied from the run records, so a README table is regenerated, never typed."""
    latest = _latest(outs)
    if paper not in latest:
        known = ", ".join(sorted(latest)) or "none"
        raise ValueError(f"no run records for {paper!r} in {', '.join(map(str, outs))} (papers with records: {known})")
    recs = latest[paper]
    s = summarize_records(recs).get(paper)
    if s is None:
        raise ValueError(f"the newest batch of {paper} has no readable records")
    if not s["seeds"]:
        first = str(s["errors"][0] if s["errors"] else "").strip().splitlines()
        raise ValueError(f"no seed of {paper}'s newest batch finished (crashed on seeds {_ranges(s['crashed'])}): "
                         f"{first[-1] if first else 'no error recorded'}")
    envs = [r.get("env") or {} for r in recs]
    commands = list(dict.fromkeys(str(e.get("command")) for e in envs if e.get("command")))
    gits = list(dict.fromkeys(f"{g['commit'][:12]}{' with uncommitted changes' if g.get('dirty') else ''}"
                              for g in (e.get("git") for e in envs) if isinstance(g, dict) and g.get("commit")))
    def cost(r: dict[str, Any]) -> str:
        wall = f"{r['wall_time']:.0f} s" if _finite(r.get("wall_time")) else "wall not recorded"
        cpu = f" (CPU {r['cpu_time']:.0f} s)" if _finite(r.get("cpu_time")) else ""
        return f"s{r['seed']} {wall}{cpu}" + (", crashed" if r["status"] != "ok" else "")

    costs = [cost(r) for r in sorted(recs, key=lambda r: r["seed"])]
    starts = [r["started"] for r in recs if _finite(r.get("started"))]
    when = time.strftime("%Y-%m-%d", time.gmtime(min(starts))) if starts else "date not recorded"
    seeds = sorted(r["seed"] for r in recs)
    lines = [f"Budget {s['budget']}, seeds {_ranges(seeds)} ({len(s['seeds'])} ok"
             + (f", crashed on {_ranges(sorted(s['crashed']))}" if s["crashed"] else "") + f"), run {when}; "
             f"time per seed: {'; '.join(costs)}; code {', '.join(gits) or 'not recorded'}.",
             "", _command_line(paper, s["budget"], seeds, commands), ""]
    tag = [f"s{x}" for x in s["seeds"]]  # the aggregated per-seed lists follow the finished seeds in this order
    claims = [c for c in s["claims"] if c.get("kind", "claim") == "claim"]
    checks = [c for c in s["claims"] if c.get("kind") == "check"]
    if claims:
        lines += ["**Claims (refutable; counted)**", "",
                  "| claim | falsifier | measured (mean [95% CI] over seeds) | reference | control | per seed: measured "
                  "(verdict) | verdict |", "|---|---|---|---|---|---|---|"]
        for c in claims:
            n = c.get("n_finite", c.get("n_seeds"))
            ref = claim_reference(c) + (f" ({c['baseline']})" if c.get("baseline") else "")
            if baselines_text(c):
                ref += f"; {baselines_text(c)}"
            pcis, refs = c.get("seed_paired_ci") or [], c.get("seed_reference") or []
            moves = len({fmt(r) for r in refs}) > 1  # a reference that differs by seed is shown per seed

            def seed_text(i: int, t: str, m: Any, v: str) -> str:
                ref = f" vs {fmt(refs[i])}" if moves and i < len(refs) else ""
                return f"{t}: {fmt(m)}{ref}{_paired_text(pcis[i] if i < len(pcis) else None)} ({v})"

            per_seed = "; ".join(seed_text(i, t, m, v) for i, (t, m, v) in enumerate(
                zip(tag, c.get("seed_measured") or [], c.get("seed_verdicts") or [])))
            cells = [latex_to_text(c["statement"]), latex_to_text(c.get("falsifier") or "(not stated)"),
                     fmt_n(c["measured"], c.get("measured_ci"), n), ref, control_text(c), per_seed, _verdict_text(c)]
            lines.append("| " + " | ".join(_md(x) for x in cells) + " |")
        lines.append("")
    if checks:
        lines += ["**Checks (true by construction, exactness or a theorem; not counted)**", "",
                  "| check | measured | reference | verdict |", "|---|---|---|---|"]
        for c in checks:
            n = c.get("n_finite", c.get("n_seeds"))
            cells = [latex_to_text(c["statement"]), fmt_n(c["measured"], c.get("measured_ci"), n),
                     claim_reference(c), _verdict_text(c)]
            lines.append("| " + " | ".join(_md(x) for x in cells) + " |")
        lines.append("")
    counts = verdict_counts(s["claims"])
    lines.append(f"Counts: claims decided over seeds {_count_text(counts['claims'], zero=True)}; seed-invariant "
                 f"{_count_text(counts[SEED_INVARIANT], zero=True)}; checks {_count_text(counts['checks'], zero=True)}.")
    return "\n".join(lines)


# pieces

def _figure_file(root: Path, rel: Any) -> Path | None:
    """The figure file a record names, resolved inside the output folder ``root``; None when the path is not a
    relative path that stays inside it (``../../etc/passwd``, an absolute path, not a string)."""
    if not isinstance(rel, str) or not rel or Path(rel).is_absolute():
        return None
    base = root.resolve()
    target = (base / rel).resolve()
    return target if target.is_relative_to(base) else None


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _count_text(counts: dict[str, int], zero: bool = False) -> str:
    keys = list(VERDICTS) + [k for k in counts if k not in VERDICTS]
    parts = [f"{k} {counts.get(k, 0)}" for k in keys if zero or counts.get(k)]
    return ", ".join(parts) or "none"


def _count_html(counts: dict[str, int], zero: bool = False, checks: bool = False) -> str:
    keys = list(VERDICTS) + [k for k in counts if k not in VERDICTS]
    parts = []
    for k in keys:
        n = counts.get(k, 0)
        if n or zero:
            cls = "check-failed" if checks and k == "does not hold" and n else k.replace(" ", "-")
            parts.append(f"<span class='{cls}'>{html.escape(k)} {n}</span>")
    return " ".join(parts) or "—"


def _verdict_text(c: dict[str, Any]) -> str:
    v = c["verdict"]
    n, nf = c.get("n_seeds"), c.get("n_finite")
    if n is not None and nf is not None and nf < n:
        v += f" ({nf}/{n} seeds finite)"
    why = why_undecided(c) if c.get("kind", "claim") == "claim" else ""
    return f"{v} — {why}" if why else v


def _verdict_cell(c: dict[str, Any], why: tuple[str, str] | None, page: str) -> str:
    v = c["verdict"]
    cls = v.replace(" ", "-")
    if c.get("kind") == "check" and v == "does not hold":
        cls = "check-failed"
    link = ""
    if why and v != "holds" and c.get("kind", "claim") == "claim":
        link = f"<br><a class='small' href='{page}#{why[1]}'>why: README § {html.escape(markdown_to_text(latex_to_text(why[0])))}</a>"
    n, nf = c.get("n_seeds"), c.get("n_finite")
    text = v + (f" ({nf}/{n} seeds finite)" if n is not None and nf is not None and nf < n else "")
    undecided = why_undecided(c) if c.get("kind", "claim") == "claim" else ""
    detail = f"<br><span class='small why-undecided'>{html.escape(undecided)}</span>" if undecided else ""
    return f"<td class='{cls}'>{html.escape(text)}{detail}{link}</td>"


def _diff(c: dict[str, Any]) -> str:
    d = c.get("difference_ci")
    if d and len(d) == 2 and all(_finite(x) for x in d):
        return _iv(d[0], d[1]) if _spread(d) else f"{d[0]:.3g} (same on all seeds)"
    pc = c.get("paired_ci")
    if c.get("n_seeds", 1) <= 1 and pc and len(pc) == 2 and all(_finite(x) for x in pc):
        return f"{_iv(pc[0], pc[1])} over instances"
    return "one seed" if c.get("n_seeds", 1) <= 1 and c["op"] != "in" else "—"


def _claim_row(pid: str, c: dict[str, Any], why: tuple[str, str] | None, index: bool) -> str:
    e = html.escape
    n = c.get("n_finite", c.get("n_seeds"))
    ref = e(claim_reference(c)) + (f"<br><span class='small'>{e(c['baseline'])}</span>" if c.get("baseline") else "")
    if baselines_text(c):
        ref += f"<br><span class='small baselines'>{e(baselines_text(c))}</span>"
    first = f"<td><a href='{pid}.html'>{pid}</a></td>" if index else ""
    cells = (f"{first}<td>{e(latex_to_text(c['statement']))}</td><td>{e(latex_to_text(c.get('falsifier') or '(not stated)'))}</td>"
             f"<td>{e(c.get('paper') or '—')}</td><td>{e(fmt_n(c['measured'], c.get('measured_ci'), n))}</td>"
             f"<td>{ref}</td><td class='control'>{e(control_text(c))}</td><td>{e(_diff(c))}</td>"
             + _verdict_cell(c, why, f"{pid}.html" if index else ""))
    if not index:
        per_seed = ", ".join(f"{fmt(m)} ({v})" for m, v in zip(c.get("seed_measured") or [], c.get("seed_verdicts") or []))
        cells += f"<td>{e(per_seed)}</td><td>{e(latex_to_text(c.get('note') or ''))}</td>"
    return f"<tr>{cells}</tr>"


def _check_row(pid: str, c: dict[str, Any], index: bool) -> str:
    e = html.escape
    first = f"<td><a href='{pid}.html'>{pid}</a></td>" if index else ""
    extra = "" if index else f"<td>{e(latex_to_text(c.get('note') or ''))}</td>"
    return (f"<tr>{first}<td>{e(latex_to_text(c['statement']))}</td><td>{e(fmt(c['measured']))}</td>"
            f"<td>{e(claim_reference(c))}</td>{_verdict_cell(c, None, '')}{extra}</tr>")


def _table(title: str, head: str, rows: Sequence[str], open_: bool | None = None, level: int = 2) -> str:
    """A titled table; folded in ``<details>`` (open or closed) when it is long."""
    if not rows:
        return f"<h{level}>{html.escape(title)}</h{level}><p class='small'>none</p>"
    table = f"<table>{head}{''.join(rows)}</table>"
    if open_ is None:
        open_ = len(rows) <= FOLD_ROWS
    if len(rows) <= FOLD_ROWS and open_:
        return f"<h{level}>{html.escape(title)}</h{level}>{table}"
    return (f"<details{' open' if open_ else ''}><summary>{html.escape(title)} ({len(rows)} rows)</summary>"
            f"{table}</details>")


def _md_fold(title: str, head: str, rows: Sequence[str], fold: bool = True) -> list[str]:
    if not rows:
        return [f"## {title}", "", "none", ""]
    sep = "|" + "---|" * (head.count("|") - 1)
    table = [head, sep, *rows]
    if len(rows) <= FOLD_ROWS or not fold:
        return [f"## {title}", "", *table, ""]
    return [f"## {title}", "", f"<details><summary>{len(rows)} rows</summary>", "", *table, "", "</details>", ""]


def _paper_page(rdir: Path, p: Any, s: dict[str, Any], why: tuple[str, str] | None, link_html: str,
                records: Sequence[dict[str, Any]]) -> None:
    e = html.escape
    claims = [c for c in s["claims"] if c.get("kind", "claim") == "claim"]
    checks = [c for c in s["claims"] if c.get("kind") == "check"]
    counts = verdict_counts(s["claims"])
    prov = provenance(records, None)  # all of this paper's runs, crashed ones too
    readme = p.readme
    readme_link = " · <a href='#readme'>README</a>" if readme else ""
    crashed = f"; <b>crashed seeds:</b> {e(_ranges(sorted(s['crashed'])))}" if s["crashed"] else ""
    parts = [HEAD.format(title=f"{p.id} {e(p.method)}", css=CSS),
             f"<p><a href='index.html'>← all papers</a></p><h1>{p.id} — {e(p.method)}</h1>",
             f"<p><b>Paper and code:</b> {link_html}{readme_link}</p>",
             f"<p><b>Budget:</b> {e(s['budget'])}; <b>seeds:</b> {e(_ranges(s['seeds']) or 'none')}{crashed}; "
             f"<b>mean wall time:</b> {fmt(s['wall_time'])} s.</p>",
             f"<p class='counts'><b>Claims:</b> {_count_html(counts['claims'], zero=True)} · <b>Seed-invariant:</b> "
             f"{_count_html(counts[SEED_INVARIANT], zero=True)} · <b>Checks:</b> "
             f"{_count_html(counts['checks'], zero=True, checks=True)}</p>",
             "<details><summary>Provenance</summary><table class='prov'>"
             + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in prov if k != "report generated")
             + "</table></details>",
             f"<h2>Abstract</h2><p>{markdown_emphasis_html(e(latex_to_text(p.abstract)))}</p>"]
    head = ("<tr><th>claim</th><th>it would not hold if</th><th>paper's figure</th><th>measured (95% CI)</th>"
            "<th>reference (same run)</th><th>control (same test)</th><th>measured − reference (95% CI)</th>"
            "<th>verdict</th><th>per seed</th>"
            "<th>note</th></tr>")
    parts.append(_table("Claims", head, [_claim_row(p.id, c, why, index=False) for c in claims], open_=True))
    parts.append(_table("Checks (true by construction; not counted)",
                        "<tr><th>check</th><th>measured</th><th>reference</th><th>verdict</th><th>note</th></tr>",
                        [_check_row(p.id, c, index=False) for c in checks], open_=False))
    if s["crashed"]:
        parts.append(f"<h2 class='crashed'>Crashed seeds: {e(str(s['crashed']))}</h2><pre>{e(s['errors'][0] or '')}</pre>")
    metric_rows = [f"<tr><td>{e(k)}</td><td>{e(fmt_n(m['mean'], [m['lo'], m['hi']], m.get('n')))}</td></tr>"
                   for k, m in s["metrics"].items()]
    parts.append(_table("Metrics (mean [95% CI] over seeds)", "<tr><th>metric</th><th>mean</th></tr>", metric_rows))
    if s["records"]:
        first = s["records"][0]
        if first.get("figures"):
            parts.append(f"<h2>Figures (seed {first['seed']})</h2>")
            for f in first["figures"]:
                where = _figure_file(rdir.parent, f.get("path"))
                if where is None:
                    log.warning("%s: figure path %r is not inside the output folder; left out", p.id, f.get("path"))
                    parts.append(f"<h3>{e(str(f.get('name')))}</h3><p class='small'>figure left out: its path is not "
                                 "inside the output folder</p>")
                elif not where.is_file():
                    parts.append(f"<h3>{e(str(f.get('name')))}</h3><p class='small'>figure file missing: "
                                 f"<code>{e(str(f.get('path')))}</code></p>")
                else:
                    rel = where.relative_to(rdir.parent.resolve()).as_posix()
                    parts.append(f"<h3>{e(str(f['name']))}</h3><img src='../{e(rel)}' alt='{e(str(f['name']))}'>")
        for name, rows in (first.get("tables") or {}).items():
            if not rows:
                continue
            cols = list(dict.fromkeys(k for r in rows for k in r))
            body = ["<tr>" + "".join(f"<td>{e(fmt(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows]
            parts.append(_table(f"Table: {name} (seed {first['seed']})", "<tr>" + "".join(f"<th>{e(c)}</th>" for c in cols)
                                + "</tr>", body))
    if readme:
        parts.append(f"<section class='readme' id='readme'><p class='small'>The paper folder's README "
                     f"(<code>{e(p.code_path)}README.md</code>):</p>{render_readme(readme)}</section>")
    parts.append("</body></html>")
    atomic_write_bytes(rdir / f"{p.id}.html", "".join(parts).encode())


__all__ = ["build_report", "counts_table", "fmt", "fmt_n", "claim_reference", "baselines_text", "control_text", "why_undecided", "latex_to_text", "arxiv_links", "why_section",
           "render_readme", "provenance"]
