"""Every ```python block of the package's READMEs is a test (issue "Docs that run").

pytest-markdown-docs runs each block in a fresh namespace; a block fenced as ```python notest is shown but not run
(a placeholder for the user's own model or data). Its ``--markdown-docs`` switch would also import every module of
the package to scan docstrings, so only README.md files are handed to its collector here.
"""

from __future__ import annotations

import pathlib

import pytest


def pytest_collect_file(file_path: pathlib.Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != "README.md" or parent.config.option.markdowndocs:
        return None  # with --markdown-docs the plugin collects it itself
    from pytest_markdown_docs.plugin import MarkdownTextFile

    return MarkdownTextFile.from_parent(parent, path=file_path)
