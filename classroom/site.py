"""The book built by `jupyter-book build` (into a folder of the caller's, `--warningiserror
--keep-going`), and the pages of its table of contents.

The test session builds it once, in the background (tests/head_start.py: the ``site`` fixture);
benchmarks/build_site.py times it.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from autograder.instructor.publish import book_environment

REPO = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT = 1200


def build_site(out: Path, book: Path = REPO) -> Path:
    """Build the book (default: this repository's) into out/_build/html; raises AssertionError
    with the log on failure. The chapters load the models and results in book/data/
    (``python -m coursebuild.models``, which `make site` runs first, keeps them up to date);
    nothing is trained here.

    It runs in the book's folder, as `make site` does, never where this process happens to be:
    the test session builds it in a thread while another may have moved the process into a folder
    deleted since (nbgrader's converters do, for as long as they run), and Sphinx fails in a
    folder that is gone."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    process = subprocess.run([str(jupyter_book), "build", str(book), "--path-output", str(out),
                              "--warningiserror", "--keep-going"], capture_output=True, text=True,
                             cwd=book, timeout=BUILD_TIMEOUT, env=book_environment())
    assert process.returncode == 0, why_the_build_failed(out, process.stdout + process.stderr)
    return out / "_build" / "html"


def why_the_build_failed(out: Path, log: str) -> str:
    """What a failed build said: its warnings and errors (the end of its log only shows the last
    of them, an undefined figure label, while the cause is a page that did not execute), and the
    end of each traceback that myst-nb wrote to _build/html/reports/ for a page that failed."""
    said = [line for line in log.splitlines() if re.search(r"WARNING|ERROR|[Ee]rror", line)]
    reports = sorted((out / "_build" / "html" / "reports").rglob("*.log"))
    tracebacks = [f"--- {report.name}:\n" + "\n".join(report.read_text(errors="replace").splitlines()[-25:])
                  for report in reports]
    return "\n".join(said[:60] + tracebacks) or log[-4000:]


def chapter_notebooks():
    """The book's extension book/_ext/chapter_notebooks.py (Sphinx loads it from its folder), as a
    module: the pages of _toc.yml, the chapters as notebooks."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("chapter_notebooks", REPO / "book" / "_ext" / "chapter_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
