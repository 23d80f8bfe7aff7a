"""Logging in and out: the login page, the token posted on its form, the session cookie."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from .. import db as tables
from ..db import WebSession, hash_secret, new_secret
from .guards import COOKIE, Asking, Served, csrf_checked
from .pages import page

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def home(request: Request, asking: Asking):
    person, _ = asking
    if person is not None:
        return RedirectResponse("/instructor" if person.role == tables.INSTRUCTOR else "/me", 303)
    return page(request, "login.html", None)


@router.post("/login")
def login(request: Request, service: Served, token: Annotated[str, Form()] = ""):
    request.app.state.login_limiter.check(request.client.host if request.client else "?")
    person = service.database.person_by_token(token.strip())
    if person is None:
        return page(request, "login.html", None, error="That token is not known: copy it again from "
                                                        "the message your instructor sent.")
    session_id = new_secret()
    with service.database.session.begin() as db:
        db.add(WebSession(id_hash=hash_secret(session_id), person_id=person.id, csrf_token=new_secret()))
    response = RedirectResponse("/", 303)
    response.set_cookie(COOKIE, session_id, httponly=True, samesite="strict", secure=service.secure_cookies)
    return response


@router.post("/logout", dependencies=[Depends(csrf_checked)])
def logout(request: Request, service: Served):
    with service.database.session.begin() as db:
        db.delete(db.get(WebSession, hash_secret(request.cookies[COOKIE])))
    response = RedirectResponse("/", 303)
    response.delete_cookie(COOKIE)
    return response
