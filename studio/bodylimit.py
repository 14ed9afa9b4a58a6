"""Request bodies refused before they are read.

Django reads an upload in full (to memory, then to a temporary file) before any view can
look at its size, so a 400 MB body cost 400 MB of disk and seconds of a web thread before
the archive's own limit refused it. `BodyLimit` wraps the WSGI application (studio/wsgi.py,
which gunicorn and `runserver` both load) and looks at the request before Django does:

- a `Content-Length` above `settings.REQUEST_MAX_BYTES` is answered 413 without a byte of
  the body read (gunicorn then drains at most 64 KiB of it and closes the connection);
- a chunked body (no `Content-Length`) is read up to the limit and one byte more; past the
  limit it is refused with 413, under it Django gets it as an ordinary body of that length
  (Django itself reads no body without a `Content-Length`).

Under /api/ the answer has the API's `{"detail": ...}` shape; elsewhere it is a sentence.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings

__all__ = ["BodyLimit", "too_large_message"]

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_CHUNK = 64 * 1024


def too_large_message(limit: int, size: int | None) -> str:
    told = f"{size} bytes" if size is not None else "more than that"
    return (
        f"request body too large: {told}; the studio accepts at most {limit} bytes "
        "(PACKFORGE_REQUEST_MAX_BYTES). Nothing was read or stored."
    )


class BodyLimit:
    def __init__(self, app: WSGIApp, limit: int | None = None) -> None:
        self.app = app
        self._limit = limit

    @property
    def limit(self) -> int:
        return self._limit if self._limit is not None else int(settings.REQUEST_MAX_BYTES)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        limit = self.limit
        declared = str(environ.get("CONTENT_LENGTH") or "").strip()
        if declared:
            try:
                size = int(declared)
            except ValueError:
                size = -1
            if size > limit:
                return _refuse(environ, start_response, too_large_message(limit, size))
            return self.app(environ, start_response)
        if "chunked" in str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower():
            body = _read_at_most(environ.get("wsgi.input"), limit + 1)
            if len(body) > limit:
                return _refuse(environ, start_response, too_large_message(limit, None))
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)


def _read_at_most(stream: Any, most: int) -> bytes:
    if stream is None:
        return b""
    parts: list[bytes] = []
    got = 0
    while got < most:
        part = stream.read(min(_CHUNK, most - got))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _refuse(environ: Environ, start_response: StartResponse, message: str) -> list[bytes]:
    if str(environ.get("PATH_INFO", "")).startswith("/api/"):
        body = json.dumps({"detail": message}).encode()
        content_type = "application/json"
    else:
        body = (message[0].upper() + message[1:] + "\n").encode()
        content_type = "text/plain; charset=utf-8"
    start_response(
        "413 Content Too Large",
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("X-Content-Type-Options", "nosniff"),
            ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"),
            ("Connection", "close"),
        ],
    )
    return [body]
