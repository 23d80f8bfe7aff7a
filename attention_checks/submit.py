"""Submit this notebook to the course's submission service, from the notebook itself::

    from attention_checks.submit import submit
    submit("https://grader.example.edu", "YOUR-TOKEN")

It sends the notebook (in Jupyter: the file as last saved, so save first; in Colab: the
notebook as Colab holds it, read through Colab's own API), waits for the grader, and shows
the score, each test's points and the feedback page. Runs in the student's kernel: standard
library only (urllib), nothing of the grader.

Each call sends a key of its own (``Idempotency-Key``): when the connection drops before the
service answers, the upload is sent again with the same key, and the service counts it once;
when it cannot be sent again, the student is told that it may have arrived, and where to look.
"""
from __future__ import annotations

import glob
import html
import http.client
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path


class SubmitError(RuntimeError):
    pass


class _Unanswered(SubmitError):
    """No answer came back: the request may or may not have reached the service."""


RESEND_PAUSES = (2, 5, 15)  # seconds before each new try of an upload that got no answer


def submit(url: str, token: str, path: str | os.PathLike | None = None, assignment: str | None = None,
           wait: float = 300, quiet: bool = False) -> dict:
    """Send the notebook to the service at ``url`` with your ``token``; returns the result.

    ``path``: the notebook file (found by itself in Jupyter and Colab); ``assignment``: which
    one (the service knows it from the notebook's cells); ``wait``: seconds to wait for the
    grade (0: return at once, with the submission's address)."""
    url = url.rstrip("/")
    notebook, filename = _this_notebook(path)
    body = {"notebook": notebook, "filename": filename, "assignment": assignment}
    sub = _upload(url, token, json.dumps(body).encode())
    _say(quiet, f"Submitted {filename} as submission {sub['id']} of {sub['assignment']}"
                f"{' (after the deadline)' if sub['late'] else ''}; waiting for the grader...")
    deadline = time.monotonic() + wait
    while sub["state"] in ("queued", "grading") and time.monotonic() < deadline:
        time.sleep(1)
        try:
            sub = _request(f"{url}/api/submissions/{sub['id']}", token)
        except _Unanswered:  # the service restarting: the submission is kept
            continue
    if sub["state"] == "failed":
        _say(quiet, f"Not graded: {sub['reason']}")
        return sub
    if sub["state"] != "done":
        _say(quiet, f"Not graded yet ({sub['state']}): see {url}{sub['url']} (log in with your token).")
        return sub
    if not quiet:
        _show(url, token, sub)
    return sub


def _upload(url: str, token: str, data: bytes) -> dict:
    """POST the notebook; sent again with the same key while no answer comes back."""
    key = uuid.uuid4().hex
    for tries, pause in enumerate((*RESEND_PAUSES, None)):
        try:
            sub = _request(f"{url}/api/submissions", token, data, key)
        except _Unanswered as err:
            if pause is None:
                raise SubmitError(f"{err}. Your notebook may have arrived: look at {url}/ (log in with your token) "
                                  "before you submit again, which would count as another attempt") from None
            print(f"{err}; sending it again in {pause:g} s (the service counts it once)")
            time.sleep(pause)
            continue
        if tries:
            print(f"The service has it, once: submission {sub['id']}.")
        return sub


def _request(url: str, token: str, data: bytes | None = None, key: str | None = None) -> dict | str:
    request = urllib.request.Request(url, data=data, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json",
        **({"Content-Type": "application/json", "Idempotency-Key": key} if data is not None else {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read().decode("utf-8")
            return json.loads(text) if response.headers.get_content_type() == "application/json" else text
    except urllib.error.HTTPError as err:
        try:
            detail = json.loads(err.read().decode("utf-8"))["detail"]
        except (ValueError, KeyError, TypeError):
            detail = err.reason
        raise SubmitError(f"the service refused the submission ({err.code}): {detail}") from None
    except urllib.error.URLError as err:
        raise _Unanswered(f"cannot reach the submission service at {url}: {err.reason}") from None
    except (http.client.HTTPException, OSError) as err:  # the connection dropped, or no answer in time
        raise _Unanswered(f"no answer from the submission service at {url} ({type(err).__name__})") from None


# --------------------------------------------------------------------------
# which notebook is this?

def _this_notebook(path) -> tuple[dict | str, str]:
    """The notebook's content and file name."""
    if path is None:
        colab = _colab_notebook()
        if colab is not None:
            return colab, "colab.ipynb"
        path = _jupyter_notebook_path()
    path = Path(path)
    if not path.is_file():
        raise SubmitError(f"no notebook at {path}")
    saved = datetime.fromtimestamp(path.stat().st_mtime).strftime("%H:%M:%S")
    print(f"Sending {path.name} as last saved at {saved} (save first if you changed it since).")
    return path.read_text(encoding="utf-8"), path.name


def _colab_notebook() -> dict | None:
    """In Colab, the notebook as Colab's front end holds it (Colab keeps no file in the runtime)."""
    try:
        from google.colab import _message  # only in Colab
    except ImportError:
        return None
    reply = _message.blocking_request("get_ipynb", request="", timeout_sec=60)
    if not reply or "ipynb" not in reply:
        raise SubmitError("Colab did not hand over the notebook; try again, or pass path=")
    return reply["ipynb"]


def _jupyter_notebook_path() -> Path:
    """The file of the notebook this kernel runs: Jupyter Server tells the kernel in
    JPY_SESSION_NAME; else ask the running Jupyter servers which session has this kernel."""
    if os.environ.get("JPY_SESSION_NAME", "").endswith(".ipynb"):
        return Path(os.environ["JPY_SESSION_NAME"])
    kernel_id = _kernel_id()
    for server in _running_servers():
        query = f"?token={server['token']}" if server.get("token") else ""
        try:
            with urllib.request.urlopen(f"{server['url'].rstrip('/')}/api/sessions{query}", timeout=5) as response:
                sessions = json.loads(response.read().decode("utf-8"))
        except (OSError, ValueError):
            continue
        for session in sessions:
            if session.get("kernel", {}).get("id") == kernel_id:
                return Path(server.get("root_dir") or server.get("notebook_dir") or ".") / session["path"]
    raise SubmitError("cannot tell which notebook this is: pass its file, submit(url, token, path='qkv.ipynb')")


def _kernel_id() -> str | None:
    try:
        from ipykernel import get_connection_file
    except ImportError:
        return None
    try:  # kernel-<id>.json
        return Path(get_connection_file()).stem.removeprefix("kernel-")
    except RuntimeError:  # not in a kernel
        return None


def _running_servers() -> list[dict]:
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        return []
    servers = []
    for info in glob.glob(os.path.join(jupyter_runtime_dir(), "*server-*.json")):
        try:
            with open(info, encoding="utf-8") as file:
                servers.append(json.load(file))
        except (OSError, ValueError):
            continue
    return servers


# --------------------------------------------------------------------------
# showing the result

def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text)


def _show(url: str, token: str, sub: dict) -> None:
    score = f"{sub['score']:g} / {sub['max_score']:g}"
    pending = sub.get("written_pending")  # graded by hand later: in neither the score nor its maximum
    print(f"Score: {score} ({sub['status']}){': ' + sub['reason'] if sub['reason'] else ''}"
          f"{f'; written answer: pending ({pending:g} points)' if pending else ''}")
    for test in sub.get("tests", []):
        points = "pending (graded by hand)" if test["points"] is None else f"{test['points']:g} / {test['max_points']:g}"
        print(f"  {test['grade_id']}: {points}")
    if "feedback_after" in sub:
        print(f"The feedback comes after the deadline ({sub['feedback_after']}).")
    if "feedback_url" not in sub:
        return
    print(f"Feedback page: {url}{sub['feedback_url']} (log in with your token)")
    try:
        from IPython.display import HTML, display
    except ImportError:
        return
    page = _request(f"{url}{sub['feedback_url']}", token)
    # in a sandboxed frame: the page's styles stay in it, and nothing in it runs
    display(HTML(f'<iframe sandbox="" srcdoc="{html.escape(page)}" '
                 'style="width:100%;height:32em;border:1px solid #ccc"></iframe>'))
