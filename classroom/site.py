"""The built book, shared by every test module that needs it: built once per test session.

tests/conftest.py makes the fixture available to every test module::

    from classroom.site import site  # noqa: F401  (the fixture: Path of the built _build/html)

However many modules import it, `jupyter-book build` runs once per session (into a
temporary folder, `--warningiserror --keep-going`); a failed build fails each of
them with the same log, without building again. To test an existing build instead
(quick, e.g. after `make site`), set COURSE_SITE_HTML=_build/html.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT = 1200

_result: dict[str, object] = {}  # "html": Path, or "error": str; shared by all importers


def build_site(out: Path) -> Path:
    """Build the book from REPO into out/_build/html; raises AssertionError with the log on failure."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    process = subprocess.run([str(jupyter_book), "build", str(REPO), "--path-output", str(out),
                              "--warningiserror", "--keep-going"], capture_output=True, text=True,
                             timeout=BUILD_TIMEOUT)
    assert process.returncode == 0, process.stdout[-4000:] + process.stderr[-4000:]
    return out / "_build" / "html"


def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if "html" not in _result and "error" not in _result:
        existing = os.environ.get("COURSE_SITE_HTML")
        if existing:
            _result["html"] = Path(existing).resolve()
        else:
            try:
                _result["html"] = build_site(tmp_path_factory.mktemp("book"))
            except (AssertionError, subprocess.TimeoutExpired) as error:
                _result["error"] = f"jupyter-book build failed:\n{error}"
    if "error" in _result:
        pytest.fail(str(_result["error"]), pytrace=False)
    return _result["html"]  # type: ignore[return-value]


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built site (its _build/html folder)."""
    return built_site(tmp_path_factory)


def chapter_notebooks():
    """The book's extension book/_ext/chapter_notebooks.py (Sphinx loads it from its folder), as a
    module: the pages of _toc.yml, the chapters as notebooks."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("chapter_notebooks", REPO / "book" / "_ext" / "chapter_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
