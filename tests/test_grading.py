"""End to end: real submissions through `python -m autograder grade`, every assignment's class in
one run (tests/graded_classes.py)."""
from __future__ import annotations

import csv
import math
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import psutil
import pytest

from autograder.sandbox.bwrap import socket_path_problem
from autograder.sandbox.kernels import PrivateIPCKernelManager
from autograder.sandbox.provisioners import use_private_ipc
from classroom import (REPO, Results, grade, load_corpus, make_submission, notebook_name, reference_code, secret_lines,
                       tree_digest)
from graded_classes import ASSIGNMENTS

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

# Tests of the grader's machinery (zips, a killed run, how kernels start) run a whole CLI run each:
# for one or two assignments' classes, not for every one (the CI's time limit).
FIRST_CLASS = pytest.mark.parametrize("graded", ASSIGNMENTS[:1], indirect=True)


def test_reference_solution_gets_full_marks(graded):
    row = graded.row("reference")
    assert row["status"] == "ok"
    assert float(row["max_score"]) > 0
    assert float(row["score"]) == float(row["max_score"]), graded.tests("reference")
    assert all(t["passed"] for t in graded.tests("reference") if not t["manual"])
    # the written answers are pending, not lost: outside score and max_score, all to grade by hand
    written = [t for t in graded.tests("reference") if t["manual"]]
    assert [t["grade_id"] for t in written] == list(graded.written)
    assert all(t["points"] is None and t["passed"] is None and "graded by hand later" in t["message"] for t in written)
    assert float(row["written_points"]) == float(row["to_grade_by_hand"]) == sum(t["max_points"] for t in written)
    page = graded.feedback_text("reference")
    assert all(f"My answer to {gid}" in page for gid in graded.written) and page.count("raded by hand later") >= 2 * len(
        written)


def test_every_failure_explains_itself(graded):
    """Issue 18's targets, on this assignment's buggy corpus as the CLI graded it: every buggy
    student gets a hint, at least 95% of the cases whose code raised get one, and no hint line
    stands detached from its case (benchmarks/hint_coverage.py prints the table)."""
    from classroom.hints import targets_hold, tally

    (row,) = tally([graded.assignment], graded.results, set(), prefix="corpus-")
    assert row.students, "no buggy student was graded"
    assert targets_hold([row]), (f"unhinted: {row.unhinted}; crash cases hinted {row.hinted_crash_cases}/"
                                 f"{row.crash_cases}; detached hints {row.detached}")


def test_untouched_release_notebook_gets_zero(graded):
    row = graded.row("stub")
    assert (row["status"], float(row["score"])) == ("ok", 0.0)
    for test in graded.tests("stub"):
        assert not test["passed"] and test["points"] == 0
        # nbgrader gives a written answer left as released 0: nothing to grade by hand
        assert ("not answered" if test["manual"] else "not implemented") in test["message"].lower(), test
    assert float(row["to_grade_by_hand"]) == 0 and float(row["written_points"]) == float(
        graded.row("reference")["written_points"])


def test_corpus(graded, capsys):
    assert graded.corpus, f"tests/corpus/{graded.assignment}/ is empty"
    full = float(graded.row("reference")["max_score"])
    rows, wrong = [], []
    for entry in graded.corpus:
        student = f"corpus-{entry.name}"
        score = float(graded.row(student)["score"])
        messages = "\n".join(t["message"] for t in graded.tests(student))
        hinted = entry.hint is None or entry.hint.lower() in messages.lower()
        right = score == full if entry.expect == "full" else score < full and hinted
        rows.append((entry.name, entry.expect, f"{score:g}/{full:g}", "yes" if hinted else "NO",
                     "ok" if right else "WRONG"))
        if not right:
            wrong.append(f"{entry.name}: expected {entry.expect}, scored {score:g}/{full:g}, hint found: {hinted}\n"
                         f"{messages}")
    with capsys.disabled():  # the table of what was caught, in the test log
        width = max(len(r[0]) for r in rows)
        print(f"\n\ncorpus of {graded.assignment}: {len(rows)} students, "
              f"{sum(r[4] == 'ok' for r in rows)} graded as expected")
        for name, expect, score, hinted, verdict in rows:
            print(f"  {name:<{width}}  {expect:<7}  {score:>9}  hint {hinted:<3}  {verdict}")
    assert not wrong, "\n\n".join(wrong)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_corpus_covers_every_graded_function(assignment):
    """At least 2 correct-but-unusual and 4 buggy students per solution cell, every bug with its hint."""
    corpus = load_corpus(assignment, cli=True)
    for function in reference_code(assignment):
        full = [e.name for e in corpus if e.expect == "full" and function in e.cells]
        buggy = [e.name for e in corpus if e.expect == "partial" and function in e.cells]
        assert len(full) >= 2 and len(buggy) >= 4, (function, full, buggy)
    assert all(e.hint for e in corpus if e.expect == "partial")


def test_renamed_notebook_is_graded(graded):
    row = graded.row("renamed")
    assert row["status"] == "ok" and float(row["score"]) == float(row["max_score"])
    assert "-Copy1.ipynb" in row["reason"]


def test_missing_and_corrupt_notebooks_do_not_stop_the_run(graded):
    missing, corrupt = graded.row("no-notebook"), graded.row("corrupt")
    assert (missing["status"], float(missing["score"])) == ("missing", 0.0)
    assert "not found" in missing["reason"]
    assert (corrupt["status"], float(corrupt["score"])) == ("invalid", 0.0)
    assert "JSON" in corrupt["reason"]
    assert missing["max_score"] == corrupt["max_score"] == graded.row("reference")["max_score"]
    for student in ("no-notebook", "corrupt"):
        assert (graded.out / "feedback" / student / graded.assignment).is_dir()


def test_one_row_per_student(graded):
    """One row per student and assignment in the run that graded this class with the others (a
    student of another class gets a row "missing" for this assignment), none twice."""
    assert {s for s, _ in graded.results.grades} == {p.name for p in graded.root.iterdir()}
    with open(graded.out / "grades.csv", newline="") as f:
        rows = [(row["student_id"], row["assignment"]) for row in csv.DictReader(f)]
    students = {p.name for p in graded.submitted.iterdir()}
    assignments = {assignment for _, assignment in rows}
    assert graded.assignment in assignments
    assert sorted(rows) == sorted((s, a) for s in students for a in assignments)


def test_a_score_is_the_same_sum_on_every_python(graded):
    """A notebook's score is the correctly rounded sum of its tests' points (math.fsum): Python
    3.12's sum() compensates and 3.11's does not (12.88 against 12.879999999999999 for one 05
    student), and results.json must not depend on the grader's Python."""
    for (student, _), notebook in graded.results.notebooks.items():
        points = [t["points"] for t in notebook["tests"] if not t.get("manual")]
        assert notebook["score"] == math.fsum(points), student


def test_submissions_are_byte_identical_afterwards(graded):
    assert tree_digest(graded.submitted) == graded.digest_before


def test_feedback_never_shows_hidden_tests_or_solutions(graded):
    secrets = secret_lines(graded.assignment)
    assert secrets
    own = {line.strip() for code in reference_code(graded.assignment).values() for line in code.splitlines()}
    for student in ["stub"] + [f"corpus-{e.name}" for e in graded.corpus]:
        text = graded.feedback_text(student)
        # corpus students keep the reference code in the cells they don't replace: their own copy
        leaked = [line for line in secrets if line in text and (student == "stub" or line not in own)]
        assert not leaked, f"feedback of {student} shows: {leaked[:3]}"
    assert "hidden tests" in graded.feedback_text("stub")


@FIRST_CLASS
def test_zip_from_another_directory_gives_the_same_grades(graded, tmp_path):
    """A zip with a wrapping folder, graded from outside the repository, leaves the repository clean."""
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for student in ("reference", "stub", "corrupt"):
            for path in (graded.root / student).rglob("*"):
                z.write(path, Path("submitted") / path.relative_to(graded.root))
    status_before = _git_status()
    process = grade(archive, tmp_path / "out", cwd=tmp_path)
    assert process.returncode == 0, process.stderr
    assert _git_status() == status_before, "grading left files in the repository"
    again = Results.read(tmp_path / "out")
    for student in ("reference", "stub", "corrupt"):
        assert again.grades[(student, graded.assignment)] == graded.row(student)


@FIRST_CLASS
def test_a_killed_run_leaves_no_half_results_and_a_rerun_gives_the_same(graded, tmp_path):
    subset, out = tmp_path / "class", tmp_path / "out"
    for student in ("reference", "stub", "corrupt"):
        shutil.copytree(graded.root / student, subset / student)
    process = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(subset), "--out", str(out),
                                "--quiet"], cwd=REPO)
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline and not any(out.glob(".feedback-staging/*/*/*")):
        time.sleep(0.1)
    killed_mid_run = process.poll() is None
    helpers = psutil.Process(process.pid).children(recursive=True) if killed_mid_run else []
    process.kill()
    process.wait()
    _, alive = psutil.wait_procs(helpers, timeout=30)
    assert not alive, f"processes of the killed run live on: {[p.cmdline()[:3] for p in alive]}"
    if killed_mid_run:  # results are written at the end, atomically: nothing half-done is left to read
        assert not (out / "grades.csv").exists() and not (out / "results.json").exists()
    assert grade(subset, out).returncode == 0
    again = Results.read(out)
    for student in ("reference", "stub", "corrupt"):
        assert again.grades[(student, graded.assignment)] == graded.row(student)
    assert not (out / ".feedback-staging").exists()


@pytest.mark.parametrize("kernels", ["--cold-kernels", "--no-sandbox"])
@pytest.mark.parametrize("graded", [ASSIGNMENTS[0], ASSIGNMENTS[-1]], indirect=True)  # plain functions; modules trained in the kernel
def test_other_kernels_give_the_same_results(graded, tmp_path, kernels):
    """Forking kernels from a warm Python in a sandbox (the default) changes speed and
    isolation, never results: kernels started cold, or without a sandbox, grade the same."""
    bug = next(e for e in graded.corpus if e.expect == "partial")
    students = ("reference", "stub", f"corpus-{bug.name}")
    for student in students:
        shutil.copytree(graded.root / student, tmp_path / "class" / student)
    assert grade(tmp_path / "class", tmp_path / "out", kernels, "--jobs", "1").returncode == 0
    other = Results.read(tmp_path / "out")
    for student in students:
        key = (student, graded.assignment)
        assert other.grades[key] == graded.row(student)
        assert other.notebooks[key]["tests"] == graded.tests(student)


def _git_status() -> list[str]:
    """What git sees in the repository, but for what the other test process may write there
    meanwhile: the browser tests' screenshots, and bytecode caches (the graded run writes none:
    PYTHONDONTWRITEBYTECODE)."""
    status = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    return [line for line in status.splitlines() if "__pycache__/" not in line and " test-artifacts/" not in line]


def test_grading_cannot_run_exits_nonzero(tmp_path):
    process = grade(tmp_path / "nowhere", tmp_path / "out")
    assert process.returncode == 2 and "does not exist" in process.stderr
    (tmp_path / "class").mkdir()
    process = grade(tmp_path / "class", tmp_path / "class" / "out")
    assert process.returncode == 2 and "never modified" in process.stderr
    assert not (tmp_path / "class" / "out").exists()


def test_grading_where_the_grader_is_not_installed_says_how_to_install_it(tmp_path):
    """jupyter_client finds the grader's kernel provisioners by the entry points of this package:
    run from a Python it is not installed in, `grade` stops before any work and says why."""
    hide_the_entry_points = (
        "import importlib.metadata as metadata, runpy, sys\n"
        "found = metadata.entry_points\n"
        "metadata.entry_points = lambda **kw: [e for e in found(**kw) if not e.name.startswith('autograder-')]\n"
        "sys.argv[0] = 'autograder'\n"
        "runpy.run_module('autograder', run_name='__main__')\n")
    folder = tmp_path / "class"
    make_submission(folder, "ada", "01-self-attention", {})
    process = subprocess.run([sys.executable, "-c", hide_the_entry_points, "grade", str(folder), "--out",
                              str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert process.returncode == 2, process.stderr
    assert "no kernel provisioner named autograder-private-ipc or autograder-sandbox" in process.stderr
    assert "pip install --no-deps --editable" in process.stderr
    assert not (tmp_path / "out").exists()


def _temp_folder_of_longest_sockets(extra: int = 0) -> Path:
    """A folder in which a kernel's deepest socket path has exactly 107 bytes (+ ``extra``)."""
    base = Path(tempfile.mkdtemp(prefix="sockets-"))  # short: the test's own folder may be too long
    for length in range(1, 108):
        if socket_path_problem(str(base / ("d" * length))):  # the first that is too long
            folder = base / ("d" * (length - 1 + extra))
            folder.mkdir()
            return folder
    raise AssertionError("no temp folder was too long")


def test_the_longest_socket_path_allowed_is_the_systems():
    """socket_path_problem's deepest path (a warm kernel's last socket) is bound as a Unix socket
    at its limit, and not one byte past it."""
    temp = _temp_folder_of_longest_sockets()
    try:
        deepest = temp / "autograder-sandbox-xxxxxxxx" / "kernel-xxxxxxxx" / "ipc"
        deepest.mkdir(parents=True)
        with socket.socket(socket.AF_UNIX) as unix:
            unix.bind(str(deepest / "socket-5"))
        with socket.socket(socket.AF_UNIX) as unix, pytest.raises(OSError):
            unix.bind(str(deepest / "socket-55"))
        with pytest.raises(OSError, match="Set TMPDIR to a shorter folder"):
            use_private_ipc(PrivateIPCKernelManager(), deepest / "longer")
    finally:
        shutil.rmtree(temp.parent)


def test_a_temp_folder_too_long_for_the_sockets_stops_grading_at_once(tmp_path):
    """Before, every notebook failed on its own, each with "File name too long"."""
    make_submission(tmp_path / "class", "ada", "03-qkv")
    temp = _temp_folder_of_longest_sockets(extra=1)
    try:
        process = grade(tmp_path / "class", tmp_path / "out", env={"TMPDIR": str(temp)})
    finally:
        shutil.rmtree(temp.parent)
    assert process.returncode == 2, process.stderr
    assert f"the temp folder {temp} is too long for the kernels' sockets" in process.stderr
    assert "Set TMPDIR to a shorter folder" in process.stderr and not (tmp_path / "out").exists()


def test_release_notebooks_are_up_to_date():
    process = subprocess.run([sys.executable, "-m", "autograder", "release", "--check"],
                             cwd=REPO, capture_output=True, text=True)
    assert process.returncode == 0, process.stdout + process.stderr


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_notebooks_hold_no_solutions(assignment):
    text = (REPO / "exercises" / assignment / f"{notebook_name(assignment)}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert "raise NotImplementedError()" in text
