"""The book builds with `jupyter-book build` without warnings, and never publishes solutions."""
from __future__ import annotations

import ast
import html
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from autograder.instructor import publish
from autograder.layout import find_assignments
from classroom import REPO, notebook_name, secret_lines
from classroom.site import build_site, chapter_notebooks

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENTS = find_assignments(REPO / "solutions")


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(errors="replace")))


def test_a_book_builds_while_this_process_is_in_a_folder_deleted_since(tmp_path, monkeypatch):
    """The session builds the book in a thread while a test may have moved the process into a
    course folder and deleted it (nbgrader's converters move it): the build runs in the book's own
    folder, so Sphinx, which asks where it runs, still builds."""
    book = tmp_path / "book"
    book.mkdir()
    (book / "intro.md").write_text("# A page\n\nOne sentence.\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (book / "_config.yml").write_text("title: A book\nexecute:\n  execute_notebooks: 'off'\n")
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert "One sentence." in _text(build_site(tmp_path / "out", book) / "intro.html")


FIGURE_PAGE = """---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
---
# A page

```{code-cell} ipython3
import matplotlib.pyplot as plt
plt.plot([1, 2])
plt.show()
```
"""


@pytest.mark.parametrize("builder", ["the test session's", "publish's"])
def test_a_book_draws_its_figures_whatever_backend_this_process_names(tmp_path, monkeypatch, builder):
    """The grader's CLI, run inside the test session, names the grading kernels' backend (Agg) in
    this process's environment while it runs; a book built meanwhile (the session builds it in a
    thread) inherited it, and its chapters drew no figure. Both builders leave it out."""
    book = tmp_path / "book"
    book.mkdir()
    (book / "intro.md").write_text(FIGURE_PAGE)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (book / "_config.yml").write_text("title: A book\nexecute:\n  execute_notebooks: force\n")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    html = build_site(tmp_path / "out", book) if builder == "the test session's" else publish.build_site(book)
    assert re.search(r'<img [^>]*src="[^"]*\.png"', (html / "intro.html").read_text()), "the figure was not drawn"


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


def test_every_image_says_what_it_shows(site):
    """Every <img> of the site has alt text, and the text describes the picture: not empty, not
    a file's path or name (myst-nb's default for a code cell's figure is "../_images/<sha>.png";
    a chapter's figure cell sets `mystnb: image: alt:`)."""
    images = 0
    for page in sorted(site.rglob("*.html")):
        for tag in re.findall(r"<img\b[^>]*>", page.read_text(errors="replace")):
            images += 1
            where = f"{page.relative_to(site)}: {tag[:160]}"
            alt = re.search(r'\balt="([^"]*)"', tag)
            assert alt is not None and alt.group(1).strip(), f"an image without alt text: {where}"
            text = html.unescape(alt.group(1)).strip()
            assert not re.search(r"\.(png|jpe?g|svg|gif|webp)$|_images/|^[\w./-]*/[\w./-]*$", text), (
                f"alt text that is a file name, not a description: {where}")
    assert images > 30  # every chapter's figures were looked at


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercise_page_opens_in_colab(site, assignment):
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    repo = config["repository"]["url"].removeprefix("https://github.com/")
    page = site / "exercises" / assignment / f"{notebook_name(assignment)}.html"
    link = (f"https://colab.research.google.com/github/{repo}/blob/{config['repository']['branch']}"
            f"/exercises/{assignment}/{notebook_name(assignment)}.ipynb")
    assert link in page.read_text()


def _withheld_by_publish() -> dict[str, str]:
    """Each page's name (without suffixes) -> the lines, whitespace-normalised, of what the self-study
    book shows there and publish withholds from the students' edition until its assignment is
    revealed: the page's answer cells, or the whole page (the book modules' answer definitions,
    under their module's name, though the site renders no module)."""
    shown: dict[str, list[str]] = {}
    for page, cells in publish.book_answer_cells(REPO / "book", ASSIGNMENTS).items():
        text = page.read_text(encoding="utf-8")
        shown.setdefault(page.stem, []).extend(text[slice(*cell.span)] for cell in cells)
    for name in publish.WHOLE_PAGES:
        shown.setdefault(Path(name).stem, []).append((REPO / "book" / name).read_text(encoding="utf-8"))
    for file, definitions in publish.answer_definitions(REPO, ASSIGNMENTS).items():
        source = (REPO / file).read_text(encoding="utf-8")
        shown.setdefault(Path(file).stem, []).extend(ast.get_source_segment(source, node) for node, _, _ in definitions)
    return {page: "\n".join(publish.normalise(line) for text in texts for line in text.splitlines())
            for page, texts in shown.items()}


def test_no_solution_reaches_the_site(site):
    """No solution or hidden test reaches the self-study site, except where the book shows a model
    solution on purpose (issue 60: one source, two books): there publish withholds it from the
    students' edition, whose own scan (tests/test_publish.py) finds no line of any solution."""
    # a line that one assignment's solution writes and another's released notebook gives (a training
    # loop's optimizer.zero_grad()) is no secret: publish's rule (autograder/instructor/publish.py)
    given = "\n".join(" ".join(line.split()) for path in (REPO / "exercises").glob("*/*.ipynb")
                      for cell in nbformat.read(path, as_version=4).cells for line in cell.source.splitlines())
    withheld = _withheld_by_publish()
    secrets = {line for a in ASSIGNMENTS for line in secret_lines(a) if " ".join(line.split()) not in given}
    assert secrets and any(publish.normalise(line) in withheld["11-your-gpt"] for line in secrets)  # its model
    for path in site.rglob("*"):
        assert "solutions" not in path.relative_to(site).parts, path
        if path.suffix in {".html", ".ipynb", ".txt", ".md", ".js", ".json"} and path.is_file():
            raw = path.read_text(errors="replace")
            assert "BEGIN SOLUTION" not in raw and "BEGIN HIDDEN TESTS" not in raw, path
            text = _text(path) if path.suffix == ".html" else raw
            on_purpose = withheld.get(path.name.split(".")[0], "")
            leaked = [s for s in secrets if s in text and publish.normalise(s) not in on_purpose]
            assert not leaked, f"{path} shows solution code: {leaked[:2]}"


# -- the chapters as notebooks, for Colab -----------------------------------------------------
def test_every_chapter_has_its_notebook_up_to_date():
    # Regenerate with: python book/_ext/chapter_notebooks.py
    extension = chapter_notebooks()
    chapters = extension.chapters()
    assert len(chapters) >= 6, chapters
    for source in chapters:
        target = source.with_suffix(".ipynb")
        assert target.is_file(), f"{target.name} is missing: run python book/_ext/chapter_notebooks.py"
        assert target.read_text() == extension.text(extension.notebook(source)), (
            f"{target.name} is out of date with {source.name}: run python book/_ext/chapter_notebooks.py")


def test_chapter_notebooks_import_only_what_colab_has():
    """The code of each chapter notebook imports the standard library, what Colab's image has
    (torch, numpy, matplotlib, ipywidgets, IPython) and the book's own modules, which its setup
    cell downloads from the repository of _config.yml; and it has no outputs to go stale."""
    import ast
    import sys

    extension = chapter_notebooks()
    colab = {"torch", "numpy", "matplotlib", "ipywidgets", "IPython"}
    base = extension.raw_base()
    assert base.startswith("https://raw.githubusercontent.com/") and base.endswith("/book/"), base
    for source in extension.chapters():
        nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), source.name
        imported = set()
        for cell in code:
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Import):
                    imported |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    imported.add(node.module.split(".")[0])
        local = {name for name in imported if (REPO / "book" / f"{name}.py").is_file()}
        assert imported - local <= set(sys.stdlib_module_names) | colab, (source.name, imported - local)
        setup = [c for c in code if "colab-setup" in c.metadata.get("tags", [])]
        if local:
            assert len(setup) == 1 and code.index(setup[0]) == 0, f"{source.name}: no setup cell first"
            for name in local:
                assert f"'{name}.py'" in setup[0].source and base in setup[0].source, (source.name, name)


# -- a page whose notebook fails fails the build, every time until it is fixed ---------------
TINY_CONFIG = f"""\
title: tiny
only_build_toc_files: true
execute:
  execute_notebooks: cache
  timeout: 60
sphinx:
  local_extensions:
    execution_guard: {REPO / "book" / "_ext"}
"""
TINY_PAGE = """\
---
file_format: mystnb
kernelspec:
  name: python3
  display_name: Python 3
---
# {title}

```{{code-cell}} ipython3
import os
print("first cell")
```

```{{code-cell}} ipython3
value = int(os.environ.get("TINY_VALUE", "x"))  # fails until TINY_VALUE is a number
```
"""


def _build_tiny(book: Path, value: str | None):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TINY_VALUE"}
    env.update({"TINY_VALUE": value} if value else {})
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run([str(jupyter_book), "build", str(book), "--warningiserror", "--keep-going"],
                          capture_output=True, text=True, env=env, timeout=300)


def test_a_failing_page_fails_every_build_until_it_is_fixed(tmp_path):
    (tmp_path / "_config.yml").write_text(TINY_CONFIG)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: broken\n")
    (tmp_path / "intro.md").write_text("# Intro\n\nNo code.\n")
    (tmp_path / "broken.md").write_text(TINY_PAGE.format(title="Broken"))
    html = tmp_path / "_build" / "html"
    for attempt in ("first build", "the same build again"):
        build = _build_tiny(tmp_path, None)
        log = build.stdout + build.stderr
        assert build.returncode != 0, f"{attempt}: {log[-3000:]}"
        assert "broken.md, the code cell at line 15" in log and "ValueError" in log, f"{attempt}: {log[-3000:]}"
        assert not (html / "reports").exists(), f"{attempt}: tracebacks published with the site"
        assert (tmp_path / "_build" / "execution-reports" / "broken.err.log").is_file()
    fixed = _build_tiny(tmp_path, "3")  # the cause fixed outside the page: the page runs again, and passes
    assert fixed.returncode == 0, (fixed.stdout + fixed.stderr)[-3000:]
    assert "first cell" in (html / "broken.html").read_text()
    assert not (tmp_path / "_build" / "execution-reports").exists()  # no stale traceback left


# -- every chapter notebook runs as in Colab: an empty folder, and what its setup cell fetches --
@pytest.mark.parametrize("chapter", [p.stem for p in chapter_notebooks().chapters()])
def test_a_chapter_notebook_runs_in_an_empty_folder_with_what_its_setup_cell_fetches(chapter, tmp_path):
    """The committed notebook, alone in an empty folder, run top to bottom in a fresh kernel; its
    setup cell's downloads come from this clone's book/ (a file:// address in place of GitHub's):
    it must fetch every module and data file the chapter needs, and nothing else is there."""
    import nbclient

    extension = chapter_notebooks()
    nb = nbformat.read(REPO / "book" / f"{chapter}.ipynb", as_version=4)
    for cell in nb.cells:
        if "colab-setup" in cell.metadata.get("tags", []):
            assert extension.raw_base() in cell.source
            cell.source = cell.source.replace(extension.raw_base(), (REPO / "book").as_uri() + "/")
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{chapter}.ipynb in an empty folder: {str(error)[-2000:]}")
    fetched = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert fetched <= {p.relative_to(REPO / "book").as_posix() for p in (REPO / "book").rglob("*")}, fetched


# -- the student distribution's Makefile -----------------------------------------------------
def _student_make(tmp_path, *args: str) -> str:
    import shutil
    import subprocess

    student = REPO / "autograder" / "instructor" / "student"
    shutil.copy(student / "Makefile", tmp_path / "Makefile")
    for name in ("requirements.txt", "pyproject.toml"):
        shutil.copy(student / name, tmp_path / name)
    (tmp_path / "tools").mkdir(exist_ok=True)
    for name in ("venv.mk", "system-packages.sh", "web_assets.py"):
        shutil.copy(REPO / "tools" / name, tmp_path / "tools" / name)
    done = subprocess.run(["make", "-n", *args], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})  # -n: print the commands, run none
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_lab_installs_pytorchs_cpu_build_and_needs_no_npm(tmp_path):
    lab = _student_make(tmp_path, "lab")
    assert "--index-url https://download.pytorch.org/whl/cpu" in lab and "jupyter lab exercises/" in lab
    assert "npm" not in lab and "web_assets" not in lab and "system-packages" not in lab, lab
    gpu = _student_make(tmp_path, "lab", "TORCH_INDEX=")
    assert "--index-url" not in gpu and '"torch"' in gpu
    site = _student_make(tmp_path, "site")
    assert "system-packages.sh npm:npm" in site and "web_assets.py" in site  # the book needs them
