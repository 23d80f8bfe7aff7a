"""The submission service, started as an instructor starts it: tokens, the API, policies,
limits, the instructor's pages and exports, and who may read what (every route)."""
from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import httpx
import pytest
import yaml

from autograder.report import FORMULA_STARTS
from autograder.service.db import Database
from classroom import REPO, notebook_name, secret_lines
from classroom.service import ASSIGNMENT, Server, client, course_source, issue_tokens, notebook_text, wait_done

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

STUDENTS = ["ann", "bob", "carl", "dora", "eve"]
CLOSED, SCORE_ONLY = "01-closed", "01-score-only"  # copies of assignment 01 under other policies
ATTEMPTS = 3


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    source = course_source(root, copies=(CLOSED, SCORE_ONLY))
    data = root / "data"
    tokens = issue_tokens(data, STUDENTS)
    policies = root / "policies.yml"
    now = datetime.now(timezone.utc)
    policies.write_text(yaml.safe_dump({"assignments": {
        ASSIGNMENT: {"attempts_per_day": ATTEMPTS},
        CLOSED: {"deadline": (now - timedelta(days=1)).isoformat(), "late": "refuse"},
        SCORE_ONLY: {"deadline": (now + timedelta(days=7)).isoformat(), "before_deadline": "score"},
    }}))
    course = root / "course"  # an instructor's nbgrader course, which formgrader reads
    course.mkdir()
    server = Server(data, source, "--policies", str(policies), "--gradebook", str(course / "gradebook.db")).start()
    yield SimpleNamespace(server=server, tokens=tokens, root=root, data=data, course=course)
    server.stop()


@pytest.fixture(scope="module")
def graded(service):
    """ann's correct notebook, graded; bob's, graded."""
    ids = {}
    for student in ("ann", "bob"):
        with client(service.server, service.tokens[student]) as http:
            reply = http.post("/api/submissions", json={"notebook": notebook_text(service.root, student),
                                                        "filename": "self_attention.ipynb"})
            assert reply.status_code == 202, reply.text
            ids[student] = reply.json()["id"]
    with client(service.server, service.tokens["ann"]) as http:
        return {student: wait_done(http, i) if student == "ann" else i for student, i in ids.items()}


def login(service, who: str) -> httpx.Client:
    """A browser-like client: logged in with the token on the form, holding the session cookie."""
    http = client(service.server)
    reply = http.post("/login", data={"token": service.tokens[who]})
    assert reply.status_code == 303, reply.text
    return http


def csrf_of(http: httpx.Client, path: str = "/me") -> str:
    return re.search(r'name="csrf" value="([^"]+)"', http.get(path).text).group(1)


# --------------------------------------------------------------------------


def test_tokens_are_stored_hashed_and_kept(service):
    stored = sqlite3.connect(service.data / "service.db").execute("select token_hash from people").fetchall()
    hashes = {row[0] for row in stored}
    assert len(hashes) == len(STUDENTS) + 1
    assert not set(service.tokens.values()) & hashes  # no token in the clear
    # issuing again for the same roster gives no one a new token: the old ones still work
    again = issue_tokens(service.data, STUDENTS)
    assert again == {}
    with client(service.server, service.tokens["dora"]) as http:
        assert http.get("/api/submissions").status_code == 200
    with client(service.server, "not-a-token") as http:
        assert http.get("/api/submissions").status_code == 401


def test_a_notebook_is_graded_with_its_feedback_page(service, graded):
    ann = graded["ann"]
    # ann left the written answer as released: nbgrader's 0 of its 2 points counts (nothing awaits a person)
    assert (ann["state"], ann["status"], ann["score"], ann["max_score"]) == ("done", "ok", 8, 10)
    assert ann["written_pending"] == 0
    assert ann["assignment"] == ASSIGNMENT  # found from the notebook's cells
    assert {t["grade_id"] for t in ann["tests"]} >= {"test_attention_scores", "test_simple_self_attention_hidden"}
    with client(service.server, service.tokens["ann"]) as http:
        page = http.get(ann["feedback_url"])
        assert page.status_code == 200 and "sandbox" in page.headers["content-security-policy"]
        assert "test_attention_scores" in page.text
        assert "(Score: 8 / 10)" in page.text  # the feedback page's score is the API's
        leaked = [line for line in secret_lines(ASSIGNMENT) if line in page.text]
        assert not leaked, leaked  # hidden tests and reference solutions never reach the student
        listed = http.get("/api/submissions").json()
        assert [s["id"] for s in listed] == [ann["id"]]


def test_a_failing_notebook_gets_partial_credit(service):
    wrong = {"attention_scores": "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1)\n"}
    with client(service.server, service.tokens["dora"]) as http:
        reply = http.post("/api/submissions", json={"notebook": notebook_text(service.root, "dora", wrong),
                                                    "filename": "self_attention.ipynb"})
        view = wait_done(http, reply.json()["id"])
    assert view["status"] == "ok" and 0 < view["score"] < view["max_score"]
    assert any(t["passed"] is False for t in view["tests"])


def test_a_hostile_notebook_gets_a_status_and_a_reason(service):
    killer = {"attention_scores": "import os\nos._exit(1)\n"}
    with client(service.server, service.tokens["carl"]) as http:
        reply = http.post("/api/submissions", json={"notebook": notebook_text(service.root, "carl", killer),
                                                    "filename": "self_attention.ipynb"})
        view = wait_done(http, reply.json()["id"])
        assert view["status"] == "error" and view["score"] == 0 and "kernel" in view["reason"].lower()
        # the service goes on grading everyone else
        assert http.get("/health").json()["ok"]


# -- every route: who may read what -------------------------------------------------

def _routes():
    """The app's routes, from the app itself (as its OpenAPI schema lists every router's): a route
    added later without a case below fails."""
    from autograder.service.app import Limits, create_app

    paths = create_app(SimpleNamespace(limits=Limits())).openapi()["paths"]
    return {(method.upper(), path) for path, operations in paths.items() for method in operations}


def test_every_route_is_covered_by_the_isolation_test():
    assert _routes() == set(ISOLATION) | PUBLIC


PUBLIC = {("GET", "/health"), ("GET", "/"), ("POST", "/login")}
# (method, path) -> how a request by another student (or an unauthenticated one) must be refused
ISOLATION = {
    ("GET", "/me"): "own",
    ("POST", "/logout"): "csrf",
    ("POST", "/upload"): "csrf",
    ("GET", "/submissions/{submission_id}"): "other",
    ("GET", "/submissions/{submission_id}/feedback"): "other",
    ("POST", "/api/submissions"): "bearer",
    ("GET", "/api/submissions"): "own",
    ("GET", "/api/submissions/{submission_id}"): "other",
    ("GET", "/instructor"): "instructor",
    ("GET", "/instructor/students/{student_id}"): "instructor",
    ("GET", "/instructor/export/{assignment}"): "instructor",
    ("GET", "/instructor/export/{assignment}/feedback"): "instructor",
    ("GET", "/instructor/report/{assignment}"): "instructor",
}


def test_students_read_only_their_own_submissions(service, graded):
    ann_id = graded["ann"]["id"]
    paths = {"submission_id": ann_id, "student_id": "ann", "assignment": ASSIGNMENT}
    bob_api = client(service.server, service.tokens["bob"])
    bob_web = login(service, "bob")
    nobody = client(service.server)
    for (method, path), rule in ISOLATION.items():
        url = path.format(**paths)
        if rule == "other":  # ann's submission: bob gets what a missing one gives, 404
            for http in (bob_api, bob_web):
                assert http.request(method, url).status_code == 404, (http, url)
            assert nobody.request(method, url).status_code in (303, 401), url
        elif rule == "own":  # bob's list holds bob's submissions only
            for http in (bob_api, bob_web):
                reply = http.request(method, url)
                assert reply.status_code == 200 and f"/submissions/{ann_id}\"" not in reply.text, url
            assert nobody.request(method, url).status_code in (303, 401), url
        elif rule == "instructor":
            for http in (bob_api, bob_web):
                assert http.request(method, url).status_code == 403, url
            assert nobody.request(method, url).status_code in (303, 401), url
        elif rule == "csrf":  # a form posted with the cookie but without the session's CSRF token
            files = {"file": ("self_attention.ipynb", notebook_text(service.root, "bob"), "application/json")}
            assert bob_web.request(method, url, data={"csrf": "forged"}, files=files).status_code == 403, url
            assert nobody.request(method, url, data={"csrf": ""}, files=files).status_code == 403, url
        elif rule == "bearer":  # the JSON API takes the bearer token only, never the cookie
            body = {"notebook": notebook_text(service.root, "bob"), "filename": "x.ipynb"}
            assert bob_web.request(method, url, json=body).status_code == 401, url
    # and the instructor reads everyone's
    with client(service.server, service.tokens["prof"]) as prof:
        assert prof.get(f"/api/submissions/{ann_id}").json()["student_id"] == "ann"
        assert prof.get(f"/submissions/{ann_id}/feedback").status_code == 200
        assert "ann" in prof.get("/instructor/students/ann").text


def test_the_web_form_needs_its_csrf_token(service):
    http = login(service, "dora")
    files = {"file": ("self_attention.ipynb", notebook_text(service.root, "dora"), "application/json")}
    assert http.post("/upload", data={"csrf": "forged"}, files=files).status_code == 403
    reply = http.post("/upload", data={"csrf": csrf_of(http)}, files=files)
    assert reply.status_code == 303 and reply.headers["location"].startswith("/submissions/")


def test_upload_limits(service):
    with client(service.server, service.tokens["dora"]) as http:
        huge = {"notebook": "x" * (11 * 1024**2), "filename": "self_attention.ipynb"}
        assert http.post("/api/submissions", json=huge).status_code == 413
        text = notebook_text(service.root, "dora")
        reply = http.post("/api/submissions", json={"notebook": text, "filename": "notes.py"})
        assert reply.status_code == 415 and "notebook" in reply.json()["detail"]
        reply = http.post("/api/submissions", json={"notebook": "{not json", "filename": "self_attention.ipynb"})
        assert reply.status_code == 415 and "JSON" in reply.json()["detail"]
        chunked = http.post("/api/submissions", content=iter([json.dumps({"notebook": text}).encode()]))
        assert chunked.status_code == 411
        other = json.loads(text)
        other["cells"] = [c for c in other["cells"] if "nbgrader" not in c.get("metadata", {})]
        reply = http.post("/api/submissions", json={"notebook": other, "filename": "mine.ipynb"})
        assert reply.status_code == 400 and "none of the course's cells" in reply.json()["detail"]


def test_rate_limit_per_token(tmp_path):
    """Unit: the limiter the service applies to each token."""
    from fastapi import HTTPException

    from autograder.service.routes.guards import RateLimiter

    limiter = RateLimiter(per_minute=5)
    for _ in range(5):
        limiter.check("ann")
    with pytest.raises(HTTPException) as refused:
        limiter.check("ann")
    assert refused.value.status_code == 429 and int(refused.value.headers["Retry-After"]) > 0
    limiter.check("bob")  # another token is not slowed down


def test_rate_limit_on_the_server(service):
    with client(service.server, service.tokens["eve"]) as http:  # eve sent nothing before
        codes = [http.get("/api/submissions").status_code for _ in range(125)]
    assert codes[:120] == [200] * 120 and codes[120:] == [429] * 5
    with client(service.server, service.tokens["dora"]) as http:  # others are served
        assert http.get("/api/submissions").status_code == 200


def test_policies_deadline_attempts_and_score_only(service):
    text = notebook_text(service.root, "bob")
    with client(service.server, service.tokens["bob"]) as http:
        reply = http.post("/api/submissions", json={"notebook": text, "filename": "a.ipynb", "assignment": CLOSED})
        assert reply.status_code == 403 and "deadline" in reply.json()["detail"]
        hidden = http.post("/api/submissions", json={"notebook": text, "filename": "a.ipynb",
                                                     "assignment": SCORE_ONLY}).json()
        view = wait_done(http, hidden["id"])
        assert view["score"] == 8 and "tests" not in view and "feedback_url" not in view
        assert view["feedback_after"]
        assert http.get(f"/submissions/{hidden['id']}/feedback").status_code == 404
        # bob's first attempt at 01 was in the `graded` fixture or not: count what is left today
        used = sum(s["assignment"] == ASSIGNMENT for s in http.get("/api/submissions").json())
        codes = [http.post("/api/submissions", json={"notebook": text, "filename": "a.ipynb",
                                                     "assignment": ASSIGNMENT}).status_code
                 for _ in range(ATTEMPTS - used + 1)]
        assert codes == [202] * (ATTEMPTS - used) + [429]
    with client(service.server, service.tokens["prof"]) as prof:  # the instructor sees everything at once
        assert "tests" in prof.get(f"/api/submissions/{hidden['id']}").json()


def test_instructor_table_history_and_exports(service, graded):
    with client(service.server, service.tokens["prof"]) as prof:
        wait_done(prof, graded["bob"])
        page = prof.get(f"/instructor?assignment={ASSIGNMENT}").text
        assert "ann" in page and "8 / 10" in page and 'id="distribution"' in page
        for fmt, header in (("canvas", "Student"), ("moodle", "Identifier"), ("csv", "student_id")):
            reply = prof.get(f"/instructor/export/{ASSIGNMENT}?format={fmt}&which=best")
            assert reply.status_code == 200, reply.text
            rows = list(csv.DictReader(io.StringIO(reply.text.lstrip("\ufeff"))))
            assert header in rows[0]
            if fmt == "csv":
                by_id = {r["student_id"]: r for r in rows}
                assert by_id["ann"]["score"] == "8" and by_id["ann"]["status"] == "ok"
                assert set(by_id) == set(STUDENTS)  # everyone on the roster: the unsubmitted as missing
        assert prof.get(f"/instructor/export/{ASSIGNMENT}?format=xls").status_code == 400
        # Moodle's worksheet carries each graded student's feedback comment, and its bulk upload of
        # feedback files each graded student's page, in the folder Moodle's download names
        moodle = {r["Identifier"]: r for r in csv.DictReader(io.StringIO(
            prof.get(f"/instructor/export/{ASSIGNMENT}?format=moodle&which=best").text.lstrip("\ufeff")))}
        ann = f"Participant {1000 + STUDENTS.index('ann')}"
        assert "test_" in moodle[ann]["Feedback comments"], moodle[ann]
        reply = prof.get(f"/instructor/export/{ASSIGNMENT}/feedback?format=moodle&which=best")
        assert reply.status_code == 200 and reply.headers["X-Students-Left-Out"] == "0"
        with zipfile.ZipFile(io.BytesIO(reply.content)) as archive:
            names = archive.namelist()
            page = archive.read(f"Ann Student_{1000 + STUDENTS.index('ann')}_assignsubmission_file/"
                                f"{notebook_name(ASSIGNMENT)}-feedback.html").decode()
        graded_students = {r["Identifier"] for r in moodle.values() if r["Grade"]}
        assert len(names) == len(graded_students) and "8" in page and "<html" in page.lower()
        canvas = prof.get(f"/instructor/export/{ASSIGNMENT}/feedback?format=canvas&which=best")
        assert canvas.status_code == 409 and "file ids" in canvas.json()["detail"]


def test_tokens_command_needs_a_roster_or_an_instructor(tmp_path):
    done = subprocess.run([sys.executable, "-m", "autograder", "tokens", "--data", str(tmp_path / "d"),
                           "--out", str(tmp_path / "t.csv")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and "ROSTER" in done.stderr


def test_every_token_in_the_tokens_file_works_as_written(tmp_path):
    """The file an instructor hands out: each token, read as any CSV reader reads it, is the one
    the service knows (a token that starts like a formula would come back with a leading ')."""
    data = tmp_path / "data"
    students = [f"s{n}" for n in range(400)]
    tokens = issue_tokens(data, students)
    database = Database(f"sqlite:///{data / 'service.db'}")
    assert [database.person_by_token(tokens[s]).id for s in students] == students
    assert all(not token.startswith(FORMULA_STARTS) for token in tokens.values())


def test_kill_mid_burst_and_restart_grades_each_submission_exactly_once(tmp_path):
    source = course_source(tmp_path)
    data = tmp_path / "data"
    students = [f"s{n}" for n in range(5)]
    tokens = issue_tokens(data, students)
    server = Server(data, source).start()
    accepted = []
    try:
        for n in range(10):
            student = students[n % len(students)]
            with client(server, tokens[student]) as http:
                reply = http.post("/api/submissions", json={"notebook": notebook_text(tmp_path, student),
                                                            "filename": "self_attention.ipynb"})
                assert reply.status_code == 202
                accepted.append((student, reply.json()["id"]))
        with client(server, tokens["s0"]) as http:  # some graded, the rest queued or being graded
            wait_done(http, accepted[0][1])
        server.kill()  # SIGKILL: no chance to tidy up
        database = sqlite3.connect(data / "service.db")
        states = dict(database.execute("select state, count(*) from submissions group by state").fetchall())
        assert states.get("done", 0) < 10, states  # killed mid-burst
        database.close()
        server.start()
        for student, submission_id in accepted:
            with client(server, tokens[student]) as http:
                view = wait_done(http, submission_id)
                assert view["status"] == "ok" and view["score"] == 8
    finally:
        server.stop()
    database = sqlite3.connect(data / "service.db")
    rows = database.execute("select id, state, gradings_started from submissions").fetchall()
    assert sorted(r[0] for r in rows) == sorted(i for _, i in accepted)  # none lost, none added
    assert all(state == "done" for _, state, _ in rows)
    # each graded to the end once: only a grading the kill interrupted was started again
    assert sum(started for *_, started in rows) <= len(rows) + 1
    assert "queued again" in server.log.read_text()


def test_graded_notebooks_go_into_the_instructors_gradebook_for_formgrader(service):
    """serve --gradebook: each graded notebook goes into the nbgrader gradebook, as grade --gradebook
    puts a class there: its automatic scores, the written answer left for a person, the student's
    name from the tokens' roster, and the autograded notebook where formgrader's manual grading
    view reads it."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    from classroom import notebook_name, written_answers

    (written,) = written_answers(ASSIGNMENT)
    answer = "Both projections come from the same x, so the scores are symmetric."
    notebook = notebook_text(service.root, "dora", {written: answer})
    with client(service.server, service.tokens["dora"]) as http:
        reply = http.post("/api/submissions", json={"notebook": notebook, "filename": "self_attention.ipynb"})
        assert reply.status_code == 202, reply.text
        done = wait_done(http, reply.json()["id"])
    config = Config()
    config.CourseDirectory.root = str(service.course)
    api = NbGraderAPI(config=config)
    recorded = {s["student"]: s for s in api.get_submissions(ASSIGNMENT)}
    assert recorded["dora"]["needs_manual_grade"] and (recorded["dora"]["first_name"], recorded["dora"]["last_name"]) \
        == ("Dora", "Student")
    assert recorded["dora"]["autograded"] and float(recorded["dora"]["score"]) == done["score"] > 0
    graded = json.loads((service.course / "autograded" / "dora" / ASSIGNMENT / f"{notebook_name(ASSIGNMENT)}.ipynb")
                        .read_text())
    cell = next(c for c in graded["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == written)
    assert "".join(cell["source"]) == answer


def test_one_score_everywhere_with_a_written_answer_pending(service):
    """The course's rule: a written answer that awaits a person is in neither the points nor the
    maximum, on the API, the student's pages, the feedback page and the class table, each of
    which says it is pending."""
    from classroom import written_answers

    (written,) = written_answers(ASSIGNMENT)
    notebook = notebook_text(service.root, "carl", {written: "The scores are symmetric because..."})
    pending = "written answer: pending (2 points)"
    with client(service.server, service.tokens["carl"]) as http:
        reply = http.post("/api/submissions", json={"notebook": notebook, "filename": "self_attention.ipynb"})
        view = wait_done(http, reply.json()["id"])
        assert (view["score"], view["max_score"], view["written_pending"]) == (8, 8, 2)
        assert f"(Score: 8 / 8; {pending})" in http.get(view["feedback_url"]).text
    carl = login(service, "carl")
    for path in ("/me", view["url"]):
        text = re.sub(r"<[^>]+>", "", carl.get(path).text)
        assert f"8 / 8; {pending}" in text, path
    with client(service.server, service.tokens["prof"]) as prof:
        table = re.sub(r"<[^>]+>", "", prof.get(f"/instructor?assignment={ASSIGNMENT}").text)
        assert f"8 / 8; {pending}" in table


def test_a_gradebook_the_service_cannot_write_stops_it_with_one_line(tmp_path):
    source = course_source(tmp_path)
    (tmp_path / "course").mkdir()
    done = subprocess.run([sys.executable, "-m", "autograder", "serve", "--data", str(tmp_path / "data"),
                           "--source", str(source), "--port", "9", "--gradebook", str(tmp_path / "course")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "is a folder" in done.stderr and "Traceback" not in done.stderr
