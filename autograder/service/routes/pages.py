"""The service's HTML: its templates, rendered for the person asking (with the session's CSRF
token, which every page's log-out form carries), and its static files."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from fastapi import Request
from fastapi.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ..db import Person

SERVICE = Path(__file__).resolve().parent.parent
TEMPLATES = Jinja2Templates(directory=SERVICE / "templates")
STATIC = SERVICE / "static"
# MathJax 3, installed with the course's web assets (tools/web_assets.py, as the book uses it): the
# only scripts a feedback page may run, served by the service itself (no CDN, which the sandboxed
# page could not reach), so that the course's math reads as math there.
WEB_ASSETS = Path(os.environ.get("COURSE_WEB_ASSETS") or Path(sys.prefix) / "share" / "course-web-assets")
MATHJAX = WEB_ASSETS / "mathjax"


def page(request: Request, template: str, person: Person | None, status_code: int = 200, **context) -> HTMLResponse:
    """``template`` for ``person`` (None: nobody logged in), as the guards found them."""
    _, session = getattr(request.state, "who", (None, None))
    return TEMPLATES.TemplateResponse(request, template, {"person": person, "csrf": session.csrf_token
                                                          if person and session else "", **context},
                                      status_code=status_code)
