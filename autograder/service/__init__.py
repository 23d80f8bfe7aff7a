"""A submission service: ``python -m autograder serve`` and ``python -m autograder tokens``.

Students submit a notebook (from the notebook itself with ``attention_checks.submit``, or on
the web page) and get its score and feedback page within seconds; the instructor sees the
class and exports grades for the LMS. See the README, "Running a submission service".
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DEFAULT_DATA = Path("autograder-service")


def add_commands(commands) -> None:
    """Register ``serve`` and ``tokens`` with the command line (cli.py)."""
    serve = commands.add_parser(
        "serve", help="run the submission service (web pages and the notebooks' submit API)",
        description="Prepare the course once, start the grading workers, and serve students' submissions on "
                    "http://HOST:PORT. Submissions, results and the default database live in DATA; accepted "
                    "submissions are graded even if the service is stopped and started again.")
    _data_options(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s; "
                                                            "behind a reverse proxy, keep it local)")
    serve.add_argument("--port", type=int, default=8000, help="default: %(default)s")
    serve.add_argument("--policies", type=Path, metavar="FILE",
                       help="YAML: deadline, late, attempts_per_day, before_deadline per assignment (see the README)")
    serve.add_argument("--source", type=Path, default=None, help="folder of source notebooks (default: solutions/)")
    serve.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, metavar="N",
                       help="notebooks graded at once on this machine (default: %(default)s)")
    cluster = serve.add_mutually_exclusive_group()
    cluster.add_argument("--scheduler", metavar="ADDRESS", help="grade on the workers of this Dask scheduler")
    cluster.add_argument("--scheduler-file", type=Path, metavar="FILE",
                         help="grade on the workers of the Dask scheduler this file names")
    serve.add_argument("--cell-timeout", type=int, default=60, metavar="SECONDS", help="default: %(default)s")
    serve.add_argument("--notebook-timeout", type=int, default=300, metavar="SECONDS", help="default: %(default)s")
    serve.add_argument("--memory", type=int, default=4096, metavar="MiB",
                       help="memory limit of a grading kernel; 0: none (default: %(default)s)")
    serve.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                       help="run kernels without bubblewrap isolation (trusted submissions only)")
    serve.add_argument("--max-upload-mb", type=int, default=10, help="largest notebook accepted (default: %(default)s)")
    serve.add_argument("--rate-limit", type=int, default=120, metavar="PER_MINUTE",
                       help="requests a token may make in a minute (default: %(default)s)")
    serve.add_argument("--secure-cookies", action="store_true",
                       help="send the login cookie over HTTPS only (set it behind an HTTPS reverse proxy)")
    serve.set_defaults(run=_serve)

    tokens = commands.add_parser(
        "tokens", help="issue students' tokens for the submission service",
        description="Give every student of ROSTER (this course's roster CSV, Canvas's gradebook export or "
                    "Moodle's grading worksheet) a token, stored hashed in the service's database, and write "
                    "OUT: one row per student given a token now, with the token, to send to that student. "
                    "Students who already have one keep it (unless --reissue).")
    tokens.add_argument("roster", type=Path, nargs="?", metavar="ROSTER")
    _data_options(tokens)
    tokens.add_argument("--out", type=Path, required=True, metavar="CSV", help="where to write the new tokens")
    tokens.add_argument("--instructor", action="append", default=[], metavar="ID",
                        help="also issue an instructor's token (may be given more than once)")
    tokens.add_argument("--reissue", action="store_true", help="new tokens for everyone named (old ones stop working)")
    tokens.set_defaults(run=_tokens)


def _data_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="the service's data folder (default: ./%(default)s)")
    parser.add_argument("--db", metavar="URL", help="SQLAlchemy database URL, e.g. postgresql://user@host/course "
                                                    "(default: sqlite:///DATA/service.db)")


def _database(args):
    from .db import Database

    args.data.mkdir(parents=True, exist_ok=True)
    return Database(args.db or f"sqlite:///{args.data.resolve() / 'service.db'}")


def _tokens(args) -> int:
    from .. import lms
    from .db import INSTRUCTOR, STUDENT, Person

    if args.roster is None and not args.instructor:
        print("autograder: error: give a ROSTER, or --instructor ID", file=sys.stderr)
        return 2
    roster = lms.read_roster(args.roster) if args.roster else []
    people = [Person(id=s.student_id, role=STUDENT, name=s.name, email=s.email, lms_id=s.lms_id) for s in roster]
    people += [Person(id=i, role=INSTRUCTOR, name=i, email="", lms_id="") for i in args.instructor]
    issued = _database(args).issue_tokens(people, reissue=args.reissue)
    lms.write_csv(args.out, ["student_id", "role", "name", "email", "token"],
                  [[p.id, p.role, p.name, p.email, issued[p.id]] for p in people if p.id in issued])
    os.chmod(args.out, 0o600)  # the tokens are passwords
    kept = len(people) - len(issued)
    print(f"issued {len(issued)} tokens -> {args.out}" + (f"; {kept} people kept their tokens" if kept else ""))
    return 0


def _serve(args) -> int:
    import uvicorn

    from ..course import SOLUTIONS_DIR
    from .app import Limits, Service, create_app
    from .grading import DaskEngine, Grader, LocalEngine, kernel_environment, prepare_course
    from .policies import Policies, PolicyError
    from .storage import Storage

    storage = Storage(args.data)
    database = _database(args)
    options = dict(source_dir=args.source or SOLUTIONS_DIR, cell_timeout=args.cell_timeout,
                   notebook_timeout=args.notebook_timeout, memory_limit=args.memory * 1024**2, sandbox=args.sandbox,
                   warm_kernels=True)
    course = prepare_course(storage.work(), options)
    try:
        policies = Policies.load(args.policies, course.assignments)
    except PolicyError as err:
        print(f"autograder: error: {err}", file=sys.stderr)
        return 2
    kernel_environment()
    if args.scheduler or args.scheduler_file:
        engine = DaskEngine(course, options, args.scheduler, args.scheduler_file)
    else:
        engine = LocalEngine(course, options, max(1, args.jobs))
    grader = Grader(database, storage, course, engine)
    requeued = grader.start()
    if requeued:
        print(f"queued again {requeued} submissions whose grading was interrupted", file=sys.stderr)
    limits = Limits(upload_bytes=args.max_upload_mb * 1024**2, requests_per_minute=args.rate_limit)
    app = create_app(Service(database, storage, course, policies, grader, limits, args.secure_cookies))
    print(f"serving {len(course.assignments)} assignments on http://{args.host}:{args.port} "
          f"({engine.slots} grading workers; data in {storage.root})", file=sys.stderr, flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", proxy_headers=True)
    finally:
        grader.stop()
    return 0
