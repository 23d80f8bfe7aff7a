"""Grading on a Dask cluster (`grade --scheduler`), with real processes: `dask scheduler` and two
`dask worker` processes started from the venv's CLIs as an instructor starts them, grading a
small mixed class of 01-self-attention (correct, buggy, stub, broken, missing, hostile).

The tests run in this order and share one cluster; the last one kills its scheduler.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from classroom import REPO, Results, grade, load_corpus, make_submission, reference_code, tree_digest
from classroom.cluster import LocalDask
from test_hostile import inflate_points

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

distributed = pytest.importorskip("distributed")

ASSIGNMENT = "01-self-attention"
KILLER = "worker-killer"  # tests/cluster_saboteur.py kills any worker that starts grading this student


def build_class(root: Path) -> None:
    make_submission(root, "reference", ASSIGNMENT)
    make_submission(root, "stub", ASSIGNMENT, answer_all=False)
    bug = next(e for e in load_corpus(ASSIGNMENT) if e.expect == "partial")
    make_submission(root, f"buggy-{bug.name}", ASSIGNMENT, bug.cells)
    corrupt = make_submission(root, "corrupt", ASSIGNMENT)
    corrupt.write_text(corrupt.read_text()[:500])
    (root / "no-notebook" / ASSIGNMENT).mkdir(parents=True)
    # Hostile: a kernel that exits in the middle (status error), and test cells worth 100 points each.
    exits = reference_code(ASSIGNMENT)["simple_self_attention"] + "\nimport os\nos._exit(0)\n"
    make_submission(root, "os-exit", ASSIGNMENT, {"simple_self_attention": exits})
    path = make_submission(root, "inflate-points", ASSIGNMENT)
    path.write_text(json.dumps(inflate_points(json.loads(path.read_text()))))


# A kernel that exits is cut off at a moment that differs between any two runs, local ones
# too (whether its last cell got its execution count): its pages are compared apart.
RACY = "/os-exit/"


def results_digest(out: Path) -> dict[str, str]:
    """Every file of RESULTS (hidden staging folders aside) and its sha256, the graded notebooks
    included (they record no cell timings, so two gradings give the same file)."""
    return {path: sha for path, sha in tree_digest(out).items()
            if not path.startswith(".") and RACY not in f"/{path}"}


class Cluster(LocalDask):
    """One `dask worker --nworkers 1` per worker (a test kills single ones), preloading the grader
    and tests/cluster_saboteur.py, with a client kept open."""

    def __init__(self, tmp: Path, workers: int = 2):
        # A task is given up after its workers died while running it twice (1 allowed failure);
        # a worker holds only the task it runs, so that only that one is blamed for its death.
        env = dict(os.environ, DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1",
                   DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION="1.0", AUTOGRADER_TEST_WORKER_KILLER=KILLER)
        super().__init__(tmp, worker_commands=workers, env=env, wait_for_workers=120,
                         worker_options=["--preload", "autograder.engine.cluster",
                                         "--preload", REPO / "tests" / "cluster_saboteur.py"])
        self.client = distributed.Client(scheduler_file=str(self.file), timeout=60)
        self.address = self.client.scheduler.address

    def busy_worker(self, timeout: float = 300) -> int:
        """The pid of a worker process while it grades a group."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = [w for w, keys in self.client.processing().items() if any(str(k).startswith("grade-") for k in keys)]
            if busy:
                return self.client.run(os.getpid, workers=busy[:1])[busy[0]]
            time.sleep(0.1)
        raise AssertionError("no worker started grading")

    def stop(self) -> None:
        self.client.close()
        super().stop()


@pytest.fixture(scope="module")
def classroom(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cluster") / "submitted"
    build_class(root)
    return root


@pytest.fixture(scope="module")
def local(classroom) -> Path:
    """The class graded on this machine, as without a cluster."""
    out = classroom.parent / "local"
    process = grade(classroom, out, "--jobs", "2")
    assert process.returncode == 0, process.stderr
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("dask"))
    yield cluster
    cluster.stop()


def grade_on_cluster(cluster: Cluster, submissions: Path, out: Path, *extra: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
                             "--quiet", "--scheduler", cluster.address, *extra], cwd=REPO, stderr=subprocess.PIPE,
                            text=True, **popen)


def test_grading_without_a_scheduler_does_not_import_dask():
    """Colab and laptops may skip distributed: only --scheduler imports autograder.engine.cluster."""
    code = ("import sys; from autograder import cli; cli._parser().parse_args(['grade', 'x', '--out', 'y']); "
            "dask = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')); "
            "sys.exit(f'imported {dask}' if dask else 0)")
    process = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert process.returncode == 0, process.stderr


def test_a_worker_starts_from_the_clis_generated_course_without_generating(tmp_path, monkeypatch):
    """The plugin carries the CLI's generated course (source, release, gradebook): a worker
    makes its course from those bytes, with the same release cells and points, and never runs
    nbgrader's generate_assignment again (seconds per assignment, in every worker)."""
    from autograder.engine.cluster import CourseOnWorker, course_files
    from autograder.grading.course import Course
    from autograder.layout import SOLUTIONS_DIR
    from autograder.options import GradingOptions

    options = GradingOptions(SOLUTIONS_DIR, sandbox=False)
    course = Course(tmp_path / "cli", options, assignments=[ASSIGNMENT])
    course.generate_all()
    files = course_files(course, [ASSIGNMENT])
    assert {name.split("/")[0] for name in files} == {"gradebook.db", "source", "release"}

    def generated_again(*args, **kwargs):
        raise AssertionError("a worker generated an assignment again")
    monkeypatch.setattr("nbgrader.apps.api.NbGraderAPI.generate_assignment", generated_again)
    plugin = CourseOnWorker(files, options, name="test")
    plugin.tmp = tmp_path / "worker"
    plugin._build()
    try:
        worker = plugin.course
        assert worker.root != course.root and worker.assignments == [ASSIGNMENT]
        for notebook in course.notebooks(ASSIGNMENT):
            assert worker.release_cells(ASSIGNMENT, notebook) == course.release_cells(ASSIGNMENT, notebook)
            assert worker.max_score(ASSIGNMENT, notebook) == course.max_score(ASSIGNMENT, notebook) > 0
    finally:
        plugin.teardown(worker=None)


def test_preloaded_workers_import_the_grader_as_they_start(cluster):
    """`--preload autograder.engine.cluster` (the README's worker command): before any run, each
    worker process has nbgrader, PyTorch and the grader's steps, so its first run does not wait
    for them."""
    from autograder.grading.steps import WORKER_MODULES

    wanted = sorted(("torch", "nbgrader.apps", *WORKER_MODULES))
    loaded = cluster.client.run(lambda: [m for m in wanted if m in sys.modules])
    assert len(loaded) == 2
    assert all(modules == wanted for modules in loaded.values()), loaded
    # and each has started the warm sandbox that a run with the default limits grades in
    assert all(sandbox is not None for sandbox in sandboxes(cluster).values())


def sandboxes(cluster: Cluster) -> dict[str, tuple[int, str, list[str]] | None]:
    """Each worker's warm sandbox for the default limits (--memory 4096): the pid of its bwrap,
    its scratch folder and the command lines of every process in it; None where there is none."""
    def sandbox():
        from autograder.options import GradingOptions
        from autograder.sandbox.bwrap import sandbox_limits
        from autograder.sandbox.server import fork_server

        server = fork_server(sandbox_limits(GradingOptions.memory_limit))
        if server.process is None or server.process.poll() is not None:
            return None
        inside = psutil.Process(server.process.pid).children(recursive=True)
        return server.process.pid, str(server.scratch), sorted(" ".join(p.cmdline()) for p in inside)
    return cluster.client.run(sandbox)


def test_cluster_gives_the_local_results_file_for_file(cluster, classroom, local, tmp_path):
    out = tmp_path / "out"
    process = grade(classroom, out, "--scheduler-file", str(cluster.file))
    assert process.returncode == 0, process.stderr
    assert results_digest(out) == results_digest(local)
    rows = Results.read(out).grades
    assert rows[("reference", ASSIGNMENT)]["status"] == "ok"
    assert rows[("os-exit", ASSIGNMENT)]["status"] == "error"  # the sandboxed kernel died, not the worker
    assert float(rows[("inflate-points", ASSIGNMENT)]["max_score"]) == float(rows[("reference", ASSIGNMENT)]["max_score"])


def test_a_workers_sandbox_stays_warm_between_runs_and_is_emptied_after_each(cluster, tmp_path):
    """A worker keeps its sandbox (its Python has PyTorch imported: seconds of each run's start)
    from one run to the next, as empty as between two students: a process the last kernel of a
    run left behind does not wait there for the next run."""
    leaves_a_process = (reference_code(ASSIGNMENT)["simple_self_attention"]
                        + "\nimport subprocess\nsubprocess.Popen(['sleep', '617'], start_new_session=True)\n")
    make_submission(tmp_path / "class", "leaves-a-process", ASSIGNMENT, {"simple_self_attention": leaves_a_process})
    before = sandboxes(cluster)
    process = grade(tmp_path / "class", tmp_path / "out", "--scheduler-file", str(cluster.file))
    assert process.returncode == 0, process.stderr
    results = Results.read(tmp_path / "out")
    row = results.grades[("leaves-a-process", ASSIGNMENT)]
    assert row["status"] == "ok", row  # its cells all ran, the one that starts a process too
    # (which earns nothing: subprocess is outside what a notebook may use, attention_checks.allowlist)
    tests = results.notebooks[("leaves-a-process", ASSIGNMENT)]["tests"]
    assert all("may not use" in t["message"] for t in tests if not t["manual"]), tests
    after = sandboxes(cluster)
    assert all(after.values()), f"a worker's sandbox was stopped at the end of the run: {after}"
    assert {w: s[0] for w, s in after.items()} == {w: s[0] for w, s in before.items()}, "a new sandbox"
    assert after == before, "a process of the run is left in a worker's sandbox"


def test_a_stopped_worker_leaves_no_sandbox_behind(tmp_path):
    """A worker's sandbox outlives its runs, not the worker: stopped as `dask worker` is stopped
    (SIGTERM), it removes its scratch folder (a RAM disk where the grader is root)."""
    cluster = Cluster(tmp_path, workers=1)
    try:
        [(_, folder, _)] = sandboxes(cluster).values()
        assert Path(folder).is_dir()
    finally:
        cluster.stop()
    assert not Path(folder).exists()
    assert folder not in Path("/proc/mounts").read_text()


def test_a_worker_killed_mid_run_loses_nothing(cluster, classroom, local, tmp_path):
    """kill -9 of a worker's whole process tree (worker, sandbox, kernel) while it grades: its
    group is graded again on the other worker, and every notebook gets exactly one result."""
    out = tmp_path / "out"
    process = grade_on_cluster(cluster, classroom, out)
    victim = psutil.Process(cluster.busy_worker())
    tree = [victim, *victim.children(recursive=True)]
    for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess):  # ended on its own since it was listed (a kernel done)
            p.send_signal(signal.SIGKILL)
    _, stderr = process.communicate(timeout=900)
    assert process.returncode == 0, stderr
    entries = [(r["student_id"], r["notebook"]) for r in json.loads((out / "results.json").read_text())]
    students = sorted(p.name for p in classroom.iterdir())
    assert sorted(entries) == sorted(set(entries)), "a notebook has two results"
    assert sorted(s for s, _ in entries) == students, "a notebook has no result"
    assert results_digest(out) == results_digest(local)
    cluster.client.wait_for_workers(2, timeout=120)  # the nanny started a new worker process


def test_a_notebook_that_kills_every_worker_is_given_up(cluster, classroom, local, tmp_path):
    """Simulated (see tests/cluster_saboteur.py): the worker that starts grading KILLER dies.
    After two deaths (allowed-failures 1) it is status error with a reason; the rest is graded."""
    small = tmp_path / "class"
    shutil.copytree(classroom / "reference", small / "reference")
    make_submission(small, KILLER, ASSIGNMENT)
    process = grade(small, tmp_path / "out", "--scheduler", cluster.address)
    assert process.returncode == 0, process.stderr
    rows, before = Results.read(tmp_path / "out").grades, Results.read(local).grades
    killer = rows[(KILLER, ASSIGNMENT)]
    assert (killer["status"], float(killer["score"])) == ("error", 0.0)
    assert "worker died while grading this notebook, 2 times" in killer["reason"]
    assert killer["max_score"] == before[("reference", ASSIGNMENT)]["max_score"]
    assert rows[("reference", ASSIGNMENT)] == before[("reference", ASSIGNMENT)]
    cluster.client.wait_for_workers(2, timeout=120)


def test_losing_the_scheduler_ends_the_run_and_keeps_the_last_results(cluster, classroom, local, tmp_path):
    """Last: it kills the scheduler. The run stops with a clear error (exit 2) once the scheduler
    has not come back in --scheduler-timeout, and RESULTS still holds the previous run's results,
    untouched."""
    out = tmp_path / "out"
    shutil.copytree(local, out)
    before = results_digest(out)
    process = grade_on_cluster(cluster, classroom, out, "--scheduler-timeout", "5")
    cluster.busy_worker()
    os.killpg(cluster.scheduler.pid, signal.SIGKILL)
    lost = time.monotonic()
    _, stderr = process.communicate(timeout=300)
    assert time.monotonic() - lost < 30, "it waited the default 30 s, not --scheduler-timeout's 5"
    assert process.returncode == 2, stderr
    assert "autograder: error:" in stderr and "scheduler" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    assert results_digest(out) == before
