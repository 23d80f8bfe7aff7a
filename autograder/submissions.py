"""Find the submitted notebooks: ``<root>/<student_id>/<assignment>/<notebook>.ipynb``.

The root is a folder or a ``.zip`` of one (nbgrader's ``submitted/`` layout; a
wrapping folder such as ``submitted/`` or the zip's own top folder is skipped).
Nothing under the root is ever modified: notebooks are only read, and a zip is
unpacked into a temporary folder.
"""
from __future__ import annotations

import json
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
            for member in members:
                name = PurePosixPath(member.filename)
                if name.is_absolute() or ".." in name.parts:
                    raise SubmissionsError(f"{zip_path} holds an unsafe path: {member.filename!r}")
                archive.extract(member, dest)
    except (zipfile.BadZipFile, OSError) as err:
        raise SubmissionsError(f"cannot read {zip_path}: {err}") from err
    return dest


def find_root(folder: Path, assignments: list[str]) -> Path:
    """The folder whose subfolders are students, skipping wrappers like ``submitted/``."""
    def holds_students(d: Path) -> bool:
        return any((student / a).is_dir() for student in _subdirs(d) for a in assignments)

    while not holds_students(folder):
        children = _subdirs(folder)
        if len(children) != 1:
            break
        folder = children[0]
    return folder


def discover(root: Path, assignments: list[str], notebooks: dict[str, list[str]]) -> list[Submission]:
    """One Submission per student, per assignment present in the class, per notebook.

    An assignment that any student submitted is expected from every student, so a
    student who did not submit it gets a row (status ``missing``).
    """
    students = _subdirs(root)
    present = sorted({d.name for s in students for d in _subdirs(s)} & set(assignments))
    twins = _same_ids(students)
    found = []
    for student in students:
        for assignment in present:
            for notebook in notebooks[assignment]:
                path, note = _locate(student / assignment, notebook, len(notebooks[assignment]))
                if student.name in twins:
                    note = "; ".join(filter(None, [note, twins[student.name]]))
                found.append(Submission(student.name, assignment, notebook, path, note))
    return found


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
    if expected.is_file():
        return expected, ""
    if not folder.is_dir():
        return None, f"no folder {folder.name}/ was submitted"
    others = sorted(p for p in folder.glob("*.ipynb") if p.is_file())
    if len(others) == 1 and notebooks_expected == 1:
        # A renamed copy ("qkv-Copy1.ipynb") is still this student's work.
        return others[0], f"graded {others[0].name} in place of {expected.name}"
    listing = ", ".join(p.name for p in others) or "no notebook"
    return None, f"{expected.name} not found (found: {listing})"


def load_notebook(path: Path) -> nbformat.NotebookNode:
    """Read and validate a notebook as nbformat 4; raises ValueError with a readable reason."""
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the notebook is {size / 1024**2:.0f} MB, over the {MAX_NOTEBOOK_BYTES // 1024**2} MB limit")
    try:
        text = path.read_bytes().decode("utf-8")
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
