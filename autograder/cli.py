"""The command line, all of it: ``python -m autograder COMMAND``. Every subcommand's arguments
and its handler are here; below the command line, options take one form (``GradingOptions``)
and the modules never see the arguments.

Only light modules at the top: ``grade`` finds the class and starts what will grade it before
nbgrader and PyTorch are loaded (seconds on a busy machine), and each handler imports what it
needs."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from collections import Counter
from itertools import groupby
from pathlib import Path

from autograder.engine.process import kernel_environment, prepare_process
from autograder.errors import CourseError, InputError
from autograder.layout import EXERCISES_DIR, SOLUTIONS_DIR
from autograder.options import GradingOptions

STARTED = time.monotonic()
NOTHING_GRADED = 1  # exit status of `grade` when no notebook could be graded (2: grading cannot run)
SERVICE_DATA = Path("autograder-service")  # serve's and tokens' default data folder
# The LMSs (autograder/instructor/lms.py, one class each), named here so that --help need not import them:
LMS_NAMING = ("canvas", "moodle")  # collect --lms: the file naming of these LMS's bulk downloads
EXPORT_FORMATS = ("canvas", "moodle", "csv")  # export --format: the grade sheets they import, and a plain CSV


def say(message: str) -> None:
    """A progress line on stderr, with the seconds since the command started."""
    print(f"autograder: [{time.monotonic() - STARTED:4.0f} s] {message}", file=sys.stderr, flush=True)


class NothingToGrade(RuntimeError):
    """SUBMISSIONS holds no notebook in the layout `grade` reads: what was found, what to do."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    prepare_process()
    try:
        return args.run(args)
    except NothingToGrade as err:
        print(f"autograder: error: {err}", file=sys.stderr)
        return NOTHING_GRADED
    except (CourseError, InputError, OSError) as err:
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
    _grading_arguments(grade, "notebooks graded at once (default: the number of cores, %(default)s)")
    grade.add_argument("--cold-kernels", dest="warm_kernels", action="store_false",
                       help="start each kernel in a new Python instead of forking it from a warm one "
                            "(about 2 s more per notebook)")
    grade.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    _gradebook_arguments(grade)  # --gradebook: also record the scores in an nbgrader gradebook
    grade.add_argument("--cache", type=Path, metavar="DIR",
                       help="reuse the results of earlier runs kept in DIR: a student's assignment whose "
                            "notebooks, source notebooks, grader and options are unchanged is not graded "
                            "again (safe to delete)")
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

    _lms_commands(commands)  # collect, export
    _export_gradebook_command(commands)
    _similarity_command(commands)
    _report_command(commands)  # the class's mistakes
    _service_commands(commands)  # serve, tokens
    _publish_command(commands)  # the student distribution
    return parser


def _grading_arguments(parser: argparse.ArgumentParser, jobs_help: str) -> None:
    """How notebooks are graded (``grade`` and ``serve``): GradingOptions, and where."""
    parser.add_argument("--source", type=Path, default=SOLUTIONS_DIR,
                        help="folder of source notebooks (default: %(default)s)")
    parser.add_argument("--cell-timeout", type=int, default=60, metavar="SECONDS",
                        help="a cell running longer is interrupted (default: %(default)s)")
    parser.add_argument("--notebook-timeout", type=int, default=300, metavar="SECONDS",
                        help="wall-clock limit for a whole notebook (default: %(default)s)")
    parser.add_argument("--memory", type=int, default=4096, metavar="MiB",
                        help="memory limit of a grading kernel: address space of each process, and all of its processes "
                             "together where the grader may make a memory cgroup; 0: none (default: %(default)s)")
    parser.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                        help="run kernels without bubblewrap isolation (trusted submissions only)")
    parser.add_argument("--no-localise", dest="localise", action="store_false",
                        help="do not run a notebook a second time to localise the mistakes that its hints do not "
                             "name (faster where many notebooks fail; the scores are the same)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, metavar="N", help=jobs_help)
    cluster = parser.add_mutually_exclusive_group()  # instead of --jobs: grade on a Dask cluster's workers
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="grade on the workers of the Dask scheduler at ADDRESS (tcp://HOST:8786)")
    cluster.add_argument("--scheduler-file", type=Path, metavar="FILE",
                         help="grade on the workers of the Dask scheduler that FILE names (dask scheduler --scheduler-file)")
    parser.add_argument("--scheduler-timeout", type=float, default=30, metavar="SECONDS",
                        help="with a scheduler: how long to wait for it and a first worker, and for it to come back "
                             "once lost, before stopping with exit status 2 (default: %(default)s)")


def grading_options(args: argparse.Namespace) -> GradingOptions:
    """The one place the arguments become options."""
    return GradingOptions(source_dir=args.source, cell_timeout=args.cell_timeout,
                          notebook_timeout=args.notebook_timeout, memory_limit=args.memory * 1024**2,
                          sandbox=args.sandbox, warm_kernels=args.warm_kernels, localise=args.localise)


def _release(args) -> int:
    from autograder.grading import release

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
    # Light modules only until the class is found: what grades it is then started (a sandbox, or
    # the workers) so that its imports of nbgrader and PyTorch run beside this process's own.
    from autograder.layout import find_assignments
    from autograder.report import ResultsWriter

    progress_line = (lambda message: None) if args.quiet else say
    submissions, out = args.submissions.resolve(), args.out.resolve()
    _refuse_to_grade(args, submissions, out)
    assignments = find_assignments(args.source)
    notebooks = {a: sorted(p.stem for p in (args.source / a).glob("*.ipynb")) for a in assignments}

    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        tmp = Path(tmp)
        expected, collected = _expected_notebooks(args, submissions, tmp, assignments, notebooks, progress_line)
        present = sorted({s.assignment for s in expected})
        groups = [list(g) for _, g in groupby(expected, key=lambda s: (s.student_id, s.assignment))]
        progress_line(f"found {len(groups)} students' assignments ({', '.join(present)}), {len(expected)} notebooks")

        options = grading_options(args)
        _start_grading_early(args, options, len(groups))
        progress_line("loading nbgrader and PyTorch")
        from autograder.grading.course_cache import prepared_course

        course = prepared_course(tmp / "course", options, present, progress_line)  # checks the source notebooks first

        grade_groups = _engine(args)
        writer = ResultsWriter(out, late={key for key, (_, late) in collected.items() if late})
        progress_line("grading")
        kept = _grade_into(writer, grade_groups, groups, course, options, args)
        writer.finish()
    return _say_what_was_graded(args, out, writer.results, kept)


def _refuse_to_grade(args, submissions: Path, out: Path) -> None:
    """Stop before any work where grading could not end well: no SUBMISSIONS, an output inside it
    (it is never modified), a roster that cannot be read, or no kernel that could start."""
    from autograder.instructor.lms import read_roster
    from autograder.submissions import SubmissionsError

    if not submissions.exists():
        raise SubmissionsError(f"{submissions} does not exist")
    if submissions.is_dir() and out.is_relative_to(submissions):
        raise SubmissionsError("RESULTS must not be inside SUBMISSIONS, which is never modified")
    if args.cache and submissions.is_dir() and args.cache.resolve().is_relative_to(submissions):
        raise SubmissionsError("the --cache folder must not be inside SUBMISSIONS, which is never modified")
    if args.roster:  # read now: a roster that cannot be read stops the run before any work
        read_roster(args.roster)
    _kernels_can_start()


def _expected_notebooks(args, submissions: Path, tmp: Path, assignments: list[str], notebooks: dict,
                        progress_line) -> tuple[list, dict]:
    """The notebooks of SUBMISSIONS (unpacked into ``tmp`` where zipped) that `grade` expects,
    sorted by student and assignment, and what `collect` said about them (``collect_notes``);
    NothingToGrade where there are none. Warns of what looks wrong in the layout and the sandbox."""
    from autograder.instructor.lms import collect_notes
    from autograder.submissions import discover, find_root, unpack_student_zips, unpack_zip

    progress_line(f"reading {submissions}")
    top = unpack_zip(submissions, tmp / "unzipped") if submissions.is_file() else submissions
    root = find_root(top, assignments)
    unzipped = unpack_student_zips(root, tmp / "students")
    given = submissions if submissions.is_file() else _only_zip(root) if unzipped else root  # not in tmp
    if unzipped:
        progress_line(f"unpacked the per-student zips of {root} (each zip's name is its student's id)")
        top = root = unzipped
    collected = collect_notes(top, assignments)  # what `collect` said: late, superseded, not placed
    expected = _with_collect_notes(discover(root, assignments, notebooks), collected, notebooks)
    if not expected:
        raise NothingToGrade(_nothing_found(submissions, top, assignments, notebooks, given))
    graded_here = not (args.scheduler or args.scheduler_file)  # a cluster's workers grade on their machines
    for hint in [*_layout_hints(root, assignments, notebooks, given),
                 *sandbox_hints(args.sandbox, args.memory if graded_here else 0)]:
        print(f"autograder: warning: {hint}", file=sys.stderr)
    return expected, collected


def _grade_into(writer, grade_groups, groups: list, course, options: GradingOptions, args):
    """Grade ``groups`` (a student's notebooks of one assignment each) into ``writer``, with a
    progress bar; with --cache, the groups graded before with the same inputs come back as they
    were, and the others are kept for the next run. Returns that cache (None without --cache)."""
    from tqdm import tqdm

    from autograder.engine import cache

    progress = tqdm(total=sum(map(len, groups)), unit="notebook", disable=args.quiet, file=sys.stderr)
    kept = cache.ResultCache(args.cache, course, options) if args.cache else None
    if kept:
        groups = kept.replay(groups, writer)
        progress.update(kept.hits)
    with kernel_environment(), progress:
        for graded in grade_groups(groups, course, options):
            for result, feedback in graded:
                writer.add(result, feedback)
            if kept:
                kept.store(graded)
            progress.update(len(graded))
    return kept


def _say_what_was_graded(args, out: Path, results: list, kept) -> int:
    """The summary line (unless --quiet), the scores recorded in --gradebook, and the exit status:
    NOTHING_GRADED where every notebook was missing or invalid."""
    counts = Counter(r.status for r in results)
    if not args.quiet:
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        reused = f"; {kept.hits} from the cache" if kept else ""
        print(f"graded {len(results)} notebooks ({summary or 'none'}{reused}) -> {out / 'grades.csv'}")
    if args.gradebook:
        recorded = _record_in_gradebook(args, out)
        if not args.quiet:
            print(f"recorded {recorded} graded notebooks in {args.gradebook}")
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

    from autograder.submissions import Submission

    with_notes = [replace(s, note="; ".join(filter(None, [s.note, collected.get((s.student_id, s.assignment), ("",))[0]])))
                  for s in expected]
    seen = {(s.student_id, s.assignment) for s in expected}
    with_notes += [Submission(student, assignment, notebook, None, note)
                   for (student, assignment), (note, _) in collected.items()
                   if (student, assignment) not in seen and assignment in notebooks for notebook in notebooks[assignment]]
    return sorted(with_notes, key=lambda s: (s.student_id, s.assignment, s.notebook))


def _nothing_found(submissions: Path, root: Path, assignments: list[str], notebooks: dict, given: Path) -> str:
    """Why ``grade`` found nothing: what is there, and what to do (``given``: what the user gave
    that ``root`` was read from, as in _layout_hints)."""
    from autograder.submissions import listing

    lines = [f"nothing to grade in {submissions}: no <student_id>/<assignment>/<notebook>.ipynb for any "
             f"assignment of the source ({', '.join(assignments)})", "found:"]
    lines += [f"  {line}" for line in listing(root)]
    hints = _layout_hints(root, assignments, notebooks, given)
    return "\n".join(lines + hints[:20] + (["..."] if len(hints) > 20 else []))


def _layout_hints(root: Path, assignments: list[str], notebooks: dict, given: Path) -> list[str]:
    """What looks wrong in the layout: an LMS download not collected, folders and notebooks
    not where `grade` reads them. ``given``: the folder or zip the user gave that holds ``root``
    (which may be unpacked in a temporary folder), for a collect command that reads it."""
    import shlex

    from autograder.instructor.lms import guess_assignment, guess_download
    from autograder.submissions import diagnose

    download = guess_download(root)
    hints = []
    if download:
        assignment = guess_assignment(root, download, notebooks) or "ASSIGNMENT"
        hints.append(f"this looks like a {download.capitalize()} download: run `python -m autograder collect "
                     f"{shlex.quote(str(given))} --lms {download} --assignment {assignment} --out SUBMISSIONS` "
                     "first, then grade SUBMISSIONS")
    return hints + diagnose(root, assignments, notebooks)


def _only_zip(folder: Path) -> Path:
    """The one zip in ``folder`` (a download saved into a folder of its own), else the folder."""
    zips = [p for p in folder.iterdir() if p.suffix.lower() == ".zip" and p.is_file()]
    return zips[0] if len(zips) == 1 else folder


def _kernels_can_start() -> None:
    """Stop before any work where no kernel could start (each would fail on its own)."""
    from autograder.sandbox.bwrap import socket_path_problem
    from autograder.sandbox.registration import registration_problem

    problem = registration_problem() or socket_path_problem()
    if problem:
        raise InputError(problem)


def sandbox_hints(sandbox: bool, memory_mib: int = 0) -> list[str]:
    """What the sandbox cannot hold on this machine, for the instructor to know before grading
    (``memory_mib``: the --memory limit of kernels graded here; 0: none, or graded elsewhere)."""
    from autograder.sandbox.bwrap import TMPFS_BYTES, _real_root
    from autograder.sandbox.cgroups import memory_groups_available
    from autograder.sandbox.forkserver import landlock_version

    if not sandbox:
        return []
    hints = []
    if not landlock_version():
        limit = f"up to {TMPFS_BYTES // 2**20} MiB, a RAM disk" if _real_root() else "limited per file only"
        hints.append(f"this Linux has no Landlock (5.13 or later): a kernel can write to its sandbox's scratch folder "
                     f"on this machine all along ({limit}); see docs/threat-model.md")
    if memory_mib and not memory_groups_available():
        hints.append(f"no memory control group can be made here (the grader is not root, and its cgroup does not "
                     f"delegate the memory controller): --memory {memory_mib} limits each process of a kernel, not "
                     "all of them together; see docs/threat-model.md")
    return hints


def _local_workers(args, groups: int) -> int:
    """How many worker processes grade ``groups`` on this machine (1: this process grades them)."""
    return max(1, min(args.jobs, groups))


def _start_grading_early(args, options: GradingOptions, groups: int) -> None:
    """Start what will grade the class on this machine before this process loads nbgrader, so
    that its own imports run beside these (on another core): the workers' fork server, or, when
    this process grades alone, the sandbox its kernels are forked from, and then what it grades
    with (PyTorch). Not for a class that a cache may answer (most groups then need no kernel)
    or a Dask cluster."""
    if args.scheduler or args.scheduler_file or args.cache:
        return
    from autograder.grading.steps import WORKER_MODULES

    if _local_workers(args, groups) > 1:
        from autograder.engine.process import start_workers_early

        start_workers_early("autograder.engine.runner", *WORKER_MODULES)
        return
    from autograder.sandbox.server import launch_warm_sandbox

    launch_warm_sandbox(options)
    for module in WORKER_MODULES:  # this process is the worker
        importlib.import_module(module)


def _engine(args):
    """Where the notebooks are graded, chosen here only: ``grade(groups, course, options)`` on
    the workers of a Dask cluster (--scheduler, --scheduler-file; connected now, before RESULTS
    is touched), else in worker processes on this machine (Dask is not even imported)."""
    from autograder.engine.runner import grade_all

    if args.scheduler or args.scheduler_file:
        from autograder.engine import cluster
        return cluster.engine(args.scheduler, args.scheduler_file, args.scheduler_timeout)
    return lambda groups, course, options: grade_all(groups, course, _local_workers(args, len(groups)), options)


# --------------------------------------------------------------------------
# an LMS's bulk download in, grades out: collect, export


def _lms_commands(commands) -> None:
    col = commands.add_parser(
        "collect", help="turn an LMS bulk download into SUBMISSIONS/<student_id>/<assignment>/",
        description="Copy the notebooks of an LMS bulk download (a folder or a .zip, never modified) to "
                    "OUT/<student_id>/<assignment>/<notebook>.ipynb, the layout `grade` reads. Every file of "
                    "the download is listed in OUT/collect-<assignment>.csv: placed, superseded (the same "
                    "student's later file was taken: Canvas's highest file id, else the highest copy number "
                    "such as -1 or (2), else the newest), ignored (system files) or unplaced, with the reason. "
                    "OUT/students.csv lists the students collected (a roster for `export`).")
    col.add_argument("download", type=Path, metavar="DOWNLOAD")
    col.add_argument("--assignment", required=True, help="the assignment these submissions are for")
    col.add_argument("--out", type=Path, required=True, metavar="SUBMISSIONS")
    col.add_argument("--lms", choices=LMS_NAMING, default="canvas",
                     help="the LMS's file naming (default: %(default)s)")
    col.add_argument("--pattern", metavar="REGEX",
                     help="instead of --lms: a Python regex matched against each file's whole path in the "
                          "download, with a named group student_id, lms_id (mapped with --roster) or name "
                          "(needs --roster), and optionally file (the uploaded name) and late")
    col.add_argument("--roster", type=Path, metavar="CSV",
                     help="map LMS ids or names to student ids: a CSV with student_id and lms_id/name columns, "
                          "or the LMS's own export (Canvas gradebook, Moodle grading worksheet)")
    col.add_argument("--source", type=Path, default=SOLUTIONS_DIR, help="folder of source notebooks (default: %(default)s)")
    col.set_defaults(run=_collect)

    exp = commands.add_parser(
        "export", help="write grades.csv in an LMS's import format",
        description="Write RESULTS/grades.csv as Canvas's gradebook import CSV, Moodle's grading worksheet or "
                    "a plain CSV, one row per student (and per roster student who submitted nothing). "
                    "Missing and invalid submissions get no grade (a blank cell), never a 0; the reason is in "
                    "Moodle's feedback comments, the plain CSV and this command's output. A written answer not "
                    "graded yet is in neither the points nor the maximum; the LMS, whose maximum is the whole "
                    "assignment, gets the points as they are (never scaled up). --feedback-zip also writes the "
                    "feedback pages as the LMS's bulk upload. No output may be a file this command reads.")
    exp.add_argument("results", type=Path, metavar="RESULTS")
    exp.add_argument("--format", choices=EXPORT_FORMATS, required=True)
    exp.add_argument("--out", type=Path, required=True, metavar="FILE")
    exp.add_argument("--assignment", help="which assignment (needed when RESULTS holds several)")
    exp.add_argument("--roster", type=Path, metavar="CSV",
                     help="names, LMS ids and emails: SUBMISSIONS/students.csv written by collect, or the LMS's export")
    exp.add_argument("--column", help="Canvas: the assignment's column title as in Canvas's export, "
                                      "e.g. 'QKV (123456)' (default: the assignment id, a new Canvas assignment)")
    exp.add_argument("--gradebook", metavar="URL_OR_PATH",
                     help="take each graded student's final score from this nbgrader gradebook (written answers "
                          "graded by hand in formgrader; see export-gradebook); default: RESULTS' autograded points")
    exp.add_argument("--late-penalty", type=float, default=0.0, metavar="PERCENT",
                     help="take PERCENT of the maximum off the grade of a submission the LMS marked late "
                          "(default: none; late is reported in the reason, not penalised)")
    exp.add_argument("--feedback-zip", type=Path, metavar="ZIP",
                     help="canvas, moodle: also write each graded student's feedback page into ZIP, named as the "
                          "LMS's bulk upload wants (Canvas: Submissions > Re-Upload Submissions, needs --collected; "
                          "Moodle: View all submissions > Upload multiple feedback files in a zip)")
    exp.add_argument("--collected", type=Path, metavar="SUBMISSIONS",
                     help="canvas --feedback-zip: the folder `collect --lms canvas` wrote (its report names each "
                          "student's file in Canvas's download, which the feedback is attached to)")
    exp.set_defaults(run=_export)


def _collect(args) -> int:
    from autograder.instructor.lms import PATTERNS, collect, guess_lms, read_roster, write_collect_report
    from autograder.layout import find_assignments

    download, out = args.download.resolve(), args.out.resolve()
    if not download.exists():
        raise InputError(f"{download} does not exist")
    if download.is_dir() and out.is_relative_to(download):
        raise InputError("SUBMISSIONS must not be inside DOWNLOAD, which is never modified")
    if args.assignment not in find_assignments(args.source):
        raise InputError(f"unknown assignment {args.assignment}; known: {', '.join(find_assignments(args.source))}")
    notebooks = sorted(p.stem for p in (args.source / args.assignment).glob("*.ipynb"))
    roster = read_roster(args.roster) if args.roster else None
    report = collect(download, args.assignment, notebooks, out, args.pattern or PATTERNS[args.lms], roster)
    out.mkdir(parents=True, exist_ok=True)
    path = write_collect_report(out, args.assignment, report, roster)
    counts = {status: sum(p.status == status for p in report) for status in ("placed", "superseded", "ignored", "unplaced")}
    for p in report:
        if p.status in ("superseded", "unplaced"):
            print(f"{p.status}: {p.file}: {p.reason}", file=sys.stderr)
    looks_like = guess_lms([p.file for p in report]) if not (counts["placed"] or args.pattern) else None
    if looks_like and looks_like != args.lms:
        print(f"autograder: collect: this looks like a {looks_like.capitalize()} download, not {args.lms.capitalize()}'s: "
              f"run it again with --lms {looks_like}", file=sys.stderr)
    print(f"collected {counts['placed']} notebooks of {args.assignment} into {out} "
          f"({', '.join(f'{n} {s}' for s, n in counts.items())}); every file: {path}")
    return 0 if counts["placed"] else 1


def _export(args) -> int:
    from autograder.instructor.gradebook import gradebook_url
    from autograder.instructor.lms import NOT_GRADED, export, read_roster

    grades = args.results / "grades.csv"
    if not grades.is_file():
        raise InputError(f"no grades.csv in {args.results}")
    gradebook = gradebook_url(str(args.gradebook)) if args.gradebook else None
    _refuse_to_export(args, gradebook)
    roster = read_roster(args.roster) if args.roster else None
    assignment, rows, left_out = export(grades, args.format, args.out, args.assignment, roster, args.column,
                                        gradebook, args.late_penalty)
    for why in left_out:
        print(f"left out: {why}", file=sys.stderr)
    _say_why_not_graded(args.format, rows)
    _say_what_awaits_a_person(rows)
    source = f"final scores from {args.gradebook}" if gradebook else "autograded points"
    print(f"wrote {len(rows)} students ({sum(r.status not in NOT_GRADED for r in rows)} graded; {source}) -> {args.out}")
    if args.feedback_zip:
        _export_feedback(args, assignment, rows)
    return 0


def _refuse_to_export(args, gradebook: str | None) -> None:
    """Stop before anything is written where an output would replace what export reads (the
    grading's record, the roster, collect's folder, a gradebook file), or --feedback-zip is
    asked for without what its LMS needs."""
    from autograder.instructor.lms import grading_record, refuse_overwriting

    read = [*grading_record(args.results), *[p for p in (args.roster, args.collected) if p]]
    if gradebook and gradebook.startswith("sqlite:///"):  # a database file (a URL may name one too)
        read.append(Path(gradebook.removeprefix("sqlite:///").removeprefix("file:").partition("?")[0]))
    refuse_overwriting({"--out": args.out, "--feedback-zip": args.feedback_zip}, read)
    if args.feedback_zip and args.format == "csv":
        raise InputError("--feedback-zip is the bulk upload of an LMS: use it with --format canvas or moodle")
    if args.feedback_zip and args.format == "canvas" and not args.collected:
        raise InputError("canvas --feedback-zip needs --collected SUBMISSIONS (the folder `collect --lms canvas` "
                         "wrote): Canvas attaches a re-uploaded file to the submitted file whose ids its name carries")


def _say_why_not_graded(fmt: str, rows: list) -> None:
    """Each student without a grade, with why; and each note that the format's sheet has no
    column for (the instructor sees it here, or nowhere)."""
    from autograder.instructor.lms import LMSS, NOT_GRADED

    for row in rows:
        if row.status in NOT_GRADED:
            print(f"no grade: {row.student.student_id} ({row.student.name}): {row.note}", file=sys.stderr)
        elif row.reason and not LMSS[fmt].shows_reasons:
            print(f"note: {row.student.student_id} ({row.student.name}): {row.note}", file=sys.stderr)


def _say_what_awaits_a_person(rows: list) -> None:
    """The graded students whose written answers are not graded yet, and what to do about them."""
    from autograder.instructor.lms import NOT_GRADED

    pending = [row for row in rows if row.to_grade_by_hand and row.status not in NOT_GRADED]
    for row in pending:
        print(f"to grade by hand: {row.student.student_id} ({row.student.name}): {row.note}", file=sys.stderr)
    if pending:
        print(f"{len(pending)} students' grades leave out written answers not graded yet (the LMS gets the points "
              "counted, out of the whole maximum): grade them in nbgrader's formgrader (after `export-gradebook`), then "
              "export with --gradebook", file=sys.stderr)


def _export_feedback(args, assignment: str, rows: list) -> None:
    """export --feedback-zip: the LMS's bulk upload of the feedback pages."""
    from autograder.instructor.lms import canvas_uploads, feedback_upload, write_zip

    uploads = canvas_uploads(args.collected, assignment) if args.format == "canvas" else None
    upload = feedback_upload(args.results, args.format, rows, assignment, uploads)
    for row, why in upload.left_out:
        print(f"no feedback file: {row.student.student_id} ({row.student.name}): {why}", file=sys.stderr)
    write_zip(args.feedback_zip, upload.members)
    print(f"wrote {len(upload.members)} feedback pages -> {args.feedback_zip}")
    if args.format == "canvas":  # Canvas names a re-uploaded file after the student's own (Assignment#generate_comments_from_files)
        print("what each student receives from Canvas: a comment \"See attached file\" on their submission, the page "
              "attached under the name of the file they submitted (e.g. qkv.ipynb, Canvas keeps that name): an HTML page "
              "that Jupyter cannot open; renamed to .html it opens in a web browser. Tell the class so, or use Moodle's "
              "upload or the submission service's pages (docs/instructors/lms.md: Feedback into the LMS)")


# --------------------------------------------------------------------------
# nbgrader's gradebook, for formgrader and `nbgrader export`: export-gradebook, grade --gradebook


def _export_gradebook_command(commands) -> None:
    cmd = commands.add_parser(
        "export-gradebook", help="write RESULTS into an nbgrader gradebook (nbgrader export, formgrader)",
        description="Record the scores of RESULTS/results.json in a persistent nbgrader gradebook: the "
                    "assignments as nbgrader's generate_assignment records them, and one submission per graded "
                    "notebook, each test cell with the autograder's points and each written answer left for "
                    "formgrader's manual grading (the autograded notebooks are copied into the course's autograded/ "
                    "folder, where formgrader reads them). `nbgrader export` and formgrader then work on it. Missing "
                    "and invalid notebooks are left unsubmitted.")
    cmd.add_argument("results", type=Path, metavar="RESULTS")
    _gradebook_arguments(cmd, required=True)
    cmd.add_argument("--source", type=Path, default=SOLUTIONS_DIR, help="folder of source notebooks (default: %(default)s)")
    cmd.set_defaults(run=_export_gradebook)


def _gradebook_arguments(parser: argparse.ArgumentParser, required: bool = False, roster: bool = True) -> None:
    """--gradebook, --course-id, --course-dir and --roster (also on ``grade``; ``serve`` takes the
    students' names from its own database, without --roster)."""
    parser.add_argument("--gradebook", metavar="URL_OR_PATH", required=required,
                        help="an nbgrader gradebook: a gradebook.db path or an SQLAlchemy URL")
    parser.add_argument("--course-id", default="", metavar="ID",
                        help="the nbgrader course id (CourseDirectory.course_id; default: nbgrader's, empty)")
    parser.add_argument("--course-dir", type=Path, metavar="DIR",
                        help="the nbgrader course folder whose source/ and autograded/ formgrader reads (default: "
                             "the gradebook file's folder)")
    if roster:
        parser.add_argument("--roster", type=Path, metavar="CSV",
                            help="students' names and emails for the gradebook, which formgrader shows: collect's "
                                 "students.csv or the LMS's export (see export --roster)")


def _record_in_gradebook(args, results: Path) -> int:
    """The notebooks of ``results`` recorded in the gradebook ``args`` names: how many."""
    from autograder.instructor.gradebook import course_folder, gradebook_url, write_gradebook
    from autograder.instructor.lms import read_roster

    roster = read_roster(args.roster) if args.roster else None
    return write_gradebook(results, gradebook_url(str(args.gradebook)), args.source, args.course_id, roster,
                           course_folder(args.gradebook, args.course_dir))


def _export_gradebook(args) -> int:
    print(f"recorded {_record_in_gradebook(args, args.results)} graded notebooks in {args.gradebook}")
    return 0


# --------------------------------------------------------------------------
# similarity


def _similarity_command(commands) -> None:
    cmd = commands.add_parser(
        "similarity", help="rank pairs of students by the similarity of their own code",
        description="Compare every pair of students' own code in one assignment (solution cells and added "
                    "cells; the released starter code, tests and comments left out) with copydetect's "
                    "winnowing, and write an HTML report that opens offline: the pairs ranked, the closest "
                    "side by side with the matching code marked. OUT with .csv lists every pair.")
    cmd.add_argument("folder", type=Path, metavar="RESULTS_OR_SUBMISSIONS")
    cmd.add_argument("--assignment", required=True)
    cmd.add_argument("--out", type=Path, required=True, metavar="REPORT.html")
    cmd.add_argument("--release", type=Path, default=EXERCISES_DIR,
                     help="folder of release notebooks, the starter code (default: %(default)s)")
    cmd.add_argument("--show", type=int, default=20, metavar="N",
                     help="pairs shown side by side (default: %(default)s)")
    cmd.set_defaults(run=_similarity)


def _similarity(args) -> int:
    from autograder.instructor.similarity import display_name, similarity

    if not args.folder.exists():
        raise InputError(f"{args.folder} does not exist")
    pairs = similarity(args.folder.resolve(), args.assignment, args.out, args.release, args.show)
    for rank, p in enumerate(pairs[:10], 1):
        print(f"{rank:3}. {display_name(p.first)} / {display_name(p.second)}: "
              f"{p.similarity[0]:.0%} / {p.similarity[1]:.0%}")
    print(f"compared {len(pairs)} pairs -> {args.out}")
    return 0


# --------------------------------------------------------------------------
# the class's mistakes: report


def _report_command(commands) -> None:
    cmd = commands.add_parser(
        "report", help="the class's mistakes: scores, failure rates, diagnosed mistakes ranked, crashes",
        description="Write an HTML page that opens offline (figures embedded, no script) and a CSV per "
                    "assignment from RESULTS/results.json: the distribution of the autograded scores, each graded "
                    "name's failure rate, the mistakes the checks diagnosed ranked by how many students made them "
                    "(the hint and one case's inputs), and the exceptions students' code raised, by type.")
    cmd.add_argument("results", type=Path, metavar="RESULTS")
    cmd.add_argument("--out", type=Path, metavar="REPORT.html",
                     help="the page; each assignment's CSV is REPORT-<assignment>.csv beside it "
                          "(default: RESULTS/class-report.html)")
    cmd.set_defaults(run=_report)


def _report(args) -> int:
    from autograder.instructor.class_report import write_report

    written = write_report(args.results, args.out or args.results / "class-report.html")
    print(f"wrote the class report -> {written[0]} ({', '.join(p.name for p in written[1:])})")
    return 0


# --------------------------------------------------------------------------
# the submission service: serve, tokens


def _service_commands(commands) -> None:
    serve = commands.add_parser(
        "serve", help="run the submission service (web pages and the notebooks' submit API)",
        description="Prepare the course once, start the grading workers, and serve students' submissions on "
                    "http://HOST:PORT. Submissions, results and the default database live in DATA; accepted "
                    "submissions are graded even if the service is stopped and started again.")
    _service_data_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s; "
                                                            "behind a reverse proxy, keep it local)")
    serve.add_argument("--port", type=int, default=8000, help="default: %(default)s")
    serve.add_argument("--policies", type=Path, metavar="FILE",
                       help="YAML: deadline, late, attempts_per_day, before_deadline per assignment "
                            "(see docs/instructors/service.md)")
    _grading_arguments(serve, "notebooks graded at once on this machine (default: %(default)s)")
    serve.add_argument("--max-upload-mb", type=int, default=10, help="largest notebook accepted (default: %(default)s)")
    serve.add_argument("--rate-limit", type=int, default=120, metavar="PER_MINUTE",
                       help="requests a token may make in a minute (default: %(default)s)")
    serve.add_argument("--secure-cookies", action="store_true",
                       help="send the login cookie over HTTPS only (set it behind an HTTPS reverse proxy)")
    serve.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDRESS",
                       help="a reverse proxy's address, whose X-Forwarded-For and X-Forwarded-Proto are believed "
                            "(may be given more than once; without it no request's proxy headers are)")
    serve.add_argument("--stall-minutes", type=float, default=15, metavar="MINUTES",
                       help="/health answers 503 when submissions wait and none was taken or graded for this long "
                            "(default: %(default)s)")
    _gradebook_arguments(serve, roster=False)  # --gradebook: each graded notebook also goes into an nbgrader gradebook
    serve.set_defaults(run=_serve, warm_kernels=True)  # the service keeps its kernels warm

    tokens = commands.add_parser(
        "tokens", help="issue students' tokens for the submission service",
        description="Give every student of ROSTER (this course's roster CSV, Canvas's gradebook export or "
                    "Moodle's grading worksheet) a token, stored hashed in the service's database, and write "
                    "OUT: one row per student given a token now, with the token, to send to that student. "
                    "Students who already have one keep it (unless --reissue).")
    tokens.add_argument("roster", type=Path, nargs="?", metavar="ROSTER")
    _service_data_arguments(tokens)
    tokens.add_argument("--out", type=Path, required=True, metavar="CSV", help="where to write the new tokens")
    tokens.add_argument("--instructor", action="append", default=[], metavar="ID",
                        help="also issue an instructor's token (may be given more than once)")
    tokens.add_argument("--reissue", action="store_true", help="new tokens for everyone named (old ones stop working)")
    tokens.set_defaults(run=_tokens)


def _service_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=SERVICE_DATA,
                        help="the service's data folder (default: ./%(default)s)")
    parser.add_argument("--db", metavar="URL", help="SQLAlchemy database URL, e.g. postgresql://user@host/course "
                                                    "(default: sqlite:///DATA/service.db)")


def _service_database(args):
    """The service's database (the data folder made, the owner's only); one that cannot be opened or
    written is an InputError, one line."""
    from sqlalchemy.exc import SQLAlchemyError

    from .service.db import Database, one_line
    from .service.storage import private_folder

    try:
        data = private_folder(args.data)
        return Database(args.db or f"sqlite:///{data / 'service.db'}")
    except OSError as err:
        raise InputError(f"cannot use the data folder {args.data}: {err}") from err
    except (SQLAlchemyError, ImportError) as err:
        raise InputError(f"cannot use the database {args.db or args.data / 'service.db'}: {one_line(err)}") from err


def _tokens(args) -> int:
    from autograder.instructor.lms import read_roster
    from .service.tokens import PrivateFile, people_named

    if args.roster is None and not args.instructor:
        print("autograder: error: give a ROSTER, or --instructor ID", file=sys.stderr)
        return 2
    people = people_named(read_roster(args.roster) if args.roster else [], args.roster, args.instructor)
    database = _service_database(args)
    out = PrivateFile(args.out)  # the tokens are passwords: private from the start
    try:
        issued = database.issue_tokens(people, reissue=args.reissue)
    except BaseException:
        out.discard()
        raise
    out.write(people, issued)
    kept = len(people) - len(issued)
    print(f"issued {len(issued)} tokens -> {args.out}" + (f"; {kept} people kept their tokens" if kept else ""))
    return 0


def _gradebook_recorder(args, assignments: list[str]):
    """serve --gradebook: the gradebook each graded notebook goes into, for formgrader, with the
    course's ``assignments`` recorded in it; None without."""
    if not args.gradebook:
        return None
    from autograder.instructor.gradebook import GradebookRecorder, course_folder, gradebook_url

    return GradebookRecorder(gradebook_url(str(args.gradebook)), args.source, assignments, args.course_id,
                             course_folder(args.gradebook, args.course_dir))


def _serve(args) -> int:
    import uvicorn

    from .service.app import Limits, Service, create_app
    from .service.grading import DaskEngine, Grader, LocalEngine, prepare_course
    from .service.policies import Policies, PolicyError
    from .service.storage import DataFolderInUse, Storage

    _kernels_can_start()
    try:
        storage = Storage(args.data)
        storage.lock()  # before anything is changed in it: the work folder is emptied next
    except OSError as err:
        raise InputError(f"cannot use the data folder {args.data}: {err}") from err
    except DataFolderInUse as err:
        raise InputError(str(err)) from err
    database = _service_database(args)
    database.hold_lease(storage.root)  # a second service on this database, from any data folder: exit 2
    options = grading_options(args)
    course = prepare_course(storage.work(), options)
    try:
        policies = Policies.load(args.policies, course.assignments)
    except PolicyError as err:
        print(f"autograder: error: {err}", file=sys.stderr)
        return 2
    gradebook = _gradebook_recorder(args, course.assignments)  # a gradebook it cannot write: exit 2
    with kernel_environment():  # for the kernels of the grading workers, which start now
        if args.scheduler or args.scheduler_file:
            engine = DaskEngine(course, options, args.scheduler, args.scheduler_file, args.scheduler_timeout)
        else:
            engine = LocalEngine(course, options, max(1, args.jobs))
        grader = Grader(database, storage, course, engine, gradebook, stall_seconds=60 * args.stall_minutes)
        requeued = grader.start()
        if requeued:
            print(f"queued again {requeued} submissions whose grading was interrupted", file=sys.stderr)
        limits = Limits(upload_bytes=args.max_upload_mb * 1024**2, requests_per_minute=args.rate_limit)
        app = create_app(Service(database, storage, course, policies, grader, limits, args.secure_cookies))
        print(f"serving {len(course.assignments)} assignments on http://{args.host}:{args.port} "
              f"({engine.slots} grading workers; data in {storage.root})", file=sys.stderr, flush=True)
        try:
            uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                        proxy_headers=bool(args.trusted_proxy), forwarded_allow_ips=args.trusted_proxy or None)
        finally:
            grader.stop()
    return 0


# --------------------------------------------------------------------------
# the student distribution: publish


def _publish_command(commands) -> None:
    cmd = commands.add_parser(
        "publish", help="write the student distribution (the public repository) into DIR",
        description="Write the students' edition of the course into DIR, a folder to push as the public "
                    "repository: the book, the released exercises, the checks and their wheel (dist/), its "
                    "own README; no model solution, no hidden test, no reference. Every file is then scanned for lines "
                    "of the model solutions and hidden tests, and every function and class in it is tried as "
                    "each graded name on the hidden cases; a hit of either fails the command (exit 1).")
    cmd.add_argument("dest", type=Path, metavar="DIR", help="a new or empty folder outside this repository")
    cmd.add_argument("--site", action="store_true", help="also build the site into DIR/_build/html (a minute or more)")
    cmd.add_argument("--source", type=Path, default=SOLUTIONS_DIR, help="default: %(default)s")
    cmd.add_argument("--reveal", action="append", default=[], metavar="ASSIGNMENT",
                     help="publish the book's answer cells of this assignment (after its deadline; repeatable); "
                          "the others are replaced by a note")
    cmd.set_defaults(run=_publish)


def _publish(args) -> int:
    from autograder.grading import release
    from autograder.instructor.publish import PublishError, publish

    try:
        done = publish(args.dest, site=args.site, source_dir=args.source, reveal=tuple(args.reveal))
    except PublishError as err:
        print(f"autograder: publish: error: {err}", file=sys.stderr)
        return 2
    print(f"published {len(done.assignments)} assignments to {done.folder}")
    for assignment, cells in sorted(done.withheld.items()):
        print(f"the book's answers of {assignment}: {len(cells)} cells withheld (--reveal {assignment} publishes them)")
    for assignment, names in sorted(done.withheld_definitions.items()):
        print(f"the book's answers of {assignment}: {', '.join(names)} withheld (--reveal {assignment} publishes it)")
    for assignment in sorted(done.revealed):
        print(f"the book's answers of {assignment}: revealed")
    setting = release.read_setting()
    where = setting.release_url or f"the package index {setting.index}"
    print(f"wheel: {done.wheel.relative_to(done.folder)} (sha256 {done.digest}): every setup cell installs it "
          f"from {where}: put it there")
    print(done.report.summary())
    print(done.functional.summary())
    for file, line, where in done.report.hits:
        print(f"  leak: {file}: {line!r} (from {where})", file=sys.stderr)
    for problem in done.functional.problems:
        print(f"  note: functional scan: {problem}")
    for earned in done.functional.earned:
        print(f"  leak: {earned.line()}", file=sys.stderr)
    if done.leaks:
        print("autograder: publish: error: the distribution holds lines of model solutions or hidden tests, or "
              "code that earns a graded name's points; do not push it", file=sys.stderr)
        return 1
    return 0
