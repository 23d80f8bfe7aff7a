"""The worker pool: a worker process that dies costs only the groups it was grading then."""
from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from autograder.engine.process import kernel_environment
from autograder.engine.runner import GraderFailed, grade_all, grade_group
from autograder.grading.course import Course
from autograder.layout import SOLUTIONS_DIR
from autograder.options import GradingOptions
from autograder.results import Status
from autograder.sandbox.bwrap import (SANDBOX_SCRATCH_PREFIX, _real_root, make_scratch, remove_orphaned_scratch,
                                      remove_scratch)
from autograder.submissions import discover
from classroom import REPO, make_submission, reference_code

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENT = "01-self-attention"


def test_a_killed_worker_costs_only_its_groups(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # as the CLI does
    slow = {"attention_scores": reference_code(ASSIGNMENT)["attention_scores"] + "\nimport time\ntime.sleep(4)\n"}
    for i in range(6):
        make_submission(tmp_path / "class", f"student{i}", ASSIGNMENT, slow)
    course = Course(tmp_path / "course")
    course.generate_all()
    groups = [[s] for s in discover(tmp_path / "class", course.assignments, {ASSIGNMENT: course.notebooks(ASSIGNMENT)})]

    def kill_a_worker():  # once a worker grades: its sandbox (a child process) is up
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                # the workers are forked by multiprocessing's fork server, a child of this process
                workers = [worker for server in psutil.Process(os.getpid()).children()
                           if "multiprocessing.forkserver" in " ".join(server.cmdline()) for worker in server.children()]
                grading = [w for w in workers if w.children()]
            except psutil.NoSuchProcess:  # a process that ended while we looked
                grading = []
            if grading:
                os.kill(grading[0].pid, signal.SIGKILL)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    with kernel_environment():
        results = [result for graded in grade_all(groups, course, 2, GradingOptions(SOLUTIONS_DIR))
                   for result, _ in graded]
    killer.join()
    assert sorted(r.student_id for r in results) == [f"student{i}" for i in range(6)]
    lost = [r for r in results if r.status == "error"]
    assert lost and all("grading worker failed" in r.reason for r in lost)
    assert len(lost) <= 4  # at most the groups in flight (2 per worker)
    assert sum(r.status == "ok" and r.score == r.max_score for r in results) >= 2


THREADS = """
import subprocess, sys
if sys.argv[1] == "torch-first":  # a Dask worker has loaded PyTorch before the plugin prepares it
    import torch
from autograder.engine.process import prepare_process
prepare_process()
import torch
child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                       capture_output=True, text=True, check=True).stdout.strip()
print(torch.get_num_threads(), child)
"""


@pytest.mark.parametrize("order", ["torch-first", "prepared-first"])
def test_the_graders_processes_give_pytorch_one_thread(order):
    """The CLI, its workers (and the processes they start), the service's and a Dask worker judge
    test-sized tensors: with a thread per core each, two workers on 2 cores took twice the CPU
    for the same wall time (their idle threads spin against each other)."""
    environment = {k: v for k, v in os.environ.items() if k not in {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}}
    default = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             capture_output=True, text=True, check=True, env=environment).stdout.strip()
    process = subprocess.run([sys.executable, "-c", THREADS, order], capture_output=True, text=True, cwd=REPO,
                             env=environment)
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["1", "1"], f"PyTorch's threads: {process.stdout} (by default {default})"


WITHOUT_TORCH = """
import atexit, runpy, sys
sys.argv = ["autograder", *sys.argv[1:]]
atexit.register(lambda: print("PyTorch loaded:", "torch" in sys.modules))  # the CLI leaves without Python's teardown
runpy.run_module("autograder", run_name="__main__")
"""


def _mounted_under(folder: Path) -> list[str]:
    with open("/proc/self/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(f"{folder}/")]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_graders_remove_their_sandboxes_as_they_stop(tmp_path, jobs):
    """Each worker of `grade --jobs 2`, and the CLI grading alone, stops its sandbox and removes its
    scratch folder (a RAM disk where root grades) as it ends: nothing of them is left in the temp
    folder, nor mounted. A pool's workers end with os._exit, which skips atexit's handlers: 1,380
    RAM disks were left mounted on this project's machine before. The CLI leaves with
    ``process.exit_now``, once its exit handlers have run."""
    for student in ("ada", "alan"):
        make_submission(tmp_path / "class", student, ASSIGNMENT)
    # the grader's own temp folder, as other tests grade beside this one; short, as the kernels'
    # sockets in it must have paths of at most 107 bytes
    temp = Path(tempfile.mkdtemp(prefix="runner-"))
    try:
        process = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "class"), "--out",
                                  str(tmp_path / "results"), "--jobs", jobs], capture_output=True,
                                 text=True, cwd=REPO, timeout=600, env=dict(os.environ, TMPDIR=str(temp)))
    finally:
        left, mounted = sorted(p.name for p in temp.iterdir()), _mounted_under(temp)
        for mount in mounted:  # so that the folder can go, whatever the run left
            subprocess.run(["umount", "--lazy", mount], check=False)
        shutil.rmtree(temp, ignore_errors=True)
    assert process.returncode == 0, process.stderr
    assert process.stdout.startswith("graded 2 notebooks (2 ok)"), process.stdout  # written before it left
    grades = (tmp_path / "results" / "grades.csv").read_text()
    assert grades.count(",ok,") == 2, grades
    assert left == [] and mounted == [], (left, mounted)


EXITS = """
import atexit, sys, threading, time
from autograder.engine.process import exit_now
atexit.register(lambda: print("exit handler ran"))
if sys.argv[1] == "with a thread":
    threading.Thread(target=lambda: (time.sleep(0.5), print("thread finished"))).start()
print("buffered", end="")
exit_now(3)
"""


@pytest.mark.parametrize("case", ["alone", "with a thread"])
def test_exit_now_keeps_the_status_the_output_and_the_exit_handlers(case):
    process = subprocess.run([sys.executable, "-c", EXITS, case], capture_output=True, text=True, cwd=REPO)
    assert process.returncode == 3, process.stderr
    expected = ["bufferedexit handler ran"] if case == "alone" else ["bufferedthread finished", "exit handler ran"]
    assert process.stdout.splitlines() == expected


def test_the_cli_under_cprofile_exits_as_usual(tmp_path):
    """cProfile writes its profile after the program returns: the CLI must not leave before."""
    process = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(tmp_path / "cli.prof"), "-m", "autograder",
                              "grade", str(tmp_path / "absent"), "--out", str(tmp_path / "out")],
                             capture_output=True, text=True, cwd=REPO)
    assert "does not exist" in process.stderr, process.stderr  # (cProfile's own exit status is 0 after a SystemExit)
    assert (tmp_path / "cli.prof").stat().st_size > 0


def test_what_a_killed_grader_left_is_removed_by_the_next_to_start(tmp_path):
    """A worker killed on the way (SIGKILL, the machine's OOM killer) runs nothing: its scratch
    folder (a RAM disk where root grades) stays. The next sandbox to start in the same temp
    folder removes it, and leaves a living grader's alone."""
    def killed_grader():
        make_scratch(SANDBOX_SCRATCH_PREFIX, tmp_path)
        os.kill(os.getpid(), signal.SIGKILL)

    child = multiprocessing.get_context("fork").Process(target=killed_grader)
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL
    living = make_scratch(SANDBOX_SCRATCH_PREFIX, tmp_path)
    try:
        (orphan,) = [folder for folder in tmp_path.iterdir() if folder.is_dir() and folder != living]
        assert os.path.ismount(orphan) == _real_root()
        assert remove_orphaned_scratch(tmp_path) == 1
        assert sorted(tmp_path.iterdir()) == [living, Path(f"{living}.lock")]
        assert _mounted_under(tmp_path) == ([str(living)] if _real_root() else [])
        assert remove_orphaned_scratch(tmp_path) == 0
    finally:
        remove_scratch(living)
    assert list(tmp_path.iterdir()) == [] and _mounted_under(tmp_path) == []


def test_the_cli_leaves_pytorch_to_its_workers(tmp_path):
    """`grade` with workers prepares the course and hands out notebooks: loading PyTorch too (the
    judge's and the kernels' modules import it) cost a second or more of every run's start. Its
    workers load it, through the steps the course names (autograder.grading.steps)."""
    for student in ("ada", "alan"):
        make_submission(tmp_path / "class", student, ASSIGNMENT)
    process = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, "grade", str(tmp_path / "class"), "--out",
                              str(tmp_path / "results"), "--jobs", "2", "--quiet"],
                             capture_output=True, text=True, cwd=REPO, timeout=600)
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip().endswith("PyTorch loaded: False"), process.stdout
    grades = (tmp_path / "results" / "grades.csv").read_text().splitlines()[1:]
    assert [row.split(",")[:5] for row in grades] == [[s, ASSIGNMENT, "8", "8", "ok"] for s in ("ada", "alan")]


def test_a_failure_of_the_grader_is_raised_for_the_service_and_the_students_error_otherwise(tmp_path, monkeypatch):
    """Past the notebook's own failures (statuses), an exception is the grader's: the command line
    reports it as that student's error and goes on; the service (raise_failures) gets it raised,
    queues the notebook again and charges no attempt (tests/test_service_faults.py)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # as the CLI does
    make_submission(tmp_path / "class", "student", ASSIGNMENT, reference_code(ASSIGNMENT))
    course = Course(tmp_path / "course")
    course.generate_all()
    (group,) = [[s] for s in discover(tmp_path / "class", course.assignments, {ASSIGNMENT: course.notebooks(ASSIGNMENT)})]
    shutil.rmtree(course.root / "autograded", ignore_errors=True)
    (course.root / "autograded").write_text("")  # where nbgrader writes the graded notebook: not a folder
    with kernel_environment():
        ((result, page),) = grade_group(course, group)
        assert (result.status, page) == (Status.ERROR, None), result
        assert result.reason.startswith("autograde failed: NotADirectoryError"), result
        with pytest.raises(GraderFailed) as failed:
            grade_group(course, group, raise_failures=True)
    assert str(failed.value) == result.reason
    assert not course.path("submitted", group[0].student_id, ASSIGNMENT).exists()  # cleared, as after a result


def test_an_autograded_notebook_is_read_as_nbformat_reads_it():
    """The grader reads back the notebook its exporter wrote without validating it again: the
    same notebook, minor version and all, as nbformat.reads gives it."""
    import nbformat

    from autograder.engine.runner import read_autograded

    for path in sorted(SOLUTIONS_DIR.glob("*/*.ipynb"))[:3]:
        text = path.read_text(encoding="utf-8")
        for version in (text, text.replace('"nbformat_minor": 5', '"nbformat_minor": 4')):
            read = read_autograded(version)
            assert read == nbformat.reads(version, as_version=4) and isinstance(read, nbformat.NotebookNode)
            assert read.cells and read.nbformat == 4


# 01's attention_scores compares every sentence with the first one's tokens: wrong values, which a
# grading kernel cannot tell (it holds no answer), so its first run records no ladder
BATCH_MIXED = "def attention_scores(x):\n    return x @ x[0].transpose(-2, -1)\n"


def test_a_second_run_that_fails_in_the_grader_is_said_and_the_first_runs_grading_stands(capsys):
    """A second run that nbgrader could not finish is the grader's failure (the first run of the
    same notebook finished): it is said on stderr with its reason, and the notebook is graded again
    as the first time, not left without a word (a finding that raised once lost its hint so)."""
    from types import SimpleNamespace

    from autograder.engine import runner

    asked = []

    def autograde(assignment, student, localise=None, **_):
        asked.append(localise)
        return {"success": False, "log": "Traceback ...\nIndexError: tuple index out of range\nNbGraderException: see above"}

    course = SimpleNamespace(api=SimpleNamespace(autograde=autograde))
    sub = SimpleNamespace(assignment=ASSIGNMENT, student_id="ann", notebook="nb")
    outcome, results = runner._localised(course, [sub], {}, ["attention_scores"])
    assert asked == [["attention_scores"], None] and not outcome["success"] and results == {}
    said = capsys.readouterr().err
    assert "the second run of ann's" in said and "attention_scores" in said
    assert "IndexError: tuple index out of range" in said


def test_a_second_run_localises_a_failure_and_never_changes_a_score(tmp_path, monkeypatch):
    """A notebook whose failure no ladder localised runs again, its kernel asked for that name's
    ladder (issue 59): its hint then says where the outputs go wrong, with the same scores. That
    run counts only where it scores as the first did: code that is right once it sees the grader
    ask gets the first run's grade, graded a third time as at first."""
    from attention_checks.answers.localising import LEAD

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # as the CLI does
    make_submission(tmp_path / "class", "planted", ASSIGNMENT, {"attention_scores": BATCH_MIXED})
    # right from the moment it meets the ladder's first case (float64, one sentence of two tokens)
    right_once_asked = ("SEEN = []\n\ndef attention_scores(x):\n"
                        "    if tuple(x.shape) == (1, 2, 2) and x.dtype == torch.float64:\n        SEEN.append(1)\n"
                        "    return x @ (x if SEEN else x[0]).transpose(-2, -1)\n")
    make_submission(tmp_path / "class", "hostile", ASSIGNMENT, {"attention_scores": right_once_asked})

    def graded(localise: bool) -> dict:
        course = Course(tmp_path / f"course-{localise}", GradingOptions(SOLUTIONS_DIR, localise=localise))
        course.generate_all()
        groups = [[s] for s in discover(tmp_path / "class", course.assignments,
                                        {ASSIGNMENT: course.notebooks(ASSIGNMENT)})]
        with kernel_environment():
            return {result.student_id: (result, page) for group in groups for result, page in grade_group(course, group)}

    plain, localised = graded(localise=False), graded(localise=True)
    for student in ("planted", "hostile"):
        assert localised[student][0].status == Status.OK
        assert [(t.grade_id, t.points) for t in localised[student][0].tests] == \
               [(t.grade_id, t.points) for t in plain[student][0].tests]
        assert LEAD not in plain[student][0].autograded
    (failed,) = [t for t in localised["planted"][0].tests if t.grade_id == "test_attention_scores"]
    assert not failed.passed and LEAD in failed.message and "batch" in failed.message, failed.message
    # the line that leaves the reference's values, read in a real kernel (IPython keeps a cell's lines)
    assert "line 2 of the cell that defines your `attention_scores` (`return x @ x[0].transpose(-2, -1)`) is the " \
           "first to make values that the reference never computes" in failed.message, failed.message
    assert LEAD in localised["planted"][1]  # the feedback page says it too
    hostile = localised["hostile"][0]
    assert hostile.score == plain["hostile"][0].score < hostile.max_score and LEAD not in hostile.autograded
