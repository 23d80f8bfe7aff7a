"""Wrong layouts fail loudly and helpfully: `grade` lists what it found, names the near miss
("did you mean 03-qkv?"), recognises an LMS download that was not collected, unpacks a class
folder of per-student zips, exits 1 when nothing could be graded, and prepares only the
assignments the class submitted."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.instructor.lms import guess_download
from autograder.submissions import diagnose, discover, find_root, near_names, unpack_student_zips
from classroom import REPO, Results, grade, make_submission

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENTS = sorted(p.name for p in (REPO / "solutions").iterdir() if any(p.glob("*.ipynb")))
NOTEBOOKS = {a: sorted(p.stem for p in (REPO / "solutions" / a).glob("*.ipynb")) for a in ASSIGNMENTS}
RELEASED = REPO / "exercises" / "03-qkv" / "qkv.ipynb"


def _put(path: Path, source: Path = RELEASED) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, path)


@pytest.mark.parametrize("near, meant", [("03_qkv", "03-qkv"), ("QKV", "03-qkv"), ("3-qkv", "03-qkv"),
                                         ("03-QKV ", "03-qkv"), ("masks", "05-masks")])
def test_near_names_are_recognised(near, meant):
    assert near_names(near, ASSIGNMENTS)[0] == meant


def test_far_names_are_not_guessed():
    assert near_names("homework", ASSIGNMENTS) == []


@pytest.mark.parametrize("layout, hint", [
    ("alice/qkv.ipynb", "alice/qkv.ipynb: a notebook outside an assignment folder; it belongs in alice/03-qkv/qkv.ipynb"),
    ("alice/03_qkv/qkv.ipynb", "alice/03_qkv/: did you mean 03-qkv?"),
    ("bob/QKV/qkv.ipynb", "bob/QKV/: did you mean 03-qkv?"),
    ("submitted/bob/QKV/qkv.ipynb", "bob/QKV/: did you mean 03-qkv?"),  # under a wrapping folder
    ("alice/00-homework/qkv.ipynb", "alice/00-homework/: not an assignment of the source"),
    ("03-qkv/qkv.ipynb", "holds assignment folders itself: it looks like one student's folder"),
])
def test_each_wrong_layout_is_found_nothing_and_explained(tmp_path, layout, hint):
    _put(tmp_path / "class" / layout)
    root = find_root(tmp_path / "class", ASSIGNMENTS)
    assert discover(root, ASSIGNMENTS, NOTEBOOKS) == []
    assert any(h.startswith(hint) or hint in h for h in diagnose(tmp_path / "class", ASSIGNMENTS, NOTEBOOKS))


def test_one_student_in_a_near_named_folder_is_missing_with_the_near_name(tmp_path):
    _put(tmp_path / "alice" / "03-qkv" / "qkv.ipynb")
    _put(tmp_path / "bob" / "QKV" / "qkv.ipynb")
    rows = {s.student_id: s for s in discover(tmp_path, ASSIGNMENTS, NOTEBOOKS)}
    assert rows["alice"].path is not None
    assert rows["bob"].path is None and "found: QKV/; is QKV/ meant to be 03-qkv/? rename it" in rows["bob"].note


def test_lms_downloads_are_recognised(tmp_path):
    _put(tmp_path / "canvas" / "muellerjose_late_12345_678901_qkv-1.ipynb")
    _put(tmp_path / "canvas" / "smithann_2222_678902_qkv.ipynb")
    _put(tmp_path / "moodle" / "José Müller_1201_assignsubmission_file_" / "qkv.ipynb")
    _put(tmp_path / "plain" / "alice" / "03-qkv" / "qkv.ipynb")
    assert [guess_download(tmp_path / d) for d in ("canvas", "moodle", "plain")] == ["canvas", "moodle", None]


def test_per_student_zips_are_unpacked_under_their_names(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    with zipfile.ZipFile(folder / "alice.zip", "w") as z:  # the assignment folder at the top
        z.write(RELEASED, "03-qkv/qkv.ipynb")
    with zipfile.ZipFile(folder / "bob.zip", "w") as z:  # wrapped in the student's own folder
        z.write(RELEASED, "bob/03-qkv/qkv.ipynb")
    _put(folder / "carol" / "03-qkv" / "qkv.ipynb")  # a folder beside the zips
    root = unpack_student_zips(folder, tmp_path / "students")
    found = discover(root, ASSIGNMENTS, NOTEBOOKS)
    assert [(s.student_id, s.path is not None) for s in found] == [("alice", True), ("bob", True), ("carol", True)]
    assert sorted(p.name for p in folder.iterdir()) == ["alice.zip", "bob.zip", "carol"]  # untouched
    assert unpack_student_zips(tmp_path / "students", tmp_path / "again") is None


def _cli_grade(submissions: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)


def test_grade_of_a_canvas_download_exits_1_with_the_listing_and_what_to_do(tmp_path):
    _put(tmp_path / "download" / "muellerjose_late_12345_678901_qkv-1.ipynb")
    result = _cli_grade(tmp_path / "download", tmp_path / "RESULTS", "--no-sandbox")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0].startswith("autograder: [")  # says what it does from the start
    assert "nothing to grade" in result.stderr and "  muellerjose_late_12345_678901_qkv-1.ipynb" in result.stderr
    assert "looks like a Canvas download: run `python -m autograder collect" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "RESULTS").exists()


def test_a_class_of_zips_is_graded_preparing_only_its_assignment(tmp_path):
    make_submission(tmp_path / "made", "alice", "03-qkv")
    (tmp_path / "class").mkdir()
    shutil.make_archive(str(tmp_path / "class" / "alice"), "zip", tmp_path / "made" / "alice")
    _put(tmp_path / "class" / "bob" / "QKV" / "qkv.ipynb")  # graded as missing, with the near name
    result = _cli_grade(tmp_path / "class", tmp_path / "RESULTS", "--jobs", "1")
    assert result.returncode == 0, result.stderr
    prepared = [line for line in result.stderr.splitlines() if "prepar" in line]  # generated, or kept from before
    assert prepared and all(re.search(r"prepar(ing|ed) 03-qkv \(", line) for line in prepared)  # no other assignment
    assert "bob/QKV/: did you mean 03-qkv?" in result.stderr
    grades = Results.read(tmp_path / "RESULTS").grades
    assert grades["alice", "03-qkv"]["status"] == "ok" and grades["alice", "03-qkv"]["score"] == grades["alice", "03-qkv"]["max_score"]
    assert grades["bob", "03-qkv"]["status"] == "missing" and "meant to be 03-qkv/" in grades["bob", "03-qkv"]["reason"]


def test_nothing_graded_exits_1_after_writing_the_reasons(tmp_path):
    _put(tmp_path / "class" / "alice" / "03-qkv" / "notes.txt", RELEASED)
    result = grade(tmp_path / "class", tmp_path / "RESULTS", "--no-sandbox")
    assert result.returncode == 1 and "no notebook could be graded" in result.stderr
    assert Results.read(tmp_path / "RESULTS").grades["alice", "03-qkv"]["status"] == "missing"
