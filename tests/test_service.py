"""The submission service, started as an instructor starts it: tokens, the API, policies,
limits, the instructor's pages and exports, and who may read what (every route)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
import zipfile
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import yaml

from autograder.report import FORMULA_STARTS
from autograder.service.db import Database, Person
from classroom import REPO, notebook_name, secret_lines
from classroom.service import (ASSIGNMENT, LocalPostgres, Server, client, course_source, issue_tokens, log_in,
                               notebook_text, wait_done)
from test_service_concurrency import database  # noqa: F401 - the fixture: SQLite, then a PostgreSQL server

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
    reply = log_in(http, service.tokens[who])
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
        interrupted = kill_while_grading(server, data)
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
    assert sum(started for *_, started in rows) <= len(rows) + interrupted
    assert f"queued again {interrupted} submissions" in server.log.read_text()


def kill_while_grading(server: Server, data: Path, timeout: float = 600) -> int:
    """SIGKILL the service once some submissions are graded and one is being graded, with no chance
    to tidy up; returns how many it left 'grading'. A kill that lands between two gradings leaves
    none: then it is started again and killed again, so that the test always sees one interrupted."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = submission_states(data)
        assert states["queued"] + states["grading"], f"all graded before a kill could land: {states}"
        if states["done"] and states["grading"]:
            server.kill()
            states = submission_states(data)
            if states["grading"]:
                return states["grading"]
            server.start()
        time.sleep(0.05)
    raise TimeoutError(f"no grading to interrupt in {timeout} s: {submission_states(data)}")


def submission_states(data: Path) -> Counter:
    database = sqlite3.connect(data / "service.db")
    try:
        return Counter(dict(database.execute("select state, count(*) from submissions group by state").fetchall()))
    finally:
        database.close()


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


# -- cross-site requests -------------------------------------------------------------

FOREIGN = ({"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
           {"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})


def test_logging_in_refuses_a_form_another_site_sent(service):
    """Without its own page's token (held in the form and in the cookie the page set), or sent
    from another site, the login form logs no one in (another site would log the student into
    its own account, where the student's next upload would land)."""
    token = service.tokens["carl"]  # eve's token spent its minute's requests on the rate limit's test
    with client(service.server) as stranger:  # never loaded the login page: no token to send
        reply = stranger.post("/login", data={"token": token, "csrf": "guessed"})
        assert reply.status_code == 403 and "another site" in reply.json()["detail"]
        assert "set-cookie" not in reply.headers
    with client(service.server) as browser:
        csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/").text).group(1)
        assert browser.post("/login", data={"token": token, "csrf": csrf[::-1]}).status_code == 403
        for headers in FOREIGN:
            reply = browser.post("/login", data={"token": token, "csrf": csrf}, headers=headers)
            assert reply.status_code == 403 and "another site" in reply.json()["detail"], headers
        assert browser.get("/me").status_code == 303  # still not logged in
        own = {"Origin": service.server.url, "Sec-Fetch-Site": "same-origin"}
        reply = browser.post("/login", data={"token": token, "csrf": csrf}, headers=own)
        assert reply.status_code == 303 and browser.get("/me").status_code == 200


def test_a_sessions_forms_refuse_what_another_site_sent(service):
    http = login(service, "carl")
    csrf = csrf_of(http)
    before = http.get("/api/submissions").json()
    files = {"file": ("self_attention.ipynb", notebook_text(service.root, "carl"), "application/json")}
    for headers in FOREIGN:
        reply = http.post("/upload", data={"csrf": csrf}, files=files, headers=headers)
        assert reply.status_code == 403 and "another site" in reply.json()["detail"], headers
        assert http.post("/logout", data={"csrf": csrf}, headers=headers).status_code == 403, headers
    assert http.get("/api/submissions").json() == before  # nothing stored
    assert http.get("/me").status_code == 200  # and still logged in
    # the notebook's API takes a bearer token, which no other site can make a browser send: no origin check
    with client(service.server, service.tokens["carl"]) as api:
        reply = api.post("/api/submissions", json={"notebook": notebook_text(service.root, "carl"),
                                                   "filename": "x.ipynb", "assignment": "none"}, headers=FOREIGN[0])
        assert reply.status_code == 400 and "unknown assignment" in reply.json()["detail"]


# -- what a client sends wrong, on both databases -------------------------------------

OTHER = "02-softmax-scaling"


def nested(notebook: str, depth: int) -> str:
    """``notebook`` with a metadata value nested ``depth`` lists deep."""
    parsed = json.loads(notebook)
    parsed["metadata"]["deep"] = "DEEP"
    return json.dumps(parsed).replace('"DEEP"', "[" * depth + "]" * depth)


def raw_form(csrf: str, filename: str, notebook: str) -> dict:
    """The upload form's body with ``filename`` as it is (httpx would escape what a browser escapes)."""
    boundary = "form-boundary-7d1"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{csrf}\r\n--{boundary}\r\n'
            f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/json\r\n\r\n")
    return {"content": f"{head}{notebook}\r\n--{boundary}--\r\n".encode(),
            "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}


def test_what_a_client_sends_wrong_is_a_4xx_with_its_reason_and_no_attempt(tmp_path, database):
    """On SQLite and on PostgreSQL: a notebook of another assignment than the one named, one with
    none of the course's cells, JSON nested past Python's stack, a NUL in the file name, a
    submission number beyond the database's integers, a NUL in a student id asked for: each a
    4xx with its reason, and none of them an attempt (the day's only one is left)."""
    source = course_source(tmp_path)
    shutil.copytree(REPO / "solutions" / OTHER, source / OTHER, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    data = tmp_path / "data"
    tokens = issue_tokens(data, ["ann"], db=database)
    (tmp_path / "policies.yml").write_text(yaml.safe_dump({"default": {"attempts_per_day": 1}}))
    server = Server(data, source, "--policies", str(tmp_path / "policies.yml"),
                    *(("--db", database) if database else ())).start()
    ours, others = notebook_text(tmp_path, "ann"), notebook_text(tmp_path, "ann", assignment=OTHER)
    bare = json.loads(ours)
    bare["cells"] = [c for c in bare["cells"] if "nbgrader" not in c["metadata"]]
    sent_wrong = [  # (what is sent, the status, words of the reason)
        ({"notebook": others, "assignment": ASSIGNMENT}, 400, f"this notebook is {OTHER}'s"),
        ({"notebook": ours, "assignment": OTHER}, 400, f"this notebook is {ASSIGNMENT}'s"),
        ({"notebook": bare, "assignment": ASSIGNMENT}, 400, "none of the course's cells"),
        ({"notebook": bare}, 400, "none of the course's cells"),
        ({"notebook": nested(ours, 100_000)}, 400, "nested too deeply"),  # past JSON's reader
        ({"notebook": nested(ours, 700)}, 400, "nested too deeply"),  # past nbformat's validation
        ({"notebook": ours, "filename": "self\x00attention.ipynb"}, 400, "control characters"),
    ]
    try:
        with client(server, tokens["ann"]) as http:
            for sent, status, words in sent_wrong:
                reply = http.post("/api/submissions", json={"filename": "self_attention.ipynb", **sent})
                assert reply.status_code == status and words in reply.json()["detail"], (sent.keys(), reply.text)
            for path in (f"/api/submissions/{2**31}", f"/api/submissions/{2**63}", f"/submissions/{2**64}/feedback"):
                reply = http.get(path)
                assert reply.status_code == 404 and reply.json()["detail"] == "no such submission", path
            reply = http.get(f"/api/submissions/{'9' * 5000}")  # past what Python reads as a number
            assert reply.status_code == 422 and isinstance(reply.json()["detail"], str)
            deep_form = {"file": ("self_attention.ipynb", nested(ours, 100_000), "application/json")}
            web = client(server)
            assert log_in(web, tokens["ann"]).status_code == 303
            reply = web.post("/upload", data={"csrf": csrf_of(web)}, files=deep_form)
            assert reply.status_code == 400 and "nested too deeply" in reply.json()["detail"]
            reply = web.post("/upload", **raw_form(csrf_of(web), "self\x00attention.ipynb", ours))
            assert reply.status_code == 400 and "control characters" in reply.json()["detail"], reply.text
            assert http.get("/api/submissions").json() == []  # nothing stored, no attempt used
            accepted = http.post("/api/submissions", json={"notebook": ours, "filename": "self_attention.ipynb",
                                                           "assignment": ASSIGNMENT})
            assert accepted.status_code == 202, accepted.text
        with client(server, tokens["prof"]) as prof:  # PostgreSQL cannot hold a NUL: never a 503 "try again"
            reply = prof.get("/instructor/students/a%00b")
            assert reply.status_code == (400 if database else 404), reply.text
            assert ("cannot store" if database else "no such student") in reply.json()["detail"]
    finally:
        server.stop()


# -- the tokens command ----------------------------------------------------------------

def test_the_tokens_file_is_created_private(tmp_path, monkeypatch):
    """Created readable by its owner only, not made private once written (others could read it
    meanwhile): with a umask that would leave a new file readable by all, no chmod touches it."""
    from autograder import cli

    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name\nann,Ann\n")
    out = tmp_path / "tokens.csv"
    out.write_text("old tokens, readable by all\n")
    out.chmod(0o644)
    changed = []
    real_chmod = os.chmod
    monkeypatch.setattr(os, "chmod", lambda path, mode, **kw: (changed.append(Path(path)),
                                                               real_chmod(path, mode, **kw)))
    old_umask = os.umask(0)
    try:
        assert cli.main(["tokens", str(roster), "--data", str(tmp_path / "data"), "--out", str(out)]) == 0
    finally:
        os.umask(old_umask)
    assert out.stat().st_mode & 0o777 == 0o600 and "ann" in out.read_text(encoding="utf-8-sig")
    assert not [p for p in changed if out.name in p.name], changed  # the data folder's are its own
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_roster_that_repeats_an_id_or_overflows_a_column_is_refused(tmp_path, database):
    """On SQLite and on PostgreSQL (whose columns refuse a longer value): an id for two people (twice
    on the roster, or a student's given as an instructor's) or a value longer than its column is
    exit 2, each row named, nothing written, and the people issued before untouched."""
    data = tmp_path / "data"
    issued = issue_tokens(data, ["ann"], db=database)
    repeated, long = tmp_path / "repeated.csv", tmp_path / "long.csv"
    repeated.write_text("student_id,name\nbea,Bea One\ncid,Cid\nbea,Bea Two\n")
    long.write_text(f"student_id,name,email\ncid,Cid,cid@example.edu\ndan,{'D' * 201},\n{'e' * 201},Eve,\n")
    out = tmp_path / "new-tokens.csv"
    expected = {repeated: ("'bea'", "Bea One", "Bea Two"),
                long: ("its name is 201 characters, over the 200", "its id is 201 characters",
                       "--instructor cid is also the roster's student 1 (cid, Cid, cid@example.edu)")}
    for roster, said in expected.items():
        done = subprocess.run([sys.executable, "-m", "autograder", "tokens", str(roster), "--data", str(data),
                               "--out", str(out), "--instructor", "cid", *(("--db", database) if database else ())],
                              cwd=REPO, capture_output=True, text=True)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert all(words in done.stderr for words in said), done.stderr
        assert not out.exists() and not list(tmp_path.glob(".new-tokens*"))
    people = Database(database or f"sqlite:///{data / 'service.db'}")
    with people.session() as db:
        assert sorted(p.id for p in db.query(Person)) == ["ann", "prof"]
    assert people.person_by_token(issued["ann"]).id == "ann"


def test_the_readmes_postgresql_recipe_issues_tokens_where_serve_reads_them(tmp_path):
    """The production recipe, as written, with a PostgreSQL server of the test's own in place of
    the README's: `tokens` puts the students' tokens in the database `serve --db` reads."""
    recipe = next(block for block in re.findall(r"```bash\n(.*?)```", _service_docs(), re.S)
                  if "serve --db postgresql://" in block)
    commands = [shlex.split(line.split("#")[0]) for line in recipe.replace("\\\n", " ").splitlines()]
    tokens = next(c for c in commands if c[:4] == ["python", "-m", "autograder", "tokens"])
    serve = next(c for c in commands if c[:4] == ["python", "-m", "autograder", "serve"])
    option = lambda command, name: command[command.index(name) + 1]  # noqa: E731
    assert option(tokens, "--db") == option(serve, "--db") and option(tokens, "--data") == option(serve, "--data")
    try:
        postgres = LocalPostgres()
    except (FileNotFoundError, RuntimeError) as err:
        pytest.skip(f"no PostgreSQL server for this test: {err}")
    try:
        (tmp_path / "roster.csv").write_text("student_id,name\nann,Ann\nbob,Bob\n")
        here = {option(serve, "--db"): postgres.url, option(serve, "--data"): str(tmp_path / "data")}
        done = subprocess.run([sys.executable, *[here.get(a, a) for a in tokens[1:]]], cwd=tmp_path,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        with open(tmp_path / "tokens.csv", encoding="utf-8-sig", newline="") as file:
            written = {row["student_id"]: row["token"] for row in csv.DictReader(file)}
        assert set(written) == {"ann", "bob", "prof"}
        known = Database(postgres.url)
        assert all(known.person_by_token(token).id == person for person, token in written.items())
    finally:
        postgres.stop()


def _service_docs() -> str:
    """The README's service section, or wherever the documentation moved it."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in pages if p.is_file())
