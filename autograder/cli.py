"""Command line: ``python -m autograder grade SUBMISSIONS --out RESULTS`` and ``release``."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import warnings
from collections import Counter
from itertools import groupby
from pathlib import Path

from tqdm import tqdm

from . import cache, gradebook, lms, publish, release, service, similarity
from .course import EXERCISES_DIR, REPO_ROOT, SOLUTIONS_DIR, Course, CourseError
from .report import ResultsWriter
from .runner import grade_all
from .sandbox import KERNEL_ENVIRONMENT
from .submissions import SubmissionsError, discover, find_root, unpack_zip


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # nbgrader runs tools of its environment (alembic) by name: find them without an activated venv.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # nbgrader's gradebook code trips SQLAlchemy 2 warnings that say nothing to an instructor.
    warnings.filterwarnings("ignore", module="nbgrader")
    try:
        return args.run(args)
    except (CourseError, SubmissionsError, OSError) as err:
        print(f"autograder: error: {err}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder",
                                     description="Release and grade the course's nbgrader assignments.")
    commands = parser.add_subparsers(dest="command", required=True)

    grade = commands.add_parser(
        "grade", help="grade a folder or zip of submissions",
        description="Grade SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb (a folder or a .zip) "
                    "into RESULTS/grades.csv, RESULTS/results.json and RESULTS/feedback/. "
                    "SUBMISSIONS is never modified.")
    grade.add_argument("submissions", type=Path, metavar="SUBMISSIONS")
    grade.add_argument("--out", type=Path, required=True, metavar="RESULTS")
    grade.add_argument("--source", type=Path, default=SOLUTIONS_DIR,
                       help="folder of source notebooks (default: %(default)s)")
    grade.add_argument("--cell-timeout", type=int, default=60, metavar="SECONDS",
                       help="a cell running longer is interrupted (default: %(default)s)")
    grade.add_argument("--notebook-timeout", type=int, default=300, metavar="SECONDS",
                       help="wall-clock limit for a whole notebook (default: %(default)s)")
    grade.add_argument("--memory", type=int, default=4096, metavar="MiB",
                       help="memory (address space) limit of a grading kernel; 0: none (default: %(default)s)")
    grade.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                       help="run kernels without bubblewrap isolation (trusted submissions only)")
    grade.add_argument("--cold-kernels", dest="warm_kernels", action="store_false",
                       help="start each kernel in a new Python instead of forking it from a warm one "
                            "(about 2 s more per notebook)")
    grade.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, metavar="N",
                       help="notebooks graded at once (default: the number of cores, %(default)s)")
    grade.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    cluster = grade.add_mutually_exclusive_group()  # instead of --jobs: grade on a Dask cluster's workers
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="grade on the workers of the Dask scheduler at ADDRESS (tcp://HOST:8786)")
    cluster.add_argument("--scheduler-file", type=Path, metavar="FILE",
                         help="grade on the workers of the Dask scheduler that FILE names (dask scheduler --scheduler-file)")
    gradebook.add_options(grade)  # --gradebook: also record the scores in an nbgrader gradebook
    cache.add_options(grade)  # --cache: grade only what changed since an earlier run
    grade.set_defaults(run=_grade)

    rel = commands.add_parser(
        "release", help="regenerate exercises/ from solutions/",
        description="Regenerate the student notebooks from the source notebooks with nbgrader.")
    rel.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: all")
    rel.add_argument("--source", type=Path, default=SOLUTIONS_DIR, help="default: %(default)s")
    rel.add_argument("--dest", type=Path, default=EXERCISES_DIR, help="default: %(default)s")
    rel.add_argument("--check", action="store_true",
                     help="change nothing; exit 1 if the release notebooks are out of date")
    rel.set_defaults(run=_release)

    lms.add_commands(commands)  # collect, export
    gradebook.add_command(commands)  # export-gradebook
    similarity.add_command(commands)  # similarity
    service.add_commands(commands)  # serve, tokens
    publish.add_command(commands)  # publish: the student distribution
    return parser


def _release(args) -> int:
    if args.check:
        stale = [f"out of date: {args.dest / path}" for path in release.stale_files(args.source, args.dest)]
        stale += release.install_problems([args.source, args.dest])  # setup cells vs pyproject.toml
        for line in stale:
            print(line)
        if stale:
            print("run `python -m autograder release` to regenerate", file=sys.stderr)
        return 1 if stale else 0
    for assignment in release.generate(args.source, args.dest, args.assignments):
        print(f"released {assignment} -> {args.dest / assignment}")
    return 0


def _grade(args) -> int:
    submissions, out = args.submissions.resolve(), args.out.resolve()
    if not submissions.exists():
        raise SubmissionsError(f"{submissions} does not exist")
    if submissions.is_dir() and out.is_relative_to(submissions):
        raise SubmissionsError("RESULTS must not be inside SUBMISSIONS, which is never modified")
    if args.cache and submissions.is_dir() and args.cache.resolve().is_relative_to(submissions):
        raise SubmissionsError("the --cache folder must not be inside SUBMISSIONS, which is never modified")

    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        tmp = Path(tmp)
        root = unpack_zip(submissions, tmp / "unzipped") if submissions.is_file() else submissions
        options = dict(source_dir=args.source, cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout,
                       memory_limit=args.memory * 1024**2, sandbox=args.sandbox, warm_kernels=args.warm_kernels)
        course = Course(tmp / "course", **options)  # checks the source notebooks before any work starts
        course.generate_all()
        notebooks = {a: course.notebooks(a) for a in course.assignments}
        expected = discover(find_root(root, course.assignments), course.assignments, notebooks)
        if not expected:
            print(f"autograder: warning: no <student>/<assignment>/ folders for "
                  f"{', '.join(course.assignments)} under {submissions}", file=sys.stderr)
        groups = [list(g) for _, g in groupby(expected, key=lambda s: (s.student_id, s.assignment))]

        grade_groups = _engine(args)
        writer = ResultsWriter(out)
        progress = tqdm(total=len(expected), unit="notebook", disable=args.quiet, file=sys.stderr)
        kept = cache.ResultCache(args.cache, course, options) if args.cache else None
        if kept:  # groups graded before with the same inputs come back as they were; the others are graded
            groups = kept.replay(groups, writer)
            progress.update(kept.hits)
        with _kernel_environment(), progress:
            for graded in grade_groups(groups, course, options):
                for result, feedback in graded:
                    writer.add(result, feedback)
                if kept:
                    kept.store(graded)
                progress.update(len(graded))
        writer.finish()

    if not args.quiet:
        counts = Counter(r.status for r in writer.results)
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        reused = f"; {kept.hits} from the cache" if kept else ""
        print(f"graded {len(writer.results)} notebooks ({summary or 'none'}{reused}) -> {out / 'grades.csv'}")
    gradebook.after_grading(args)
    return 0


def _engine(args):
    """Where the notebooks are graded, chosen here only: ``grade(groups, course, options)`` on
    the workers of a Dask cluster (--scheduler, --scheduler-file; connected now, before RESULTS
    is touched), else in worker processes on this machine (Dask is not even imported)."""
    if args.scheduler or args.scheduler_file:
        from . import cluster
        return cluster.engine(args.scheduler, args.scheduler_file)
    return lambda groups, course, options: grade_all(groups, course, max(1, min(args.jobs, len(groups))), **options)


@contextlib.contextmanager
def _kernel_environment():
    """Environment of the grading kernels without a sandbox (the sandbox sets its own): the
    check helpers importable, and what every grading kernel has (sandbox.KERNEL_ENVIRONMENT)."""
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.update(KERNEL_ENVIRONMENT)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
