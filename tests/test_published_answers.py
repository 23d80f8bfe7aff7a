"""The visible tests judge the same from the published data as from the references (issue 48).

Students get no reference: their checks judge the visible cases from the answers the course
publishes as data (attention_checks.published, written by autograder.grading.release). For every
assignment, the model solution and every buggy simulated student of tests/corpus/ run the released notebook's test cells
in-process; each check's outcomes are judged twice, once by the references and once by the data,
and the two reports (points, every line, every hint) must be the same."""
from __future__ import annotations

import contextlib
import io

import nbformat
import pytest
import torch

from attention_checks import CheckFailed, published
from attention_checks.answers import judging
from autograder.grading import release
from classroom import REPO, load_corpus
from classroom.notebook import SourceNotebook

pytestmark = pytest.mark.slow  # every buggy corpus student's visible tests, judged twice

ASSIGNMENTS = release.find_assignments(REPO / "solutions")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("visible")
    release.write_visible_answers(REPO / "exercises", folder, ASSIGNMENTS)
    return folder


def _visible_cells(assignment: str) -> list[str]:
    (path,) = sorted((REPO / "exercises" / assignment).glob("*.ipynb"))
    return [c.source for c in nbformat.read(path, as_version=4).cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade") and "check_" in c.source]


def _not_installed(check):
    raise ModuleNotFoundError(f"{check.answers_module} is not published: the data's judging must not need it")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_corpus_student_gets_the_same_visible_verdicts_and_hints(assignment, data, monkeypatch):
    source = published.Published(data)
    judge = judging.judge
    compared, differences = [], []

    def both(check, cases, outcomes, **kwargs):
        by_references = judge(check, cases, outcomes, source=judging.REFERENCES, **kwargs)
        with monkeypatch.context() as students_side:  # as where the answers modules are not installed
            students_side.setattr(judging, "answer_for", _not_installed)
            by_data = judge(check, cases, outcomes, source=source, **kwargs)
        compared.append(check.name)
        if (by_data.score, by_data.text) != (by_references.score, by_references.text):
            differences.append(f"{student}: {check.name}\n--- references:\n{by_references.text}\n"
                               f"--- data:\n{by_data.text}")
        return by_references

    monkeypatch.setattr(judging, "judge", both)
    notebook = SourceNotebook(assignment)
    cells = _visible_cells(assignment)
    # the buggy ones: a corpus student that earns full marks passes as the model solution does
    students = [("model solution", {})] + [(e.name, e.cells) for e in load_corpus(assignment) if e.expect == "partial"]
    for student, answers in students:
        namespace = notebook.student(answers)
        for cell in cells:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(CheckFailed):
                exec(compile(cell, "<test>", "exec"), namespace)  # noqa: S102 - the course's own tests
    assert len(compared) >= len(cells) * len(students) > 0
    assert differences == [], "\n\n".join(differences)


def test_a_case_that_was_not_published_is_not_judged_and_says_why(data):
    from attention_checks import registry
    from attention_checks.probe import probe_all

    check = registry.load_all()["check_attention_scores"]
    cases = [dict(), dict(B=9, L=3)]  # the first is published, the second no visible test holds
    probed = probe_all(check, lambda x: x @ x.transpose(-2, -1), cases, torch.device("cpu"))
    report = judging.judge(check, cases, probed.outcomes, points=2, source=published.Published(data))
    assert report.score == 0 and "is not one of the visible cases the course published" in report.text
    assert "('B', '9')" in report.text and "Put the test's cases back" in report.text
    assert judging.judge(check, cases[:1], probed.outcomes[:1], points=2,
                         source=published.Published(data)).score == 2
