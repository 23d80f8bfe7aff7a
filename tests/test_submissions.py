"""Unit tests: finding, unpacking and validating submissions; the results files."""
from __future__ import annotations

import csv
import io
import json
import os
import pkgutil
import random
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.engine.runner import _nbgrader_error, grade_all
from autograder.grading.course import Course, nbgrader_id
from autograder.grading.feedback import HideHiddenTests
from autograder.layout import SOLUTIONS_DIR
from autograder.options import GradingOptions
from autograder.report import MATH_FOLDER, ResultsWriter, grades_csv, read_cell, spreadsheet_cell
from autograder.results import NotebookResult, Status
from autograder.submissions import (MAX_NOTEBOOK_BYTES, Submission, SubmissionsError, discover,
                                    drop_broken_grade_ids, find_root, load_notebook, member_name, unpack_zip)

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

NOTEBOOKS = {"03-qkv": ["qkv"], "05-masks": ["masks"]}


def _touch(path, text="{}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_discover_expects_every_assignment_of_the_class_from_every_student(tmp_path):
    _touch(tmp_path / "ann" / "03-qkv" / "qkv.ipynb")
    _touch(tmp_path / "ann" / "05-masks" / "masks.ipynb")
    _touch(tmp_path / "ben" / "03-qkv" / "other.ipynb")
    _touch(tmp_path / "ben" / "03-qkv" / "more.ipynb")
    (tmp_path / "cy").mkdir()
    found = {(s.student_id, s.assignment): s for s in discover(tmp_path, list(NOTEBOOKS), NOTEBOOKS)}
    assert set(found) == {(s, a) for s in ("ann", "ben", "cy") for a in NOTEBOOKS}
    assert found[("ann", "03-qkv")].path == tmp_path / "ann" / "03-qkv" / "qkv.ipynb"
    assert found[("ben", "03-qkv")].path is None
    assert "other.ipynb" in found[("ben", "03-qkv")].note  # says what was there instead
    assert found[("cy", "05-masks")].path is None


def test_a_single_renamed_notebook_is_taken(tmp_path):
    copy = _touch(tmp_path / "ann" / "03-qkv" / "qkv-Copy1.ipynb")
    (sub,) = discover(tmp_path, ["03-qkv"], NOTEBOOKS)
    assert sub.path == copy and "qkv-Copy1.ipynb" in sub.note


def test_a_duplicated_student_is_graded_twice_with_a_note(tmp_path):
    for name in ("Ann", "ann "):
        _touch(tmp_path / name / "03-qkv" / "qkv.ipynb")
    _touch(tmp_path / "ben" / "03-qkv" / "qkv.ipynb")
    notes = {s.student_id: s.note for s in discover(tmp_path, ["03-qkv"], NOTEBOOKS)}
    assert notes["Ann"] == "same student id as 'ann '" and notes["ann "] == "same student id as 'Ann'"
    assert notes["ben"] == ""


def test_find_root_skips_wrapping_folders(tmp_path):
    _touch(tmp_path / "export" / "submitted" / "ann" / "03-qkv" / "qkv.ipynb")
    (tmp_path / "__MACOSX").mkdir()
    assert find_root(tmp_path, list(NOTEBOOKS)) == tmp_path / "export" / "submitted"


def test_unpack_zip_refuses_unsafe_paths(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("ann/03-qkv/qkv.ipynb", "{}")
        z.writestr("../escaped.txt", "boom")
    with pytest.raises(SubmissionsError, match="unsafe path"):
        unpack_zip(archive, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()


def test_unpack_zip_reports_a_broken_zip(tmp_path):
    bad = _touch(tmp_path / "class.zip", "not a zip")
    with pytest.raises(SubmissionsError, match="cannot read"):
        unpack_zip(bad, tmp_path / "out")


@pytest.mark.parametrize("content, reason", [
    ("", "not valid JSON"),
    ("{\"cells\": [", "not valid JSON"),
    (json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": []}), "nbformat: 3"),
    (json.dumps([1, 2]), "nbformat 4"),
    (json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": "nope", "metadata": {}}), "does not follow"),
])
def test_load_notebook_gives_a_reason(tmp_path, content, reason):
    with pytest.raises(ValueError, match=reason):
        load_notebook(_touch(tmp_path / "x.ipynb", content))


def test_load_notebook_refuses_a_huge_file_before_reading_it(tmp_path):
    path = tmp_path / "huge.ipynb"
    with open(path, "wb") as f:
        f.truncate(MAX_NOTEBOOK_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ValueError, match="MB limit"):
        load_notebook(path)


def test_load_notebook_accepts_a_valid_notebook(tmp_path):
    path = tmp_path / "ok.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    assert load_notebook(path).cells[0].source == "1 + 1"


def test_hide_hidden_tests_keeps_visible_code_and_drops_the_region():
    cell = nbformat.v4.new_code_cell("check(a)\n### BEGIN HIDDEN TESTS\nsecret(b)\n### END HIDDEN TESTS\ndone()")
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert "secret" not in cell.source
    assert cell.source.startswith("check(a)\n# (hidden tests") and cell.source.endswith("done()")


def test_hide_hidden_tests_fails_closed_without_an_end_marker():
    cell = nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\nsecret(b)")
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert "secret" not in cell.source


def test_grades_csv_sums_notebooks_and_keeps_the_worst_status():
    results = [NotebookResult("ann", "a1", "n1", "ok", 2, 4), NotebookResult("ann", "a1", "n2", "timeout", 1.5, 4,
                                                                             reason="slow"),
               NotebookResult("ben", "a1", "n1", "missing", 0, 4, reason="n1.ipynb not found", late=True)]
    lines = grades_csv(results).splitlines()
    assert lines[0] == "student_id,assignment,score,max_score,status,reason,written_points,to_grade_by_hand,late"
    assert lines[1] == "ann,a1,3.5,8,timeout,n2: slow,0,0,"
    assert lines[2] == "ben,a1,0,4,missing,n1.ipynb not found,0,0,yes"  # the LMS's flag, reported only


def test_a_status_is_written_as_its_value_and_read_back_as_a_status():
    """A Status is a str: "timeout" in grades.csv, results.json and any f-string, and a status read
    back from JSON (the cache) is a Status again, equal to its value in sets and counts."""
    failed = NotebookResult.failed("ann", "a1", "n1", Status.MISSING, 4.0, "n1.ipynb not found")
    assert (failed.score, failed.max_score, failed.reason) == (0.0, 4.0, "n1.ipynb not found")
    data = json.loads(json.dumps(failed.to_json()))
    assert data["status"] == "missing" and f"{failed.status}|{failed.status:>8}" == "missing| missing"
    back = NotebookResult.from_json(data)
    assert back.status is Status.MISSING and back == failed
    assert {Status.MISSING, Status.INVALID} - {"missing", "invalid"} == set()
    assert NotebookResult("ann", "a1", "n1", "timeout", 1.0, 4.0).status is Status.TIMEOUT
    with pytest.raises(ValueError):
        NotebookResult("ann", "a1", "n1", "graded", 1.0, 4.0)  # not a status


def _link(path, target):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def test_symbolic_links_are_refused_and_never_followed(tmp_path):
    """Links to the instructor's notebook, a classmate's, a whole folder: each is refused with a
    reason, whatever it points at (even nothing), and the row is still there."""
    root, outside = tmp_path / "class", _touch(tmp_path / "solutions" / "qkv.ipynb")
    ben = _touch(root / "ben" / "03-qkv" / "qkv.ipynb")
    _link(root / "ann" / "03-qkv" / "qkv.ipynb", outside)
    _link(root / "cy" / "03-qkv" / "qkv.ipynb", ben)
    _link(root / "dee" / "03-qkv", tmp_path / "solutions")
    _link(root / "eve", root / "ben")
    _link(root / "fay" / "03-qkv" / "qkv-Copy1.ipynb", tmp_path / "nowhere.ipynb")
    found = {s.student_id: s for s in discover(root, ["03-qkv"], NOTEBOOKS)}
    assert set(found) == {"ann", "ben", "cy", "dee", "eve", "fay"}
    assert found["ben"].refused == ""
    reasons = {name: found[name].refused for name in ("ann", "cy", "dee", "eve", "fay")}
    assert "ann/03-qkv/qkv.ipynb is a symbolic link to a file outside" in reasons["ann"]
    assert "cy/03-qkv/qkv.ipynb is a symbolic link to another file in the submissions" in reasons["cy"]
    assert reasons["dee"].startswith("dee/03-qkv is a symbolic link to a file outside")
    assert reasons["eve"].startswith("eve is a symbolic link to another file")
    assert reasons["fay"].startswith("fay/03-qkv/qkv-Copy1.ipynb is a symbolic link")


def test_find_root_does_not_enter_a_linked_wrapper(tmp_path):
    _touch(tmp_path / "elsewhere" / "ann" / "03-qkv" / "qkv.ipynb")
    _link(tmp_path / "class" / "submitted", tmp_path / "elsewhere")
    assert find_root(tmp_path / "class", list(NOTEBOOKS)) == tmp_path / "class"


def test_load_notebook_does_not_follow_a_link(tmp_path):
    target = tmp_path / "ok.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), target)
    with pytest.raises(OSError):
        load_notebook(_link(tmp_path / "link.ipynb", target))


def test_unpack_zip_makes_links_as_unzip_does_but_never_through_one(tmp_path):
    """A zip's links become links (then refused by discover), made after every file, and never
    inside a linked folder, which would write outside the unpacked folder."""
    def link(name, target):
        info = zipfile.ZipInfo(name)
        info.external_attr = (0o120777 << 16)  # S_IFLNK | 0777, as zip -y stores it
        return info, target
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(*link("ann/03-qkv/qkv.ipynb", "/etc/passwd"))
        z.writestr(*link("ben", str(tmp_path / "elsewhere")))
        z.writestr(*link("ben/03-qkv/qkv.ipynb", "/etc/passwd"))
        z.writestr("cy/03-qkv/qkv.ipynb", "{}")
    (tmp_path / "elsewhere").mkdir()
    out = unpack_zip(archive, tmp_path / "out")
    assert (out / "ann" / "03-qkv" / "qkv.ipynb").is_symlink() and (out / "ben").is_symlink()
    assert list((tmp_path / "elsewhere").iterdir()) == []  # nothing written through the link
    found = {s.student_id: s.refused for s in discover(out, ["03-qkv"], NOTEBOOKS)}
    assert "outside" in found["ann"] and "outside" in found["ben"] and found["cy"] == ""


def test_a_failed_worker_records_the_max_score_as_every_failure_does(tmp_path, monkeypatch):
    """Workers that cannot start (here: no source notebooks) fail their groups with status
    error; the rows keep the notebook's max score, so the grade sheet still sums correctly."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # as the CLI does
    course = Course(tmp_path / "course", GradingOptions(SOLUTIONS_DIR, sandbox=False))
    course.generate("03-qkv")
    groups = [[Submission(student, "03-qkv", "qkv", None)] for student in ("ann", "ben")]
    rows = [result for graded in grade_all(groups, course, 2, GradingOptions(tmp_path / "nowhere", sandbox=False))
            for result, _ in graded]
    assert sorted(r.student_id for r in rows) == ["ann", "ben"]
    assert {(r.status, r.max_score) for r in rows} == {("error", course.max_score("03-qkv", "qkv"))}
    assert course.max_score("03-qkv", "qkv") > 0 and all("grading worker failed" in r.reason for r in rows)


def test_nbgrader_ids_are_plain_distinct_and_leave_plain_names_alone():
    names = ["ann", "Ann.Lee_2", "[ab]", "a", "b", "*", "ann ", "ann lee", "-rf", "_x", "été"]
    ids = [nbgrader_id(name) for name in names]
    assert len(set(ids)) == len(names)
    assert ids[:2] == ["ann", "Ann.Lee_2"] and ids[3:5] == ["a", "b"]
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", i) for i in ids)


def test_grade_ids_that_are_not_strings_are_dropped_and_named():
    cells = [nbformat.v4.new_code_cell("def f(): pass", metadata={"nbgrader": {"grade_id": grade_id, "solution": True}})
             for grade_id in ("f", 5, ["f"], None)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notes = drop_broken_grade_ids(notebook)
    assert [c.metadata.get("nbgrader", {}).get("grade_id", "gone") for c in notebook.cells] == ["f", "gone", "gone", "gone"]
    assert notes[0] == "cell 2: its nbgrader grade_id is 5 (of type int, not a string), so its metadata was ignored"
    assert len(notes) == 3 and "null (of type NoneType" in notes[2]


def test_an_nbgrader_failure_is_reported_by_its_error_not_its_closing_words():
    log = ("[ERROR] There was an error processing assignment\nTraceback (most recent call last):\n"
           '  File "x.py", line 1\nTypeError: unhashable type: \'list\'\n\n'
           "[ERROR] Please see the the above traceback for details on the specific errors on the above failures.\n")
    assert _nbgrader_error(log) == "TypeError: unhashable type: 'list'"
    assert _nbgrader_error("[ERROR] something odd\n") == "[ERROR] something odd"
    # the API's "error" is the traceback of nbgrader's own NbGraderException, after the log
    raised = ("Traceback (most recent call last):\n  File \"utils.py\", line 542\nnbgrader.converters.base."
              "NbGraderException: Please see the the above traceback for details\n")
    assert _nbgrader_error(log + raised) == "TypeError: unhashable type: 'list'"


def test_the_package_map_lists_every_module():
    import autograder
    listed = set(re.findall(r"^- ``([\w.]+)``", autograder.__doc__, re.M))
    modules = {info.name.removeprefix("autograder.") for info in pkgutil.walk_packages(autograder.__path__, "autograder.")
               if not info.ispkg or info.name == "autograder.service"}  # a wing is its modules; the service is one
    modules = {m for m in modules if not m.startswith("service.")}
    assert listed == modules, f"autograder/__init__.py: add {modules - listed}, remove {listed - modules}"


def test_collect_offers_the_naming_of_every_lms_it_knows():
    """The command line names the LMSs without importing lms (which loads nbformat): the same list."""
    from autograder import cli
    from autograder.instructor import lms
    assert set(cli.LMS_NAMING) == set(lms.PATTERNS)
    assert cli.EXPORT_FORMATS == tuple(lms.LMSS)


def test_grading_warns_where_linux_cannot_confine_a_kernels_writes(monkeypatch):
    """Without Landlock a kernel can write to its scratch folder all along (README): said once,
    before grading, unless the instructor asked for no sandbox."""
    from autograder import cli
    from autograder.sandbox import forkserver

    monkeypatch.setattr(forkserver, "landlock_version", lambda: 0)
    (hint,) = cli.sandbox_hints(sandbox=True)
    assert "no Landlock" in hint and "scratch folder" in hint
    assert cli.sandbox_hints(sandbox=False) == []
    monkeypatch.setattr(forkserver, "landlock_version", lambda: 3)
    assert cli.sandbox_hints(sandbox=True) == []


def test_grading_warns_where_no_memory_group_can_hold_a_kernels_processes_together(monkeypatch):
    """Without a memory control group --memory limits each process, not all of a kernel's
    together (README): said before grading here, not for a cluster's workers (memory 0 here)."""
    from autograder import cli
    from autograder.sandbox import cgroups, forkserver

    monkeypatch.setattr(forkserver, "landlock_version", lambda: 3)
    monkeypatch.setattr(cgroups, "memory_groups_available", lambda: False)
    (hint,) = cli.sandbox_hints(sandbox=True, memory_mib=4096)
    assert "no memory control group" in hint and "--memory 4096 limits each process" in hint
    assert cli.sandbox_hints(sandbox=True, memory_mib=0) == cli.sandbox_hints(sandbox=False, memory_mib=4096) == []
    monkeypatch.setattr(cgroups, "memory_groups_available", lambda: True)
    assert cli.sandbox_hints(sandbox=True, memory_mib=4096) == []


def test_a_memory_group_is_found_as_the_sandbox_makes_one():
    """The probe behind that warning makes a group as a sandbox does, and leaves none behind."""
    from autograder.sandbox import cgroups

    hierarchy = cgroups._hierarchy()
    before = sorted(p.name for p in hierarchy.own_group.iterdir()) if hierarchy else []
    made = cgroups.MemoryGroup.create(2**30)
    if made is not None:
        made.remove()
    assert cgroups.memory_groups_available() == (made is not None)
    assert (sorted(p.name for p in hierarchy.own_group.iterdir()) if hierarchy else []) == before


def test_a_student_folder_name_that_is_not_utf8_is_reported_as_it_is_on_disk(tmp_path):
    name = b"ann\xff".decode("utf-8", "surrogateescape")  # as os.listdir gives it
    writer = ResultsWriter(tmp_path / "out")
    writer.add(NotebookResult(name, "a1", "n1", "invalid", 0, 4, reason=f"{name}/a1/n1.ipynb is a symbolic link"), None)
    writer.finish()
    assert b"ann\xff,a1,0,4,invalid," in (tmp_path / "out" / "grades.csv").read_bytes()
    assert json.loads((tmp_path / "out" / "results.json").read_text())[0]["student_id"] == name
    # the student's folder, beside the course's MathJax that the pages load
    assert [f for f in os.listdir(tmp_path / "out" / "feedback") if f != MATH_FOLDER] == [name]


def test_a_test_that_cannot_be_graded_says_why_with_the_errors_type():
    """The verdict's message on a test cell whose own code fails (here a name the course's test code
    does not define) keeps the error's type; a check's report stands alone (test_check_machinery)."""
    import nbformat
    from nbformat.v4 import new_code_cell

    from autograder.grading.judge import JudgeTests
    from autograder.results import CellVerdict

    cell = new_code_cell("raise NameError(\"name 'softmax' is not defined\")", metadata={"nbgrader": {
        "grade": True, "solution": False, "grade_id": "t", "points": 1}})
    nb = nbformat.v4.new_notebook(cells=[cell])
    JudgeTests().preprocess(nb, {})
    verdict = CellVerdict.of(nb.cells[0])
    assert (verdict.score, verdict.message) == (0, "NameError: this test could not be graded: name 'softmax' is not "
                                                   "defined")


class _UnflaggedName(zipfile.ZipInfo):
    """A member whose name is written as raw bytes without the UTF-8 flag, as Info-ZIP's zip
    and many archivers write it (Python's zipfile sets the flag for any name not ASCII)."""

    def _encodeFilenameFlags(self):
        return self.filename.encode("utf-8"), self.flag_bits & ~0x800


def _zip_both_ways(path: Path, names: list[str], data: bytes) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for number, name in enumerate(names):
            info = (zipfile.ZipInfo if number % 2 else _UnflaggedName)(name)
            archive.writestr(info, data)


def test_zip_names_are_read_as_unzip_reads_them_with_or_without_the_utf8_flag(tmp_path):
    names = ["müllerjosé/03-qkv/qkv.ipynb", "çağrı/03-qkv/qkv.ipynb", "ann/03-qkv/qkv.ipynb"]
    _zip_both_ways(tmp_path / "class.zip", names, b"{}")
    with zipfile.ZipFile(tmp_path / "class.zip") as archive:  # Python alone: cp437 for the unflagged one
        assert archive.infolist()[0].filename == "m├╝llerjos├⌐/03-qkv/qkv.ipynb"
        assert [member_name(m) for m in archive.infolist()] == names
    unpack_zip(tmp_path / "class.zip", tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(["müllerjosé", "çağrı", "ann"])


def test_a_cp437_name_that_is_not_utf8_stays_cp437(tmp_path):
    with zipfile.ZipFile(tmp_path / "old.zip", "w") as archive:
        info = _UnflaggedName("x")
        info._encodeFilenameFlags = lambda: (b"caf\x82/03-qkv/qkv.ipynb", 0)  # 'café' in cp437, an old DOS zip
        archive.writestr(info, b"{}")
    with zipfile.ZipFile(tmp_path / "old.zip") as archive:
        assert member_name(archive.infolist()[0]) == "café/03-qkv/qkv.ipynb"


@pytest.mark.skipif(shutil.which("zip") is None, reason="Info-ZIP's zip is not installed")
def test_a_zip_made_by_info_zip_keeps_accented_names(tmp_path):
    (tmp_path / "class" / "müllerjosé" / "03-qkv").mkdir(parents=True)
    (tmp_path / "class" / "müllerjosé" / "03-qkv" / "qkv.ipynb").write_text("{}")
    subprocess.run(["zip", "-qr", str(tmp_path / "class.zip"), "müllerjosé"], cwd=tmp_path / "class", check=True,
                   env=dict(os.environ, LC_ALL="C.UTF-8"))
    unpack_zip(tmp_path / "class.zip", tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["müllerjosé"]


def test_a_zip_with_a_damaged_member_is_an_unreadable_zip(tmp_path):
    with zipfile.ZipFile(tmp_path / "class.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ann/03-qkv/qkv.ipynb", random.Random(0).randbytes(5000))  # does not compress
    data = bytearray((tmp_path / "class.zip").read_bytes())
    data[60:80] = b"\xff" * 20  # inside the compressed data (after the 30-byte header and the name)
    (tmp_path / "class.zip").write_bytes(bytes(data))
    with zipfile.ZipFile(tmp_path / "class.zip") as archive:  # the zip's directory is intact
        assert [m.filename for m in archive.infolist()] == ["ann/03-qkv/qkv.ipynb"]
    with pytest.raises(SubmissionsError, match="cannot read .*class.zip: (BadZipFile|error)"):
        unpack_zip(tmp_path / "class.zip", tmp_path / "out")


FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(1,1)", "\tstart", "\rstart", "'quoted"]


@pytest.mark.parametrize("cell", FORMULAS)
def test_a_cell_that_starts_like_a_formula_is_text_in_a_spreadsheet_and_reads_back(cell):
    safe = spreadsheet_cell(cell)
    assert safe.startswith("'") and read_cell(safe) == cell


@pytest.mark.parametrize("cell", ["12.5", "-1", "0", "-", "ann", "Müller, José", ""])
def test_numbers_and_plain_text_are_left_alone(cell):
    assert spreadsheet_cell(cell) == cell and read_cell(cell) == cell


def test_grades_csv_neutralises_a_hostile_id_and_reason():
    rows = [NotebookResult("=1+1", "a1", "n1", "invalid", 0, 4, reason="@SUM(A1:A9)")]
    (row,) = list(csv.DictReader(io.StringIO(grades_csv(rows))))
    assert row["student_id"] == "'=1+1" and row["reason"] == "'@SUM(A1:A9)" and row["max_score"] == "4"
