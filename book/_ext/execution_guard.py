"""A page whose notebook failed fails the build, and is executed again by the next one.

myst-nb only warns when a page's notebook raises, writes the traceback into the site
(_build/html/reports/), and records the page as read: the next build finds nothing
changed and says "build succeeded" over the same broken page. This extension

- marks every page whose notebook failed as outdated at the start of a build
  (``env-get-outdated``), so that it is read, and its notebook executed, again: jupyter-cache
  never caches a failed run, so the page cannot pass until its cause is fixed;
- at the end, moves the tracebacks out of the site into <build>/execution-reports/ and, when
  a page failed, prints each page, its failing cell (its line in the page's source) and the
  error, and sets the build's exit status to 1.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)
REPORTS = "reports"  # myst-nb's folder, in the builder's output folder
KEPT = "execution-reports"  # where they go instead: beside the site, never in it

# nbclient's CellExecutionError: "An error occurred while executing the following cell:\n
# ------------------\n<source>\n------------------\n\n<the traceback>"
CELL = re.compile(r"executing the following cell:\n-{18}\n(?P<source>.*?)\n-{18}\n", re.S)


def failed_pages(env) -> dict[str, str]:
    """docname -> traceback of every page whose notebook failed when it was last executed."""
    from myst_nb.sphinx_ import NbMetadataCollector

    failed = {}
    for docname, data in NbMetadataCollector.get_doc_data(env).items():
        traceback = (data.get("exec_data") or {}).get("traceback")
        if traceback and docname in env.all_docs:
            failed[docname] = traceback
    return failed


def execute_failed_again(app, env, added, changed, removed) -> list[str]:
    return sorted(set(failed_pages(env)) - set(added) - set(changed) - set(removed))


def describe(env, docname: str, traceback: str) -> str:
    """One paragraph: the page, the cell that failed (the line of the source where it starts) and
    the error (the traceback's last line)."""
    source_file = Path(env.doc2path(docname))
    where = f"{source_file.relative_to(env.srcdir)}"
    match = CELL.search(traceback)
    if match:
        code = match["source"]
        text = source_file.read_text(encoding="utf-8") if source_file.is_file() else ""
        at = text.find(code)
        line = text.count("\n", 0, at) + 1 if at >= 0 else None
        first = code.strip().splitlines()[0] if code.strip() else ""
        where += f", the code cell at line {line}" if line else ""
        where += f" ({first[:80]!r})"
    plain = re.sub(r"\x1b\[[0-9;]*m", "", traceback)  # IPython colours the traceback
    error = [row for row in plain.strip().splitlines() if row.strip()][-1]
    return f"{where}: {error.strip()}"


def report_failures(app, exception) -> None:
    out = Path(app.outdir)
    reports, kept = out / REPORTS, out.parent / KEPT
    shutil.rmtree(kept, ignore_errors=True)  # every page that still fails was executed again: fresh reports
    if reports.is_dir():
        shutil.move(str(reports), str(kept))
    failed = failed_pages(app.env) if app.env is not None else {}
    if not failed:
        return
    lines = [describe(app.env, docname, traceback) for docname, traceback in sorted(failed.items())]
    logger.error("%d page(s) of the book failed to execute (tracebacks in %s); the next build "
                 "executes them again:\n  %s", len(failed), out.parent / KEPT, "\n  ".join(lines))
    app.statuscode = 1


def setup(app):
    app.connect("env-get-outdated", execute_failed_again)
    app.connect("build-finished", report_failures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
