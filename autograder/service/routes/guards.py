"""Who is asking, and the checks a route needs before it runs, as FastAPI dependencies.

A person is known by a student's token as ``Authorization: Bearer TOKEN`` (the notebook's
``attention_checks.submit``) or by the session cookie a browser gets by logging in with that
token; each token has a rate limit.

Every form (logging in, logging out, uploading) refuses a request another site made a browser
send (``FORM_CHECKS``): the browser's own word on where it comes from (``same_origin``), and a
CSRF token in the form that only the service's own page can know (``csrf_checked``: the
session's; before there is a session, the login form's, also held in a cookie, ``login_checked``).
"""
from __future__ import annotations

import hmac
import threading
import time
from collections import defaultdict, deque
from typing import Annotated, Callable
from urllib.parse import urlsplit

from fastapi import Depends, Form, HTTPException, Request

from .. import db as tables
from ..core import Service
from ..db import Person, WebSession, hash_secret

COOKIE = "autograder_session"
LOGIN_COOKIE = "autograder_login"  # the login form's CSRF token, before there is a session
STALE_FORM = "the form is stale or came from another site (CSRF check): reload the page"
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


def login_limited(request: Request) -> None:
    """Tries at logging in, by address (no token is known yet; behind a proxy named with
    ``--trusted-proxy``, the address it forwards), each counted before any check."""
    request.app.state.login_limiter.check(request.client.host if request.client else "?")


def same_origin(request: Request) -> None:
    """A request a browser sent from another site (or from a sandboxed page: the feedback page's
    origin is opaque) is refused. Browsers say where a request comes from: ``Sec-Fetch-Site``
    (every current browser; a header no page can set), else ``Origin``, sent with every cross-site
    POST and compared with the address asked for (its host: behind the HTTPS proxy the scheme
    differs). A request with neither is no browser's cross-site request (a script's): the
    form's CSRF token still has to be right."""
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is not None:
        allowed = site in ("same-origin", "none")  # "none": the person's own doing (a bookmark)
    else:
        allowed = origin is None or urlsplit(origin).netloc == request.headers.get("host")
    if not allowed:
        raise HTTPException(403, f"a form sent from another site ({origin or site}) is refused: "
                                 "use the service's own page")


def _same_secret(sent: str, kept: str | None) -> bool:
    """Compared in constant time (no timing tells how much of a guess was right)."""
    return bool(sent and kept) and hmac.compare_digest(sent.encode(), kept.encode())


def csrf_checked(asking: Asking, csrf: str = Form("")) -> None:
    """The form came from one of the session's own pages: the session's CSRF token."""
    session = asking[1]
    if session is None or not _same_secret(csrf, session.csrf_token):
        raise HTTPException(403, STALE_FORM)


def login_checked(request: Request, csrf: str = Form("")) -> None:
    """The login form came from the service's own login page: its token, also in the cookie that
    page set (a double-submit token; another site can post a form but can neither read nor set
    this host's cookie, and a sibling site that could set one is refused by ``same_origin``).
    Without it, another site could log a student into the attacker's account, whose next upload
    would then land there."""
    if not _same_secret(csrf, request.cookies.get(LOGIN_COOKIE)):
        raise HTTPException(403, STALE_FORM)


FORM_CHECKS = [Depends(same_origin), Depends(csrf_checked)]  # the forms of a logged-in session


instructor_only = signed_in(tables.INSTRUCTOR)
Anyone = Annotated[Person, Depends(signed_in())]
Uploader = Annotated[Person, Depends(signed_in(bearer_only=True))]
Browser = Annotated[Person, Depends(at_browser())]
StudentBrowser = Annotated[Person, Depends(at_browser(tables.STUDENT))]
InstructorBrowser = Annotated[Person, Depends(at_browser(tables.INSTRUCTOR))]
