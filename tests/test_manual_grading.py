"""Written questions graded by hand (issue 19), end to end with nbgrader's own tools: the CLI grades
a class into an instructor's gradebook, the written answers wait for a person (never reported as
lost), formgrader finds the autograded notebooks, a grader gives a written answer its points the
way formgrader saves them, and the LMS export then carries the final score."""
from __future__ import annotations

import csv
import html
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from classroom import grade, make_submission, notebook_name, written_answers

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENT = "01-self-attention"  # the quickest to grade
NB = notebook_name(ASSIGNMENT)
(WRITTEN,) = written_answers(ASSIGNMENT)  # its one written question
ANSWER = "The scores are symmetric since x_i . x_j = x_j . x_i, so learned projections are needed."


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"))))


def _export(results: Path, out: Path, *extra) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "autograder", "export", str(results), "--out", str(out), *map(str, extra)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A class graded with --gradebook into an instructor's course folder."""
    tmp = tmp_path_factory.mktemp("manual")
    subs, results, course = tmp / "SUBMISSIONS", tmp / "RESULTS", tmp / "course"
    make_submission(subs, "answered", ASSIGNMENT, {WRITTEN: ANSWER})
    make_submission(subs, "blank", ASSIGNMENT)  # every function right, the written answer left as released
    make_submission(subs, "stub", ASSIGNMENT, {WRITTEN: "I do not know."}, answer_all=False)
    (subs / "absent" / ASSIGNMENT).mkdir(parents=True)
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.root = '.'\n")
    roster = tmp / "students.csv"  # as collect writes it
    roster.write_text("student_id,lms_id,name,email\nanswered,1,Ana Answered,ana@example.org\n"
                      "blank,2,\"Blank, Bo\",bo@example.org\nstub,3,Stu Stub,\nabsent,4,Ab Sent,\n", encoding="utf-8")
    run = grade(subs, results, "--jobs", "2", "--gradebook", course / "gradebook.db", "--roster", roster)
    assert run.returncode == 0, run.stderr
    return tmp, results, course


def test_written_points_are_pending_never_lost(graded):
    _, results, _ = graded
    rows = {r["student_id"]: r for r in _csv((results / "grades.csv").read_text())}
    answered, blank, stub, absent = (rows[s] for s in ("answered", "blank", "stub", "absent"))
    # max_score counts the autograded tests; the written points stand beside it, the same for everyone
    assert answered["score"] == answered["max_score"] == blank["score"] == absent["max_score"]
    assert {r["written_points"] for r in rows.values()} == {"2"}
    assert (answered["to_grade_by_hand"], blank["to_grade_by_hand"], stub["to_grade_by_hand"]) == ("2", "0", "2")
    assert (stub["score"], absent["status"], absent["to_grade_by_hand"]) == ("0", "missing", "0")
    notebooks = {r["student_id"]: r for r in json.loads((results / "results.json").read_text())}
    (written,) = [t for t in notebooks["answered"]["tests"] if t["manual"]]
    assert (written["grade_id"], written["points"], written["max_points"], written["passed"]) == (WRITTEN, None, 2, None)
    assert "graded by hand later" in written["message"]
    (left,) = [t for t in notebooks["blank"]["tests"] if t["manual"]]  # nbgrader gives an unchanged answer 0
    assert (left["points"], left["passed"]) == (0, None) and "not answered" in left["message"]
    assert all(t["passed"] for t in notebooks["answered"]["tests"] if not t["manual"])


def test_the_feedback_page_shows_the_answer_as_graded_by_hand_later(graded):
    _, results, _ = graded
    page = (results / "feedback" / "answered" / ASSIGNMENT / f"{NB}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert ANSWER.split(",")[0] in text
    assert "Graded by hand later (2 points)" in text
    # the page's score as every page of the service shows it: the pending points out of both
    assert re.search(r"\(Score: 8 / 8; written answer: pending \(2 points\)\)", text), text[-3000:]
    assert not re.search(r"Written response\s*\(Score: 0", text)  # not as 0 points
    blank = html.unescape(re.sub(r"<[^>]+>", " ", (results / "feedback" / "blank" / ASSIGNMENT / f"{NB}.html").read_text()))
    assert "YOUR ANSWER HERE" in blank and "graded by hand later" not in blank


def test_formgrader_lists_the_assignment_and_the_students_by_name(graded):
    """What formgrader's pages show comes from nbgrader's API over the course folder that
    grade --gradebook filled: the assignment (from source/), each submission with the name
    from --roster."""
    _, _, course = graded
    config = Config()
    config.CourseDirectory.root = str(course)
    api = NbGraderAPI(config=config)
    assert [a["name"] for a in api.get_assignments()] == [ASSIGNMENT]
    names = {s["student"]: (s["first_name"], s["last_name"]) for s in api.get_submissions(ASSIGNMENT)}
    assert names == {"answered": ("Ana", "Answered"), "blank": ("Bo", "Blank"), "stub": ("Stu", "Stub")}
    assert {s["id"]: s["email"] for s in api.get_students()}["answered"] == "ana@example.org"


def test_formgrader_finds_the_answers_to_grade(graded):
    """The gradebook has the submissions with the written answer flagged, and the autograded
    notebooks lie where formgrader's manual grading view reads them."""
    _, results, course = graded
    config = Config()
    config.CourseDirectory.root = str(course)
    api = NbGraderAPI(config=config)
    flagged = {s["student"]: s["needs_manual_grade"] for s in api.get_submissions(ASSIGNMENT)}
    assert flagged == {"answered": True, "blank": False, "stub": True}
    coursedir = CourseDirectory(config=config)
    for student in flagged:
        path = Path(coursedir.format_path(coursedir.autograded_directory, student, ASSIGNMENT)) / f"{NB}.ipynb"
        assert path.read_bytes() == (results / "autograded" / student / ASSIGNMENT / f"{NB}.ipynb").read_bytes()
    answered = json.loads((course / "autograded" / "answered" / ASSIGNMENT / f"{NB}.ipynb").read_text())
    cell = next(c for c in answered["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == WRITTEN)
    assert "".join(cell["source"]) == ANSWER
    assert not (course / "autograded" / "absent").exists()


def test_the_lms_export_takes_the_hand_given_points_from_the_gradebook(graded):
    tmp, results, course = graded
    rows = {r["student_id"]: r for r in _csv((results / "grades.csv").read_text())}
    auto, total = float(rows["answered"]["score"]), float(rows["answered"]["max_score"]) + 2

    before = _export(results, tmp / "before.csv", "--format", "csv")
    exported = {r["student_id"]: r for r in _csv((tmp / "before.csv").read_text(encoding="utf-8-sig"))}
    # the score rule: a written answer not graded yet is in neither the points nor the maximum
    assert (float(exported["answered"]["score"]), float(exported["answered"]["max_score"])) == (auto, total - 2)
    assert exported["answered"]["to_grade_by_hand"] == "2" and exported["blank"]["to_grade_by_hand"] == "0"
    assert "to grade by hand: answered" in before.stderr and "blank" not in before.stderr.split("students' grades")[0]
    # the LMS, whose maximum is the whole, gets the points as they are: never scaled up while the answer waits
    assert _export(results, tmp / "pending.csv", "--format", "canvas").returncode == 0
    table = list(csv.reader(io.StringIO((tmp / "pending.csv").read_text(encoding="utf-8-sig"))))
    assert table[1][-1] == f"{total:g}" and float({row[1]: row[-1] for row in table[2:]}["answered"]) == auto

    # A grader gives the answer 1.5 of its 2 points in formgrader, which saves the grade so.
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade(WRITTEN, NB, ASSIGNMENT, "answered")
        grade.manual_score, grade.needs_manual_grade = 1.5, False
        gb.db.commit()

    after = _export(results, tmp / "after.csv", "--format", "canvas", "--gradebook", course / "gradebook.db")
    table = list(csv.reader(io.StringIO((tmp / "after.csv").read_text(encoding="utf-8-sig"))))
    assert table[1][-1] == f"{total:g}"  # Points Possible: the whole assignment
    scores = {row[1]: row[-1] for row in table[2:]}
    assert float(scores["answered"]) == auto + 1.5  # the total includes the hand-given points
    assert float(scores["blank"]) == auto and scores["absent"] == ""
    assert "to grade by hand: stub" in after.stderr and "to grade by hand: answered" not in after.stderr
    assert "final scores from" in after.stdout

    # Grading the class again keeps the hand-given points (nbgrader flags them for a second look).
    run = subprocess.run([sys.executable, "-m", "autograder", "export-gradebook", str(results), "--gradebook",
                          str(course / "gradebook.db")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission(ASSIGNMENT, "answered").score == auto + 1.5


def test_feedback_made_after_hand_grading_shows_the_given_points(graded):
    """An instructor who gives the written answer its points in formgrader, then makes the feedback
    with nbgrader (the course's configuration, as nbgrader/nbgrader_config.py loads it): the page
    shows those points, no longer "graded by hand later"."""
    from autograder.grading.course import grading_config

    tmp, results, course = graded
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade(WRITTEN, NB, ASSIGNMENT, "answered")
        grade.manual_score, grade.needs_manual_grade = 1.5, False
        gb.db.commit()
    config = grading_config(course)
    config.CourseDirectory.root = str(course)
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    made = api.generate_feedback(ASSIGNMENT, "answered", force=True)
    assert made["success"], made
    page = (course / "feedback" / "answered" / ASSIGNMENT / f"{NB}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert re.search(r"Written response\s*\(Score: 1\.5 / 2\.0\)", text) and "graded by hand later" not in text.lower()
