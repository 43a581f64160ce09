"""Issue 10 item 7: `python -m icml26`, `--version`, py.typed, LICENSE matching pyproject, a CHANGELOG;
and `--out ""` refused by every command that takes --out."""

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

import icml26
from icml26.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_python_dash_m_version(tmp_path):
    out = subprocess.run([sys.executable, "-m", "icml26", "--version"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"icml26 {icml26.__version__}"
    assert icml26.__version__ == importlib.metadata.version("icml26")


def test_python_dash_m_without_arguments_shows_help(tmp_path):
    out = subprocess.run([sys.executable, "-m", "icml26"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert "Usage: icml26" in text
    assert all(cmd in text for cmd in ("list", "show", "prepare", "reproduce", "report"))


def test_py_typed_marker_is_shipped():
    assert resources.files("icml26").joinpath("py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["icml26"]


def test_license_matches_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "icml26 contributors" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\"" in text


def test_changelog_keeps_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    m = re.search(r"^## \[0\.1\.0\] - \d{4}-\d{2}-\d{2}$(.*)", text, flags=re.M | re.S)
    assert m, "a dated 0.1.0 section"
    assert text.index("## [Unreleased]") < m.start()
    first = m.group(1)
    assert all(pid in first for pid in ("A03", "A08", "A10", "A11", "A12", "A15", "A17", "A19", "B01", "B04", "B10",
                                        "B11", "B12", "B16", "B17", "B19")), "0.1.0 lists the 16 papers it shipped"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"## [{version}]" in text, "the released version has a section"


@pytest.mark.parametrize("args", [
    ["list", "--out", ""],
    ["list", "--out", "  "],
    ["reproduce", "A03", "--out", ""],
    ["report", "--out", ""],
])
def test_empty_out_is_refused(args):
    r = runner.invoke(app, args)
    assert r.exit_code == 2
    assert "--out is empty" in r.output


def test_every_command_with_out_is_covered():
    """If a command gains --out, it must go through cli.out_path (the check above)."""
    import inspect

    for cmd in app.registered_commands:
        src = inspect.getsource(cmd.callback)
        if re.search(r"\bout: str = typer\.Option", src):
            assert "out_path(out)" in src, cmd.callback.__name__
        assert "out: Path" not in src, f"{cmd.callback.__name__}: a Path option turns '' into '.'"
