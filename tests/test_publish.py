"""The student distribution (`python -m autograder publish DIR`): nothing of the answer key in it.
(The functional scan's own tests, planted implementations, are tests/test_functional_scan.py; the
visible tests judged from the published data, tests/test_published_answers.py.)

One distribution, written by the command as an instructor runs it, serves every test: the scan
of every file for every secret line (autograder.instructor.publish says what one is), a scan that must fail
when one solution line is planted, what the distribution holds, a released notebook's setup cell
in a fresh environment (it installs the wheel from a local folder standing in for the release,
offline, then passes every visible test with the model solution pasted), and last the site,
built from a copy of the distribution alone and scanned too. The distribution and its site are
made in the background as the session begins (tests/head_start.py). The book's answer cells
(tagged answers:<assignment>) are in the self-study book and not in the distribution, unless their
assignment is revealed; publish refuses a reveal of no assignment, and a sandbox its scan cannot
run in, before it writes anything.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections import Counter

import nbformat
import pytest
import yaml

from autograder.instructor import functional, publish

from autograder.grading import release
from classroom import REPO, reference_code
from test_install import fresh_venv, kernel

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENT = "01-self-attention"  # the smallest; every setup cell installs the same way


def _scan(dist):
    report = publish.scan(dist, publish.secret_lines(REPO / "solutions", dist / "exercises"))
    print(report.summary())  # the figures, for the record (pytest -s)
    return report


def _hits(report) -> str:
    return "\n".join(f"{file}: {line!r} ({where})" for file, line, where in report.hits)


def test_no_file_of_the_distribution_holds_a_line_of_a_model_solution_or_a_hidden_test(published):
    dist, run = published
    report = _scan(dist)
    assert report.hits == [], _hits(report)
    assert run.returncode == 0 and report.summary() in run.stdout, run.stdout + run.stderr[-3000:]
    # and the functional scan: nothing in it earns a graded name's points (issue 48)
    assert "functional scan: " in run.stdout and ": 0 earn points" in run.stdout, run.stdout + run.stderr[-3000:]
    # what was scanned: every file (the wheel's members, the notebooks), secrets from every assignment
    secrets = publish.secret_lines(REPO / "solutions", dist / "exercises")
    assert report.secrets == len(secrets) > 300
    assert {where.split("/")[0] for where in secrets.values()} == set(release.find_assignments(REPO / "solutions"))
    files = {str(p.relative_to(dist)) for p in dist.rglob("*") if p.is_file()}
    assert report.files == len(files) and f"dist/{release.read_setting().wheel}" in files - set(report.binary)
    # with every graded chapter unrevealed: each answer cell of the book a note, none left
    for page in sorted((REPO / "book").glob("*.md")):
        cells = publish.answer_cells(page)
        shown = (dist / "book" / page.name).read_text()
        assert publish.answer_cells(dist / "book" / page.name) == [], page.name
        if page.name in publish.WHOLE_PAGES:  # a page withheld whole: its title and one note
            assert "code-cell" not in shown and "builds and trains the model solution of" in shown, page.name
        else:
            assert shown.count("This cell shows the model solution of") == len(cells), page.name
    for assignment in ("07-additive-attention", "08-decoder", "09-attention-at-scale", "10-positions-and-generation"):
        assert re.search(rf"the book's answers of {assignment}: \d+ cells withheld", run.stdout), run.stdout
    # and the book's modules' answers: the decoding loop of book/transformer.py (issue 58)
    assert "the book's answers of 08-decoder: book/transformer.py: Seq2Seq.generate withheld" in run.stdout, run.stdout
    assert "def generate(self, src, start_token, steps)" in (dist / "book" / "transformer.py").read_text()
    assert "logits[:, -1]" not in (dist / "book" / "transformer.py").read_text()


def test_one_planted_solution_line_fails_the_scan(published, tmp_path):
    """The same solution line, hidden as a student could find it: in a page's highlighted code,
    in a notebook's JSON, in a module of a wheel. Each is found, and nothing else."""
    dist, _ = published
    secrets = publish.secret_lines(REPO / "solutions", dist / "exercises")
    line, where = next((s, w) for s, w in secrets.items() if w.startswith("03-qkv") and "softmax" in s)
    page = tmp_path / "page.html"
    page.write_text("<pre>" + "".join(f'<span class="n">{word}</span> ' for word in line.split()) + "</pre>")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = 1\n    {line}  # planted\n")])
    nbformat.write(notebook, tmp_path / "planted.ipynb")
    wheel = tmp_path / next((dist / "dist").glob("*.whl")).name
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("attention_checks/__init__.py", "")
        archive.writestr("attention_checks/planted.py", f"def f(scores):\n    {line}\n")
    report = publish.scan(tmp_path, secrets)
    assert sorted((file, secret) for file, secret, _ in report.hits) == \
        sorted([("page.html", line), ("planted.ipynb", line), (wheel.name, line)])


def test_the_distribution_is_the_students_edition(published):
    dist, _ = published
    setting = release.read_setting()
    present = {p.name for p in dist.iterdir()}
    assert not present & {"solutions", "autograder", "tests", "instructor", "benchmarks", "classroom"}
    assert {"book", "exercises", "attention_checks", "README.md", "_config.yml", "_toc.yml", "dist"} <= present
    config = yaml.safe_load((dist / "_config.yml").read_text())
    assert config["repository"]["url"] == setting.repository
    readme = (dist / "README.md").read_text()
    assert "make site" in readme and "make lab" in readme and setting.repository in readme
    assert "{version}" not in readme and f"v{setting.version}" in readme
    # its Makefile sets up the venv with the repository's own recipe (tools/venv.mk, copied)
    # as a student runs it from a shell: not inside the suite's own `make test`, whose MAKELEVEL
    # would make it print "Entering directory" around the plan
    student_shell = {k: v for k, v in os.environ.items() if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS"}}
    plan = subprocess.run(["make", "-n", "-B", "site"], cwd=dist, capture_output=True, text=True,
                          env=student_shell)
    assert plan.returncode == 0, plan.stderr
    # PyTorch's CPU build by default (a laptop's few hundred MB), pip's own index for a GPU
    assert ('-m pip download --quiet --no-deps --dest .venv/torch-wheel \\\n'
            '\t--index-url https://download.pytorch.org/whl/cpu "torch"') in plan.stdout, plan.stdout
    for_a_gpu = subprocess.run(["make", "-n", "-B", "site", "TORCH_INDEX="], cwd=dist, capture_output=True,
                               text=True, env=student_shell)
    assert '-m pip download --quiet --no-deps --dest .venv/torch-wheel \\\n\t "torch"' in for_a_gpu.stdout, \
        for_a_gpu.stdout
    assert "tools/web_assets.py" in plan.stdout, plan.stdout
    assert plan.stdout.rstrip().endswith(".venv/bin/jupyter-book build . --keep-going"), plan.stdout
    assert sorted(p.name for p in (dist / "exercises").iterdir()) == release.find_assignments(REPO / "solutions")
    # every setup cell installs this very wheel, its sha256 pinned
    (wheel,) = (dist / "dist").glob("*.whl")
    assert wheel.name == setting.wheel
    assert release.install_problems([dist / "exercises"], sha256=publish.sha256(wheel)) == []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert {name.split("/")[0] for name in names} == {
            "attention_checks", f"attention_checks-{setting.version}.dist-info"}
    # no reference and no mistake of answers/, in the folder or the wheel: only the judging that
    # computes no answer, and the visible cases' answers as data, for every assignment
    assert {p.name for p in (dist / "attention_checks" / "answers").glob("*.py")} == publish.SHIPPED_ANSWERS
    assert {n.removeprefix("attention_checks/answers/") for n in names
            if n.startswith("attention_checks/answers/")} == publish.SHIPPED_ANSWERS
    data = {f"{a}{suffix}" for a in release.find_assignments(REPO / "solutions") for suffix in (".json", ".pt")}
    assert {p.name for p in (dist / "attention_checks" / "visible").iterdir()} == data
    assert {n.removeprefix("attention_checks/visible/") for n in names if "/visible/" in n} == data
    # the same sources give the same wheel, byte for byte (the pinned hash stays right)
    again = publish.build_wheel(dist, dist.parent / "again")
    assert publish.sha256(again) == publish.sha256(wheel)


def _cell(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def test_a_released_setup_cell_installs_the_wheel_offline_and_the_visible_tests_pass(published, tmp_path,
                                                                                   monkeypatch):
    from nbclient import NotebookClient

    dist, _ = published
    setting = release.read_setting()
    python = fresh_venv(tmp_path)
    assert subprocess.run([python, "-c", "import attention_checks"], capture_output=True, cwd=tmp_path).returncode
    name = kernel(tmp_path, python, monkeypatch)
    (wheel,) = (dist / "dist").glob("*.whl")
    stand_in = tmp_path / "release"  # the release's assets, on this machine
    stand_in.mkdir()
    shutil.copy2(wheel, stand_in)
    tampered = tmp_path / "tampered"  # another wheel under the same name: its hash differs
    tampered.mkdir()
    shutil.copy2(wheel, tampered / wheel.name)
    with zipfile.ZipFile(tampered / wheel.name, "a") as archive:
        archive.writestr("attention_checks/extra.py", "")
    work = tmp_path / "colab"  # the student's folder: no attention_checks in it or above it
    work.mkdir()
    assert not [p for p in [work, *work.parents] if (p / "attention_checks").exists()]

    released = nbformat.read(next((dist / "exercises" / ASSIGNMENT).glob("*.ipynb")), as_version=4)
    setup = _cell(released, "setup").source
    assert setup.count(setting.release_url) == 1 and publish.sha256(wheel) in setup
    at = lambda folder: setup.replace(setting.release_url, folder.as_uri() + "/")  # noqa: E731
    where = "import attention_checks, importlib.metadata as m; print(attention_checks.__file__, m.version('attention-checks'))"
    # the released notebook's cells after the setup cell, each solution cell with the model solution
    model = reference_code(ASSIGNMENT)
    rest = [nbformat.v4.new_code_cell(model.get(c.metadata["nbgrader"]["grade_id"], c.source))
            for c in released.cells[released.cells.index(_cell(released, "setup")) + 1:] if c.cell_type == "code"]
    visible = [c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade") and "check_" in c.source]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(at(tmp_path / "missing")),
                                         nbformat.v4.new_code_cell(at(tampered)),
                                         nbformat.v4.new_code_cell(visible[0].source),  # after a failed setup
                                         nbformat.v4.new_code_cell(at(stand_in)),
                                         nbformat.v4.new_code_cell(where),
                                         nbformat.v4.new_code_cell("a_name_of_my_own"),  # a typo, once installed
                                         *rest], metadata=released.metadata)
    NotebookClient(nb, timeout=600, kernel_name=name, allow_errors=True,
                   resources={"metadata": {"path": str(work)}}).execute()

    missing, wrong, too_early, installed, found, typo, *tests = [c.outputs for c in nb.cells]
    for outputs, reason in ((missing, "No such file"), (wrong, "DO NOT MATCH THE HASHES")):
        errors = [o for o in outputs if o.output_type == "error"]
        assert len(errors) == 1 and errors[0].ename == "ImportError", outputs
        paragraph = errors[0].evalue
        assert "Could not install the course's check helpers" in paragraph and reason in paragraph, paragraph
        assert f"git clone {setting.repository}" in paragraph and "exercises/" in paragraph
    (error,) = [o for o in too_early if o.output_type == "error"]  # the test's name is missing, and why
    assert error.ename == "NameError" and "run the setup cell again" in error.traceback[-1], error
    (error,) = [o for o in typo if o.output_type == "error"]  # the student's own: no word of the setup
    assert error.ename == "NameError" and "setup cell" not in "".join(error.traceback), error
    assert not [o for o in installed if o.output_type == "error"], installed
    text = "".join(o.get("text", "") for o in found)
    assert f"{tmp_path / 'venv'}" in text and text.strip().endswith(setting.version), text
    assert not [o for outputs in tests for o in outputs if o.output_type == "error"], tests
    checks = [o.get("text", "") for outputs in tests for o in outputs]
    assert len(visible) == sum("✓" in t for t in checks) > 0, checks


def test_the_site_builds_from_the_distribution_alone_and_holds_none_either(published_site):
    """The book built from a copy of the distribution's folder alone (as `publish --site` and a
    student's `make site` build it; tests/head_start.py builds it in the background); every page,
    search index and copied source scanned."""
    html = published_site
    copy = html.parent.parent
    assert (html / "index.html").is_file() and (html / "exercises" / ASSIGNMENT).is_dir()
    report = _scan(copy)
    assert report.hits == [], _hits(report)
    assert any(name.endswith(".png") for name in report.binary)  # figures: read as bytes, scanned too


def _answer_cells(book) -> dict[str, list]:
    return {page.name: publish.answer_cells(page) for page in sorted(book.glob("*.md"))}


def test_the_books_answer_cells_are_withheld_until_their_assignment_is_revealed(tmp_path):
    """On a copy of the book's pages, in-process: every cell tagged answers:<assignment> becomes a
    note, except those of a revealed assignment; the pages stay pages that myst-nb reads; a tag
    that names no assignment stops publish."""
    from myst_nb.core.read import read_myst_markdown_notebook

    book = tmp_path / "book"
    book.mkdir()
    for page in (REPO / "book").glob("*.md"):
        shutil.copy2(page, book / page.name)
    shown = _answer_cells(book)
    count = Counter(a for cells in shown.values() for cell in cells for a in cell.assignments)
    assert count["08-decoder"] >= 4 and count["10-positions-and-generation"] >= 6, count
    assert count["07-additive-attention"] >= 6 and count["09-attention-at-scale"] >= 2, count
    known = release.find_assignments(REPO / "solutions")

    withheld = publish.withhold_answers(book, known, frozenset({"08-decoder"}))
    assert {a: len(cells) for a, cells in withheld.items()} == {a: n for a, n in count.items() if a != "08-decoder"}
    left = _answer_cells(book)
    assert [c.assignments for c in left["08-decoder.md"]] == [c.assignments for c in shown["08-decoder.md"]]
    assert left["10-positions-and-generation.md"] == []
    page = (book / "10-positions-and-generation.md").read_text()
    assert page.count("This cell shows the model solution of `10-positions-and-generation`") == \
        len(shown["10-positions-and-generation.md"])  # another page may hold answers of 10 too
    assert "class CharGPT" not in page and "def beam_search" not in page and "def apply_rope" not in page
    cells = read_myst_markdown_notebook(page).cells
    assert [c for c in cells if c.cell_type == "code"] and not [
        c for c in cells if any(str(t).startswith("answers:") for t in c.metadata.get("tags", []))]

    publish.withhold_answers(book, known, frozenset())  # nothing revealed: nothing left
    assert all(cells == [] for cells in _answer_cells(book).values())
    (book / "typo.md").write_text("# A page\n\n```{code-cell} ipython3\n:tags: [answers:08-decodr]\n\nx = 1\n```\n")
    with pytest.raises(publish.PublishError, match="book/typo.md:3: answers:08-decodr"):
        publish.withhold_answers(book, known, frozenset())


def test_a_page_that_trains_the_graded_model_is_withheld_whole_until_its_assignment_is_revealed(tmp_path):
    """Chapter 11 trains the model its exercise grades, and its prose reads the numbers off that
    run: the students' edition keeps its front matter and title, and a note instead of the rest."""
    book = tmp_path / "book"
    shutil.copytree(REPO / "book", book, ignore=shutil.ignore_patterns("*.ipynb", "data", "_ext", "__pycache__"))
    page = book / "11-your-gpt.md"
    original = page.read_text()
    assert publish.withhold_pages(book, frozenset({"11-your-gpt"})) == {} and page.read_text() == original
    assert publish.withhold_pages(book, frozenset()) == {"11-your-gpt": ["book/11-your-gpt.md"]}
    shown = page.read_text()
    front = original[:original.index("\n---\n", 4) + 5]
    assert shown.startswith(front) and "\n# " in shown and "appears after the assignment's deadline" in shown
    assert "code-cell" not in shown and "glue" not in shown and len(shown) < len(front) + 600


def test_a_book_modules_answer_definitions_are_withheld_until_their_assignment_is_revealed(tmp_path):
    """book/transformer.py's greedy decoding loop (Seq2Seq.generate, what 08-decoder grades behind a
    four-line wrapper): in the students' edition its body raises and says why, its signature and
    docstring stay, the module still imports and its model still runs; revealed, it is published as
    it is; a named definition that is not there stops publish."""
    import importlib.util

    import torch

    known = release.find_assignments(REPO / "solutions")
    (tmp_path / "book").mkdir()
    shutil.copy2(REPO / "book" / "transformer.py", tmp_path / "book" / "transformer.py")
    assert publish.withhold_definitions(tmp_path, known, frozenset({"08-decoder"})) == {}
    assert (tmp_path / "book" / "transformer.py").read_text() == (REPO / "book" / "transformer.py").read_text()

    withheld = publish.withhold_definitions(tmp_path, known, frozenset())
    assert withheld == {"08-decoder": ["book/transformer.py: Seq2Seq.generate"]}
    text = (tmp_path / "book" / "transformer.py").read_text()
    assert "def generate(self, src, start_token, steps):" in text and "Greedy decoding" in text and "logits[:, -1]" not in text
    spec = importlib.util.spec_from_file_location("withheld_transformer", tmp_path / "book" / "transformer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Seq2Seq(13).eval()
    src = torch.tensor([[4, 5, 6, 0]])
    assert model(src, src).shape == (1, 4, 13)  # the model itself is published whole
    with pytest.raises(NotImplementedError, match="Seq2Seq.generate is the model solution of 08-decoder"):
        model.generate(src, 1, 3)
    with pytest.raises(publish.PublishError, match="book/transformer.py: Seq2Seq.decode_greedily"):
        publish.withhold_definitions(tmp_path, known, frozenset(),
                                     {"book/transformer.py": {"Seq2Seq.decode_greedily": "08-decoder"}})


def test_a_revealed_assignments_answers_are_left_out_of_both_scans():
    """Its answer cells are published on purpose: the scans look for every other assignment's."""
    every = publish.secret_lines(REPO / "solutions", REPO / "exercises")
    revealed = publish.secret_lines(REPO / "solutions", REPO / "exercises", frozenset({"08-decoder"}))
    assert any(where.startswith("08-decoder/") for where in every.values())
    assert revealed == {line: where for line, where in every.items() if not where.startswith("08-decoder/")}
    graded = set(functional.hidden_cases(REPO / "solutions"))
    left = set(functional.hidden_cases(REPO / "solutions", frozenset({"08-decoder"})))
    assert graded - left == {"DecoderLayer", "Decoder", "Transformer", "shift_right", "greedy_decode"}


def _publish_command(tmp_path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "publish", str(tmp_path / "dist"), *args],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)


def test_a_reveal_that_names_no_assignment_is_refused_before_anything_is_written(tmp_path):
    run = _publish_command(tmp_path, "--reveal", "08-decoder", "--reveal", "08-decodr")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--reveal 08-decodr: no such assignment" in run.stderr and "10-positions-and-generation" in run.stderr
    assert not (tmp_path / "dist").exists()


def test_publish_stops_before_building_anything_when_its_scan_cannot_run(tmp_path):
    """No bubblewrap on the PATH: publish says so and exits 2 before it writes or builds anything
    (it used to fail after the site's build, minutes later)."""
    env = {**os.environ, "PATH": str(tmp_path / "nothing-here")}
    run = _publish_command(tmp_path, "--site", env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "the functional scan cannot run, so nothing was written" in run.stderr and "bubblewrap" in run.stderr
    assert not (tmp_path / "dist").exists()


def _page_text(page) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(errors="replace")))


def test_the_self_study_book_shows_the_answer_cells_and_the_students_edition_does_not(site, published_site):
    for page, answer in [("07-additive-attention", "def additive_scores(q, k, w_q, w_k, v)"),
                         ("08-decoder", "def greedy_decode(model, src, start_token, max_len)"),
                         ("09-attention-at-scale", "def tiled_attention(q, k, v, block_size)"),
                         ("10-positions-and-generation", "class CharGPT(nn.Module)")]:
        own, students = _page_text(site / "book" / f"{page}.html"), _page_text(published_site / "book" / f"{page}.html")
        assert answer in own and "This cell shows the model solution of" not in own, page
        assert answer not in students and f"This cell shows the model solution of {page}" in students, page
