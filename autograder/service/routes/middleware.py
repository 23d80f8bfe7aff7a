"""What every request and answer goes through: the upload's size, checked before any of it is
read, and the security headers of every answer."""
from __future__ import annotations

import json

from starlette.middleware.base import BaseHTTPMiddleware

# every page's own policy, unless a route sets a stricter one (the feedback page's sandbox)
PAGE_POLICY = "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"


class BodyLimit:
    """ASGI middleware: a request whose body is over ``limit`` bytes is answered 413 before any
    of it is read, and one that does not say its length (a chunked upload) 411."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            length = dict(scope["headers"]).get(b"content-length", b"")
            if not length.isdigit():
                return await _refuse(send, 411, "say the upload's length (Content-Length)")
            if int(length) > self.limit:
                return await _refuse(send, 413, f"the upload is over the {self.limit // 1024**2} MB limit")
        return await self.app(scope, receive, send)


async def _refuse(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


class SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        response = await call_next(request)
        if request.url.path.startswith("/static/"):
            # MathJax's fonts, fetched from a sandboxed page, whose origin is opaque: CORS lets them load
            response.headers.setdefault("Access-Control-Allow-Origin", "*")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault("Content-Security-Policy", PAGE_POLICY)
        return response
