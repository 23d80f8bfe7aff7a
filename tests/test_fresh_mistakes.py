"""The fresh corpus (tests/corpus_fresh/<assignment>/<name>.py): mistakes written for issue 59,
absent from the answers' catalogue and from tests/corpus, which benchmarks/fresh_mistakes.py
grades to measure how often the grader names a mistake nobody anticipated. These tests keep the
yardstick honest: every graded name has at least three, each file is a mistake (it loses points
in the tests of the name it breaks), none repeats a corpus student, and no message accuses a
fresh student of a forbidden call or of tampering, which none makes. How often the hints name the
mistakes is the benchmark's to report (docs/benchmarks.md), not asserted here."""
from __future__ import annotations

import ast
import functools
from collections import Counter
from pathlib import Path

import pytest

from attention_checks.registry import checks
from classroom import REPO, load_corpus
from classroom.notebook import SourceNotebook, run_test_cell

from autograder.layout import find_assignments
from benchmarks.fresh_mistakes import ACCUSATION, FRESH, FreshMistake

ASSIGNMENTS = [a for a in find_assignments(REPO / "solutions") if (FRESH / a).is_dir()]
ISSUE_59 = [a for a in find_assignments(REPO / "solutions") if int(a.split("-")[0]) <= 10]  # what it asks for: 01-10
MISTAKES = [FreshMistake.read(path) for path in sorted(FRESH.glob("*/*.py"))]


def entry(mistake: FreshMistake):
    (found,) = [e for e in load_corpus(mistake.assignment, cli=True, corpus=FRESH) if e.name == mistake.name]
    return found


@functools.cache
def notebook(assignment: str) -> SourceNotebook:
    return SourceNotebook(assignment)


def test_every_graded_name_has_three_fresh_mistakes():
    counts = Counter((m.assignment, m.graded) for m in MISTAKES)
    few = [f"{c.assignment}/{c.name}: {counts[(c.assignment, c.name)]}" for c in checks()
           if c.assignment in ISSUE_59 and counts[(c.assignment, c.name)] < 3]
    assert not few, f"graded names with fewer than three fresh mistakes: {few}"


def check_of(name: str):
    (check,) = [c for c in checks() if c.name == name]
    return check


def cells_checking(assignment: str, name: str) -> list:
    """The test cells of an assignment's source notebook that check a graded name (05's notebook
    checks 04's MultiHeadAttention too)."""
    call = f"{check_of(name).function_name}("
    return [cell for cell in notebook(assignment).tests.values() if call in cell.source]


def test_every_fresh_file_says_its_mistake_the_name_it_breaks_and_what_would_name_it():
    for mistake in MISTAKES:
        where = f"{mistake.assignment}/{mistake.name}"
        assert cells_checking(mistake.assignment, mistake.graded), f"{where}: no test of {mistake.graded} in its notebook"
        assert mistake.what and not mistake.what.startswith(("expect:", "graded:", "locus:")), f"{where}: no comment"
        # a phrase of one or two characters would be found in almost any hint
        assert mistake.locus and all(len(phrase) >= 3 for phrase in mistake.locus), f"{where}: {mistake.locus}"
        assert entry(mistake).expect == "partial", f"{where}: a mistake expects partial credit"


def _parsed(cells: dict[str, str]) -> dict[str, str]:
    return {gid: ast.dump(ast.parse(source)) for gid, source in cells.items()}


def test_no_fresh_mistake_repeats_a_corpus_student():
    """A fresh mistake whose completed cells are a tests/corpus student's, to the letter as parsed,
    is no longer fresh: the grader's authors have seen it."""
    for assignment in ASSIGNMENTS:
        known = [_parsed(e.cells) for e in load_corpus(assignment, cli=True)]
        for fresh in load_corpus(assignment, cli=True, corpus=FRESH):
            assert _parsed(fresh.cells) not in known, f"{assignment}/{fresh.name} repeats a tests/corpus student"


@pytest.mark.slow
@pytest.mark.parametrize("mistake", MISTAKES, ids=[f"{m.assignment}/{m.name}" for m in MISTAKES])
def test_a_fresh_mistake_loses_points_in_its_own_tests_and_is_accused_of_nothing(mistake):
    """Judged in-process, the tests of the name the mistake breaks (the hidden ones too) give it
    less than their points, and none of their messages says the student called a forbidden
    function, reached past the allowlist or tampered with a check."""
    namespace = notebook(mistake.assignment).student(entry(mistake).cells)
    tests = cells_checking(mistake.assignment, mistake.graded)
    graded = [run_test_cell(cell, namespace) for cell in tests]
    points = sum(p for p, _ in graded)
    total = sum(notebook(mistake.assignment).points(cell.metadata["nbgrader"]["grade_id"]) for cell in tests)
    assert points < total, f"{mistake.name} loses nothing in its own tests: it is not a mistake"
    accusations = [line for _, message in graded for line in message.splitlines() if ACCUSATION.search(line)]
    assert not accusations, accusations
