"""Rebuilding a submission on the source notebook, before it runs (nbgrader's sanitize step)."""
import copy
import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from autograder.cells import grade_id_of, nbgrader_metadata


class RebuildFromSource(NbGraderPreprocessor):
    """Rebuild a submission on the source notebook, keeping only the student's answers.

    Every cell of the source notebook comes back in its place with its metadata:
    test cells (hidden tests included), instructions, the setup cell. Each solution
    cell takes the student's code (the first cell with its grade_id), or the release
    stub when the student deleted it. Cells the student added (or duplicated, or
    stripped of metadata) follow the solution or test cell they followed in the
    submission, except copies of the course's own cells (a pasted setup or test cell),
    which stay as an inert note. So deleted, edited, reordered or duplicated test cells
    and changed metadata (points, grade flags, kernelspec) have no effect.
    """

    course_root = Unicode(help="the nbgrader course folder, with source/ and release/").tag(config=True)

    def preprocess(self, nb, resources):
        assignment, notebook = resources["nbgrader"]["assignment"], resources["nbgrader"]["notebook"]
        source, release = (nbformat.read(Path(self.course_root) / step / assignment / f"{notebook}.ipynb",
                                         as_version=4) for step in ("source", "release"))
        return self.rebuild(nb, source, release), resources

    def rebuild(self, submitted, source, release):
        release_cells = {grade_id_of(c): c for c in release.cells if grade_id_of(c)}
        known = {grade_id_of(c) for c in source.cells if grade_id_of(c)}
        answers, extra, anchor = {}, {}, None
        for cell in submitted.cells:
            grade_id = identify(cell, known, release_cells)
            if grade_id and grade_id not in answers and grade_id not in extra:
                answers[grade_id] = cell
                anchor = grade_id
            elif cell.cell_type in ("code", "markdown"):
                copied = copy_of(cell, release_cells)
                extra.setdefault(anchor, []).append(_plain(cell) if copied is None else new_code_cell(
                    f"# A copy of the course's cell {copied!r}: the original runs in its place, the copy does not."))
        cells = list(extra.get(None, []))
        for cell in source.cells:
            grade_id = grade_id_of(cell)
            if nbgrader_metadata(cell).get("solution"):
                student = answers.get(grade_id, release_cells.get(grade_id, cell))
                cell = _with_source(cell, student.source)
            else:
                cell = _with_source(cell, cell.source)
            cells.append(cell)
            cells.extend(extra.get(grade_id, []) if grade_id else [])
        rebuilt = copy.deepcopy(source)
        rebuilt.cells = cells
        return rebuilt


def identify(cell, known: set, release_cells: dict):
    """The grade_id of a submitted cell: its metadata's, or, for a cell whose metadata was
    lost (an editor that drops it, a copy into a new notebook), the solution cell whose
    functions and classes it defines."""
    if grade_id_of(cell) in known:
        return grade_id_of(cell)
    source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
    for grade_id, released in release_cells.items():
        if source.strip() and source.strip() == released.source.strip():
            return grade_id  # a copy of one of the course's own cells
    defined = _defined_names(cell)
    for grade_id, stub in release_cells.items():
        wanted = _defined_names(stub)
        if wanted and nbgrader_metadata(stub).get("solution") and wanted <= defined:
            return grade_id
    return None


def copy_of(cell, release_cells: dict):
    """The grade_id of the course's own cell (setup, a test, an example) that ``cell`` is a
    copy of (Jupyter's copy and paste: the same source), or None. Such a copy is kept inert:
    running the setup or a test again would cost time, and it is not the student's code."""
    source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
    for grade_id, released in release_cells.items():
        if (cell.cell_type == released.cell_type == "code" and source.strip() == released.source.strip()
                and not nbgrader_metadata(released).get("solution")):
            return grade_id
    return None


def _defined_names(cell) -> set:
    if cell.cell_type != "code":
        return set()
    source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
    return set(re.findall(r"^(?:def|class)\s+([A-Za-z_]\w*)", source, flags=re.M))


def _with_source(cell, source):
    cell = copy.deepcopy(cell)
    cell.source = source if isinstance(source, str) else "".join(source)
    if cell.cell_type == "code":
        cell.outputs, cell.execution_count = [], None
    return cell


def _plain(cell):
    """A student's own cell: their source, no nbgrader metadata, no outputs."""
    source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
    return new_code_cell(source) if cell.cell_type == "code" else new_markdown_cell(source)
