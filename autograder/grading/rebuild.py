"""Rebuilding a submission on the source notebook, before it runs (nbgrader's sanitize step).

What the sanitize step reads of the course is the same for every notebook of an assignment: the
source and release notebooks, and the rows that ``generate_assignment`` made of the source notebook
in the gradebook (its cells, their points and checksums, its kernelspec). nbgrader's
``OverwriteCells`` and ``OverwriteKernelspec`` asked the gradebook for them again for every
notebook (some 70 SQL statements a notebook); here they are read once per process for each
source notebook's content, and every notebook is checked against them as nbgrader checks it.
"""
import copy
import hashlib
import json
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec
from traitlets import Unicode

from autograder.cells import grade_id_of, nbgrader_metadata


class CourseNotebooks:
    """The course's source and release notebooks, each parsed (and validated) once per process
    for the bytes it has: a notebook edited since is parsed again. Callers only read them."""

    _parsed: dict[Path, tuple[bytes, nbformat.NotebookNode]] = {}

    @classmethod
    def read(cls, path: Path) -> nbformat.NotebookNode:
        data = path.read_bytes()
        kept = cls._parsed.get(path)
        if kept is None or kept[0] != data:
            kept = cls._parsed[path] = (data, nbformat.reads(data.decode("utf-8"), as_version=4))
        return kept[1]


class SourceRows:
    """What ``generate_assignment`` put in the gradebook for one source notebook, read at once: its
    source cells, its graded cells' points and its kernelspec. It answers the lookups nbgrader's
    sanitize steps make (``find_source_cell``, ``find_graded_cell``) as the gradebook does, with
    plain copies of the rows (``MissingEntry`` for a name it lacks).

    The rows are made from the source notebook alone, so they are kept (``of``) for as long as the
    source notebook has the same bytes: a source edited (and generated again) is read anew."""

    _kept: dict[tuple, "SourceRows"] = {}

    def __init__(self, db_url: str, assignment: str, notebook: str):
        self.assignment, self.notebook = assignment, notebook
        with Gradebook(db_url) as gb:
            row = gb.find_notebook(notebook, assignment)
            self.kernelspec = row.kernelspec
            self.source_cells = {c.name: SimpleNamespace(name=c.name, cell_type=c.cell_type, locked=c.locked,
                                                         checksum=c.checksum, source=c.source)
                                 for c in row.source_cells}
            # a grade cell first, then a task cell of the name, as Gradebook.find_graded_cell looks
            self.graded_cells = {c.name: SimpleNamespace(name=c.name, max_score=c.max_score)
                                 for c in [*row.task_cells, *row.grade_cells]}

    @classmethod
    def of(cls, resources: dict, course_root: str) -> "SourceRows":
        nbgrader = resources["nbgrader"]
        assignment, notebook, db_url = nbgrader["assignment"], nbgrader["notebook"], nbgrader["db_url"]
        source = (Path(course_root) / "source" / assignment / f"{notebook}.ipynb").read_bytes()
        key = (db_url, assignment, notebook, hashlib.sha256(source).digest())
        if key not in cls._kept:
            cls._kept[key] = cls(db_url, assignment, notebook)
        return cls._kept[key]

    def _of_this_notebook(self, notebook: str, assignment: str) -> None:
        if (notebook, assignment) != (self.notebook, self.assignment):
            raise ValueError(f"rows of {self.assignment}/{self.notebook} asked for {assignment}/{notebook}")

    def find_source_cell(self, name: str, notebook: str, assignment: str):
        self._of_this_notebook(notebook, assignment)
        if name not in self.source_cells:
            raise MissingEntry(f"No such source cell: {assignment}/{notebook}/{name}")
        return self.source_cells[name]

    def find_graded_cell(self, name: str, notebook: str, assignment: str):
        self._of_this_notebook(notebook, assignment)
        if name not in self.graded_cells:
            raise MissingEntry(f"No such grade cell: {assignment}/{notebook}/{name}")
        return self.graded_cells[name]


class OverwriteCellsOnce(OverwriteCells):
    """nbgrader's OverwriteCells (each cell's type, lock, points and checksum checked against the
    gradebook, a locked cell's source put back), its every check unchanged, against the source
    notebook's rows read once (``SourceRows``) instead of queried again for every cell."""

    course_root = Unicode(help="the nbgrader course folder, with source/").tag(config=True)

    def preprocess(self, nb, resources):
        if self.add_missing_cells:  # puts cells back from the gradebook's own objects: nbgrader's way
            return super().preprocess(nb, resources)
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.gradebook = SourceRows.of(resources, self.course_root)
        return super(OverwriteCells, self).preprocess(nb, resources)  # each cell, by nbgrader's preprocess_cell


class OverwriteKernelspecOnce(OverwriteKernelspec):
    """nbgrader's OverwriteKernelspec (the notebook runs with the source notebook's kernelspec),
    the kernelspec read once (``SourceRows``)."""

    course_root = Unicode(help="the nbgrader course folder, with source/").tag(config=True)

    def preprocess(self, nb, resources):
        kernelspec = SourceRows.of(resources, self.course_root).kernelspec
        if kernelspec is not None and json.loads(kernelspec):
            nb.metadata["kernelspec"] = json.loads(kernelspec)
        return nb, resources


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
        source, release = (CourseNotebooks.read(Path(self.course_root) / step / assignment / f"{notebook}.ipynb")
                           for step in ("source", "release"))
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
