"""The notebook's JSON API (``attention_checks.submit``): upload a notebook, list one's
submissions, read one. Uploads take the token as a bearer header only, never the cookie."""
from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from .guards import Anyone, Served, Uploader

router = APIRouter(prefix="/api")

IDEMPOTENCY_KEY = "Idempotency-Key"  # attention_checks.submit's header: one key per upload, the same on a retry


@router.post("/submissions", status_code=202)
async def api_submit(request: Request, service: Served, person: Uploader):
    """202 for a new submission; 200 for an upload already accepted under the same
    ``Idempotency-Key`` (a client's retry), with what became of it.

    No Origin or CSRF check, unlike the forms: another site cannot make a browser send this
    request as the student. The token is taken only from the ``Authorization`` header
    (``Uploader``: never the cookie), which a browser adds to no request by itself; a page can
    set it only with ``fetch``, whose cross-origin request with that header needs a CORS
    preflight that this service never answers with a yes; and that page would need the student's
    token, which is the secret itself. ``attention_checks.submit`` runs in the kernel, not in a
    browser, and sends no ``Origin``."""
    key = request.headers.get(IDEMPOTENCY_KEY)
    if key is not None and not (0 < len(key) <= 64 and key.isascii() and key.isprintable()):
        raise HTTPException(400, f"the {IDEMPOTENCY_KEY} header must be 1 to 64 printable ASCII characters")
    body = await request.body()
    try:
        sent = json.loads(body)
        notebook, filename = sent["notebook"], str(sent.get("filename") or "notebook.ipynb")
        assignment = sent.get("assignment") or None
        if not isinstance(notebook, (str, dict)) or not isinstance(assignment, (str, type(None))):
            raise TypeError
        data = (notebook if isinstance(notebook, str) else json.dumps(notebook)).encode()
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise HTTPException(400, 'send JSON: {"notebook": <the notebook>, "filename": "...", '
                                 '"assignment": "..." (optional)}') from err
    sub, new = await run_in_threadpool(service.accept, person, data, filename, assignment, key)
    return JSONResponse(service.view(person, sub), status_code=202 if new else 200)


@router.get("/submissions")
def api_list(service: Served, person: Anyone) -> list[dict]:
    return [service.view(person, s) for s in service.submissions_of(person.id)]


@router.get("/submissions/{submission_id}")
def api_get(service: Served, person: Anyone, submission_id: int) -> dict:
    return service.view(person, service.own(person, submission_id))
