"""From an LMS bulk download to nbgrader's layout, and from grades to the LMS gradebook.

``collect`` does what nbgrader's ``zip_collect`` does for its own layout: it reads a bulk
download (a folder or a .zip, never modified), reads each file's path with a pattern that
names the student, and copies the notebooks to ``SUBMISSIONS/<student_id>/<assignment>/
<notebook>.ipynb``. Every file ends up in its report: placed, superseded by a later file of
the same student, or not placed and why.

Built-in patterns (the LMSs' own naming, matched against the path inside the download):

* ``canvas``: ``<lastnamefirstname>_[late_]<user id>_<file id>_<uploaded name>``, e.g.
  ``muellerjose_late_12345_678901_qkv-1.ipynb``; Canvas appends ``-1``, ``-2`` to a name
  uploaded again. The user id is the ``ID`` column of Canvas's gradebook.
* ``moodle``: ``<Full Name>_<participant id>_assignsubmission_file_/<file>`` (one folder per
  submission, Moodle's default) or ``<Full Name>_<participant id>_assignsubmission_file_<file>``
  (flat); the participant id is the ``Participant <id>`` identifier of Moodle's grading worksheet.

``export`` writes a results folder's grades in the import formats of Canvas (gradebook CSV),
Moodle (offline grading worksheet, with each test's score and each failing test's hint in the
feedback comments) or a plain CSV, one row per student. Written answers are graded by hand in
nbgrader's formgrader: with ``--gradebook`` the grade is nbgrader's final score there (the
autograded points and the hand-given ones); without it, the autograder's points, and every
student whose written answers were not graded yet is named. The score rule (``course_score``,
used by every sheet, the class report and the service's exports and distribution): an answer
not graded yet is in neither the points nor the maximum; an LMS, whose maximum is the whole
assignment, gets the points as they are (never scaled up). ``export --feedback-zip`` also writes each student's feedback page
into the LMS's bulk upload of feedback files (``feedback_upload``), named as the LMS reads them
back (``Lms.feedback_name``), each name made safe (``_name_part``).
"""
from __future__ import annotations

import codecs
import csv
import html
import io
import json
import os
import re
import unicodedata
import zipfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from math import fsum
from pathlib import Path, PurePosixPath

from autograder.errors import InputError
from autograder.report import NAMES_AS_ON_DISK, csv_text, read_cell
from autograder.submissions import MAX_ZIP_BYTES, MAX_ZIP_FILES, SKIPPED_NAMES, ZIP_ERRORS, zip_members



def guess_download(root: Path) -> str | None:
    """The LMS whose bulk download ``root`` looks like ('canvas', 'moodle'): most of its files
    are named as that LMS names them. None for anything else."""
    return guess_lms([p.relative_to(root).as_posix() for p in sorted(root.rglob("*"))[:2000] if p.is_file()])


def guess_lms(files: list[str]) -> str | None:
    """The LMS that names most of ``files`` (paths inside a download) as its download does."""
    for lms, pattern in PATTERNS.items():
        if files and 2 * sum(re.fullmatch(pattern, f) is not None for f in files) >= len(files):
            return lms
    return None


def guess_assignment(root: Path, lms: str, notebooks: dict[str, list[str]]) -> str | None:
    """The one assignment whose notebooks the files of an LMS download in ``root`` are, if one."""
    found = set()
    for path in sorted(root.rglob("*.ipynb"))[:2000]:
        match = re.fullmatch(PATTERNS[lms], path.relative_to(root).as_posix())
        if match:
            stem = _COPY_NUMBER.sub("", PurePosixPath(match["file"]).stem)
            found |= {a for a, names in notebooks.items() if stem in names}
    return found.pop() if len(found) == 1 else None


# A copy's number in an uploaded name: Canvas's "qkv-1.ipynb", a browser's "qkv (2).ipynb".
_COPY_NUMBER = re.compile(r"(?:-(\d+)| \((\d+)\))$")
_SAFE_ID = re.compile(r"[\w.@+-]+")


# --------------------------------------------------------------------------
# the roster




class LmsError(InputError):
    """An LMS's download, a roster, a naming pattern, a gradebook or grades to export that cannot
    be used as given."""

@dataclass
class Student:
    student_id: str          # the folder name under SUBMISSIONS, the id in grades.csv
    lms_id: str = ""         # Canvas user ID, Moodle participant id
    name: str = ""
    email: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""


def _key(name: str) -> str:
    """A name as Canvas writes it in file names: no accents, no spaces or punctuation, lower case."""
    plain = unicodedata.normalize("NFKD", name)
    return "".join(c for c in plain if c.isalnum() and not unicodedata.combining(c)).casefold()


def _name_keys(name: str) -> set[str]:
    """'José Müller' and 'Müller, José' are both 'josemuller' and 'mullerjose'."""
    if "," in name:
        last, first = (p.strip() for p in name.split(",", 1))
    else:
        first, _, last = name.strip().rpartition(" ")
    return {_key(name), _key(first + last), _key(last + first)} - {""}


def read_roster(path: Path) -> list[Student]:
    """A roster CSV: this course's own (columns ``student_id`` and any of ``lms_id``, ``name``,
    ``email``, ``sis_user_id``, ``sis_login_id``, ``section``), or the LMS's own export as it
    comes: Canvas's gradebook export (``Student``, ``ID``, ...) or Moodle's grading worksheet
    (``Identifier``, ``Full name``, ...), where the LMS id is the student id."""
    rows = read_csv(path, "the roster ", spreadsheet=True)
    students, lines = [], []
    for line, row in enumerate(rows, 2):  # the row's number in the file, the header's being 1
        if "student_id" in row:
            student = Student(**{k: row.get(k, "") for k in Student.__dataclass_fields__})
            student.lms_id = student.lms_id or student.student_id
        elif "ID" in row and "Student" in row:  # Canvas; its "Points Possible" row has no ID
            student = Student(row["ID"], row["ID"], row["Student"], "", row.get("SIS User ID", ""),
                              row.get("SIS Login ID", ""), row.get("Section", ""))
        elif "Identifier" in row:  # Moodle: "Participant 12345"
            lms_id = row["Identifier"].rpartition(" ")[2]
            student = Student(lms_id, lms_id, row.get("Full name", ""), row.get("Email address", ""))
        else:
            raise LmsError(f"{path}: a roster needs a student_id column (or is Canvas's gradebook "
                                   f"export or Moodle's grading worksheet); found {', '.join(row)}")
        if student.student_id:
            students.append(student)
            lines.append(line)
    _refuse_shared_ids(path, students, lines)
    return students


_ID_NAMES = {"student_id": "student id", "lms_id": "LMS id"}


def _refuse_shared_ids(path: Path, students: list[Student], lines: list[int]) -> None:
    """A roster that gives two rows one student id or one LMS id would give one student the
    other's files, grade and feedback: refused, both rows named (``lines``: each student's line)."""
    for what in ("student_id", "lms_id"):
        first: dict[str, tuple[int, Student]] = {}
        for line, student in zip(lines, students):
            key = getattr(student, what)
            if key in first:
                earlier_line, earlier = first[key]
                raise LmsError(f"{path}: rows {earlier_line} ({earlier.name or earlier.student_id}) and {line} "
                               f"({student.name or student.student_id}) have the same {_ID_NAMES[what]} {key!r}: "
                               "a roster names each student once (fix it; nothing was written)")
            first[key] = (line, student)


# --------------------------------------------------------------------------
# collect


@dataclass
class Entry:
    """One file of the download."""

    path: str  # inside the download, with / separators
    mtime: datetime
    read: object = field(repr=False)  # () -> bytes
    link: bool = False  # a symbolic link: never followed


@dataclass
class Placement:
    file: str
    status: str  # placed, superseded, unplaced, ignored
    student_id: str = ""
    name: str = ""
    target: str = ""
    late: bool = False
    reason: str = ""


def _entries(download: Path) -> list[Entry]:
    """The files of a folder or a zip, read in place (nothing is written into the download)."""
    if download.is_dir():  # links are not followed: only what the LMS wrote is read
        return [Entry(p.relative_to(download).as_posix(), datetime.fromtimestamp(p.lstat().st_mtime),
                      p.read_bytes, p.is_symlink()) for p in sorted(download.rglob("*")) if p.is_file() or p.is_symlink()]
    try:
        archive = zipfile.ZipFile(download)
        members = _checked(download, zip_members(archive))
        inner = [m for m in members if not _system_file(m.filename)]
        if len(inner) == 1 and inner[0].filename.lower().endswith(".zip"):  # the download, zipped again
            archive = zipfile.ZipFile(io.BytesIO(archive.read(inner[0])))
            members = _checked(download, zip_members(archive))
    except ZIP_ERRORS as err:
        raise LmsError(f"cannot read {download}: {type(err).__name__}: {err}") from err
    return [Entry(m.filename, datetime(*m.date_time), lambda m=m: archive.read(m)) for m in members]


def _checked(download: Path, members: list[zipfile.ZipInfo]) -> list[zipfile.ZipInfo]:
    """The zip's members, if within the sizes read."""
    if len(members) > MAX_ZIP_FILES or sum(m.file_size for m in members) > MAX_ZIP_BYTES:
        raise LmsError(f"{download} is larger than {MAX_ZIP_FILES} files or {MAX_ZIP_BYTES} bytes")
    return members


def _version(match: re.Match, entry: Entry) -> tuple:
    """Which of a student's files is the latest: Canvas's file id (ids only grow), then the
    copy number of the uploaded name ("-1", " (2)"), then the time in the download, then the name."""
    groups = match.groupdict()
    copy = _COPY_NUMBER.search(PurePosixPath(groups.get("file") or entry.path).stem)
    return (int(groups.get("file_id") or -1), int(copy and (copy[1] or copy[2]) or 0), entry.mtime, entry.path)


def _notebook_for(file: str, notebooks: list[str]) -> str | None:
    """Which of the assignment's notebooks an uploaded file is: the only one, or the one whose
    name it carries (without a copy number)."""
    if len(notebooks) == 1:
        return notebooks[0]
    stem = _COPY_NUMBER.sub("", PurePosixPath(file).stem)
    return next((nb for nb in notebooks if stem == nb or stem.endswith(f"_{nb}")), None)


def _system_file(path: str) -> bool:
    """A file the system made (macOS's __MACOSX, a hidden file, Jupyter's checkpoints)."""
    return any(p in SKIPPED_NAMES or p.startswith(".") for p in PurePosixPath(path).parts)


# Why a file of a student collect knows is not placed: these reach the student's row in grades.csv.
NOT_A_NOTEBOOK = "not a notebook (.ipynb)"
NOT_THIS_ASSIGNMENT = "not one of the assignment's notebooks"
UNREADABLE = "cannot be read from the download"
LATE = "submitted late (the LMS's late flag)"


def collect(download: Path, assignment: str, notebooks: list[str], out: Path, pattern: str,
            roster: list[Student] | None = None) -> list[Placement]:
    """Copy the download's notebooks to ``out/<student_id>/<assignment>/<notebook>.ipynb``;
    returns what happened to every file of the download."""
    regex = re.compile(pattern)
    if not {"student_id", "lms_id", "name"} & set(regex.groupindex):
        raise LmsError("the pattern needs a named group student_id, lms_id or name")
    students = _RosterIndex(roster)
    report, chosen = [], {}  # target -> (version, entry, placement) of the latest file placed there
    for entry in _entries(download):
        placement, match = _placement(entry, regex, students, assignment, notebooks)
        report.append(placement)
        if placement.status == "placed":
            _keep_the_latest(chosen, _version(match, entry), entry, placement)
    _refuse_collecting_over(out, assignment, [placement for _, _, placement in chosen.values()])
    for _, entry, placement in chosen.values():
        _copy_placed(out, entry, placement)
    return report


def _placement(entry: Entry, regex: re.Pattern, students: "_RosterIndex", assignment: str, notebooks: list[str]
               ) -> tuple[Placement, re.Match | None]:
    """What the name of one file of the download says (and its match of the pattern): a
    notebook of the assignment placed for its student, or why it is not placed."""
    if _system_file(entry.path):
        return Placement(entry.path, "ignored", reason="a system file (macOS, Jupyter checkpoint)"), None
    if entry.link:
        return Placement(entry.path, "unplaced", reason="a symbolic link (not followed)"), None
    match = regex.fullmatch(entry.path)
    if not match:
        return Placement(entry.path, "unplaced", reason="its name does not match the pattern"), None
    groups = {k: v for k, v in match.groupdict().items() if v}
    student, why = students.identify(groups)
    placement = Placement(entry.path, "unplaced", student or groups.get("student_id") or groups.get("lms_id", ""),
                          groups.get("name", ""), late=bool(groups.get("late")), reason=why)
    if student is not None:
        _place_notebook(placement, groups.get("file") or PurePosixPath(entry.path).name, assignment, notebooks)
    return placement, match


def _place_notebook(placement: Placement, file: str, assignment: str, notebooks: list[str]) -> None:
    """Place an identified student's uploaded ``file`` as the notebook of the assignment it is,
    or say why it is none of them (these reasons reach the student's row in grades.csv)."""
    if not file.endswith(".ipynb"):
        placement.reason = NOT_A_NOTEBOOK
        return
    notebook = _notebook_for(file, notebooks)
    if notebook is None:
        placement.reason = f"{NOT_THIS_ASSIGNMENT} ({', '.join(n + '.ipynb' for n in notebooks)})"
        return
    placement.status, placement.reason = "placed", ""
    placement.target = f"{placement.student_id}/{assignment}/{notebook}.ipynb"


def _keep_the_latest(chosen: dict, version: tuple, entry: Entry, placement: Placement) -> None:
    """Of the files placed at one target (a student's notebook uploaded again), only the latest
    (``_version``) is copied; the others are superseded, each naming the file that replaced it."""
    earlier = chosen.get(placement.target)
    if earlier and earlier[0] > version:
        placement.status, placement.reason = "superseded", f"a later file of this student: {earlier[1].path}"
        return
    if earlier:
        earlier[2].status, earlier[2].reason = "superseded", f"a later file of this student: {entry.path}"
    chosen[placement.target] = (version, entry, placement)


def _refuse_collecting_over(out: Path, assignment: str, placed: list[Placement]) -> None:
    """Several downloads may go into one SUBMISSIONS (two LMSs, two sections), never over each other."""
    taken = sorted({p.target.rpartition("/")[0] for p in placed if (out / p.target).parent.exists()})
    if taken:
        raise LmsError(f"{out} already holds {len(taken)} of these students' {assignment} "
                       f"({', '.join(taken[:3])}, ...): collect into a new folder, or remove them first")


def _copy_placed(out: Path, entry: Entry, placement: Placement) -> None:
    """Copy a placed file to its target, with its time in the download; a damaged zip member is
    not placed (and says why), the others are."""
    try:
        data = entry.read()
    except ZIP_ERRORS as err:
        placement.status, placement.target = "unplaced", ""
        placement.reason = f"{UNREADABLE} ({type(err).__name__}: {err})"
        return
    target = out / placement.target
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    os.utime(target, (entry.mtime.timestamp(), entry.mtime.timestamp()))


class _RosterIndex:
    """A roster's students by student id, LMS id and name (each of its spellings, ``_name_keys``),
    to tell whose a file is; without a roster, a file's name says it alone."""

    def __init__(self, roster: list[Student] | None):
        self.given = roster is not None
        self.by_id = {s.student_id: s for s in roster or []}
        self.by_lms = {s.lms_id: s for s in roster or []}
        self.by_name: dict[str, list[Student]] = {}
        for student in roster or []:
            for key in _name_keys(student.name):
                self.by_name.setdefault(key, []).append(student)

    def identify(self, groups: dict) -> tuple[str | None, str]:
        """(student id, "") from what a file name says (the pattern's groups), or (None, why not)."""
        if "student_id" in groups:
            student = groups["student_id"]
            if self.given and student not in self.by_id:
                return None, f"student id {student} is not in the roster"
        elif "lms_id" in groups:
            if self.given and groups["lms_id"] not in self.by_lms:
                return None, f"LMS id {groups['lms_id']} is not in the roster"
            student = self.by_lms[groups["lms_id"]].student_id if self.given else groups["lms_id"]
        elif not self.given:
            return None, "the pattern gives only a name: pass --roster to map names to student ids"
        else:
            student, why = self._by_name(groups["name"])
            if student is None:
                return None, why
        if not _SAFE_ID.fullmatch(student) or student in (".", ".."):
            return None, f"student id {student!r} cannot be a folder name"
        return student, ""

    def _by_name(self, name: str) -> tuple[str | None, str]:
        """(student id, "") of the one student of the roster with this name, or (None, why not)."""
        found = {s.student_id for s in self.by_name.get(_key(name), [])}
        if len(found) != 1:
            return None, (f"the name {name!r} is " +
                          ("not in the roster" if not found else f"ambiguous in the roster ({', '.join(sorted(found))})"))
        return found.pop(), ""


def collect_notes(folder: Path, assignments: list[str]) -> dict[tuple[str, str], tuple[str, bool]]:
    """(student id, assignment) -> (what collect said about the student's files, late), from
    the ``collect-<assignment>.csv`` reports in ``folder`` (SUBMISSIONS): a late flag, files
    superseded by a later one, files not placed (not a notebook, another assignment's, unreadable).
    A student with no placed file is in it too: grade reports them missing with this reason."""
    notes = {}
    for assignment in assignments:
        report = folder / f"collect-{assignment}.csv"
        if not report.is_file():
            continue
        by_student: dict[str, list[dict]] = {}
        for row in read_csv(report):
            mine = row["status"] in ("placed", "superseded") or row["reason"].startswith(
                (NOT_A_NOTEBOOK, NOT_THIS_ASSIGNMENT, UNREADABLE))
            if row["student_id"] and mine:
                by_student.setdefault(row["student_id"], []).append(row)
        for student, rows in by_student.items():
            late = any(r["late"] and r["status"] == "placed" for r in rows)
            said = [LATE] if late else []
            said += [f"{PurePosixPath(r['file']).name}: {'superseded by a later file' if r['status'] == 'superseded' else 'not graded: ' + r['reason']}"
                     for r in rows if r["status"] != "placed"]
            notes[(student, assignment)] = ("; ".join(said), late)
    return notes


def students_seen(report: list[Placement], roster: list[Student] | None) -> list[Student]:
    """The students of the placed files, with their LMS id and name (for ``export --roster``)."""
    known = {s.student_id: s for s in roster or []}
    seen = {}
    for p in report:
        if p.status in ("placed", "superseded") and p.student_id not in seen:
            seen[p.student_id] = known.get(p.student_id) or Student(p.student_id, p.student_id, p.name)
    return sorted(seen.values(), key=lambda s: s.student_id)


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    """UTF-8 with a byte-order mark, so that Excel (where instructors open these) reads accents;
    no cell is a formula there (``report.spreadsheet_cell``); a file name that is not UTF-8 is
    written as its bytes on disk, as in grades.csv."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(csv_text(header, rows), encoding="utf-8-sig", errors=NAMES_AS_ON_DISK)
    os.replace(tmp, path)


def read_csv(path: Path, what: str = "", spreadsheet: bool = False) -> list[dict[str, str]]:
    """The rows of a CSV this tool or an LMS wrote, each cell stripped and as it was before
    ``write_csv`` made it safe for a spreadsheet. ``spreadsheet``: a file an instructor may have
    saved from a spreadsheet (a roster), in its encoding and with its delimiter (``_as_saved``)."""
    try:
        text, delimiter = _as_saved(path.read_bytes()) if spreadsheet else (
            path.read_text(encoding="utf-8-sig", errors=NAMES_AS_ON_DISK), ",")
        rows = list(csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter))
    except (OSError, csv.Error) as err:
        raise LmsError(f"cannot read {what}{path}: {err}") from err
    return [{(k or "").strip(): read_cell((v or "").strip()) for k, v in row.items()} for row in rows]


def _as_saved(data: bytes) -> tuple[str, str]:
    """(text, delimiter) of a CSV as spreadsheets save it: UTF-16 with its byte-order mark (Excel's
    "Unicode Text", tab-separated), UTF-8 with or without one (this tool's files keep the bytes of
    a name that is not UTF-8), else cp1252 (Excel's "CSV" on Windows); a comma, a semicolon (where
    the decimal separator is a comma) or a tab between the cells of the header."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16")
    elif data.startswith(codecs.BOM_UTF8):
        text = data.decode("utf-8-sig", errors=NAMES_AS_ON_DISK)
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("cp1252", errors=NAMES_AS_ON_DISK)
    header = text.split("\n", 1)[0]
    return text, max(",;\t", key=header.count) if any(c in header for c in ",;\t") else ","


def write_collect_report(out: Path, assignment: str, report: list[Placement], roster: list[Student] | None) -> Path:
    """``out/collect-<assignment>.csv`` (every file and what happened to it, after the files of
    the downloads collected before into ``out``) and ``out/students.csv`` (a roster of the
    students collected so far, merged over assignments)."""
    path = out / f"collect-{assignment}.csv"
    columns = ["file", "status", "student_id", "name", "late", "target", "reason"]
    earlier = [[row[c] for c in columns] for row in read_csv(path)] if path.is_file() else []  # another download
    write_csv(path, columns, earlier + [[p.file, p.status, p.student_id, p.name, "yes" if p.late else "", p.target,
                                         p.reason] for p in report])
    students = {s.student_id: s for s in (read_roster(out / "students.csv") if (out / "students.csv").is_file() else [])}
    students.update({s.student_id: s for s in students_seen(report, roster)})
    fields = list(Student.__dataclass_fields__)
    write_csv(out / "students.csv", fields,
              [[getattr(s, f) for f in fields] for s in sorted(students.values(), key=lambda s: s.student_id)])
    return path


# --------------------------------------------------------------------------
# export

NOT_GRADED = ("missing", "invalid")  # no grade at all in the LMS, with the reason beside it
PENDING = "written answer: pending"  # the score rule's words, on every page and sheet


@dataclass(frozen=True)
class Score:
    """A student's score under the course's rule (docs/instructors/lms.md, "The score rule"), made by
    ``course_score``: a written answer that awaits a person is in neither ``points`` nor
    ``maximum`` (its points are ``pending``); once it has a score it counts in both. An LMS keeps
    one maximum per assignment, the ``whole`` (autograded and written points), and gets the
    points as they are, never scaled up while answers are pending: 8 of 8 with 2 points pending
    is 8 of 10 there until a person grades the answer."""

    points: float
    maximum: float
    pending: float = 0.0

    @property
    def whole(self) -> float:
        return self.maximum + self.pending

    @property
    def share(self) -> float:
        """The points as a share of this student's own maximum (0 where nothing counts yet)."""
        return self.points / self.maximum if self.maximum else 0.0


def course_score(points: float, autograded_maximum: float, written_points: float = 0.0, pending: float = 0.0) -> Score:
    """The score rule, the one place it is computed. ``points``: the autograded points and the
    points of the written answers that have a score (a person's, or nbgrader's 0 for an answer
    left as released); ``written_points``: every written answer's points, of which ``pending``
    await a person."""
    return Score(points, fsum([autograded_maximum, written_points, -pending]), pending)


def notebooks_score(results: list[dict]) -> Score:
    """One student's score from results.json's entries of their notebooks of one assignment."""
    scored = [t["points"] for r in results for t in r.get("tests", []) if t.get("manual") and t["points"] is not None]
    return course_score(fsum([*(r["score"] for r in results), *scored]), fsum(r["max_score"] for r in results),
                        fsum(r.get("written_points", 0.0) for r in results),
                        fsum(r.get("to_grade_by_hand", 0.0) for r in results))


@dataclass
class Row:
    """One student's line in a grade sheet: ``grade`` where graded (``course_score``), None where
    not (missing, invalid: a blank cell in the LMS, never a 0)."""

    student: Student
    grade: Score | None
    status: str
    reason: str
    late: bool = False  # the LMS marked it late (collect's report)
    whole: float = 0.0  # the assignment's maximum, the LMS's: autograded and written points
    comment: str = ""  # the score per test, each failing test with its hint (results.json)

    @property
    def score(self) -> str:
        """The points counted ("" where not graded): what every LMS gets, out of ``whole``."""
        return "" if self.grade is None else _shown(self.grade.points)

    @property
    def max_score(self) -> str:
        """What the points are counted out of: the whole, less the written answers not graded yet."""
        return _shown(self.whole if self.grade is None else self.grade.maximum)

    @property
    def to_grade_by_hand(self) -> float:
        return 0.0 if self.grade is None else self.grade.pending

    @property
    def note(self) -> str:
        """What a student and the LMS see beside the grade."""
        if self.status in NOT_GRADED:
            return f"Not graded: {self.status}" + (f" ({self.reason})" if self.reason else "")
        pending = (f"{PENDING} ({_shown(self.to_grade_by_hand)} points): {self.score} of {self.max_score} counted, "
                   f"{self.score} of {_shown(self.whole)} in the LMS until it is graded" if self.to_grade_by_hand else "")
        if self.status != "ok":
            return "; ".join(filter(None, [f"Graded with status {self.status}: {self.reason}".rstrip(": "), pending]))
        return "; ".join(filter(None, [self.reason, pending]))


def _number(text: str | float | None) -> float:
    return float(text) if text not in (None, "") else 0.0


def _shown(x: float) -> str:
    return f"{x:g}"


def _final_scores(db_url: str, assignment: str, course_id: str = "") -> dict[str, tuple[float, float]]:
    """student id -> (score, points not graded yet) of each submission in an nbgrader gradebook:
    nbgrader's score (a hand-given score where there is one, else the automatic one), and the
    points of the cells that have neither (written answers formgrader has not graded)."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with Gradebook(db_url, course_id) as gb:
            try:
                submissions = gb.find_assignment(assignment).submissions
            except MissingEntry:
                raise LmsError(f"the gradebook {db_url} has no assignment {assignment}") from None
            return {sub.student.id: (float(sub.score), float(sum(
                g.max_score for nb in sub.notebooks for g in nb.grades if g.auto_score is None and g.manual_score is None)))
                for sub in submissions}
    except SQLAlchemyError as err:
        raise LmsError(f"cannot read the nbgrader gradebook {db_url}: {err}") from err


def grade_rows(grades_csv: Path, assignment: str | None, roster: list[Student] | None, gradebook: str | None = None
               ) -> tuple[str, list[Row], list[str]]:
    """(assignment, one Row per student, the students left out and why). Without a roster: the
    graded students. With one: its students, each graded or missing; graded students not on it
    (another section or LMS) are left out, since the LMS would not know them, and so are students
    who share an LMS id with another (the LMS would give both one grade and one feedback). With
    ``gradebook`` (an nbgrader database URL), graded students get their final score there."""
    rows = read_csv(grades_csv)
    assignment = _assignment_of(grades_csv, sorted({r["assignment"] for r in rows}), assignment)
    rows = [r for r in rows if r["assignment"] == assignment]
    final = _final_scores(gradebook, assignment) if gradebook else {}
    # written_points: graded by hand, outside max_score (absent from grades.csv of older versions)
    whole = max(_number(r["max_score"]) + _number(r.get("written_points")) for r in rows)
    out, left_out = _student_rows(rows, roster, final, whole)
    shared = _sharing_an_lms_id(roster or [])
    left_out += [shared[row.student.student_id] for row in out if row.student.student_id in shared]
    out = [row for row in out if row.student.student_id not in shared]
    return assignment, sorted(out, key=lambda row: (row.student.name.casefold(), row.student.student_id)), left_out


def _assignment_of(grades_csv: Path, assignments: list[str], asked: str | None) -> str:
    """The assignment to export: the one asked for, which grades.csv must hold, or else the only one it holds."""
    if asked is None:
        if len(assignments) != 1:
            raise LmsError(f"{grades_csv} holds {len(assignments)} assignments "
                           f"({', '.join(assignments) or 'none'}): name one with --assignment")
        return assignments[0]
    if asked not in assignments:
        raise LmsError(f"{grades_csv} holds no grades for {asked} (it has {', '.join(assignments)})")
    return asked


def _student_rows(lines: list[dict[str, str]], roster: list[Student] | None, final: dict[str, tuple[float, float]],
                  whole: float) -> tuple[list[Row], list[str]]:
    """One Row per line of grades.csv, and with a roster one per student of it who is in none
    (missing); the graded students not on the roster are left out, with why."""
    known = {s.student_id: s for s in roster or []}
    rows, left_out = [], []
    for line in lines:
        student = known.pop(line["student_id"], None)
        if student is None and roster is not None:
            left_out.append(f"{line['student_id']} was graded but is not on the roster")
            continue
        rows.append(_graded_row(line, student or Student(line["student_id"], line["student_id"], line["student_id"]),
                                final, whole))
    rows += [Row(student, None, "missing", "nothing was submitted", whole=whole)  # on the roster, absent from every submission
             for student in known.values()]
    return rows, left_out


def _graded_row(line: dict[str, str], student: Student, final: dict[str, tuple[float, float]], whole: float) -> Row:
    """A student's Row from their line of grades.csv; ``final``: the gradebook's (score, points
    not graded yet) by student id (``_final_scores``), which replace the line's."""
    grade = None
    if line["status"] not in NOT_GRADED:
        points, pending = final.get(line["student_id"], (_number(line["score"]), _number(line.get("to_grade_by_hand"))))
        grade = course_score(points, _number(line["max_score"]), _number(line.get("written_points")), pending)
    return Row(student, grade, line["status"], line["reason"], line.get("late") == "yes", whole)


def _sharing_an_lms_id(roster: list[Student]) -> dict[str, str]:
    """student id -> why they are left out, for the students of a roster who share an LMS id with
    another (a roster read from a file never has them: read_roster refuses it; the service's may)."""
    by_lms: dict[str, list[Student]] = {}
    for student in roster:
        by_lms.setdefault(student.lms_id, []).append(student)
    return {s.student_id: f"{s.student_id} ({s.name}) shares the LMS id {lms_id} with "
                          f"{', '.join(o.student_id for o in group if o is not s)}: neither gets a grade or feedback"
            for lms_id, group in by_lms.items() if len(group) > 1 for s in group}


def penalise_late(rows: list[Row], percent: float) -> None:
    """Take ``percent`` of the assignment's maximum (the whole, as the LMS knows it) off each late
    student's points (never below 0), and say so."""
    for row in rows:
        if row.late and row.grade is not None:
            penalty = row.whole * percent / 100
            row.grade = replace(row.grade, points=round(max(0.0, row.grade.points - penalty), 2))
            row.reason = "; ".join(filter(None, [row.reason, f"late: {_shown(round(penalty, 2))} points off "
                                                             f"(--late-penalty {_shown(percent)}%)"]))


def export(grades_csv: Path, fmt: str, out: Path, assignment: str | None = None,
           roster: list[Student] | None = None, column: str | None = None,
           gradebook: str | None = None, late_penalty: float = 0.0) -> tuple[str, list[Row], list[str]]:
    """Write ``out`` in the LMS's import format; returns the assignment, the rows written and the
    students left out, with why (not on the roster, an LMS id shared). ``gradebook``: an nbgrader
    database URL to take the final scores from (after grading by hand in formgrader). ``late_penalty``:
    the percent of the maximum taken off a late submission (default none: late is reported, not penalised)."""
    assignment, rows, left_out = grade_rows(grades_csv, assignment, roster, gradebook)
    if late_penalty:
        penalise_late(rows, late_penalty)
    results_json = grades_csv.with_name("results.json")
    if results_json.is_file():  # the service exports grades.csv alone
        comments = test_comments(results_json, assignment, written=gradebook is None)
        for row in rows:
            row.comment = comments.get(row.student.student_id, "") if row.status not in NOT_GRADED else ""
    if fmt not in LMSS:
        raise LmsError(f"unknown format {fmt!r}: {', '.join(LMSS)}")
    header, lines = LMSS[fmt].sheet(rows, assignment, column)
    write_csv(out, header, lines)
    return assignment, rows, left_out


def grading_record(results: Path) -> list[Path]:
    """What ``grade`` wrote into RESULTS, the grading's record: no command's output may replace it."""
    return [results / name for name in ("grades.csv", "results.json", "feedback", "autograded")]


def refuse_overwriting(outputs: dict[str, Path | None], inputs: list[Path]) -> None:
    """Stop before anything is written (LmsError: one line, exit status 2) where an output (how
    it is named, e.g. "--out", -> its path; None: not asked for) is a file the command reads, lies
    inside a folder it reads, or is another output. Paths are compared resolved (links, "..", a
    relative path) and, where both exist, as files on disk (a hard link to an input is that input)."""
    read = [(path, path.resolve()) for path in inputs]
    written: dict[Path, str] = {}
    for name, path in outputs.items():
        if path is None:
            continue
        target = path.resolve()
        for given, source in read:
            if target == source or (source.is_dir() and target.is_relative_to(source)) or _same_file(target, source):
                raise LmsError(f"{name} {path} would overwrite {given}, which this command reads: "
                               "write it elsewhere (nothing was written)")
        if target in written:
            raise LmsError(f"{name} {path} is the same file as {written[target]}: name another (nothing was written)")
        written[target] = f"{name} {path}"


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return False


# --------------------------------------------------------------------------
# feedback: a comment per student in the grade sheet, each feedback page in the LMS's bulk upload


def test_comments(results_json: Path, assignment: str, written: bool = True) -> dict[str, str]:
    """student id -> a few lines of plain text: each test's score, and each failing test's hints
    (else the exception its code raised); with ``written``, each written answer's points or
    "pending" (without: a gradebook's hand-given points are in the grade, not in results.json)."""
    from autograder.instructor.verdicts import read_verdict

    try:
        results = json.loads(results_json.read_text(encoding="utf-8", errors=NAMES_AS_ON_DISK))
    except (OSError, ValueError) as err:
        raise LmsError(f"cannot read {results_json}: {err}") from err
    lines: dict[str, list[str]] = {}
    for result in results:
        if result.get("assignment") != assignment:
            continue
        own, said_before = lines.setdefault(result["student_id"], []), set()
        for test in result.get("tests", []):
            points, most = test["points"], _shown(test["max_points"])
            if test.get("manual"):
                if written:
                    own.append(f"{test['grade_id']}: {PENDING} ({most} points)" if points is None
                               else f"{test['grade_id']}: written answer: {_shown(points)} / {most}")
                continue
            line = f"{test['grade_id']}: {_shown(points)} / {most}"
            said = "" if test["passed"] else read_verdict(test.get("message", ""), test["grade_id"]).summary
            if said:  # a mistake shows in several tests: its hint once
                line += " (as above)" if said in said_before else f" ({said})"
                said_before.add(said)
            own.append(line)
    return {student: "\n".join(text) for student, text in lines.items()}


@dataclass
class FeedbackUpload:
    """The LMS's bulk-feedback zip: its members (name in the zip -> the feedback page), and the
    students graded whose page is not in it, with why."""

    members: dict[str, Path] = field(default_factory=dict)
    left_out: list[tuple[Row, str]] = field(default_factory=list)


class NoUploadName(Exception):
    """Why a student's feedback page cannot be named as the LMS's bulk upload wants."""


def _feedback_pages(results: Path, student_id: str, assignment: str) -> list[Path]:
    folder = results / "feedback" / student_id / assignment
    return sorted(folder.iterdir()) if folder.is_dir() else []


def canvas_uploads(collected: Path, assignment: str) -> dict[tuple[str, str], str]:
    """(student id, notebook) -> the name in Canvas's download of the file collect placed there,
    from ``collected/collect-<assignment>.csv`` (Canvas's re-upload needs its user and file ids)."""
    report = collected / f"collect-{assignment}.csv"
    if not report.is_file():
        raise LmsError(f"no {report.name} in {collected}: give --collected the SUBMISSIONS folder that "
                       "`collect --lms canvas` wrote (Canvas attaches a re-uploaded file by the ids in its name)")
    return {(row["student_id"], PurePosixPath(row["target"]).stem): PurePosixPath(row["file"]).name
            for row in read_csv(report) if row["status"] == "placed"}


def feedback_upload(results: Path, fmt: str, rows: list[Row], assignment: str,
                    uploads: dict[tuple[str, str], str] | None = None) -> FeedbackUpload:
    """Each graded student's feedback pages (``results/feedback/<student>/<assignment>/``), named
    as the LMS's bulk upload of feedback files wants them; ``uploads``: Canvas's download names
    (``canvas_uploads``). Students with nothing submitted get nothing."""
    lms, upload = LMSS[fmt], FeedbackUpload()
    for row in rows:
        if row.status == "missing":
            continue
        pages = _feedback_pages(results, row.student.student_id, assignment)
        try:
            if not pages:
                raise NoUploadName(f"no feedback page in {results / 'feedback'}")
            for page in pages:
                upload.members[lms.feedback_name(row, page.stem, uploads or {})] = page
        except NoUploadName as why:
            upload.left_out.append((row, str(why)))
    return upload


def write_zip(out: Path, members: dict[str, Path]) -> None:
    """A zip of ``members`` (name inside -> file), written whole or not at all."""
    tmp = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in sorted(members.items()):
            archive.write(path, name)
    os.replace(tmp, out)


# --------------------------------------------------------------------------
# the LMSs: a new one is a class here (and its name in the CLI's lists, cli.LMS_NAMING and
# cli.EXPORT_FORMATS, which tests/test_submissions.py keeps equal to these)


class Lms:
    """An LMS the course works with: how its bulk download names each file (``pattern``, matched
    against a file's whole path in the download, with the groups ``name``, ``lms_id`` and ``file``,
    and ``late`` where the LMS flags it; None where it has no bulk download), and the grade sheet
    it imports (``sheet``: its header and one line per student)."""

    name = ""
    pattern: str | None = None
    shows_reasons = True  # its sheet has a column for why a grade is what it is

    def sheet(self, rows: list[Row], assignment: str, column: str | None) -> tuple[list[str], list[list]]:
        raise NotImplementedError

    def feedback_name(self, row: Row, notebook: str, uploads: dict[tuple[str, str], str]) -> str:
        """The name of a student's feedback page for ``notebook`` in the LMS's bulk upload of
        feedback files, or NoUploadName (``uploads``: the download's names, ``canvas_uploads``)."""
        raise NoUploadName(f"{self.name} has no bulk upload of feedback files")


class Canvas(Lms):
    name = "canvas"
    pattern = r"(?:.*/)?(?P<name>[^/_]+)_(?P<late>(?i:late)_)?(?P<lms_id>\d+)_(?P<file_id>\d+)_(?P<file>[^/]+)"
    shows_reasons = False

    def sheet(self, rows, assignment, column):
        # Canvas's gradebook import: the columns of its own export. Canvas finds each student by
        # ID (or SIS User ID / SIS Login ID) and the assignment by its column title, "Name (id)" as
        # in an export; a title it does not know becomes a new assignment. A blank cell is no grade.
        header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", column or assignment]
        lines = [["    Points Possible", "", "", "", "", _shown(rows[0].whole) if rows else ""]]
        lines += [[r.student.name, r.student.lms_id, r.student.sis_user_id, r.student.sis_login_id,
                   r.student.section, r.score] for r in rows]
        return header, lines

    def feedback_name(self, row, notebook, uploads):
        # "Re-Upload Submissions" reads a file's name as the download wrote it: the first two parts
        # (split at "_") that are numbers are the user id and the id of a file of that student's
        # submission, which the file becomes a comment on (shown under that file's name).
        downloaded = uploads.get((row.student.student_id, notebook))
        match = re.fullmatch(self.pattern, downloaded or "")
        if not match:
            raise NoUploadName(f"no {notebook}.ipynb of this student in Canvas's download (collect's report): "
                               "Canvas attaches feedback only to a file the student submitted")
        # Canvas names the attachment after the student's own file (its display name, qkv.ipynb), whatever
        # this name is; the content type comes from this name: an HTML page.
        ids = f"_{match['late'] or ''}{match['lms_id']}_{match['file_id']}_"
        page = _name_part(notebook, NOTEBOOK_BYTES, "notebook") + FEEDBACK_SUFFIX
        name = _name_part(match["name"], NAME_BYTES - _bytes(ids + page), "student")
        return (name if not name.isdigit() else "student") + ids + page  # a number first would read as the user id


class Moodle(Lms):
    name = "moodle"
    # a folder per submission ("..._file_/" before Moodle 4.1, "..._file/" since), or flat ("..._file_<file>")
    pattern = r"(?:.*/)?(?P<name>[^/_]+)_(?P<lms_id>\d+)_assignsubmission_file(?:_?/(?:.*/)?|_)(?P<file>[^/]+)"

    def sheet(self, rows, assignment, column):
        # Moodle's offline grading worksheet (Assignment > Upload grading worksheet): Moodle reads
        # Identifier, Grade, Last modified (grade) and the feedback comments; an empty Grade is
        # left alone. A grade changed in Moodle after "Last modified (grade)" (read with PHP's
        # strtotime) is kept unless the upload overrides it: the export's time says these are newest.
        now = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
        header = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                  "Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments"]
        lines = [[f"Participant {r.student.lms_id}", r.student.name, r.student.email,
                  "No submission" if r.status == "missing" else "Submitted for grading", r.score, _shown(r.whole),
                  "Yes", "-", now, html_lines("\n".join(filter(None, [r.note, r.comment])))] for r in rows]
        return header, lines

    def feedback_name(self, row, notebook, uploads):
        # "Upload multiple feedback files in a zip" reads each folder name of a path as the download
        # writes it, <name>_<participant id>_<plugin type>_<plugin>, and gives the file to that participant.
        if not (row.student.lms_id.isascii() and row.student.lms_id.isdigit()):
            raise NoUploadName(f"no Moodle participant id (student id {row.student.student_id}): export with "
                               "--roster, Moodle's grading worksheet or collect's students.csv")
        plugin = f"_{row.student.lms_id}_assignsubmission_file"
        page = _name_part(notebook, NOTEBOOK_BYTES, "notebook") + FEEDBACK_SUFFIX
        name = _name_part(row.student.name.replace("_", " "), NAME_BYTES - _bytes(plugin), "Participant")
        return f"{name}{plugin}/{page}"


FEEDBACK_SUFFIX = "-feedback.html"
NAME_BYTES = 255  # the longest file name (one path component) most file systems and archivers take
NOTEBOOK_BYTES = 120  # of it, at most this for a notebook's name, so that a student's name keeps room
# Characters no file name in the zip keeps: path separators, those Windows refuses (as Moodle's
# clean_filename), and the Unicode categories of control and format characters (line breaks, tabs,
# right-to-left overrides, zero-width joiners), of unassigned code points and of line separators.
_REFUSED_CHARACTERS = set('/\\:*?"<>|')
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _name_part(text: str, room: int, fallback: str) -> str:
    """``text`` (a student's name as the download or the roster gives it, a notebook's) as part of
    one file name in a zip: none of the refused characters, any space as a plain one, no dot
    or space at either end (so never "." or ".."), at most ``room`` bytes of UTF-8 (whole characters,
    cut at the end); ``fallback`` where nothing is left."""
    spaced = "".join(" " if c.isspace() else c for c in unicodedata.normalize("NFC", text))  # a line break too
    kept = "".join(c for c in spaced
                   if c not in _REFUSED_CHARACTERS and unicodedata.category(c) not in _REFUSED_CATEGORIES)
    cut = kept.encode("utf-8")[:max(0, room)].decode("utf-8", errors="ignore")
    return " ".join(cut.split()).strip(" .") or fallback


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def html_lines(text: str) -> str:
    """Plain text as HTML (Moodle stores feedback comments as HTML): each line escaped, so that
    nothing a student wrote (a file name, a name, their code's exception) is markup, and a line
    break after each."""
    return "<br>\n".join(html.escape(line) for line in text.splitlines())


class PlainCsv(Lms):
    """No LMS: a CSV of every column, for a spreadsheet or an LMS without an importer here."""

    name = "csv"

    def sheet(self, rows, assignment, column):
        header = ["student_id", "lms_id", "name", "email", "assignment", "score", "max_score", "status", "reason",
                  "to_grade_by_hand", "late"]
        lines = [[r.student.student_id, r.student.lms_id, r.student.name, r.student.email, assignment,
                  r.score, r.max_score, r.status, r.reason, _shown(r.to_grade_by_hand), "yes" if r.late else ""]
                 for r in rows]
        return header, lines


LMSS: dict[str, Lms] = {lms.name: lms for lms in (Canvas(), Moodle(), PlainCsv())}
PATTERNS = {name: lms.pattern for name, lms in LMSS.items() if lms.pattern}  # collect --lms NAME
