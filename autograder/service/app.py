"""The web application: students submit and read their results, the instructor reads everyone's.

``create_app`` puts together what ``core.Service`` does and the routers of ``routes/``, one per
concern (the student's pages, the instructor's pages, the JSON API, logging in, health), whose
checks (who is asking, the role, the CSRF token) are FastAPI dependencies (``routes.guards``).

Every route that shows a submission looks it up with its owner (``Service.own``): a student
asking for another's submission gets 404, as for one that does not exist. Forms posted with the
cookie carry the session's CSRF token; the JSON API takes the bearer token only, which a browser
never adds by itself. Each token has a rate limit, uploads a size limit, and files are read only
from the data folder (``Storage``), by submission number.

Failures: every refusal is a 4xx with a one-line reason; the database busy or unreachable, or
the data folder unwritable (a full disk), is a 503 that says so and keeps nothing half-stored;
a client that hangs up mid-upload is dropped without a word in the log (``routes.errors``).
"""
from __future__ import annotations

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from .core import Limits, Service
from .routes import api, health, instructor, session, student
from .routes.errors import add_error_handlers
from .routes.guards import RateLimiter
from .routes.middleware import BodyLimit, SecurityHeaders
from .routes.pages import MATHJAX, STATIC

__all__ = ["Limits", "Service", "create_app"]  # what `serve` builds the application from


def create_app(service: Service) -> FastAPI:
    app = FastAPI(title="Attention from scratch: submissions", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    app.state.token_limiter = RateLimiter(service.limits.requests_per_minute)
    app.state.login_limiter = RateLimiter(service.limits.requests_per_minute)  # by address, before a token is known
    if MATHJAX.is_dir():  # before /static, which would answer for it
        app.mount("/static/mathjax", StaticFiles(directory=MATHJAX), name="mathjax")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    for router in (health.router, session.router, student.router, api.router, instructor.router):
        app.include_router(router)
    add_error_handlers(app)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit, limit=service.limits.upload_bytes + 64 * 1024)  # room for the form's other fields
    return app
