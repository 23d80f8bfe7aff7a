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

import difflib
import json
import os
import shutil
import stat
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import nbformat

from autograder.errors import InputError

# Limits on a zip, so that a zip bomb is refused instead of filling the disk.
MAX_ZIP_BYTES = 2 * 1024**3
MAX_ZIP_FILES = 100_000
MAX_NOTEBOOK_BYTES = 100 * 1024**2  # a notebook with a few plots is well under 10 MB
SKIPPED_NAMES = {"__MACOSX", ".ipynb_checkpoints"}


class SubmissionsError(InputError):
    """The submissions as a whole cannot be read (a folder, an archive): grading cannot run."""


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


# Errors of reading a zip: its directory (BadZipFile), a member's data (zlib.error, a bad
# CRC as BadZipFile, EOFError for a cut file), the disk (OSError).
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError)
UTF8_FLAG = 0x800  # general purpose bit 11: the name is UTF-8


def member_name(member: zipfile.ZipInfo) -> str:
    """A zip member's name as Info-ZIP's ``unzip`` reads it: UTF-8 when the zip says so (bit 11),
    else the bytes as they are when they are valid UTF-8 (Info-ZIP's ``zip`` and most archivers
    write UTF-8 names without the flag), else cp437, the zip format's old default (Python's
    zipfile reads every unflagged name as cp437: 'müller' would become 'm├╝ller')."""
    if member.flag_bits & UTF8_FLAG:
        return member.filename
    raw = member.orig_filename.encode("cp437")
    try:
        return raw.decode("utf-8").replace(os.sep, "/")
    except UnicodeDecodeError:
        return member.filename


def zip_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The files of a zip (no folders), each renamed as ``unzip`` names it (``member_name``)."""
    members = [m for m in archive.infolist() if not m.is_dir()]
    for member in members:
        member.filename = member_name(member)
    return members


def unpack_zip(zip_path: Path, dest: Path) -> Path:
    """Unpack ``zip_path`` into ``dest`` after checking its names and sizes."""
    try:
        with zipfile.ZipFile(zip_path) as archive:
            members = zip_members(archive)
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
    except ZIP_ERRORS as err:
        raise SubmissionsError(f"cannot read {zip_path}: {type(err).__name__}: {err}") from err
    return dest


def unpack_student_zips(root: Path, dest: Path) -> Path | None:
    """A class folder of per-student zips (``alice.zip``, ``bob.zip``) as the layout ``grade``
    reads: each zip is unpacked into ``dest/<its name>/`` (a wrapping folder inside it, such as
    ``alice/``, skipped), the folders beside them are copied as they are (links kept as links,
    so that they are still refused). None when ``root`` holds no zip."""
    zips = sorted(p for p in root.iterdir() if p.suffix.lower() == ".zip" and p.is_file() and not p.is_symlink())
    if not zips:
        return None
    dest.mkdir(parents=True)
    for folder in _subdirs(root):
        shutil.copytree(folder, dest / folder.name, symlinks=True)
    for archive in zips:
        student = dest / archive.stem
        if student.exists():
            raise SubmissionsError(f"{root} holds both {archive.name} and a folder {archive.stem}/: which is the student's?")
        unpacked = unpack_zip(archive, dest / f".unzipping-{archive.stem}")
        inner = _subdirs(unpacked)
        if len(inner) == 1 and not inner[0].is_symlink() and not any(p.is_file() for p in unpacked.iterdir()) \
                and inner[0].name.casefold() == archive.stem.casefold():
            unpacked = inner[0]  # alice.zip holding alice/03-qkv/...
        unpacked.rename(student)
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
    (never a linked one: what it points at is not the submissions; never one beside
    per-student zips, which are students too)."""
    def holds_students(d: Path) -> bool:
        return any((student / a).is_dir() for student in _subdirs(d) if not student.is_symlink() for a in assignments)

    while not holds_students(folder):
        children = _subdirs(folder)
        if len(children) != 1 or children[0].is_symlink() or any(p.suffix.lower() == ".zip" for p in folder.iterdir()):
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
        return None, f"no folder {folder.name}/ was submitted ({_what_is_there(folder.parent, folder.name)})"
    others = sorted(p for p in folder.glob("*.ipynb") if p.is_file() or p.is_symlink())
    if len(others) == 1 and notebooks_expected == 1:
        # A renamed copy ("qkv-Copy1.ipynb") is still this student's work.
        return others[0], f"graded {others[0].name} in place of {expected.name}"
    listing = ", ".join(p.name for p in others) or "no notebook"
    return None, f"{expected.name} not found (found: {listing})"


def _what_is_there(student: Path, assignment: str) -> str:
    """What a student folder holds instead of ``assignment/``, and the near name it may be."""
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in student.iterdir()
                     if not p.name.startswith(".") and p.name not in SKIPPED_NAMES)
    near = [e.rstrip("/") for e in entries if e.endswith("/") and near_names(e.rstrip("/"), [assignment])]
    found = f"found: {', '.join(entries[:8])}{', ...' if len(entries) > 8 else ''}" if entries else "the folder is empty"
    return found + (f"; is {near[0]}/ meant to be {assignment}/? rename it" if near else "")


def _plain(name: str) -> str:
    """A folder name as a person means it: no case, '_' and ' ' as '-'."""
    return name.casefold().replace("_", "-").replace(" ", "-")


def near_names(name: str, candidates: list[str]) -> list[str]:
    """The candidates that ``name`` was probably meant to be ('03_qkv', 'QKV', '3-qkv' for
    '03-qkv'), closest first: the same up to case and separators, else difflib's close matches
    (of the whole name, or of the name without its number)."""
    by_plain = {}
    for candidate in candidates:
        by_plain.setdefault(_plain(candidate), candidate)
        by_plain.setdefault(_plain(candidate).lstrip("0123456789-"), candidate)
    close = difflib.get_close_matches(_plain(name), list(by_plain), n=3, cutoff=0.75)
    return list(dict.fromkeys(by_plain[c] for c in close))


def diagnose(root: Path, assignments: list[str], notebooks: dict[str, list[str]]) -> list[str]:
    """Why no ``<student>/<assignment>/<notebook>.ipynb`` was found under ``root``: what is there,
    and what to do (a near name, a notebook outside an assignment folder, one student's folder)."""
    root = _class_folder(root)
    owner = {f"{nb}.ipynb": a for a in assignments for nb in notebooks[a]}
    if any(d.name in assignments for d in _subdirs(root)):
        return [f"{root.name}/ holds assignment folders itself: it looks like one student's folder; pass the "
                "folder that holds every student's folder (SUBMISSIONS/<student_id>/<assignment>/)"]
    hints = []
    for student in _subdirs(root):
        for entry in sorted(student.iterdir()):
            if entry.is_dir() and entry.name not in SKIPPED_NAMES and not entry.name.startswith("."):
                near = near_names(entry.name, assignments)
                if entry.name not in assignments:
                    hints.append(f"{student.name}/{entry.name}/: " + (f"did you mean {near[0]}?" if near else
                                 f"not an assignment of the source ({', '.join(assignments)})"))
            elif entry.suffix == ".ipynb":
                where = (f"{student.name}/{owner[entry.name]}/{entry.name}" if entry.name in owner
                         else f"{student.name}/<assignment>/")
                hints.append(f"{student.name}/{entry.name}: a notebook outside an assignment folder; it belongs in {where}")
    return hints


def _class_folder(top: Path) -> Path:
    """The folder that is most likely meant to hold the students: going down through wrapping
    folders (a single folder each), the first whose folders hold notebooks directly or one
    folder down (alice/qkv.ipynb, alice/03_qkv/qkv.ipynb)."""
    folder = top
    while True:
        children = _subdirs(folder)
        if any(next(child.glob("*.ipynb"), None) or next(child.glob("*/*.ipynb"), None) for child in children):
            return folder
        if len(children) != 1 or children[0].is_symlink():
            return top
        folder = children[0]


def listing(root: Path, limit: int = 12) -> list[str]:
    """The first files under ``root`` (for a message that shows what was found)."""
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_file() or path.is_symlink():
            files.append(str(path.relative_to(root)))
            if len(files) > limit:
                return files[:limit] + ["..."]
    return files or ["(no files)"]


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
