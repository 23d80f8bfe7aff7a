"""An instructor's own nbgrader, with the configuration this course ships (instructor/nbgrader_config.py).

nbgrader's own apps (`nbgrader generate_assignment`, `autograde`, `generate_feedback`), started
as an instructor starts them, in a course folder whose nbgrader_config.py is the shipped file:
the model solution gets full marks, the release notebook 0, a notebook that rebinds the
`check_*` names the score its honest twin gets, and no feedback page shows a hidden test.
The same rebinding notebook under stock nbgrader (no configuration) gets full marks: the shipped
file is what makes the difference.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.instructor.publish import HIDDEN, normalise, texts, without_comments
from classroom import REPO, make_submission, notebook_name

ASSIGNMENT = "01-self-attention"
NOTEBOOK = notebook_name(ASSIGNMENT)
SHIPPED = REPO / "instructor" / "nbgrader_config.py"
REBIND = "check_attention_scores = check_simple_self_attention = lambda *args, **kwargs: None\n"
STUB = "def simple_self_attention(x):\n    raise NotImplementedError()\n"
STUB_SCORES = "def attention_scores(x):\n    raise NotImplementedError()\n"
# files beside a notebook that Python or IPython would import or run in the kernel's folder
PLANTED = {"attention_checks/__init__.py": "", "attention_checks/self_attention.py": REBIND.replace(" = lambda", "=lambda"),
           "sitecustomize.py": "", ".ipython/profile_default/startup/00-rebind.py": REBIND}

pytestmark = [pytest.mark.slow,  # runs kernels, the CLI, a server or a browser
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="the shipped configuration needs bubblewrap")]


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    """An nbgrader app, as an instructor runs it in the course folder (config errors are fatal)."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
           "TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(Path(sys.executable).with_name("nbgrader")), *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=900)


def course_folder(root: Path, config: Path | None) -> Path:
    course = root / "course"
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    if config:
        shutil.copy2(config, course / "nbgrader_config.py")
    run = nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    assert run.returncode == 0, run.stdout + run.stderr
    return course


def code_scores(course: Path) -> dict[str, tuple[float, float]]:
    """student -> (autograded points, autograded maximum), from nbgrader's own gradebook."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {submission.student.id: (notebook.code_score, notebook.max_code_score)
                for submission in gb.find_assignment(ASSIGNMENT).submissions for notebook in submission.notebooks}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = course_folder(tmp_path_factory.mktemp("shipped"), SHIPPED)
    submitted = course / "submitted"
    make_submission(submitted, "honest", ASSIGNMENT)
    make_submission(submitted, "stub", ASSIGNMENT, answer_all=False)
    make_submission(submitted, "twin", ASSIGNMENT, {"simple_self_attention": STUB})  # attention_scores only
    # the twin, with the checks rebound in its last solution cell: the test cells after it call a no-op
    make_submission(submitted, "rebind", ASSIGNMENT, {"simple_self_attention": STUB + REBIND})
    for name, text in PLANTED.items():
        path = submitted / "rebind" / ASSIGNMENT / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for app in ("autograde", "generate_feedback"):
        run = nbgrader(course, app, ASSIGNMENT, "--force")
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return course


def test_the_model_solution_gets_full_marks_and_the_release_notebook_none(graded):
    scores = code_scores(graded)
    points, most = scores["honest"]
    assert most > 0 and points == most, scores
    assert scores["stub"] == (0, most), scores


def test_rebinding_the_checks_earns_what_the_honest_twin_earns(graded):
    scores = code_scores(graded)
    twin, most = scores["twin"]
    assert 0 < twin < most, scores
    assert scores["rebind"] == (twin, most), scores


def test_files_beside_a_notebook_never_reach_the_kernel_folder(graded):
    autograded = graded / "autograded" / "rebind" / ASSIGNMENT
    assert (autograded / f"{NOTEBOOK}.ipynb").is_file()
    assert [name for name in PLANTED if (autograded / name).exists()] == []


def test_no_feedback_page_shows_a_hidden_test(graded):
    source = nbformat.read(REPO / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    hidden = {normalise(line) for cell in source.cells for region in HIDDEN.findall(cell.source)
              for line in without_comments(region).split("\n") if len(normalise(line)) >= 12}
    assert len(hidden) >= 5
    pages = sorted((graded / "feedback").glob(f"*/{ASSIGNMENT}/{NOTEBOOK}.html"))
    assert {p.parts[-3] for p in pages} == {"honest", "stub", "twin", "rebind"}
    for page in pages:
        text = "\n".join(normalise(line) for t in texts(page.name, page.read_bytes())[0] for line in t.split("\n"))
        assert [line for line in hidden if line in text] == [], page


def test_stock_nbgrader_gives_the_rebinding_notebook_full_marks(tmp_path):
    """The control: without the shipped configuration, nbgrader is fooled (why it is shipped)."""
    course = course_folder(tmp_path, None)
    make_submission(course / "submitted", "rebind", ASSIGNMENT, {"attention_scores": STUB_SCORES + REBIND},
                    answer_all=False)
    run = nbgrader(course, "autograde", ASSIGNMENT, "--force")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    points, most = code_scores(course)["rebind"]
    assert most > 0 and points == most


def test_a_configuration_that_cannot_load_stops_nbgrader(tmp_path):
    """With TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR=1 (as the README says), a course whose
    nbgrader cannot import the grader does not fall back to nbgrader's unsafe defaults."""
    course = tmp_path / "course"
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    (course / "nbgrader_config.py").write_text(SHIPPED.read_text().replace("from autograder.grading.course",
                                                                           "from autograder.no_such_module"))
    run = nbgrader(course, "generate_assignment", ASSIGNMENT)
    assert run.returncode != 0 and "no_such_module" in run.stdout + run.stderr
