"""What a cell of a course notebook is, read from its nbgrader metadata: the grader reads it only
here (submissions.drop_broken_grade_ids alone looks at it first, to drop what it cannot use).
nbgrader's own predicates (nbgrader.utils) assume metadata that nbgrader validated; a
submission's may be anything, so here a cell whose metadata is not a dict is a cell without any
(one the student added)."""
from __future__ import annotations

# nbgrader's markers of a hidden-test region in a test cell's source (ClearHiddenTests' defaults)
BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


def nbgrader_metadata(cell) -> dict:
    meta = cell.get("metadata", {})
    nbgrader = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return nbgrader if isinstance(nbgrader, dict) else {}


def grade_id_of(cell) -> str | None:
    return nbgrader_metadata(cell).get("grade_id")


def is_test_cell(cell) -> bool:
    """An autograded test: a code cell with points that the student does not write."""
    nbgrader = nbgrader_metadata(cell)
    return cell.get("cell_type") == "code" and bool(nbgrader.get("grade")) and not nbgrader.get("solution")


# The case key of a check whose memory the grader measures (attention_checks.attention_at_scale):
# a test cell that names it is one the sandbox measures (a test cell is the course's own source).
MEMORY_BOUND = "memory_mib"


def measures_memory(cell) -> bool:
    """A test cell whose checks are judged on the memory it uses, which the sandbox then measures
    (it costs some 20 ms a cell, so only there)."""
    return is_test_cell(cell) and MEMORY_BOUND in cell.get("source", "")


def is_student_cell(cell) -> bool:
    """A cell whose code the student wrote: a solution cell, or one they added."""
    nbgrader = nbgrader_metadata(cell)
    return cell.get("cell_type") == "code" and bool(nbgrader.get("solution") or not nbgrader.get("locked"))


def is_written_answer(cell) -> bool:
    """nbgrader's manually graded answer: a solution cell that is also a grade cell (the
    course's written questions are markdown cells), which a person grades in formgrader."""
    nbgrader = nbgrader_metadata(cell)
    return bool(nbgrader.get("grade")) and bool(nbgrader.get("solution"))


def is_course_cell(cell) -> bool:
    """A cell the course wrote: rebuilt from the source notebook with its nbgrader metadata
    (RebuildFromSource gives the cells a student adds no nbgrader metadata)."""
    nbgrader = nbgrader_metadata(cell)
    return bool(nbgrader.get("locked")) and not nbgrader.get("solution")


def holds_hidden_tests(cell) -> bool:
    """A test cell with a hidden-test region (which students never see)."""
    return is_test_cell(cell) and BEGIN_HIDDEN_TESTS in cell.get("source", "")
