"""Hostile files, graded by the real CLI: links out of SUBMISSIONS, feedback pages that would
run the student's JavaScript.

Links (finding 4 of issue 12): a submitted notebook, assignment folder or student folder
that is a symbolic link (to the instructor's source notebook, to a classmate's) is
``invalid`` with a reason and scores 0, in a folder and in a zip as ``unzip`` makes them.

Scripts (finding 5): a student's outputs (HTML, JavaScript, SVG, an iframe, markdown, an
image whose metadata adds attributes) and markdown cells (raw HTML, ``javascript:`` links,
an SVG attachment) carry payloads that each log ``PWNED:<name>`` when they run. The
feedback page is opened in headless Chromium: nothing logs, no element keeps an event
handler or a ``javascript:`` URL, and the course's own content is still there. The same
payloads rendered by plain nbconvert do run (the payloads are real).
"""
from __future__ import annotations

import copy
import json
import os
import re
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter

from autograder.grading.feedback import FeedbackExporter
from classroom import REPO, Results, grade, make_submission, notebook_name, reference_code
from headless import Chromium, find_chromium

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENT = "03-qkv"
NOTEBOOK = notebook_name(ASSIGNMENT)
SDPA = "scaled_dot_product_attention"
SOURCE = REPO / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"  # the instructor's notebook: full marks
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def mark(name: str) -> str:
    """JavaScript that says it ran."""
    return f"console.error('PWNED:{name}')"


def svg(name: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="{mark(name)}">'
            f'<script>{mark(name + "-script")}</script></svg>')


# (name, output data, output metadata): what a student's cell can display.
OUTPUTS = [
    ("html-script", {"text/html": f"<b>mine</b><script>{mark('html-script')}</script>"}, {}),
    ("img-onerror", {"text/html": f'<img src="x" onerror="{mark("img-onerror")}">'}, {}),
    ("javascript", {"application/javascript": mark("javascript"), "text/plain": "js"}, {}),
    ("svg-onload", {"image/svg+xml": svg("svg-onload")}, {}),
    ("svg-in-html", {"text/html": svg("svg-in-html")}, {}),
    ("iframe-srcdoc", {"text/html": f'<iframe srcdoc="<script>{mark("iframe-srcdoc")}</script>"></iframe>'}, {}),
    ("isolated-html", {"text/html": f"<script>{mark('isolated-html')}</script>"}, {"text/html": {"isolated": True}}),
    ("markdown-output", {"text/markdown": f"<img src=x onerror=\"{mark('markdown-output')}\">"}, {}),
    ("png-width", {"image/png": PIXEL}, {"image/png": {"width": f"1 src=x onerror={mark('png-width')}"}}),
    ("style-tag", {"text/html": f"<style>body{{background:url(javascript:{mark('style-tag')})}}</style>"}, {}),
]
# A markdown cell a student adds (and its attachment), and links that run when clicked.
MARKDOWN = (f"My notes <script>{mark('md-script')}</script> <img src=x onerror=\"{mark('md-img')}\">\n\n"
            f"[a link](javascript:{mark('md-link')}) <a href=\"javascript:{mark('md-a')}\">b</a>\n\n"
            "![plot](attachment:plot.svg)\n")
ATTACHMENTS = {"plot.svg": {"image/svg+xml": svg("md-attachment")}}
STUDENT_CODE = ("\nfrom IPython.display import display\n"
                f"for _data, _metadata in {[(data, meta) for _, data, meta in OUTPUTS]!r}:\n"
                "    display(_data, raw=True, metadata=_metadata)\n"
                f"print({'<script>' + mark('stdout') + '</script>'!r})\n")

# The DOM after load: what ran, and what could still run on a click.
PAGE_REPORT = """(() => {
    const all = [...document.querySelectorAll("*")];
    return {
        handlers: all.flatMap(e => [...e.attributes].filter(a => /^on/i.test(a.name)).map(a => e.tagName + " " + a.name)),
        js_urls: all.flatMap(e => [...e.attributes].filter(a => /^\\s*javascript:/i.test(a.value)).map(a => e.tagName + " " + a.name)),
        frames: document.querySelectorAll("iframe, object, embed").length,
        scripts: [...document.scripts].filter(s => s.text.includes("PWNED")).length,
        bold_outputs: [...document.querySelectorAll(".output_html b")].map(b => b.textContent),
        text: document.body.innerText,
        setup_cell: [...document.querySelectorAll("details.setup-cell")].map(d => d.textContent).join(""),  // folded
    };
})()"""


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    executable = find_chromium()
    if executable is None:
        message = "headless Chromium not found (Debian: apt-get install chromium, or set CHROMIUM=/path/to/it)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    with Chromium(executable, tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


def open_page(browser: Chromium, path: Path) -> tuple[list[str], dict]:
    """The payloads that ran while ``path`` was opened (and a moment after), and the DOM report."""
    page = browser.new_page()
    try:
        page.goto(path.as_uri())
        page.evaluate("new Promise(r => setTimeout(r, 500))")  # late events: onerror, iframes
        ran = sorted({m for e in page.errors for m in re.findall(r"PWNED:([\w-]+)", e)})
        return ran, page.evaluate(PAGE_REPORT)
    finally:
        page.close()


def hostile_notebook() -> nbformat.NotebookNode:
    """Every payload as a graded notebook holds it: outputs of a student's cell, a markdown cell."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# The course's instructions", metadata={"nbgrader": {
            "grade": False, "grade_id": "intro", "locked": True, "solution": False, "schema_version": 3}}),
        nbformat.v4.new_code_cell("show()", outputs=[nbformat.v4.new_output("display_data", data=data, metadata=meta)
                                                     for _, data, meta in OUTPUTS]),
        nbformat.v4.new_markdown_cell(MARKDOWN, attachments=ATTACHMENTS),
    ])
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    return nb


def test_payloads_run_in_plain_nbconvert_and_not_in_the_feedback_page(chromium, tmp_path):
    """The control: nbconvert's page runs the payloads (so each can be seen); the feedback
    exporter's page runs none and leaves no handler or javascript: URL to click."""
    plain, _ = HTMLExporter(template_name="classic").from_notebook_node(hostile_notebook())
    (tmp_path / "plain.html").write_text(plain)
    ran, report = open_page(chromium, tmp_path / "plain.html")
    # (The JavaScript output needs jQuery from a CDN and SVG is shown as an <img>: neither runs
    # offline. The links run when clicked: report["js_urls"]. Printed text is always escaped.)
    assert set(ran) == {"html-script", "img-onerror", "svg-in-html", "svg-in-html-script", "iframe-srcdoc",
                        "isolated-html", "markdown-output", "png-width", "md-script", "md-img", "md-attachment",
                        "md-attachment-script"}, ran
    assert report["js_urls"] and report["handlers"] and report["scripts"]

    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(hostile_notebook())
    (tmp_path / "feedback.html").write_text(page)
    ran, report = open_page(chromium, tmp_path / "feedback.html")
    assert ran == [] and report["handlers"] == [] and report["js_urls"] == [] and report["frames"] == 0, report
    assert report["scripts"] == 0 and "mine" in report["bold_outputs"]
    assert "The course's instructions" in report["text"] and "My notes" in report["text"]
    assert "My notes" in report["text"] and "console.error" not in report["text"]  # a script goes, with its text


def test_the_course_markdown_is_kept_as_it_is():
    nb = hostile_notebook()
    nb.cells[0].source = "# Instructions\n\n<details><summary>a hint</summary>use <kbd>dim=-1</kbd></details>"
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(nb)
    assert "<details><summary>a hint</summary>" in page  # not a tag a student may use
    student = copy.deepcopy(nb.cells[0])
    student.metadata = {}
    nb.cells.append(student)
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(nb)
    # the student's copy: the tags removed, the text kept
    assert page.count("<details>") == 1 and page.count("a hint") == 2 and page.count("<kbd>dim=-1</kbd>") == 2


# -- graded by the real CLI ---------------------------------------------------------------------------
GLOB_NAMES = ["[ab]", "*", "ann lee (2)"]  # student folders whose names nbgrader would glob or split
def link(path: Path, target: Path | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def zip_link(archive: zipfile.ZipFile, name: str, target: str) -> None:
    """A symbolic link, stored as `zip --symlinks` stores it (unzip makes it a link again)."""
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o120777 << 16
    archive.writestr(info, target)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One class in a folder (links, and the script payloads), one in a zip (links as entries)."""
    tmp = tmp_path_factory.mktemp("hostile-files")
    folder = tmp / "class"
    honest = make_submission(folder, "honest", ASSIGNMENT)
    link(folder / "link-to-source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", SOURCE)
    link(folder / "link-to-classmate" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", honest)
    link(folder / "linked-student-folder", folder / "honest")
    link(folder / "linked-assignment-folder" / ASSIGNMENT, SOURCE.parent)
    # In the first solution cell: the outputs of cells after a hidden test are not shown at all.
    first = next(iter(reference_code(ASSIGNMENT)))
    scripts = make_submission(folder, "scripts", ASSIGNMENT, {first: reference_code(ASSIGNMENT)[first] + STUDENT_CODE})
    nb = nbformat.read(scripts, 4)
    (at,) = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == first]
    nb.cells.insert(at + 1, nbformat.v4.new_markdown_cell(MARKDOWN, attachments=ATTACHMENTS))
    nbformat.write(nb, scripts)
    for name in GLOB_NAMES:  # each one's own notebook, told apart by its score
        make_submission(folder, name, ASSIGNMENT, answer_all=name == "[ab]")
    make_submission(folder, "a", ASSIGNMENT, {SDPA: reference_code(ASSIGNMENT)[SDPA]}, answer_all=False)
    broken = make_submission(folder, "grade-id-a-list", ASSIGNMENT)
    nb = json.loads(broken.read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == SDPA:
            cell["metadata"]["nbgrader"]["grade_id"] = [SDPA]
    broken.write_text(json.dumps(nb))
    process = grade(folder, tmp / "out", "--cell-timeout", "30", "--notebook-timeout", "120")
    assert process.returncode == 0, process.stderr[-3000:]

    archive = tmp / "class.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(honest, f"submitted/honest/{ASSIGNMENT}/{NOTEBOOK}.ipynb")
        zip_link(z, f"submitted/zip-link-to-source/{ASSIGNMENT}/{NOTEBOOK}.ipynb", str(SOURCE))
        zip_link(z, f"submitted/zip-link-to-classmate/{ASSIGNMENT}/{NOTEBOOK}.ipynb",
                 f"../../honest/{ASSIGNMENT}/{NOTEBOOK}.ipynb")
        zip_link(z, "submitted/zip-linked-folder", str(folder / "honest"))
    zipped = grade(archive, tmp / "out-zip")
    assert zipped.returncode == 0, zipped.stderr[-3000:]
    return tmp, Results.read(tmp / "out"), Results.read(tmp / "out-zip")


def test_the_honest_student_gets_full_marks(graded):
    _, folder, zipped = graded
    for results in (folder, zipped):
        row = results.grades[("honest", ASSIGNMENT)]
        assert (row["status"], row["score"]) == ("ok", row["max_score"]) and float(row["score"]) > 0


@pytest.mark.parametrize("student, where, zipped", [
    ("link-to-source", "a file outside", False),
    ("link-to-classmate", "another file in the submissions", False),
    ("linked-student-folder", "another file in the submissions", False),
    ("linked-assignment-folder", "a file outside", False),
    ("zip-link-to-source", "a file outside", True),
    ("zip-link-to-classmate", "another file in the submissions", True),
    ("zip-linked-folder", "a file outside", True),
])
def test_a_linked_notebook_is_invalid_with_a_reason(graded, student, where, zipped):
    tmp, folder, zip_results = graded
    results = zip_results if zipped else folder
    row = results.grades[(student, ASSIGNMENT)]
    assert (row["status"], float(row["score"])) == ("invalid", 0.0), row
    assert f"is a symbolic link to {where}" in row["reason"] and float(row["max_score"]) > 0
    page = (tmp / ("out-zip" if zipped else "out") / "feedback" / student / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert "symbolic link" in page and "def scaled_dot_product_attention" not in page  # the target was not read


def test_a_feedback_page_runs_none_of_the_students_scripts(graded, chromium):
    tmp, results, _ = graded
    row = results.grades[("scripts", ASSIGNMENT)]
    assert (row["status"], row["score"]) == ("ok", row["max_score"])  # the payloads cost nothing
    ran, report = open_page(chromium, tmp / "out" / "feedback" / "scripts" / ASSIGNMENT / f"{NOTEBOOK}.html")
    assert ran == [] and report["handlers"] == [] and report["js_urls"] == [] and report["frames"] == 0, report
    assert report["scripts"] == 0
    # The course's own content: its instructions, the setup cell's output, each test's verdict.
    assert "Assignment 03" in report["text"] and "tests run on" in report["setup_cell"]
    verdicts = [t["message"].splitlines()[0] for t in results.notebooks[("scripts", ASSIGNMENT)]["tests"]
                if not t.get("manual")]  # a written answer's page says "graded by hand later" (test_feedback)
    assert verdicts and all(v in report["text"] for v in verdicts)
    assert "My notes" in report["text"] and "mine" in report["bold_outputs"]  # safe HTML still renders


def test_student_folders_named_like_glob_patterns_keep_their_names_and_their_own_work(graded):
    """'[ab]' gets its own full marks (not the stub of 'a', which it matches as a pattern), under
    its real name in grades.csv, results.json and the feedback folder."""
    tmp, results, _ = graded
    full = results.grades[("honest", ASSIGNMENT)]["max_score"]
    scores = {name: results.grades[(name, ASSIGNMENT)] for name in [*GLOB_NAMES, "a"]}
    assert all(row["status"] == "ok" for row in scores.values()), scores
    assert scores["[ab]"]["score"] == full and scores["*"]["score"] == scores["ann lee (2)"]["score"] == "0"
    assert 0 < float(scores["a"]["score"]) < float(full)
    for name in GLOB_NAMES:
        assert results.notebooks[(name, ASSIGNMENT)]["student_id"] == name
        page = (tmp / "out" / "feedback" / name / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
        assert f"{NOTEBOOK} (Score: " in page  # nbgrader's page, not a status page


def test_a_grade_id_of_the_wrong_type_is_named_and_the_notebook_graded(graded):
    _, results, _ = graded
    row = results.grades[("grade-id-a-list", ASSIGNMENT)]
    assert (row["status"], row["score"]) == ("ok", results.grades[("honest", ASSIGNMENT)]["max_score"]), row
    assert f'its nbgrader grade_id is ["{SDPA}"] (of type list, not a string)' in row["reason"]
