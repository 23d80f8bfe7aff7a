"""A Dask worker preload for ``benchmarks/cluster.py --simulate SECONDS``
(``dask worker --preload benchmarks/stand_in_worker.py``): the worker's course grades nothing.

Each notebook of a group takes $AUTOGRADER_BENCH_SECONDS of sleep, and comes back as a result
the size of a real one (an autograded notebook of 37 kB and a feedback page of 200 kB, as the
reference solutions' are), through the scheduler to the CLI, which writes RESULTS as it always
does. The worker builds no course and starts no sandbox. So many more workers than cores can
run, and what limits their throughput is what a real cluster adds to grading: the scheduler,
the transfers, the CLI reading submissions and writing results. That is the per-task overhead
that decides how grading scales from 4 to 16 workers, measured without 16 cores.
"""
from __future__ import annotations

import os
import time

from autograder.engine.cluster import CourseOnWorker
from autograder.results import NotebookResult, Status

AUTOGRADED_BYTES, FEEDBACK_BYTES = 37_000, 200_000


def _no_course(self) -> None:
    self.course = None


def _sleep_and_answer(self, group):
    if self.failed:
        raise RuntimeError(self.failed)
    seconds = float(os.environ["AUTOGRADER_BENCH_SECONDS"])
    graded = []
    for sub, _ in group:
        time.sleep(seconds)
        result = NotebookResult(sub.student_id, sub.assignment, sub.notebook, Status.OK, 1.0, 1.0,
                                autograded="{" + " " * (AUTOGRADED_BYTES - 2) + "}")
        graded.append((result, "<html>" + "x" * FEEDBACK_BYTES + "</html>"))
    return graded


def dask_setup(worker) -> None:
    # the plugin's class is this module's: a plugin unpickled here grades with these methods
    CourseOnWorker._build = _no_course
    CourseOnWorker.grade = _sleep_and_answer
