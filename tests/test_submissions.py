"""Unit tests: finding, unpacking and validating submissions; the results files."""
from __future__ import annotations

import json
import zipfile

import nbformat
import pytest

from autograder.preprocessors import HideHiddenTests
from autograder.report import grades_csv
from autograder.scoring import NotebookResult
from autograder.submissions import (MAX_NOTEBOOK_BYTES, SubmissionsError, discover, find_root, load_notebook,
                                    unpack_zip)

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
               NotebookResult("ben", "a1", "n1", "missing", 0, 4, reason="n1.ipynb not found")]
    lines = grades_csv(results).splitlines()
    assert lines[0] == "student_id,assignment,score,max_score,status,reason"
    assert lines[1] == "ann,a1,3.5,8,timeout,n2: slow"
    assert lines[2] == "ben,a1,0,4,missing,n1.ipynb not found"
