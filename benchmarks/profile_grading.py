"""Where grading's time goes: one worker (``grade --jobs 1``, in this process) over a class of
the reference solutions, each stage timed, and the checks' meta-device re-run measured apart.

    .venv/bin/python -m benchmarks.profile_grading --students 5
    .venv/bin/python -m benchmarks.profile_grading --students 5 --assignments 01-self-attention

Prints a table of stages (seconds in all, per notebook, share of the run, and per notebook in
``import torch`` times, the unit issue 32's targets use), with the fixed start (preparing the
course, starting the fork server) apart from the cost per notebook. Each stage's time is its
own: a stage inside another (a preprocessor inside nbgrader's app) is taken out of the outer
one. The stages are the grader's own classes and nbgrader's, wrapped here with a stopwatch;
nothing in the grader is changed.

The kernel's side (the test cells) is then split by running each assignment's checks in this
process (``classroom.notebook.SourceNotebook``): the share of their time spent in the meta-device
re-run (``attention_checks.probe.on_meta``), and what the checks' call watch costs (the same
cells with its profiler hook off, alternating runs), are printed per assignment.
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from classroom import REPO, make_submission

from autograder.layout import find_assignments


class Stopwatch:
    """Exclusive seconds per stage: time spent in a nested stage is charged to it, not to the
    stage around it."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._local = threading.local()

    def run(self, label: str, fn, *args, **kwargs):
        stack = self._local.__dict__.setdefault("stack", [])
        frame = [0.0]  # seconds of the stages nested in this one
        stack.append(frame)
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            stack.pop()
            self.seconds[label] += elapsed - frame[0]
            self.calls[label] += 1
            if stack:
                stack[-1][0] += elapsed

    def wrap(self, owner, name: str, label: str | None = None, label_of=None) -> None:
        """Time ``owner.name`` (a function of a class or a module) as ``label``, or as
        ``label_of(*args)`` chosen per call."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            return self.run(label_of(*args) if label_of else label, original, *args, **kwargs)

        setattr(owner, name, timed)


def cell_kind(_self, cell, *_rest) -> str:
    from autograder.cells import is_test_cell

    return ("kernel: test cells (the checks, with their meta re-run)" if is_test_cell(cell)
            else "kernel: setup and solution cells")


def instrument(watch: Stopwatch) -> None:
    """Wrap every stage of a grading with ``watch``."""
    from nbgrader.apps import NbGraderAPI

    from traitlets.utils.importstring import import_item

    from autograder import report
    from autograder.engine import runner
    from autograder.grading import course, feedback
    from autograder.sandbox import kernels, server

    watch.wrap(course.Course, "__init__", "fixed start: the course folder and its gradebook")
    watch.wrap(course.Course, "generate", "fixed start: nbgrader generate_assignment")
    # started, then waited for: the wait is what is left of its imports when the first kernel needs it
    watch.wrap(server.ForkServer, "launch", "fixed start: the fork server (imports torch once)")
    watch.wrap(server.ForkServer, "_wait_until_ready", "fixed start: the fork server (imports torch once)")
    watch.wrap(runner, "grade_group", "the worker's own steps (checks, copies, clean-up)")
    watch.wrap(NbGraderAPI, "autograde", "nbgrader autograde: the app's own steps")
    watch.wrap(NbGraderAPI, "generate_feedback", "nbgrader generate_feedback: the app's own steps")
    config = course.grading_config(Path("."))
    steps = {import_item(step) if isinstance(step, str) else step  # steps named for the workers to import
             for step in [*config.Autograde.sanitize_preprocessors, *config.Autograde.autograde_preprocessors,
                          *config.GenerateFeedback.preprocessors]}
    for step in steps - {kernels.SandboxedExecute}:  # timed below, apart from its cells
        watch.wrap(step, "preprocess", f"preprocessor {step.__name__}")
    watch.wrap(kernels.SandboxedExecute, "preprocess", "kernel: start and stop (fork, sandbox, connect)")
    watch.wrap(kernels.SandboxedExecute, "preprocess_cell", label_of=cell_kind)
    watch.wrap(feedback.FeedbackExporter, "from_notebook_node", "feedback page: HTML rendering")
    watch.wrap(runner, "_read_result", "reading the result (gradebook, graded notebook)")
    watch.wrap(report.ResultsWriter, "add", "writing results")
    watch.wrap(report.ResultsWriter, "finish", "writing results")


def torch_import_seconds(runs: int = 3) -> float:
    """The median wall time of ``import torch`` in a fresh interpreter (the issue's unit)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kernel_shares(assignment: str, runs: int = 3) -> tuple[float, float, float]:
    """Seconds of one run of the assignment's test cells in this process (the median of
    ``runs``), of them the seconds in the meta-device re-run, and the seconds the same cells take
    with the checks' call watch (``ForbiddenCalls``' profiler hook) off: runs with and without it
    alternate, so that a busy neighbour weighs on both alike."""
    from attention_checks import core, probe
    from classroom.notebook import SourceNotebook

    watch = Stopwatch()
    watch.wrap(probe, "on_meta", "meta")
    notebook = SourceNotebook(assignment)
    namespace = notebook.student()
    notebook.grade_all(namespace=namespace)  # once untimed: what PyTorch loads at its first use of an operator
    watching = core.ForbiddenCalls.__init__

    def unwatched(calls, forbidden):
        watching(calls, forbidden)
        calls.watch_code = False

    times: dict[str, list[float]] = {"on": [], "off": [], "meta": []}
    try:
        for _ in range(runs):
            for mode, init in (("on", watching), ("off", unwatched)):
                core.ForbiddenCalls.__init__ = init
                watch.seconds.clear()
                start = time.perf_counter()
                notebook.grade_all(namespace=namespace)
                times[mode].append(time.perf_counter() - start)
                if mode == "on":
                    times["meta"].append(watch.seconds["meta"])
    finally:
        core.ForbiddenCalls.__init__ = watching
        setattr(probe, "on_meta", probe.on_meta.__wrapped__)
    return statistics.median(times["on"]), statistics.median(times["meta"]), statistics.median(times["off"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=5)
    parser.add_argument("--assignments", nargs="+", default=find_assignments(REPO / "solutions"))
    args = parser.parse_args()

    unit = torch_import_seconds()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; `import torch` takes {unit:.2f} s")
    watch = Stopwatch()
    with tempfile.TemporaryDirectory(prefix="profile-") as tmp:
        root = Path(tmp) / "class"
        for assignment in args.assignments:
            for n in range(args.students):
                make_submission(root, f"student{n:03d}", assignment)
        notebooks = len(list(root.glob("*/*/*.ipynb")))
        instrument(watch)
        from autograder import cli

        start = time.perf_counter()
        code = watch.run("the CLI's own steps (reading SUBMISSIONS, the class's groups)", cli.main,
                         ["grade", str(root), "--out", str(Path(tmp) / "results"), "--jobs", "1", "--quiet"])
        wall = time.perf_counter() - start
    if code != 0:
        print(f"grade exited {code}")
        return 1

    fixed = {k: v for k, v in watch.seconds.items() if k.startswith("fixed start")}
    per_notebook = {k: v for k, v in watch.seconds.items() if k not in fixed}
    print(f"\n{notebooks} notebooks ({args.students} students x {len(args.assignments)} assignments), "
          f"one worker: {wall:.1f} s")
    print(f"\n{'stage':<62} {'s':>7} {'s/nb':>6} {'share':>6} {'torch/nb':>8}")
    for group in (fixed, per_notebook):
        for label, seconds in sorted(group.items(), key=lambda item: -item[1]):
            print(f"{label:<62} {seconds:7.2f} {seconds / notebooks:6.3f} {seconds / wall:6.1%} "
                  f"{seconds / notebooks / unit:8.3f}")
        print()
    counted = sum(watch.seconds.values())
    print(f"{'not in any stage':<62} {wall - counted:7.2f}")
    cost = sum(per_notebook.values()) / notebooks
    print(f"per notebook, the fixed start aside: {cost:.3f} s = {cost / unit:.2f} `import torch`")
    print(f"fixed start: {sum(fixed.values()):.1f} s")

    print("\nthe test cells in this process (medians of 3 runs after a first), their meta-device re-run,"
          "\nand the same cells with the checks' call watch off (alternating runs):")
    for assignment in args.assignments:
        total, meta, unwatched = kernel_shares(assignment)
        print(f"  {assignment:<28} {total:6.2f} s, meta {meta:5.2f} s ({meta / total:.0%}), "
              f"watch off {unwatched:5.2f} s (the watch: x{total / unwatched:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
