"""The submission service from its two clients, against the real server: a student and the
instructor in headless Chromium, and ``attention_checks.submit`` run in a Jupyter kernel."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from jupyter_client.manager import start_new_kernel

from classroom import REPO, axe, make_submission
from browsing import chromium_executable
from headless import Chromium, Page
from classroom.service import ASSIGNMENT, Server, client, course_source, issue_tokens

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ARTIFACTS = Path(os.environ.get("SERVICE_ARTIFACTS", "/tmp/service-browser"))


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("service-clients")
    data = root / "data"
    tokens = issue_tokens(data, ["ann", "bob"])
    server = Server(data, course_source(root)).start()
    yield SimpleNamespace(server=server, tokens=tokens, root=root)
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = chromium_executable()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with Chromium(executable, tmp_path_factory.mktemp("profile"), ARTIFACTS / "chromium.log") as chromium:
        yield chromium


def wait_for(page: Page, condition: str, timeout: float = 600) -> None:
    """Until the JavaScript ``condition`` holds in the page (a form posted, a page reloaded by itself)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if page.evaluate(f"document.readyState === 'complete' && !!({condition})"):
                return
        except Exception:  # noqa: BLE001 - the page is between two documents
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{condition} did not hold in {timeout} s; the page says: "
                       f"{page.evaluate('document.body && document.body.innerText')}")


def log_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "/")
    page.evaluate(f"document.getElementById('token').value = {json.dumps(token)}; "
                  "document.getElementById('login').submit(); true")


def test_student_uploads_and_sees_feedback_then_instructor_sees_the_table(service, browser, tmp_path):
    """Every page on the way, as loaded, breaks no serious or critical rule of axe-core."""
    url = service.server.url
    notebook = make_submission(tmp_path, "ann", ASSIGNMENT)
    page = browser.new_page()
    inaccessible = []

    def check_accessibility(where: str) -> None:
        if found := axe.violations(page):
            inaccessible.append(f"{where}:\n    " + axe.describe(found).replace("\n", "\n    "))

    try:
        page.goto(url + "/")
        wait_for(page, "document.getElementById('login')")
        check_accessibility("the login page")
        log_in(page, url, service.tokens["ann"])
        wait_for(page, "location.pathname === '/me' && document.getElementById('upload')")
        check_accessibility("the student's page")
        # choose the file as a person does in the file dialog, then press Submit
        root = page.send("DOM.getDocument")["root"]["nodeId"]
        node = page.send("DOM.querySelector", {"nodeId": root, "selector": "#file"})["nodeId"]
        page.send("DOM.setFileInputFiles", {"nodeId": node, "files": [str(notebook)]})
        page.evaluate("document.querySelector('#upload button[type=submit]').click(); true")
        wait_for(page, "location.pathname.startsWith('/submissions/') && document.getElementById('score')")
        score = page.evaluate("document.getElementById('score').innerText")
        assert "8 / 10" in score and "ok" in score  # the written answer left as released: 0 of 2
        assert page.evaluate("document.querySelectorAll('#tests tr').length") > 4
        feedback = page.evaluate("document.getElementById('feedback-link').href")
        check_accessibility("a submission's page")
        page.screenshot(ARTIFACTS / "student-submission.png")
        page.goto(feedback)
        assert "test_simple_self_attention" in page.evaluate("document.body.innerText")
        # the course's math typeset by the service's own MathJax (the only scripts the page may run),
        # with its fonts, in the page's sandbox
        wait_for(page, "document.querySelectorAll('mjx-container').length > 10", timeout=60)
        assert page.evaluate("document.fonts.check('1em MJXZERO') || document.querySelectorAll('mjx-c').length > 0")
        assert page.evaluate("(() => { try { return document.cookie; } catch (e) { return 'opaque'; } })()") == "opaque"
        check_accessibility("the feedback page")
        page.screenshot(ARTIFACTS / "feedback-math.png")
        page.goto(url + "/me")
        assert page.evaluate("document.querySelectorAll('#submissions tr').length") == 2  # header and the one

        page.evaluate("document.querySelector('header form button').click(); true")  # log out
        wait_for(page, "document.getElementById('login')")
        log_in(page, url, service.tokens["prof"])
        wait_for(page, "location.pathname === '/instructor' && document.getElementById('class')")
        table = page.evaluate("document.getElementById('class').innerText")
        assert "ann" in table and "8 / 10" in table and "bob" in table and "missing" in table
        check_accessibility("the class page")
        page.screenshot(ARTIFACTS / "instructor.png")
        # a student's page, and the class's mistakes
        links = [page.evaluate(f"document.querySelector({json.dumps(link)}).href")
                 for link in ("a[href^='/instructor/students/']", "a[href^='/instructor/report/']")]
        for link in links:
            page.goto(link)
            wait_for(page, "document.querySelector('h1, h2')")
            check_accessibility(page.evaluate("location.pathname"))
        # the feedback page is served sandboxed: its own scripts are blocked there, by design
        assert not [e for e in page.errors if "favicon" not in e and "/feedback" not in e], page.errors
    finally:
        page.close()
    assert not inaccessible, "\n".join(inaccessible)


def run_in_kernel(code: str, env: dict[str, str]) -> str:
    """Run ``code`` in a new Python kernel (as a student's notebook runs it); returns what it printed."""
    manager, kernel = start_new_kernel(kernel_name="python3", env=dict(os.environ, **env), cwd=str(REPO))
    printed = []
    try:
        reply = kernel.execute_interactive(code, timeout=600, output_hook=lambda m: printed.append(m))
    finally:
        kernel.stop_channels()
        manager.shutdown_kernel(now=True)
    text = "".join(m["content"].get("text", "") for m in printed if m["msg_type"] == "stream")
    errors = [m["content"] for m in printed if m["msg_type"] == "error"]
    assert reply["content"]["status"] == "ok", errors
    return text


def test_submit_from_a_notebook_kernel(service, tmp_path):
    notebook = make_submission(tmp_path, "bob", ASSIGNMENT)
    code = ("from attention_checks.submit import submit\n"
            f"result = submit({service.server.url!r}, {service.tokens['bob']!r})\n"
            "import json; print('RESULT', json.dumps(result))\n")
    # Jupyter Server tells each kernel its notebook's path in JPY_SESSION_NAME
    printed = run_in_kernel(code, {"JPY_SESSION_NAME": str(notebook), "PYTHONPATH": str(REPO)})
    result = json.loads(printed.split("RESULT ", 1)[1])
    assert (result["state"], result["score"], result["max_score"]) == ("done", 8, 10)
    assert "Score: 8 / 10 (ok)" in printed and "Feedback page:" in printed
    with client(service.server, service.tokens["bob"]) as http:  # it is bob's, listed as his
        assert [s["id"] for s in http.get("/api/submissions").json()] == [result["id"]]


def test_submit_says_why_it_was_refused(service, tmp_path):
    notebook = make_submission(tmp_path, "bob", ASSIGNMENT)
    code = ("from attention_checks.submit import submit, SubmitError\n"
            "try:\n"
            f"    submit({service.server.url!r}, 'wrong-token', path={str(notebook)!r})\n"
            "except SubmitError as err:\n"
            "    print('REFUSED', err)\n")
    printed = run_in_kernel(code, {"PYTHONPATH": str(REPO)})
    assert "REFUSED the service refused the submission (401): unknown token" in printed
