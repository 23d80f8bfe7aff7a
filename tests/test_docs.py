"""The documentation (docs/, `make docs`) builds with every warning an error, a broken link
between its pages included; the README reaches every page, and every instructor task in two clicks."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def build(docs: Path) -> subprocess.CompletedProcess:
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run([str(jupyter_book), "build", str(docs), "--warningiserror", "--keep-going"],
                          capture_output=True, text=True, cwd=docs, timeout=600)


def toc_pages() -> set[str]:
    def files(entries):
        for entry in entries or []:
            if "file" in entry:
                yield entry["file"]
            yield from files(entry.get("sections"))
            yield from files(entry.get("chapters"))

    toc = yaml.safe_load((DOCS / "_toc.yml").read_text())
    return {toc["root"], *files(toc.get("parts")), *files(toc.get("chapters"))}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("docs") / "docs"
    shutil.copytree(DOCS, copy, ignore=shutil.ignore_patterns("_build"))
    process = build(copy)
    assert process.returncode == 0, (process.stdout + process.stderr)[-4000:]
    return copy / "_build" / "html"


def test_every_page_is_in_the_table_of_contents_and_built(built):
    pages = {str(p.relative_to(DOCS).with_suffix("")) for p in DOCS.rglob("*.md") if "_build" not in p.parts}
    assert pages == toc_pages()
    for page in pages:
        assert (built / f"{page}.html").is_file(), page


def test_a_broken_link_between_pages_fails_the_build(tmp_path):
    copy = tmp_path / "docs"
    shutil.copytree(DOCS, copy, ignore=shutil.ignore_patterns("_build"))
    with open(copy / "students.md", "a") as page:
        page.write("\nSee [how grading works](grading.md#no-such-heading).\n")
    process = build(copy)
    assert process.returncode != 0 and "no-such-heading" in process.stdout + process.stderr


def test_the_readme_links_every_page_and_each_link_lands():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", readme)
    for path, anchor in links:
        assert (REPO / path).is_file(), path
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (REPO / path).read_text(), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
            assert anchor in slugs, (path, anchor)
    linked = {str(Path(p).relative_to("docs").with_suffix("")) for p, _ in links}
    assert toc_pages() - {"index"} <= linked
    assert len(readme.splitlines()) <= 160  # a README that fits on a screen or two
