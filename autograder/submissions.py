"""Find the submitted notebooks: ``<root>/<student_id>/<assignment>/<notebook>.ipynb``.

The root is a folder or a ``.zip`` of one (nbgrader's ``submitted/`` layout; a
wrapping folder such as ``submitted/`` or the zip's own top folder is skipped).
Nothing under the root is ever modified: notebooks are only read, and a zip is
unpacked into a temporary folder.

Only the students' own files are read. A symbolic link (a student folder, an
assignment folder or a notebook; ``unzip`` of a student's archive makes them) could
point at the instructor's source notebook or at a classmate's: it is never followed,
and its notebook is ``invalid`` with a reason.
"""
from __future__ import annotations

import json
import os
import stat
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import nbformat

# Limits on a zip, so that a zip bomb is refused instead of filling the disk.
MAX_ZIP_BYTES = 2 * 1024**3
MAX_ZIP_FILES = 100_000
MAX_NOTEBOOK_BYTES = 100 * 1024**2  # a notebook with a few plots is well under 10 MB
SKIPPED_NAMES = {"__MACOSX", ".ipynb_checkpoints"}


class SubmissionsError(RuntimeError):
    """The submissions as a whole cannot be read: grading cannot run."""


@dataclass(frozen=True)
class Submission:
    """One expected notebook of one student. ``path`` is None when it is missing."""

    student_id: str
    assignment: str
    notebook: str
    path: Path | None
    note: str = ""  # why this file, or why none was found
    refused: str = ""  # why the file at ``path`` must not be read (a symbolic link): status invalid


def _subdirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name not in SKIPPED_NAMES)


def unpack_zip(zip_path: Path, dest: Path) -> Path:
    """Unpack ``zip_path`` into ``dest`` after checking its names and sizes."""
    try:
        with zipfile.ZipFile(zip_path) as archive:
            members = [m for m in archive.infolist() if not m.is_dir()]
            if len(members) > MAX_ZIP_FILES:
                raise SubmissionsError(f"{zip_path} holds {len(members)} files (limit {MAX_ZIP_FILES})")
            if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
                raise SubmissionsError(f"{zip_path} unpacks to more than {MAX_ZIP_BYTES} bytes")
            links = []
            for member in members:
                name = PurePosixPath(member.filename)
                if name.is_absolute() or ".." in name.parts:
                    raise SubmissionsError(f"{zip_path} holds an unsafe path: {member.filename!r}")
                if stat.S_ISLNK(member.external_attr >> 16):
                    links.append(member)  # made last, so that no file is written through one
                else:
                    archive.extract(member, dest)
            for member in links:
                _make_link(dest, member.filename, archive.read(member).decode("utf-8", "replace"))
    except (zipfile.BadZipFile, OSError) as err:
        raise SubmissionsError(f"cannot read {zip_path}: {err}") from err
    return dest


def _make_link(dest: Path, name: str, target: str) -> None:
    """A zip's symbolic link, as ``unzip`` makes it: discover() then refuses it with a reason
    (a missing file would only say 'not found'). Its target is never read; a link inside a
    linked folder is not made, since making it would write wherever that folder points."""
    path = dest / name.rstrip("/")
    if path.parent.resolve() == dest.resolve() / path.parent.relative_to(dest) and not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)


def find_root(folder: Path, assignments: list[str]) -> Path:
    """The folder whose subfolders are students, skipping wrappers like ``submitted/``
    (never a linked one: what it points at is not the submissions)."""
    def holds_students(d: Path) -> bool:
        return any((student / a).is_dir() for student in _subdirs(d) if not student.is_symlink() for a in assignments)

    while not holds_students(folder):
        children = _subdirs(folder)
        if len(children) != 1 or children[0].is_symlink():
            break
        folder = children[0]
    return folder


def discover(root: Path, assignments: list[str], notebooks: dict[str, list[str]]) -> list[Submission]:
    """One Submission per student, per assignment present in the class, per notebook.

    An assignment that any student submitted is expected from every student, so a
    student who did not submit it gets a row (status ``missing``).
    """
    students = _subdirs(root)
    present = sorted({d.name for s in students if not s.is_symlink() for d in _subdirs(s)} & set(assignments))
    twins = _same_ids(students)
    found = []
    for student in students:
        for assignment in present:
            for notebook in notebooks[assignment]:
                refused = _link_on_the_way(root, student / assignment)
                path, note = (None, "") if refused else _locate(student / assignment, notebook,
                                                                 len(notebooks[assignment]))
                refused = refused or (_link_on_the_way(root, path) if path else "")
                if student.name in twins:
                    note = "; ".join(filter(None, [note, twins[student.name]]))
                found.append(Submission(student.name, assignment, notebook, path, note, refused))
    return found


def _link_on_the_way(root: Path, path: Path) -> str:
    """Why ``path`` (under ``root``) is not the student's own: a symbolic link on the way
    to it, from ``root`` down ('' if there is none). Only the link is read, never its target."""
    here = root
    for name in path.relative_to(root).parts:
        here = here / name
        if here.is_symlink():
            try:
                inside = here.resolve().is_relative_to(root.resolve())
            except (OSError, RuntimeError):  # a loop of links
                inside = False
            where = "another file in the submissions (a classmate's?)" if inside else "a file outside the submissions"
            return (f"{here.relative_to(root)} is a symbolic link to {where}; only a student's own files are "
                    "graded, so submit the notebook itself")
    return ""


def _same_ids(students: list[Path]) -> dict[str, str]:
    """Folders whose names differ only in case or spaces ('Ann', 'ann '): the same student
    submitted twice, or two students an instructor must tell apart. Each is graded, with a note."""
    by_key: dict[str, list[str]] = {}
    for student in students:
        by_key.setdefault(student.name.strip().casefold(), []).append(student.name)
    return {name: "same student id as " + ", ".join(repr(other) for other in names if other != name)
            for names in by_key.values() if len(names) > 1 for name in names}


def _locate(folder: Path, notebook: str, notebooks_expected: int) -> tuple[Path | None, str]:
    expected = folder / f"{notebook}.ipynb"
    if expected.is_file() or expected.is_symlink():
        return expected, ""
    if not folder.is_dir():
        return None, f"no folder {folder.name}/ was submitted"
    others = sorted(p for p in folder.glob("*.ipynb") if p.is_file() or p.is_symlink())
    if len(others) == 1 and notebooks_expected == 1:
        # A renamed copy ("qkv-Copy1.ipynb") is still this student's work.
        return others[0], f"graded {others[0].name} in place of {expected.name}"
    listing = ", ".join(p.name for p in others) or "no notebook"
    return None, f"{expected.name} not found (found: {listing})"


def load_notebook(path: Path) -> nbformat.NotebookNode:
    """Read and validate a notebook as nbformat 4; raises ValueError with a readable reason."""
    # O_NOFOLLOW: a link put there after discover() looked is refused, not followed.
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"the notebook is {size / 1024**2:.0f} MB, over the "
                             f"{MAX_NOTEBOOK_BYTES // 1024**2} MB limit")
        data = file.read()
    try:
        text = data.decode("utf-8")
        raw = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"not a notebook: the file is not valid JSON ({err})") from err
    if not isinstance(raw, dict) or raw.get("nbformat") != 4:
        version = raw.get("nbformat") if isinstance(raw, dict) else None
        raise ValueError(f"not an nbformat 4 notebook (nbformat: {version!r})")
    try:
        with warnings.catch_warnings():  # e.g. cells without ids: harmless here
            warnings.simplefilter("ignore")
            notebook = nbformat.reads(text, as_version=4)
            nbformat.validate(notebook)
    except Exception as err:  # noqa: BLE001 - nbformat raises many kinds on malformed JSON
        message = getattr(err, "message", None) or f"{type(err).__name__}: {err}"
        raise ValueError(f"the notebook does not follow nbformat 4: {message}") from err
    return notebook


def drop_broken_grade_ids(notebook: nbformat.NotebookNode) -> list[str]:
    """Remove nbgrader metadata whose grade_id is not a string (nbformat does not check it;
    nbgrader and the grader look cells up by it); returns what was wrong, for the reason.
    Such a cell is then matched by the functions it defines, as one whose metadata was lost."""
    notes = []
    for number, cell in enumerate(notebook.cells, 1):
        nbgrader = cell.get("metadata", {}).get("nbgrader")
        if isinstance(nbgrader, dict) and "grade_id" in nbgrader and not isinstance(nbgrader["grade_id"], str):
            del cell.metadata["nbgrader"]
            notes.append(f"cell {number}: its nbgrader grade_id is {json.dumps(nbgrader['grade_id'])[:40]} "
                         f"(of type {type(nbgrader['grade_id']).__name__}, not a string), so its metadata was ignored")
    return notes
