"""Command line: ``python -m autograder grade SUBMISSIONS --out RESULTS`` and ``release``."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from itertools import groupby
from pathlib import Path

# Only light modules here: `grade` says what it does before nbgrader and PyTorch are loaded
# (seconds on a busy machine); the commands import what they need.
STARTED = time.monotonic()
NOTHING_GRADED = 1  # exit status of `grade` when no notebook could be graded (2: grading cannot run)


def say(message: str) -> None:
    """A progress line on stderr, with the seconds since the command started."""
    print(f"autograder: [{time.monotonic() - STARTED:4.0f} s] {message}", file=sys.stderr, flush=True)


class NothingToGrade(RuntimeError):
    """SUBMISSIONS holds no notebook in the layout `grade` reads: what was found, what to do."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["grade"] and "--quiet" not in argv and not {"-h", "--help"} & set(argv):
        say("loading nbgrader and PyTorch")
    args = _parser().parse_args(argv)
    from .course import CourseError
    from .submissions import SubmissionsError

    # nbgrader runs tools of its environment (alembic) by name: find them without an activated venv.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # nbgrader's gradebook code trips SQLAlchemy 2 warnings that say nothing to an instructor.
    warnings.filterwarnings("ignore", module="nbgrader")
    try:
        return args.run(args)
    except NothingToGrade as err:
        print(f"autograder: error: {err}", file=sys.stderr)
        return NOTHING_GRADED
    except (CourseError, SubmissionsError, OSError) as err:
        print(f"autograder: error: {err}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    from . import cache, gradebook, lms, publish, service, similarity
    from .course import EXERCISES_DIR, SOLUTIONS_DIR

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
    from . import release

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
    from tqdm import tqdm

    from . import cache, gradebook
    from .course import Course, find_assignments
    from .lms import collect_notes, read_roster
    from .report import ResultsWriter
    from .submissions import SubmissionsError, discover, find_root, unpack_student_zips, unpack_zip

    progress_line = (lambda message: None) if args.quiet else say
    submissions, out = args.submissions.resolve(), args.out.resolve()
    if not submissions.exists():
        raise SubmissionsError(f"{submissions} does not exist")
    if submissions.is_dir() and out.is_relative_to(submissions):
        raise SubmissionsError("RESULTS must not be inside SUBMISSIONS, which is never modified")
    if args.cache and submissions.is_dir() and args.cache.resolve().is_relative_to(submissions):
        raise SubmissionsError("the --cache folder must not be inside SUBMISSIONS, which is never modified")
    if args.roster:  # read now: a roster that cannot be read stops the run before any work
        read_roster(args.roster)
    assignments = find_assignments(args.source)
    notebooks = {a: sorted(p.stem for p in (args.source / a).glob("*.ipynb")) for a in assignments}

    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        tmp = Path(tmp)
        progress_line(f"reading {submissions}")
        top = unpack_zip(submissions, tmp / "unzipped") if submissions.is_file() else submissions
        root = find_root(top, assignments)
        unzipped = unpack_student_zips(root, tmp / "students")
        if unzipped:
            progress_line(f"unpacked the per-student zips of {root} (each zip's name is its student's id)")
            top = root = unzipped
        collected = collect_notes(top, assignments)  # what `collect` said: late, superseded, not placed
        expected = _with_collect_notes(discover(root, assignments, notebooks), collected, notebooks)
        if not expected:
            raise NothingToGrade(_nothing_found(submissions, top, assignments, notebooks))
        for hint in _layout_hints(root, assignments, notebooks):
            print(f"autograder: warning: {hint}", file=sys.stderr)
        present = sorted({s.assignment for s in expected})
        groups = [list(g) for _, g in groupby(expected, key=lambda s: (s.student_id, s.assignment))]
        progress_line(f"found {len(groups)} students' assignments ({', '.join(present)}), {len(expected)} notebooks")

        options = dict(source_dir=args.source, cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout,
                       memory_limit=args.memory * 1024**2, sandbox=args.sandbox, warm_kernels=args.warm_kernels)
        course = Course(tmp / "course", assignments=present, **options)  # checks the source notebooks first
        course.generate_all(lambda a: progress_line(f"preparing {a} (nbgrader generate_assignment)"))

        grade_groups = _engine(args)
        writer = ResultsWriter(out, late={key for key, (_, late) in collected.items() if late})
        progress_line("grading")
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

    counts = Counter(r.status for r in writer.results)
    if not args.quiet:
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        reused = f"; {kept.hits} from the cache" if kept else ""
        print(f"graded {len(writer.results)} notebooks ({summary or 'none'}{reused}) -> {out / 'grades.csv'}")
    gradebook.after_grading(args)
    if not set(counts) - {"missing", "invalid"}:
        print(f"autograder: error: no notebook could be graded (every one is missing or invalid; "
              f"see the reasons in {out / 'grades.csv'})", file=sys.stderr)
        return NOTHING_GRADED
    return 0


def _with_collect_notes(expected: list, collected: dict, notebooks: dict) -> list:
    """The expected notebooks with what `collect` said about each student's files in their
    note (it reaches grades.csv's reason), and a missing row for each student whose files
    collect could not place (an uploaded qkv.py), so that the reason is not lost."""
    from dataclasses import replace

    from .submissions import Submission

    with_notes = [replace(s, note="; ".join(filter(None, [s.note, collected.get((s.student_id, s.assignment), ("",))[0]])))
                  for s in expected]
    seen = {(s.student_id, s.assignment) for s in expected}
    with_notes += [Submission(student, assignment, notebook, None, note)
                   for (student, assignment), (note, _) in collected.items()
                   if (student, assignment) not in seen and assignment in notebooks for notebook in notebooks[assignment]]
    return sorted(with_notes, key=lambda s: (s.student_id, s.assignment, s.notebook))


def _nothing_found(submissions: Path, root: Path, assignments: list[str], notebooks: dict) -> str:
    """Why ``grade`` found nothing: what is there, and what to do."""
    from .submissions import listing

    lines = [f"nothing to grade in {submissions}: no <student_id>/<assignment>/<notebook>.ipynb for any "
             f"assignment of the source ({', '.join(assignments)})", "found:"]
    lines += [f"  {line}" for line in listing(root)]
    hints = _layout_hints(root, assignments, notebooks)
    return "\n".join(lines + hints[:20] + (["..."] if len(hints) > 20 else []))


def _layout_hints(root: Path, assignments: list[str], notebooks: dict) -> list[str]:
    """What looks wrong in the layout: an LMS download not collected, folders and notebooks
    not where `grade` reads them."""
    from .lms import guess_download
    from .submissions import diagnose

    download = guess_download(root)
    hints = [f"this looks like a {download.capitalize()} download: run `python -m autograder collect {root} --lms "
             f"{download} --assignment ASSIGNMENT --out SUBMISSIONS` first, then grade SUBMISSIONS"] if download else []
    return hints + diagnose(root, assignments, notebooks)


def _engine(args):
    """Where the notebooks are graded, chosen here only: ``grade(groups, course, options)`` on
    the workers of a Dask cluster (--scheduler, --scheduler-file; connected now, before RESULTS
    is touched), else in worker processes on this machine (Dask is not even imported)."""
    from .runner import grade_all

    if args.scheduler or args.scheduler_file:
        from . import cluster
        return cluster.engine(args.scheduler, args.scheduler_file)
    return lambda groups, course, options: grade_all(groups, course, max(1, min(args.jobs, len(groups))), **options)


@contextlib.contextmanager
def _kernel_environment():
    """Environment of the grading kernels without a sandbox (the sandbox sets its own): the
    check helpers importable, and what every grading kernel has (sandbox.KERNEL_ENVIRONMENT)."""
    from .course import REPO_ROOT
    from .sandbox import KERNEL_ENVIRONMENT

    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.update(KERNEL_ENVIRONMENT)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
