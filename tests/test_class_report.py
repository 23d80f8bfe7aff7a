"""The class's mistakes (`python -m autograder report RESULTS`), on a class built from the test
corpus, where each student's mistake is known: the corpus file's ``# hint:`` line is a part
of the hint its mistake gets. Several students share a mistake, so that the ranking is known
too: three forget the 1/sqrt(d_k) scaling, two invert the boolean mask, one swaps the outputs
of project_qkv, one crashes on a missing mask; the reference, the untouched stub and a student
who uploaded nothing complete the class."""
from __future__ import annotations

import csv
import html
import io
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autograder.instructor.class_report import class_reports, read_results
from classroom import grade, load_corpus, make_submission

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENT = "03-qkv"
SDPA, PROJECT = "scaled_dot_product_attention", "project_qkv"
CLASS = {"sdpa_no_scale": 3, "sdpa_mask_inverted": 2, "project_outputs_swapped": 1, "crash_sdpa_none_mask": 1}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class-report")
    corpus = {e.name: e for e in load_corpus(ASSIGNMENT, cli=True)}
    known = {}  # student -> the corpus's hint of their mistake
    for name, copies in CLASS.items():
        for n in range(copies):
            student = f"{name}-{n}"
            make_submission(tmp / "class", student, ASSIGNMENT, corpus[name].cells, added=corpus[name].added)
            known[student] = corpus[name].hint
    make_submission(tmp / "class", "reference", ASSIGNMENT)
    make_submission(tmp / "class", "stub", ASSIGNMENT, answer_all=False)
    (tmp / "class" / "absent" / ASSIGNMENT).mkdir(parents=True)
    run = grade(tmp / "class", tmp / "RESULTS", "--jobs", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    report = subprocess.run([sys.executable, "-m", "autograder", "report", tmp / "RESULTS"], capture_output=True,
                            text=True)
    assert report.returncode == 0, report.stderr
    (report,) = class_reports(read_results(tmp / "RESULTS"))
    return tmp / "RESULTS", report, known


def test_the_top_mistake_of_each_graded_name_is_the_one_most_students_made(graded):
    _, report, _ = graded
    top = report.top_mistakes()
    assert "is the 1/sqrt(d_k) scaling missing?" in top[SDPA].what and len(top[SDPA].students) == 3
    assert "return (q, k, v) in this order" in top[PROJECT].what and len(top[PROJECT].students) == 1
    sdpa = [f for f in report.ranked(report.mistakes) if f.name == SDPA]
    counts = [len(f.students) for f in sdpa]
    assert counts == sorted(counts, reverse=True)  # ranked by how many students made it
    inverted = next(f for f in sdpa if "boolean mask is inverted" in f.what)
    assert len(inverted.students) == 2 and inverted.example.startswith("query (")  # one case's shapes
    assert "attn_mask bool" in inverted.example


def test_every_students_known_mistake_is_found_and_counted_once(graded):
    _, report, known = graded
    for student, hint in known.items():
        theirs = [f.what for f in report.mistakes.values() if student in f.students]
        assert any(hint in what for what in theirs), (student, theirs)
    assert not [f for f in report.mistakes.values() if {"reference", "stub"} & f.students]


def test_failure_rates_crashes_and_statuses(graded):
    _, report, _ = graded
    assert report.graded == 9 and report.statuses == {"ok": 9, "missing": 1}
    rates = {name.name: (len(name.failed), len(name.not_implemented)) for name, _ in report.failure_rates()}
    # every buggy sdpa, the crash and the stub; the swapped outputs and the stub
    assert rates == {SDPA: (7, 1), PROJECT: (2, 1)}
    (crash,) = report.ranked(report.crashes)
    assert (crash.name, crash.what, crash.students) == (SDPA, "AttributeError", {"crash_sdpa_none_mask-0"})


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.fetched, self.scripts = [], [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.scripts += tag == "script"
        if tag == "img":
            self.images.append(attrs)
        self.fetched += [v for k, v in attrs.items() if k in ("src", "href") and v and not v.startswith(("data:", "#"))]


def test_the_page_opens_offline_with_alt_text_and_the_csv_has_the_same_numbers(graded):
    results, report, _ = graded
    page = _Page()
    page.feed((results / "class-report.html").read_text(encoding="utf-8"))
    assert len(page.images) == 2 and page.fetched == [] and page.scripts == 0
    for image in page.images:
        assert image["src"].startswith("data:image/png;base64,") and len(image["alt"]) > 40
    assert "9 graded students" in page.images[0]["alt"] and f"{SDPA} 78%" in page.images[1]["alt"]
    rows = list(csv.DictReader(io.StringIO((results / f"class-report-{ASSIGNMENT}.csv").read_text(encoding="utf-8-sig"))))
    mistakes = [(r["graded_name"], r["what"], int(r["students"])) for r in rows if r["section"] == "mistake"]
    assert mistakes == [(f.name, f.what, len(f.students)) for f in report.ranked(report.mistakes)]
    assert sum(int(r["students"]) for r in rows if r["section"] == "score") == 9
    assert {r["what"]: r["students"] for r in rows if r["section"] == "status"} == {"ok": "9", "missing": "1"}


def test_a_folder_without_results_is_one_line_and_exit_2(tmp_path: Path):
    run = subprocess.run([sys.executable, "-m", "autograder", "report", tmp_path], capture_output=True, text=True)
    assert run.returncode == 2 and "no results.json" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_the_service_shows_the_same_report_from_its_database(tmp_path):
    """A class graded by the submission service: /instructor/report/<assignment> ranks the
    mistakes of each student's best submission, for the instructor only."""
    from classroom.service import ASSIGNMENT as SERVED, Server, client, course_source, issue_tokens, notebook_text, wait_done

    corpus = {e.name: e for e in load_corpus(SERVED)}
    mistakes = {"ann": "attention_no_scale", "bo": "attention_no_scale", "cy": "attention_swapped", "dee": None}
    data = tmp_path / "data"
    tokens = issue_tokens(data, list(mistakes))
    server = Server(data, course_source(tmp_path)).start()
    try:
        for student, mistake in mistakes.items():
            with client(server, tokens[student]) as http:
                code = corpus[mistake].cells if mistake else None
                reply = http.post("/api/submissions", json={"notebook": notebook_text(tmp_path, student, code)})
                assert reply.status_code in (200, 202), reply.text
                wait_done(http, reply.json()["id"])
        with client(server, tokens["ann"]) as http:
            assert http.get(f"/instructor/report/{SERVED}").status_code == 403
        with client(server, tokens["prof"]) as http:
            class_page = http.get(f"/instructor?assignment={SERVED}").text
            reply = http.get(f"/instructor/report/{SERVED}")  # what the class page links to
            latest = http.get(f"/instructor/report/{SERVED}?which=latest")
    finally:
        server.stop()
    assert f'href="/instructor/report/{SERVED}"' in class_page
    assert f'href="/instructor/report/{SERVED}?which=latest"' in class_page
    assert reply.status_code == latest.status_code == 200 and "img-src data:" in reply.headers["content-security-policy"]
    page = _Page()
    page.feed(reply.text)
    assert len(page.images) == 2 and page.fetched == [] and page.scripts == 0
    rows = re.findall(r'<td class="n">(\d+) \(\d+ %\)</td><td><code>(\w+)</code></td>\s*<td>(.*?)<', reply.text, re.S)
    top = rows[0]
    assert top[0] == "2" and corpus["attention_no_scale"].hint in html.unescape(top[2]), rows
    assert any(n == "1" and corpus["attention_swapped"].hint in html.unescape(what) for n, _, what in rows), rows


def test_each_score_is_a_share_of_the_students_own_maximum():
    """The distribution puts each student over their own maximum (lms.course_score): 8 of 8 with a
    written answer pending is 100 %, 8 with the answer left as released (nbgrader's 0) 80 %,
    whichever student comes first."""
    from autograder.instructor.class_report import score_counts

    def notebook(student, score, pending, written=2.0):
        return {"student_id": student, "assignment": ASSIGNMENT, "notebook": "qkv", "status": "ok", "score": score,
                "max_score": 8.0, "written_points": written, "to_grade_by_hand": pending,
                "tests": [{"grade_id": "written", "manual": True, "passed": True, "message": "",
                           "points": None if pending else 0.0, "max_points": written}]}

    (report,) = class_reports([notebook("a-released", 8.0, 0.0), notebook("b-pending", 8.0, 2.0),
                               notebook("c-half", 4.0, 2.0)])
    bins = {(low, high): n for low, high, n in score_counts(report)}
    assert bins[(90, 100)] == 1 and bins[(80, 90)] == 1 and bins[(50, 60)] == 1 and sum(bins.values()) == 3
    assert report.scores["b-pending"].whole == report.scores["a-released"].maximum == 10


def test_no_output_replaces_what_it_reads(tmp_path: Path):
    """--out (or the CSV named after it) that is results.json or grades.csv (by a link too) or inside
    feedback/: refused, one line, exit 2, nothing written, the record as it was."""
    results = tmp_path / "RESULTS"
    (results / "feedback").mkdir(parents=True)
    (results / "results.json").write_text(
        '[{"student_id": "a", "assignment": "03-qkv", "notebook": "qkv", "status": "missing", "score": 0, "max_score": 8}]')
    (results / "grades.csv").write_text("student_id\n")
    (tmp_path / "link.html").symlink_to(results / "grades.csv")
    (tmp_path / f"week3-{ASSIGNMENT}.csv").symlink_to(results / "results.json")  # where --out week3.html puts its CSV
    before = {p: p.read_bytes() for p in (results / "results.json", results / "grades.csv")}
    for out in (results / "results.json", tmp_path / "link.html", results / "feedback" / "report.html",
                tmp_path / "week3.html"):
        run = subprocess.run([sys.executable, "-m", "autograder", "report", results, "--out", out], capture_output=True,
                             text=True)
        assert run.returncode == 2 and "would overwrite" in run.stderr and len(run.stderr.strip().splitlines()) == 1, out
        assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "week3.html").exists() and not (results / "feedback" / "report.html").exists()
