"""Bodies over the limit are refused before they are read (studio/bodylimit.py)."""

from __future__ import annotations

import io
import json
from typing import Any

from studio.bodylimit import BodyLimit
from studio.wsgi import application

LIMIT = 4096


class Unreadable:
    """A wsgi.input that fails the test if anything reads it."""

    def read(self, *args: Any) -> bytes:
        raise AssertionError("the body was read")

    readline = read


class Counting(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, size: int | None = -1) -> bytes:
        part = super().read(size)
        self.taken += len(part)
        return part


class Inner:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.bodies.append(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def _call(app: Any, path: str = "/api/projects/upload", **environ: Any) -> tuple[str, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    base = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "SERVER_NAME": "testserver", "SERVER_PORT": "80"}
    body = b"".join(app({**base, "wsgi.url_scheme": "http", **environ}, start_response))
    return seen["status"], seen["headers"], body


def test_it_refuses_a_huge_content_length_without_reading_the_body() -> None:
    inner = Inner()
    status, headers, body = _call(BodyLimit(inner, LIMIT), CONTENT_LENGTH="419430400", **{"wsgi.input": Unreadable()})
    assert status.startswith("413")
    assert headers["Content-Type"] == "application/json"
    detail = json.loads(body)["detail"]
    assert "419430400 bytes" in detail and f"at most {LIMIT} bytes" in detail
    assert inner.bodies == []


def test_the_studio_application_refuses_it_before_django_reads_it(settings: Any) -> None:
    settings.REQUEST_MAX_BYTES = LIMIT
    status, headers, body = _call(
        application, "/projects/new", CONTENT_LENGTH=str(LIMIT + 1), **{"wsgi.input": Unreadable()}
    )
    assert status.startswith("413")
    assert headers["Content-Type"].startswith("text/plain")
    assert body.startswith(b"Request body too large")
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Content-Security-Policy"].startswith(
        "default-src"
    )


def test_it_passes_a_body_within_the_limit() -> None:
    inner = Inner()
    status, _, _ = _call(BodyLimit(inner, LIMIT), CONTENT_LENGTH="5", **{"wsgi.input": io.BytesIO(b"hello")})
    assert status.startswith("200")
    assert inner.bodies == [b"hello"]


def test_it_cuts_a_chunked_body_at_the_limit_and_refuses_it() -> None:
    inner = Inner()
    stream = Counting(b"x" * (LIMIT * 10))
    status, _, body = _call(BodyLimit(inner, LIMIT), HTTP_TRANSFER_ENCODING="chunked", **{"wsgi.input": stream})
    assert status.startswith("413")
    assert "more than that" in json.loads(body)["detail"]
    assert stream.taken == LIMIT + 1
    assert inner.bodies == []


def test_it_hands_on_a_chunked_body_within_the_limit_with_its_length() -> None:
    inner = Inner()
    status, _, _ = _call(
        BodyLimit(inner, LIMIT), HTTP_TRANSFER_ENCODING="chunked", **{"wsgi.input": io.BytesIO(b"y" * LIMIT)}
    )
    assert status.startswith("200")
    assert inner.bodies == [b"y" * LIMIT]
