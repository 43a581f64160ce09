"""Fixtures shared by the harness and CLI tests."""

import logging
import os

import pytest

from icml26 import catalog


@pytest.fixture
def planned_paper(monkeypatch):
    """The id of a paper the catalogue reports as planned, for the "planned, not implemented yet" cases: a real
    planned paper while one exists; once every paper is implemented, the last one is shown as planned (monkeypatched)."""
    planned = next((p.id for p in catalog.PAPERS if not p.implemented), None)
    if planned is None:
        planned = catalog.PAPERS[-1].id
        real = catalog.Paper.implemented.fget
        monkeypatch.setattr(catalog.Paper, "implemented", property(lambda p: p.id != planned and real(p)))
    return planned


@pytest.fixture(autouse=True)
def restore_cli_side_effects():
    """The CLI sets environment variables and logging for its own process; undo them after each test."""
    import icml26.cli as cli_mod

    env = dict(os.environ)
    levels = {n: logging.getLogger(n).level for n in ("", "icml26", "icml26.testbeds")}
    yield
    os.environ.clear()
    os.environ.update(env)
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, cli_mod._ConsoleHandler)]:
        root.removeHandler(h)
    for n, lv in levels.items():
        logging.getLogger(n).setLevel(lv)
    logging.captureWarnings(False)
