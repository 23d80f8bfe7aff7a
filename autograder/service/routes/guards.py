"""Who is asking, and the checks a route needs before it runs, as FastAPI dependencies.

A person is known by a student's token as ``Authorization: Bearer TOKEN`` (the notebook's
``attention_checks.submit``) or by the session cookie a browser gets by logging in with that
token; each token has a rate limit. Forms posted with the cookie carry the session's CSRF token.
"""
from __future__ import annotations

import hmac
import threading
import time
from collections import defaultdict, deque
from typing import Annotated, Callable

from fastapi import Depends, Form, HTTPException, Request

from .. import db as tables
from ..core import Service
from ..db import Person, WebSession, hash_secret

COOKIE = "autograder_session"
Caller = tuple[Person | None, WebSession | None]


class RateLimiter:
    """At most ``per_minute`` requests in any 60 s, per key."""

    def __init__(self, per_minute: int):
        self.per_minute, self.lock, self.seen = per_minute, threading.Lock(), defaultdict(deque)

    def check(self, key: str) -> None:
        moment = time.monotonic()
        with self.lock:
            seen = self.seen[key]
            while seen and seen[0] < moment - 60:
                seen.popleft()
            if len(seen) >= self.per_minute:
                raise HTTPException(429, f"too many requests: at most {self.per_minute} a minute",
                                    headers={"Retry-After": str(int(seen[0] + 61 - moment))})
            seen.append(moment)


class Redirect(Exception):
    """Sends a browser elsewhere (app.create_app answers it with a 303)."""

    def __init__(self, url: str):
        self.url = url


def service_of(request: Request) -> Service:
    return request.app.state.service


Served = Annotated[Service, Depends(service_of)]


def caller(request: Request, service: Served) -> Caller:
    """Who sent the request: the person and, for a browser, its session (looked up once per
    request, which FastAPI caches: the rate limit counts requests, not look-ups). Kept on
    ``request.state`` for the error pages, which can log out too."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        person = service.database.person_by_token(header[7:].strip())
        if person is None:
            raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
        request.state.who = person, None
    else:
        cookie = request.cookies.get(COOKIE)
        session = person = None
        if cookie:
            with service.database.session() as db:
                session = db.get(WebSession, hash_secret(cookie))
                person = db.get(Person, session.person_id) if session else None
        request.state.who = person, session
    if request.state.who[0] is not None:
        request.app.state.token_limiter.check(request.state.who[0].id)
    return request.state.who


Asking = Annotated[Caller, Depends(caller)]


def signed_in(role: str | None = None, bearer_only: bool = False) -> Callable[..., Person]:
    """A dependency: the person asking (401 without a token or a session; 403 for another role).
    ``bearer_only``: the token as a bearer header, never the cookie (the JSON API's uploads)."""

    def person(asking: Asking) -> Person:
        person, session = asking
        if person is None or (bearer_only and session is not None):
            raise HTTPException(401, "log in with your token first", headers={"WWW-Authenticate": "Bearer"})
        if role and person.role != role:
            raise HTTPException(403, f"only for the {role}")
        return person

    return person


def at_browser(role: str | None = None) -> Callable[..., Person]:
    """A dependency for a page: the person logged in (a browser without a session is sent to the
    login page; 403 for another role)."""

    def person(asking: Asking) -> Person:
        if asking[0] is None:
            raise Redirect("/")
        if role and asking[0].role != role:
            raise HTTPException(403, f"only for the {role}")
        return asking[0]

    return person


def csrf_checked(asking: Asking, csrf: str = Form("")) -> None:
    """The form came from one of the session's own pages: its CSRF token, compared in constant time."""
    session = asking[1]
    if session is None or not csrf or not hmac.compare_digest(csrf.encode(), session.csrf_token.encode()):
        raise HTTPException(403, "the form is stale or came from another site (CSRF check): reload the page")


instructor_only = signed_in(tables.INSTRUCTOR)
Anyone = Annotated[Person, Depends(signed_in())]
Uploader = Annotated[Person, Depends(signed_in(bearer_only=True))]
Browser = Annotated[Person, Depends(at_browser())]
StudentBrowser = Annotated[Person, Depends(at_browser(tables.STUDENT))]
InstructorBrowser = Annotated[Person, Depends(at_browser(tables.INSTRUCTOR))]
