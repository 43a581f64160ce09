"""Fixtures shared by the harness and CLI tests."""

import logging
import os

import pytest


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
