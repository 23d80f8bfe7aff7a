"""Logging in and out: the login page, the token posted on its form, the session cookie.
Both forms refuse what another site sends (``guards``): the login form carries a token of its
own, also set in a cookie with the page, since there is no session yet."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from .. import db as tables
from ..core import Service
from ..db import WebSession, hash_secret, new_secret
from .guards import COOKIE, FORM_CHECKS, LOGIN_COOKIE, Asking, Served, login_checked, login_limited, same_origin
from .pages import page

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def home(request: Request, service: Served, asking: Asking):
    person, _ = asking
    if person is not None:
        return RedirectResponse("/instructor" if person.role == tables.INSTRUCTOR else "/me", 303)
    return login_page(request, service)


def login_page(request: Request, service: Service, error: str = "") -> HTMLResponse:
    """The login form, with its CSRF token in the form and in a cookie (the one the browser
    already holds, else a new one)."""
    token = request.cookies.get(LOGIN_COOKIE) or new_secret()
    response = page(request, "login.html", None, login_csrf=token, error=error)
    response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=service.secure_cookies)
    return response


@router.post("/login", dependencies=[Depends(login_limited), Depends(same_origin), Depends(login_checked)])
def login(request: Request, service: Served, token: Annotated[str, Form()] = ""):
    person = service.database.person_by_token(token.strip())
    if person is None:
        return login_page(request, service, "That token is not known: copy it again from the message your "
                                            "instructor sent.")
    session_id = new_secret()
    with service.database.session.begin() as db:
        db.add(WebSession(id_hash=hash_secret(session_id), person_id=person.id, csrf_token=new_secret()))
    response = RedirectResponse("/", 303)
    response.set_cookie(COOKIE, session_id, httponly=True, samesite="strict", secure=service.secure_cookies)
    response.delete_cookie(LOGIN_COOKIE)
    return response


@router.post("/logout", dependencies=FORM_CHECKS)
def logout(request: Request, service: Served):
    with service.database.session.begin() as db:
        db.delete(db.get(WebSession, hash_secret(request.cookies[COOKIE])))
    response = RedirectResponse("/", 303)
    response.delete_cookie(COOKIE)
    return response
