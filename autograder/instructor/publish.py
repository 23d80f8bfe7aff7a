"""The student distribution: ``python -m autograder publish DIR``.

One source, two distributions. This repository is the instructor's: model solutions and
hidden tests (``solutions/``), the grader (``autograder/``); it stays private when the course
is taken for credit. ``publish`` writes DIR, everything a student or a self-learner needs and
nothing else, a folder to push as the course's PUBLIC repository::

    README.md, Makefile, requirements.txt, .gitignore   for students (templates in autograder/instructor/student/)
    pyproject.toml        builds the checks as the package attention-checks, version [project] version
    _config.yml           the repository and launch buttons name the public repository
    _toc.yml, book/, tools/ (web assets, system packages, venv.mk)   the book, buildable from DIR alone
    exercises/<assignment>/   released fresh from solutions/ (nbgrader generate_assignment); every
                              setup cell installs the wheel below, its sha256 pinned
    attention_checks/     the checks (see SAFE TO PUBLISH below)
    dist/attention_checks-<version>-py3-none-any.whl   the wheel, reproducible: upload it as the asset
                          of the public repository's release v<version> (or to the configured index)
    _build/html/          the built site, with --site

Then every file of DIR is scanned (``scan``): a line of a model solution or of a hidden test
anywhere in it, the wheel and the site included, and publish fails (exit 1) naming each hit.

One source, two books: a code cell of a page that computes a graded answer (a chapter's model,
its decoding loop, a worked implementation) carries the tag ``answers:<assignment>``. The book this
repository builds (the self-study course) shows it; in DIR it is replaced by a short note
(``withhold_answers``) until the instructor reveals that assignment (``--reveal 08-decoder``, after
its deadline). A revealed assignment's answers are published and are no longer secret: the scans
then look for every other assignment's. A definition of a module of book/ that computes a graded
answer (``ANSWER_DEFINITIONS``: the book's model's greedy decoding loop) is withheld the same way,
its body replaced by a NotImplementedError (``withhold_definitions``).

SAFE TO PUBLISH, decided per part of ``attention_checks/``:

* the declared checks (one module per assignment), ``core``, ``inputs``, ``modules``,
  ``probe``, ``record``, ``registry``: what a test cell calls, how a case's inputs are made
  from its spec and seed, how the student's object is called. Public by nature: the kernel
  that runs the student's code needs them. A hidden test's *cases* (its specs and seeds) are
  only in the hidden-test cells of solutions/, which nbgrader removes on release; without a
  spec the seeded inputs say nothing.
* of ``answers/``, only what judges without computing an answer (``SHIPPED_ANSWERS``: the
  comparisons, the reports, the generic hints). Its per-assignment modules (float64 references,
  known mistakes) compute what a graded function returns, so a student could hand them in:
  they stay here. The student's own notebook (``Mode.STUDENT``) judges its visible tests from
  ``visible/``, the answers of every visible case as data (expected outputs, each known
  mistake's outputs and hint: tensors and a JSON manifest), which publish computes with the
  references (``release.write_visible_answers``). The grader never trusts them in a student's
  kernel anyway (the sandbox hides ``answers/`` from grading kernels and judges outside the
  kernel).
* ``autograder/`` (the grader), ``solutions/``, ``tests/`` (simulated students, model
  answers), ``benchmarks/`` and any other top-level folder (``coursebuild/``, the code the book
  runs at build time) are the instructor's and are never copied: ``COPIED`` is an allow-list.

Two scans then prove it: the line scan (``scan``) and the functional scan
(``autograder.instructor.functional``: every function and class students get, tried as each
graded name on the hidden cases, judged by the grader).
"""
from __future__ import annotations

import ast
import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
import zipfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import yaml

from autograder.cells import nbgrader_metadata
from autograder.grading import release
from autograder.instructor.functional import CODE_CELL, FunctionalReport, cell_options, functional_scan, sandbox_problem
from autograder.layout import EXERCISES_DIR, REPO_ROOT, SOLUTIONS_DIR

TEMPLATES = Path(__file__).with_name("student")
CHECKS = "attention_checks"
# What the student distribution copies from this repository, as it is (the exercises are released
# fresh, and the files for students come from TEMPLATES).
COPIED = ["book", "_toc.yml", "tools/web_assets.py", "tools/system-packages.sh", "tools/venv.mk", CHECKS]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "_build", ".DS_Store")
# What of attention_checks/answers/ students get: the judging that computes no answer. Every other
# module there (references, mistakes: one per assignment) stays with the grader.
SHIPPED_ANSWERS = {"__init__.py", "judging.py", "catalogue.py", "localising.py", "hints.py", "crashes.py", "fits.py", "torch_messages.py"}
ANSWERS = Path(CHECKS) / "answers"
VISIBLE = Path(CHECKS) / "visible"  # the visible cases' answers as data (attention_checks.published)
# A fixed date for every file of the wheel: the same sources give the same wheel, byte for byte,
# so that the sha256 that the notebooks pin stays right when the course is published again.
WHEEL_EPOCH = "315532800"  # 1980-01-01, the earliest date a zip file can hold


class PublishError(RuntimeError):
    """The distribution cannot be written, or would leak (its message says what to do)."""


# --------------------------------------------------------------------------------------------
# what must never reach students, and the scan that proves it does not
#
# A "secret line" is a line of a solution cell (code or a written answer) or of a hidden-test
# region (### BEGIN/END HIDDEN TESTS) of a source notebook that is non-trivial:
#   - normalised: comments stripped from code (Python's tokenizer), every run of whitespace one
#     space, the ends trimmed;
#   - at least MIN_CHARS characters long after that;
#   - not a bare compound-statement header (`if attn_mask is not None:`, `for _ in range(n):`,
#     `else:`): the body says what the code does, the header alone does not;
#   - not text the students get anyway: a line found (as a substring of a normalised line) in
#     the released notebooks, which hold the signatures, docstrings and instructions.
# The scan looks for every secret line as a substring of every normalised line of every file.

MIN_CHARS = 20
HEADER = re.compile(r"^(if|elif|else|for|while|with|try|except|finally|async for|async with)\b.*:$")
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def normalise(line: str) -> str:
    return " ".join(line.split())


def without_comments(source: str) -> str:
    """Python source without its comments (a cell that does not tokenize is kept whole)."""
    lines = source.split("\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    for token in reversed(tokens):
        if token.type == tokenize.COMMENT:
            (row, start), end = token.start, token.end[1]
            lines[row - 1] = lines[row - 1][:start] + lines[row - 1][end:]
    return "\n".join(lines)


def _cell_lines(cell) -> list[str]:
    source = without_comments(cell.source) if cell.cell_type == "code" else cell.source
    return [normalise(line) for line in source.split("\n")]


def secret_lines(source_dir: Path = SOLUTIONS_DIR, released_dir: Path = EXERCISES_DIR,
                 revealed: frozenset[str] = frozenset()) -> dict[str, str]:
    """Every secret line of the source notebooks -> where it is (assignment/notebook:grade_id);
    none of the ``revealed`` assignments (their answers are published on purpose)."""
    given = "\n".join(line for path in sorted(Path(released_dir).glob("*/*.ipynb"))
                      for cell in nbformat.read(path, as_version=4).cells for line in _cell_lines(cell))
    secrets: dict[str, str] = {}
    for path in sorted(p for p in Path(source_dir).glob("*/*.ipynb") if p.parent.name not in revealed):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = nbgrader_metadata(cell)
            if meta.get("solution"):
                region = cell
            elif cell.cell_type == "code" and HIDDEN.search(cell.source):
                region = nbformat.v4.new_code_cell("\n".join(HIDDEN.findall(cell.source)))
            else:
                continue
            for line in _cell_lines(region):
                if len(line) >= MIN_CHARS and not HEADER.match(line) and line not in given:
                    secrets.setdefault(line, f"{path.parent.name}/{path.name}:{meta.get('grade_id')}")
    return secrets


class _Text(HTMLParser):
    """The text of an HTML page as a reader (or a copy-paste) gets it: tags dropped, entities
    decoded (code blocks are highlighted token by token in <span>s)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _strings(value) -> list[str]:
    """Every string of a JSON document; a list of strings (a notebook's source) joined."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return ["".join(value)]
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def texts(name: str, data: bytes) -> tuple[list[str], bool]:
    """(the texts of a file to scan, whether it is binary): an archive's members recursively, a
    notebook's or a JSON file's strings, an HTML page's text and its source. A binary file (an
    image, a font, a pickled doctree, a database) is read as UTF-8 with every invalid byte
    replaced, so that text stored inside it is still found."""
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return [text for member in archive.namelist() if not member.endswith("/")
                    for text in texts(member, archive.read(member))[0]], False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return [data.decode("utf-8", errors="replace")], True
    found = [text]
    if name.endswith((".ipynb", ".json")):
        try:
            found += _strings(json.loads(text))
        except ValueError:
            pass
    if name.endswith((".html", ".htm", ".xml", ".svg")):
        page = _Text()
        page.feed(text)
        found += ["".join(page.parts), html.unescape(text)]
    return found, False


@dataclass
class ScanReport:
    files: int = 0  # files read (an archive counts once, its members are scanned too)
    binary: list[str] = field(default_factory=list)  # files that are not UTF-8 text (scanned as bytes)
    secrets: int = 0  # secret lines looked for
    hits: list[tuple[str, str, str]] = field(default_factory=list)  # (file, secret line, where it comes from)

    def summary(self) -> str:
        return (f"scanned {self.files} files ({len(self.binary)} of them binary) for {self.secrets} lines of "
                f"model solutions and hidden tests: {len(self.hits)} hits")


def scan(folder: Path, secrets: dict[str, str]) -> ScanReport:
    """Look for every secret line in every file under ``folder``."""
    report = ScanReport(secrets=len(secrets))
    # Each secret line contains its first KEY characters: a dict of them finds the candidates at
    # each position of a line in one lookup, instead of testing every secret everywhere.
    by_key: dict[str, list[str]] = {}
    for secret in secrets:
        by_key.setdefault(secret[:MIN_CHARS], []).append(secret)
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and not p.is_symlink()):
        name = str(path.relative_to(folder))
        report.files += 1
        found, binary = texts(path.name, path.read_bytes())
        if binary:
            report.binary.append(name)
        seen = set()
        for text in found:
            for line in text.split("\n"):
                line = normalise(line)
                for at in range(len(line) - MIN_CHARS + 1):
                    for secret in by_key.get(line[at:at + MIN_CHARS], ()):
                        if secret not in seen and line.startswith(secret, at):
                            seen.add(secret)
                            report.hits.append((name, secret, secrets[secret]))
    return report


# --------------------------------------------------------------------------------------------
# the book's answer cells: shown in the self-study book, withheld from the students' edition
#
# A code cell of a page (book/**/*.md, MyST) that computes a graded answer is tagged with the
# assignment it answers, in its options: `:tags: [answers:08-decoder]`, or `tags:` in the cell's
# YAML header. publish replaces it by WITHHELD until that assignment is revealed. The cells after
# it never use what it defines (they load the book's stored results), so the page still builds.

ANSWERS_TAG = "answers:"
WITHHELD = """```{{note}}
This cell shows the model solution of `{assignment}`; it appears after the assignment's deadline.
```"""


@dataclass(frozen=True)
class AnswerCell:
    """A code cell of a page tagged with the assignments it answers."""

    page: str
    line: int  # of its fence, in the page
    assignments: frozenset[str]
    span: tuple[int, int]  # in the page's text


def answer_cells(page: Path, name: str | None = None) -> list[AnswerCell]:
    """The answer cells of a page, in order (``name``: how messages name the page)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for cell in CODE_CELL.finditer(text):
        tags = cell_options(cell["body"]).get("tags") or []
        answers = frozenset(str(tag)[len(ANSWERS_TAG):] for tag in tags if str(tag).startswith(ANSWERS_TAG))
        if answers:
            found.append(AnswerCell(name or str(page), text.count("\n", 0, cell.start()) + 1, answers, cell.span()))
    return found


def book_answer_cells(book: Path, known: list[str]) -> dict[Path, list[AnswerCell]]:
    """Every page under ``book`` -> its answer cells. A tag that names no assignment stops publish:
    its cell would be published, or withheld, by mistake."""
    pages = {page: answer_cells(page, str(page.relative_to(book.parent))) for page in sorted(book.rglob("*.md"))}
    unknown = [f"{cell.page}:{cell.line}: answers:{name}" for cells in pages.values() for cell in cells
               for name in sorted(cell.assignments - set(known))]
    if unknown:
        raise PublishError("cells tagged with an assignment that does not exist (known: " + ", ".join(known)
                           + "):\n" + "\n".join(unknown))
    return pages


def withhold_answers(book: Path, known: list[str], revealed: frozenset[str]) -> dict[str, list[AnswerCell]]:
    """Replace every answer cell of the pages under ``book`` by a note, except those whose
    assignments are all ``revealed``; returns the cells withheld, by assignment."""
    withheld: dict[str, list[AnswerCell]] = {}
    for page, cells in book_answer_cells(book, known).items():
        hidden = [cell for cell in cells if not cell.assignments <= revealed]
        if not hidden:
            continue
        text = page.read_text(encoding="utf-8")
        for cell in reversed(hidden):  # from the end: the spans before it stay where they are
            note = WITHHELD.format(assignment=", ".join(sorted(cell.assignments - revealed)))
            text = text[:cell.span[0]] + note + text[cell.span[1]:]
        page.write_text(text, encoding="utf-8")
        for cell in hidden:
            for assignment in cell.assignments - revealed:
                withheld.setdefault(assignment, []).append(cell)
    return withheld


# A page whose experiments all run the graded answers (chapter 11 trains the very model its
# exercise grades, and its prose reads the numbers off that training) cannot show them without
# those answers: until its assignment is revealed, the students' edition keeps the page's front
# matter and title, and a note in place of the rest.
WHOLE_PAGES: dict[str, str] = {"11-your-gpt.md": "11-your-gpt"}
WITHHELD_PAGE = """
```{{note}}
This chapter builds and trains the model solution of `{assignment}`, the exercise you hand in: it
appears after the assignment's deadline. Until then, the exercise notebook `exercises/{assignment}`
says what to build, and the chapters before it hold every part.
```
"""


def withhold_pages(book: Path, revealed: frozenset[str], pages: dict[str, str] = WHOLE_PAGES) -> dict[str, list[str]]:
    """Replace every page of ``pages`` (file name under ``book`` -> assignment) by its front matter,
    its title and a note, except a revealed assignment's; returns them by assignment."""
    withheld: dict[str, list[str]] = {}
    for name, assignment in pages.items():
        page = book / name
        if assignment in revealed or not page.is_file():
            continue
        text = page.read_text(encoding="utf-8")
        end = text.index("\n---\n", 4) + 5 if text.startswith("---\n") else 0  # the front matter
        title = next(line for line in text[end:].splitlines() if line.startswith("# "))
        page.write_text(text[:end] + "\n" + title + "\n" + WITHHELD_PAGE.format(assignment=assignment),
                        encoding="utf-8")
        withheld.setdefault(assignment, []).append(str(page.relative_to(book.parent)))
    return withheld


# A definition of a module of book/ that computes a graded answer (a decoding loop of the book's
# model) is withheld the same way: its body becomes a NotImplementedError that says why, its
# signature and docstring stay. A module carries no tag: its bytes decide the models that
# coursebuild trains (their SOURCES), so the definitions are named here, by file and qualified name.
ANSWER_DEFINITIONS: dict[str, dict[str, str]] = {"book/transformer.py": {"Seq2Seq.generate": "08-decoder"}}
WITHHELD_BODY = ('raise NotImplementedError("{name} is the model solution of {assignment}: it appears after the '
                 'assignment\'s deadline")')


def _definition(tree: ast.Module, qualified: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function or method ``qualified`` ("Class.method" or "function") of a module, or None."""
    scope: list[ast.stmt] = tree.body
    *classes, name = qualified.split(".")
    for cls in classes:
        scope = next((node.body for node in scope if isinstance(node, ast.ClassDef) and node.name == cls), [])
    return next((node for node in scope if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.name == name), None)


def answer_definitions(root: Path, known: list[str], named: dict[str, dict[str, str]] = ANSWER_DEFINITIONS
                       ) -> dict[str, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, str]]]:
    """file -> (its definition, its qualified name, the assignment) of every definition in ``named``
    (file under ``root`` -> qualified name -> assignment). A name that is not there, or an
    assignment that does not exist, stops publish: the definition would be published by mistake."""
    found, wrong = {}, []
    for file, names in named.items():
        tree = ast.parse((root / file).read_text(encoding="utf-8"))
        found[file] = [(_definition(tree, name), name, assignment) for name, assignment in names.items()]
        wrong += [f"{file}: {name} ({assignment})" for node, name, assignment in found[file]
                  if node is None or assignment not in known]
    if wrong:
        raise PublishError("definitions to withhold that are not there, or of no assignment (known: "
                           + ", ".join(known) + "):\n" + "\n".join(wrong))
    return found


def withhold_definitions(root: Path, known: list[str], revealed: frozenset[str],
                         named: dict[str, dict[str, str]] = ANSWER_DEFINITIONS) -> dict[str, list[str]]:
    """Replace the body of every definition in ``named`` under ``root`` by a NotImplementedError,
    except a revealed assignment's; returns them, as "file: name", by assignment."""
    withheld: dict[str, list[str]] = {}
    for file, definitions in answer_definitions(root, known, named).items():
        lines = (root / file).read_text(encoding="utf-8").split("\n")
        hidden = [d for d in definitions if d[2] not in revealed]
        for node, name, assignment in sorted(hidden, key=lambda d: -d[0].lineno):  # from the end: lines stay put
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            start = body[0].lineno if body else node.end_lineno + 1
            lines[start - 1:node.end_lineno] = [" " * (node.col_offset + 4)
                                                + WITHHELD_BODY.format(name=name, assignment=assignment)]
            withheld.setdefault(assignment, []).append(f"{file}: {name}")
        (root / file).write_text("\n".join(lines), encoding="utf-8")
    return withheld


# --------------------------------------------------------------------------------------------
# writing the distribution


def _fill(text: str, **values: str) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def _student_config(setting: release.InstallSetting) -> str:
    """_config.yml with the repository and the launch buttons on the public repository."""
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["repository"] = {**config.get("repository", {}), "url": setting.repository}
    header = ("# Jupyter Book 1.x configuration of the students' edition (written by the course's\n"
              "# `python -m autograder publish`): `jupyter-book build .` or `make site`.\n")
    return header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def _copy_ignoring(source_root: Path):
    """shutil.copytree's ignore for a copied folder: the usual clutter, and the answers' modules."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        ignored = set(IGNORED(folder, names))
        if Path(folder).resolve() == (source_root / ANSWERS).resolve():
            ignored |= {name for name in names if name not in SHIPPED_ANSWERS}
        return ignored
    return ignore


def build_wheel(dist: Path, out: Path) -> Path:
    """Build the checks' wheel from the distribution's pyproject.toml and attention_checks/,
    in a copy (setuptools writes build/ and *.egg-info beside the sources), reproducibly."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="publish-wheel-") as tmp:
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(dist / name, Path(tmp) / name)
        shutil.copytree(dist / CHECKS, Path(tmp) / CHECKS, ignore=IGNORED)
        env = {**os.environ, "SOURCE_DATE_EPOCH": WHEEL_EPOCH, "PIP_NO_INDEX": "1"}
        pip = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                              "--wheel-dir", str(out), tmp], capture_output=True, text=True, env=env, cwd=tmp)
        if pip.returncode:
            raise PublishError(f"could not build the checks' wheel: {pip.stderr.strip()[-1000:]}")
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise PublishError(f"expected one wheel in {out}, found {[w.name for w in wheels]}")
    return wheels[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pin_setup_cells(exercises: Path, assignments: list[str], digest: str, pyproject: Path) -> None:
    """Every released setup cell installs the configured wheel and checks its sha256."""
    release.write_install_lines(exercises, assignments, pyproject, sha256=digest)
    problems = release.install_problems([exercises], pyproject, sha256=digest)
    if problems:
        raise PublishError("setup cells that do not install the checks as configured:\n" + "\n".join(problems))


@dataclass
class Published:
    """What publish wrote: the folder, its assignments, the wheel and its sha256, the two scans."""

    folder: Path
    assignments: list[str]
    wheel: Path
    digest: str
    report: ScanReport
    functional: FunctionalReport
    revealed: frozenset[str] = frozenset()
    withheld: dict[str, list[AnswerCell]] = field(default_factory=dict)  # the book's answer cells left out
    withheld_definitions: dict[str, list[str]] = field(default_factory=dict)  # of the book's modules, "file: name", and whole pages

    @property
    def leaks(self) -> bool:
        return bool(self.report.hits or self.functional.earned)


def publish(dest: Path, *, site: bool = False, source_dir: Path = SOLUTIONS_DIR,
            pyproject: Path = release.PYPROJECT, reveal: tuple[str, ...] = ()) -> Published:
    """Write the student distribution into ``dest`` (empty or new), then scan it. The book's answer
    cells are withheld, except those of the assignments in ``reveal``."""
    dest = Path(dest).resolve()
    if dest == REPO_ROOT or REPO_ROOT.is_relative_to(dest) or dest.is_relative_to(REPO_ROOT):
        raise PublishError(f"{dest}: write the distribution outside this repository (it is a repository of its own)")
    if dest.exists() and any(dest.iterdir()):
        raise PublishError(f"{dest} is not empty: publish writes a new folder (delete it, or name another)")
    known = release.find_assignments(source_dir)
    unknown = sorted(set(reveal) - set(known))
    if unknown:
        raise PublishError(f"--reveal {', '.join(unknown)}: no such assignment (known: {', '.join(known)})")
    revealed = frozenset(reveal)
    book_answer_cells(REPO_ROOT / "book", known)  # every tag names an assignment
    answer_definitions(REPO_ROOT, known)  # every named definition is there, of an assignment
    # The functional scan runs last, in bubblewrap: where it cannot run, say so before building anything.
    problem = sandbox_problem()
    if problem:
        raise PublishError(f"the functional scan cannot run, so nothing was written: {problem}")
    setting = release.read_setting(pyproject)
    values = dict(version=setting.version, repository=setting.repository, wheel=setting.wheel)
    dest.mkdir(parents=True, exist_ok=True)

    for name in COPIED:
        source, target = REPO_ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=_copy_ignoring(REPO_ROOT))
        else:
            shutil.copy2(source, target)
    (dest / "_config.yml").write_text(_student_config(setting), encoding="utf-8")
    withheld = withhold_answers(dest / "book", known, revealed)
    withheld_definitions = withhold_definitions(dest, known, revealed)
    for assignment, pages in withhold_pages(dest / "book", revealed).items():
        withheld_definitions.setdefault(assignment, []).extend(pages)
    assignments = release.generate(source_dir, dest / "exercises", write_install=False)
    release.write_visible_answers(dest / "exercises", dest / VISIBLE, assignments)
    values["assignments"] = ", ".join(f"`{a}`" for a in assignments)
    for template, name in [("README.md", "README.md"), ("Makefile", "Makefile"), ("requirements.txt", "requirements.txt"),
                           ("pyproject.toml", "pyproject.toml"), ("gitignore", ".gitignore")]:
        (dest / name).write_text(_fill((TEMPLATES / template).read_text(encoding="utf-8"), **values), encoding="utf-8")
    # The chapters' Colab notebooks download book/*.py from the repository in _config.yml: the public one.
    chapters = subprocess.run([sys.executable, str(dest / "book" / "_ext" / "chapter_notebooks.py")],
                              capture_output=True, text=True, cwd=dest)
    if chapters.returncode:
        raise PublishError(f"could not write the chapters' notebooks: {chapters.stderr.strip()[-1000:]}")

    wheel = build_wheel(dest, dest / "dist")
    digest = sha256(wheel)
    pin_setup_cells(dest / "exercises", assignments, digest, pyproject)
    if site:
        build_site(dest)
    report = scan(dest, secret_lines(source_dir, dest / "exercises", revealed))
    try:
        functional = functional_scan(dest, source_dir, revealed=revealed)
    except (RuntimeError, subprocess.TimeoutExpired) as err:  # the scan stopped: not proven clean
        raise PublishError(f"the functional scan could not run, so the distribution is not proven clean: {err}") from None
    return Published(dest, assignments, wheel, digest, report, functional, revealed, withheld, withheld_definitions)


def book_environment() -> dict[str, str]:
    """This process's environment for a build of the book, less MPLBACKEND: the chapters' kernels
    draw their figures with matplotlib's inline backend, which a backend named in the environment
    replaces (the grading kernels' Agg, set while the grader runs in this process): every figure
    would be lost, and the build would fail on their undefined labels."""
    return {name: value for name, value in os.environ.items() if name != "MPLBACKEND"}


def build_site(dist: Path) -> Path:
    """Build the book of the distribution, from the distribution alone, into dist/_build/html."""
    book = subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", str(dist),
                           "--warningiserror", "--keep-going"], capture_output=True, text=True, cwd=dist,
                          env=book_environment())
    if book.returncode:
        raise PublishError(f"jupyter-book could not build the site of {dist}:\n{book.stdout[-2000:]}{book.stderr[-2000:]}")
    return dist / "_build" / "html"
