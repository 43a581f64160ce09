"""Static report from the result store: ``<out>/report/index.html`` (every paper, planned ones too), one page
per reproduced paper with its figures and tables, and ``report.md``. Opens from disk, no server."""

from __future__ import annotations

import html
import math
import time
from pathlib import Path
from typing import Any

from .runner import summarize_records
from .store import ResultStore, atomic_write_bytes

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.holds{background:#dff3df}.does-not-hold{background:#f8dcdc}
.inconclusive{background:#fff4cc}.planned{color:#888}.crashed{background:#f3c0c0}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}pre{background:#f6f6f6;padding:1em;overflow-x:auto}
"""


def fmt(x: Any, ci: Any = None) -> str:
    if x is None:
        return "—"
    if isinstance(x, (list, tuple)) and len(x) == 2:
        return f"[{fmt(x[0])}, {fmt(x[1])}]"
    if isinstance(x, (int, float)):
        if isinstance(x, float) and not math.isfinite(x):
            return "—"
        s = f"{x:.4g}"
        if ci and all(isinstance(c, (int, float)) and c is not None and math.isfinite(c) for c in ci) and ci[0] != ci[1]:
            s += f" [{ci[0]:.3g}, {ci[1]:.3g}]"
        return s
    return str(x)


def claim_reference(c: dict[str, Any]) -> str:
    return f"{c['op']} {fmt(c['reference'], c.get('reference_ci'))}"


def build_report(out: str | Path = "runs") -> Path:
    """Render the report from the newest batch of every paper in ``out``; returns the index path."""
    from ..catalog import PAPERS

    store = ResultStore(Path(out))
    latest = store.latest_batches()
    summaries = {pid: summarize_records(recs)[pid] for pid, recs in latest.items()}
    rdir = store.root / "report"
    e = html.escape
    rows, md = [], ["# icml26 report", "", f"Generated {time.strftime('%Y-%m-%d %H:%M')}.", "",
                    "| id | method | claim | paper | measured | reference | verdict | seeds | budget |",
                    "|---|---|---|---|---|---|---|---|---|"]
    for p in PAPERS:
        s = summaries.get(p.id)
        if s is None:
            cls = "" if p.implemented else "planned"
            rows.append(f"<tr class='{cls}'><td>{p.id}</td><td>{e(p.method)}</td><td colspan='6'>{e(p.claim)}</td>"
                        f"<td>{p.status}{'' if not p.implemented else ' (not run)'}</td></tr>")
            md.append(f"| {p.id} | {p.method} | {p.claim} | | | | {p.status} | | |")
            continue
        claims = s["claims"] or [{"statement": "(crashed)" if s["crashed"] else "(no claims)", "verdict": "crashed" if s["crashed"] else "inconclusive",
                                  "measured": None, "op": "", "reference": None, "paper": None}]
        for i, c in enumerate(claims):
            first = f"<td rowspan='{len(claims)}'><a href='{p.id}.html'>{p.id}</a></td><td rowspan='{len(claims)}'>{e(p.method)}</td>" if i == 0 else ""
            v = c["verdict"]
            rows.append(f"<tr>{first}<td>{e(c['statement'])}</td><td>{e(c.get('paper') or '—')}</td>"
                        f"<td>{fmt(c['measured'], c.get('measured_ci'))}</td><td>{e(claim_reference(c)) if c['op'] else '—'}</td>"
                        f"<td class='{v.replace(' ', '-')}'>{v}</td><td>{len(s['seeds'])}</td><td>{s['budget']}</td></tr>")
            md.append(f"| {p.id} | {p.method} | {c['statement']} | {c.get('paper') or ''} | {fmt(c['measured'])} | "
                      f"{claim_reference(c) if c['op'] else ''} | {v} | {len(s['seeds'])} | {s['budget']} |")
        _paper_page(rdir, p, s)
    n_impl = sum(p.implemented for p in PAPERS)
    index = (f"<!doctype html><meta charset='utf-8'><title>icml26 report</title><style>{CSS}</style>"
             f"<h1>icml26 — reproductions of ICML 2026 papers</h1><p>{n_impl} of {len(PAPERS)} papers implemented; "
             f"verdicts are computed from measurements against baselines measured in the same run. "
             f"Over several seeds a claim is inconclusive when the 95% interval of (measured − reference) contains 0.</p>"
             f"<table><tr><th>id</th><th>method</th><th>claim</th><th>paper's figure</th><th>measured (95% CI)</th>"
             f"<th>reference</th><th>verdict</th><th>seeds</th><th>budget</th></tr>{''.join(rows)}</table>")
    atomic_write_bytes(rdir / "index.html", index.encode())
    atomic_write_bytes(store.root / "report.md", "\n".join(md).encode())
    return rdir / "index.html"


def _paper_page(rdir: Path, p: Any, s: dict[str, Any]) -> None:
    e = html.escape
    parts = [f"<!doctype html><meta charset='utf-8'><title>{p.id} {e(p.method)}</title><style>{CSS}</style>",
             f"<p><a href='index.html'>← all papers</a></p><h1>{p.id} — {e(p.method)}</h1>",
             f"<p><b>Reference:</b> {e(p.reference)}. <b>Code:</b> <code>{p.code_path}</code>. "
             f"<b>Budget:</b> {s['budget']}; <b>seeds:</b> {s['seeds']}; <b>mean wall time:</b> {fmt(s['wall_time'])} s.</p>",
             f"<h2>Abstract</h2><p>{e(p.abstract)}</p><h2>Claims</h2><table><tr><th>claim</th><th>metric</th>"
             "<th>paper</th><th>measured (95% CI)</th><th>reference</th><th>baseline</th><th>verdict</th><th>per seed</th><th>note</th></tr>"]
    for c in s["claims"]:
        v = c["verdict"]
        parts.append(f"<tr><td>{e(c['statement'])}</td><td>{e(c.get('metric') or '')}</td><td>{e(c.get('paper') or '—')}</td>"
                     f"<td>{fmt(c['measured'], c.get('measured_ci'))}</td><td>{e(claim_reference(c))}</td><td>{e(c.get('baseline') or '')}</td>"
                     f"<td class='{v.replace(' ', '-')}'>{v}</td><td>{e(', '.join(c.get('seed_verdicts', [])))}</td><td>{e(c.get('note') or '')}</td></tr>")
    parts.append("</table>")
    if s["crashed"]:
        parts.append(f"<h2 class='crashed'>Crashed seeds: {s['crashed']}</h2><pre>{e(s['errors'][0] or '')}</pre>")
    parts.append("<h2>Metrics (mean [95% CI] over seeds)</h2><table><tr><th>metric</th><th>mean</th><th>95% CI</th></tr>")
    for k, m in s["metrics"].items():
        parts.append(f"<tr><td>{e(k)}</td><td>{fmt(m['mean'])}</td><td>{fmt([m['lo'], m['hi']])}</td></tr>")
    parts.append("</table>")
    if s["records"]:
        first = s["records"][0]
        if first.get("figures"):
            parts.append(f"<h2>Figures (seed {first['seed']})</h2>")
            for f in first["figures"]:
                parts.append(f"<h3>{e(f['name'])}</h3><img src='../{e(f['path'])}' alt='{e(f['name'])}'>")
        for name, rows in first.get("tables", {}).items():
            if not rows:
                continue
            cols = list(dict.fromkeys(k for r in rows for k in r))
            parts.append(f"<h2>Table: {e(name)} (seed {first['seed']})</h2><table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>")
            for r in rows:
                parts.append("<tr>" + "".join(f"<td>{e(fmt(r.get(c)))}</td>" for c in cols) + "</tr>")
            parts.append("</table>")
    atomic_write_bytes(rdir / f"{p.id}.html", "".join(parts).encode())
