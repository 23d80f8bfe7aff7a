"""The throwaway nbgrader course each grading run works in (autograder/grading/course.py)."""
from __future__ import annotations

import os
import shutil
import threading

import pytest
from nbgrader.api import Gradebook
from sqlalchemy import text

from autograder.grading.course import Course, new_gradebook
from autograder.layout import SOLUTIONS_DIR
from autograder.options import GradingOptions
from autograder.sandbox.bwrap import bwrap_available, sandbox_limits
from autograder.sandbox.kernels import SandboxedKernelManager

SYNCHRONOUS_OFF, SYNCHRONOUS_FULL = 0, 2  # what SQLite's `PRAGMA synchronous` answers


def _synchronous(db_url: str) -> int:
    with Gradebook(db_url, "course") as gradebook:
        return gradebook.db.execute(text("PRAGMA synchronous")).scalar_one()


def test_only_the_courses_own_gradebook_skips_waiting_for_the_disk(tmp_path):
    """nbgrader commits once per cell: the course's scratch gradebook does not wait for the disk
    on each, and any other gradebook the process opens (an instructor's, when the service
    records into it) keeps SQLite's durable default."""
    course = Course(tmp_path / "course", GradingOptions(SOLUTIONS_DIR, sandbox=False),
                    assignments=["01-self-attention"])
    instructors = tmp_path / "instructor" / "gradebook.db"
    instructors.parent.mkdir()
    new_gradebook(instructors)
    assert _synchronous(course.db_url) == SYNCHRONOUS_OFF
    assert _synchronous(f"sqlite:///{instructors}") == SYNCHRONOUS_FULL


@pytest.mark.skipif(not bwrap_available(), reason="a sandboxed course needs bubblewrap")
def test_the_sandbox_grade_starts_early_is_the_one_its_kernels_use(tmp_path):
    """`grade` launches a fork server for ``sandbox_limits(options.memory_limit)`` before it loads
    the grader (cli._start_grading_early); the course's kernels look theirs up by the limits their
    manager is configured with. Were the two to differ, the early start would be wasted, silently."""
    options = GradingOptions(SOLUTIONS_DIR, memory_limit=3 * 1024**3)
    course = Course(tmp_path / "course", options, assignments=["01-self-attention"])
    manager = SandboxedKernelManager(config=course.api.config)
    assert manager.limits() == sandbox_limits(options.memory_limit)


def test_a_process_keeps_one_engine_per_gradebook(tmp_path):
    """nbgrader makes a new SQLAlchemy engine for every Gradebook it opens, several per notebook,
    and SQLAlchemy keeps compiled statements per engine: the course keeps one engine per URL.
    A closed gradebook still lets its file go: a new file at the same path is a new gradebook."""
    path = tmp_path / "gradebook.db"
    new_gradebook(path)
    url = f"sqlite:///{path}"
    with Gradebook(url, "course") as first:
        first.add_student("ada")
    with Gradebook(url, "course") as second:
        assert second.engine is first.engine
        assert [student.id for student in second.students] == ["ada"]
    path.unlink()
    new_gradebook(path)
    with Gradebook(url, "course") as third:
        assert third.students == []


# --------------------------------------------------------------------------
# generated courses kept between runs (autograder/grading/course_cache.py)

def _prepared(root, source, lines, assignments=("01-self-attention",)):
    from autograder.grading.course_cache import prepared_course

    return prepared_course(root, GradingOptions(source, sandbox=False), list(assignments), lines.append)


def test_a_generated_course_is_kept_and_the_next_run_starts_from_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_COURSE_CACHE", str(tmp_path / "cache"))
    first_lines, second_lines = [], []
    first = _prepared(tmp_path / "first", SOLUTIONS_DIR, first_lines)
    second = _prepared(tmp_path / "second", SOLUTIONS_DIR, second_lines)
    assert first_lines == ["preparing 01-self-attention (nbgrader generate_assignment)"]
    assert len(second_lines) == 1 and second_lines[0].startswith("prepared 01-self-attention (generated before")
    assert (tmp_path / "cache").stat().st_mode & 0o077 == 0  # hidden tests: the instructor's alone
    # the same release notebooks and the same gradebook, as nbgrader generated them
    release = sorted(p.relative_to(first.root) for p in (first.root / "release").rglob("*") if p.is_file())
    assert release and release == sorted(p.relative_to(second.root) for p in (second.root / "release").rglob("*")
                                         if p.is_file())
    assert all((first.root / p).read_bytes() == (second.root / p).read_bytes() for p in release)
    notebook = first.notebooks("01-self-attention")[0]
    assert second.max_score("01-self-attention", notebook) == first.max_score("01-self-attention", notebook) > 0


def test_a_changed_source_is_generated_anew(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("AUTOGRADER_COURSE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "source"
    shutil.copytree(SOLUTIONS_DIR / "01-self-attention", source / "01-self-attention")
    lines = []
    _prepared(tmp_path / "a", source, lines)
    notebook = next((source / "01-self-attention").glob("*.ipynb"))
    notebook.write_text(notebook.read_text().replace("Self-attention", "Self attention", 1))
    _prepared(tmp_path / "b", source, lines)
    (source / "01-self-attention" / ".ipynb_checkpoints").mkdir()  # what the course's copy leaves out
    _prepared(tmp_path / "c", source, lines)
    assert [line.split(" (")[1] for line in lines] == ["nbgrader generate_assignment)"] * 2 + ["generated before, kept in "
                                                                                          f"{tmp_path / 'cache'})"]
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_only_the_newest_courses_are_kept_and_none_where_the_cache_cannot_be_written(tmp_path, monkeypatch):
    from autograder.grading import course_cache

    monkeypatch.setattr(course_cache, "KEPT", 1)
    monkeypatch.setenv("AUTOGRADER_COURSE_CACHE", str(tmp_path / "cache"))
    lines = []
    _prepared(tmp_path / "a", SOLUTIONS_DIR, lines, ["01-self-attention"])
    _prepared(tmp_path / "b", SOLUTIONS_DIR, lines, ["02-softmax-scaling"])
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [course_cache.course_key(SOLUTIONS_DIR,
                                                                                        ["02-softmax-scaling"])]
    (tmp_path / "file").write_text("not a folder")
    for where in (str(tmp_path / "file" / "cache"), "off"):  # a cache that cannot be written, or none asked for
        monkeypatch.setenv("AUTOGRADER_COURSE_CACHE", where)
        lines.clear()
        for run in ("c", "d"):
            course = _prepared(tmp_path / f"{run}-{len(where)}", SOLUTIONS_DIR, lines)
            assert course.max_score("01-self-attention", course.notebooks("01-self-attention")[0]) > 0
        assert all(line.startswith("preparing") for line in lines) and len(lines) == 2


def test_converters_in_two_threads_leave_the_process_where_it_was(tmp_path):
    """nbgrader's converters move the whole process into their course folder while they run.
    Two generating at once in two threads (the test session does: the student distribution is
    published in a thread while tests release assignments) must still leave the process in the
    folder it was in, not in a course folder deleted since, where every program it starts fails."""
    where = os.getcwd()
    failures = []

    def generate(root):
        try:
            Course(root, GradingOptions(SOLUTIONS_DIR, sandbox=False),
                   assignments=["01-self-attention"]).generate("01-self-attention")
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            failures.append(error)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    for attempt in range(4):  # one at a time, the threads cannot interleave; unserialised, they often do
        threads = [threading.Thread(target=generate, args=(tmp_path / f"course-{attempt}-{n}",)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures
        assert os.path.isdir(where) and os.getcwd() == where


# --------------------------------------------------------------------------
# the sanitize step's gradebook rows, read once per source notebook (autograder/grading/rebuild.py)

def _tampered(release):
    """A release notebook with what nbgrader's OverwriteCells puts right: a locked cell's source,
    a test's points, a cell unlocked, a cell's type, a grade id the course lacks, a kernelspec."""
    import copy

    from autograder.cells import grade_id_of, is_test_cell, nbgrader_metadata

    nb = copy.deepcopy(release)
    tests = [c for c in nb.cells if is_test_cell(c)]
    tests[0].source = "pass  # the test, edited"
    nbgrader_metadata(tests[1])["points"] = 1000
    nbgrader_metadata(tests[-1])["locked"] = False
    markdown = next(c for c in nb.cells if c.cell_type == "markdown" and grade_id_of(c))
    markdown.cell_type, markdown.outputs, markdown.execution_count = "code", [], None
    nbgrader_metadata(next(c for c in nb.cells if grade_id_of(c) and c is not markdown))["grade_id"] = "not-ours"
    nb.metadata["kernelspec"] = {"name": "mine", "display_name": "mine", "language": "python"}
    return nb


def test_the_sanitize_step_reads_the_gradebook_once_and_checks_every_notebook_as_nbgrader_does(tmp_path, monkeypatch):
    """OverwriteCells and OverwriteKernelspec ask the gradebook, for every notebook, what is the
    same for all of an assignment's: the course reads it once per source notebook, and each
    tampered notebook comes out as nbgrader's own steps leave it; a source edited since is read anew."""
    import copy

    import nbformat
    from nbgrader.preprocessors import OverwriteCells, OverwriteKernelspec

    from autograder.grading import rebuild

    course = Course(tmp_path / "course", GradingOptions(SOLUTIONS_DIR, sandbox=False),
                    assignments=["01-self-attention"])
    course.generate("01-self-attention")
    notebook = course.notebooks("01-self-attention")[0]
    release = nbformat.read(course.root / "release" / "01-self-attention" / f"{notebook}.ipynb", as_version=4)
    resources = {"nbgrader": {"assignment": "01-self-attention", "notebook": notebook, "student": "ada",
                              "db_url": course.db_url}}
    opened = []
    monkeypatch.setattr(rebuild, "Gradebook", lambda *args: opened.append(args) or Gradebook(*args))

    def sanitized(steps, nb):
        for step in steps:
            nb, _ = step(config=course.api.config).preprocess(nb, copy.deepcopy(resources))
        return nb

    nbgraders = [OverwriteKernelspec, OverwriteCells]
    ours = [rebuild.OverwriteKernelspecOnce, rebuild.OverwriteCellsOnce]
    tampered = _tampered(release)
    expected = sanitized(nbgraders, copy.deepcopy(tampered))
    assert expected != tampered  # nbgrader's steps put things right, so the comparison below means something
    for submission in (tampered, release, tampered):
        assert sanitized(ours, copy.deepcopy(submission)) == sanitized(nbgraders, copy.deepcopy(submission))
    assert len(opened) == 1

    source = course.root / "source" / "01-self-attention" / f"{notebook}.ipynb"
    source.write_text(source.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert sanitized(ours, copy.deepcopy(tampered)) == expected
    assert len(opened) == 2


def test_a_test_cell_is_compiled_once_and_runs_afresh_in_each_notebook():
    """The judge replays each test cell's source, the course's, the same in every notebook of an
    assignment: compiled once per process, run each time in the namespace it is given."""
    from autograder.grading.judge import _compiled_test, run_test_source

    source = "seen.append(value)\ntotal = sum(seen)\ntotal"
    before = _compiled_test.cache_info()
    first, second = {"seen": [], "value": 2}, {"seen": [10], "value": 5}
    assert run_test_source(source, first) == 2 and first["seen"] == [2]
    assert run_test_source(source, second) == 15 and second["seen"] == [10, 5]
    after = _compiled_test.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
