"""How a refusal or a failure is answered: every refusal a 4xx with a one-line reason (JSON for
the API and scripts, a page for a browser, which can log out too); the database busy or
unreachable, or the data folder unwritable (a full disk), a 503 that says so; a client that hung
up mid-upload, nothing (nobody reads the answer)."""
from __future__ import annotations

import sys

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.exc import DataError, SQLAlchemyError
from starlette.requests import ClientDisconnect

from ..db import one_line
from .guards import Redirect
from .pages import page

DATABASE_DOWN = "the service's database is busy or unreachable; nothing was stored: try again in a minute"
DISK_DOWN = "the service cannot write its data folder (is the disk full?); nothing was stored: try again later"


async def refused(request: Request, exc: HTTPException) -> Response:
    """JSON for the API and scripts; a page for a browser."""
    if "text/html" in request.headers.get("accept", "") and not request.url.path.startswith("/api/"):
        person, _ = getattr(request.state, "who", (None, None))
        response = page(request, "error.html", person, exc.status_code, status=exc.status_code, detail=exc.detail)
    else:
        response = JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
    for key, value in (exc.headers or {}).items():
        response.headers[key] = value
    return response


async def database_down(request: Request, exc: SQLAlchemyError) -> Response:
    print(f"autograder serve: {request.method} {request.url.path}: database: {one_line(exc)}", file=sys.stderr)
    return await refused(request, HTTPException(503, DATABASE_DOWN, headers={"Retry-After": "60"}))


async def unstorable(request: Request, exc: DataError) -> Response:
    """A value of the request the database refuses to hold (PostgreSQL: a NUL in a text, a
    number beyond its integers): the same request can never succeed, so no "try again"."""
    return await refused(request, HTTPException(400, f"the request holds a value the database cannot store: "
                                                     f"{one_line(exc)}"))


async def invalid(request: Request, exc: RequestValidationError) -> Response:
    """FastAPI's own refusal (a path's number that is not one), in one line as every other."""
    said = "; ".join(f"{'.'.join(map(str, error['loc'][1:])) or error['loc'][0]}: {error['msg']}"
                     for error in exc.errors())
    return await refused(request, HTTPException(422, said))


async def disk_down(request: Request, exc: OSError) -> Response:
    print(f"autograder serve: {request.method} {request.url.path}: data folder: {exc}", file=sys.stderr)
    return await refused(request, HTTPException(503, DISK_DOWN, headers={"Retry-After": "60"}))


async def hung_up(request: Request, exc: ClientDisconnect) -> Response:
    """The client went away mid-request: nothing was stored, and nobody reads the answer."""
    return Response(status_code=400)


async def redirect(request: Request, exc: Redirect) -> Response:
    return RedirectResponse(exc.url, status_code=303)


def add_error_handlers(app: FastAPI) -> None:
    for error, handler in ((HTTPException, refused), (RequestValidationError, invalid), (DataError, unstorable),
                           (SQLAlchemyError, database_down), (OSError, disk_down), (ClientDisconnect, hung_up),
                           (Redirect, redirect)):
        app.add_exception_handler(error, handler)
