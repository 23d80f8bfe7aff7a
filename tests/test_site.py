"""The book builds with `jupyter-book build` without warnings, and never publishes solutions."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import yaml

from autograder.course import find_assignments
from classroom import REPO, notebook_name, secret_lines

ASSIGNMENTS = find_assignments(REPO / "solutions")


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(errors="replace")))


def test_every_toc_page_is_built(site):
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    for file in files:
        assert (site / f"{file}.html").is_file(), file
    assert (site / "index.html").is_file()


def test_chapters_have_figures_and_math(site):
    for page in sorted((site / "book").glob("[0-9][0-9]-*.html")):
        source = page.read_text()
        assert re.search(r'<img [^>]*src="[^"]*\.png"', source), f"{page.name}: no figure"
        assert 'class="math' in source, f"{page.name}: no math"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercise_page_opens_in_colab(site, assignment):
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    repo = config["repository"]["url"].removeprefix("https://github.com/")
    page = site / "exercises" / assignment / f"{notebook_name(assignment)}.html"
    link = (f"https://colab.research.google.com/github/{repo}/blob/{config['repository']['branch']}"
            f"/exercises/{assignment}/{notebook_name(assignment)}.ipynb")
    assert link in page.read_text()


def test_no_solution_reaches_the_site(site):
    secrets = set().union(*(secret_lines(a) for a in ASSIGNMENTS))
    assert secrets
    for path in site.rglob("*"):
        assert "solutions" not in path.relative_to(site).parts, path
        if path.suffix in {".html", ".ipynb", ".txt", ".md", ".js", ".json"} and path.is_file():
            raw = path.read_text(errors="replace")
            assert "BEGIN SOLUTION" not in raw and "BEGIN HIDDEN TESTS" not in raw, path
            text = _text(path) if path.suffix == ".html" else raw
            leaked = [s for s in secrets if s in text]
            assert not leaked, f"{path} shows solution code: {leaked[:2]}"
