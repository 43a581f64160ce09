"""The report in a real browser: headless Chromium renders each page, takes a screenshot, logs no console
message, and every image, local link and in-page anchor resolves. Skipped where Chromium is not installed."""

import io
import re
import shutil
import subprocess
from urllib.parse import unquote

import pytest

from icml26.harness import Claim
from icml26.harness.report import build_report
from icml26.harness.store import ResultStore, atomic_write_bytes

BROWSERS = ("chromium", "chromium-browser", "chromium-headless-shell", "chrome-headless-shell", "headless_shell",
            "google-chrome", "google-chrome-stable")
CHROME = next((b for b in map(shutil.which, BROWSERS) if b), None)
pytestmark = pytest.mark.skipif(CHROME is None, reason="no Chromium installed")


def chrome(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROME, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", *args], capture_output=True, text=True, timeout=90)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = tmp_path_factory.mktemp("chromium")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="line")
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(out / "figures" / "A03" / "r0-line.png", buf.getvalue())
    store = ResultStore(out)
    for seed in range(2):
        store.save({"run_id": f"r{seed}", "batch": "b", "paper": "A03", "budget": "quick", "seed": seed, "status": "ok",
                    "started": 1.7e9, "wall_time": 1.0, "error": None, "metrics": {"m": 1.0 + seed},
                    "tables": {"t": [{"h": 0.1, "err": 0.01}]}, "env": {"python": "3.11"},
                    "figures": [{"name": "line", "path": "figures/A03/r0-line.png"}],
                    "claims": [{"statement": "beats baseline", "measured": 2.0 + seed, "op": "<", "reference": 1.0,
                                "verdict": "does not hold", "kind": "claim", "falsifier": "at or above baseline"},
                               {"statement": "exact", "measured": 0.0, "op": "<=", "reference": 0.0, "verdict": "holds",
                                "kind": "check", "falsifier": ""},
                               Claim("AUROC above 0.9", 0.95 + 0.001 * seed, ">", 0.9, bar=True, falsifier="at or below",
                                     control=0.93 + 0.001 * seed, control_arm="untrained GNN").to_dict(),
                               Claim("beats every baseline", 0.8 + (0.1, -0.12)[seed], ">", falsifier="at or below",
                                     baselines={"keyword": 0.78, "random": 0.1}).to_dict()]})
    return build_report(out, command="icml26 reproduce A03").parent


@pytest.mark.parametrize("page", ["index.html", "A03.html"])
def test_page_renders_without_console_messages(report_dir, tmp_path, page):
    path = report_dir / page
    shot = tmp_path / f"{page}.png"
    r = chrome("--window-size=1280,1600", f"--screenshot={shot}", path.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 10_000  # a real screenshot, not a blank page
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    dom = chrome("--dump-dom", path.as_uri())
    assert dom.returncode == 0 and "<table" in dom.stdout and "Provenance" in dom.stdout
    # the evidence fields render: the control under the same test, the strongest baseline, why undecided
    for text in ("control (same test)", "untrained GNN", "the control passes too", "strongest of 2 baselines: keyword",
                 "Δ ["):
        assert text in dom.stdout, text


@pytest.mark.parametrize("page", ["index.html", "A03.html"])
def test_images_links_and_anchors_resolve(report_dir, page):
    text = (report_dir / page).read_text()
    ids = set(re.findall(r"id=['\"]([^'\"]+)['\"]", text))
    for attr, target in re.findall(r"(src|href)=['\"]([^'\"]+)['\"]", text):
        if target.startswith(("http://", "https://", "data:")):
            continue
        file, _, anchor = target.partition("#")
        dest = (report_dir / unquote(file)).resolve() if file else report_dir / page
        assert dest.exists(), f"{page}: {attr}={target} does not exist"
        if anchor:
            dest_ids = ids if not file else set(re.findall(r"id=['\"]([^'\"]+)['\"]", dest.read_text()))
            assert anchor in dest_ids, f"{page}: anchor #{anchor} not found in {dest.name}"
