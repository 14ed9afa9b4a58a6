"""Gunicorn's access log without query strings.

A query string may carry a secret (`?token=...` is refused with 401, but gunicorn's
default format writes the request line verbatim, so the token would sit in the log),
so every atom that can hold one is logged without its query: the request line (`%(r)s`),
the query (`%(q)s`, logged as `-`), the referer (`%(f)s`) and the same values reached
as `{...}e` / `{...}i` atoms; the Authorization and Cookie headers are never logged.
Loaded by gunicorn.conf.py at the repository's root, which gunicorn reads by default
when started from there (scripts/start, docker/)."""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

__all__ = ["AccessLogger", "without_query"]


def without_query(url: str) -> str:
    """`url` up to its first `?` (and without a fragment)."""
    return url.split("?", 1)[0].split("#", 1)[0]


class AccessLogger(Logger):  # type: ignore[misc]  # gunicorn ships no types
    def atoms(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> dict[str, Any]:
        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        atoms["r"] = " ".join(
            [
                str(environ.get("REQUEST_METHOD", "-")),
                without_query(str(environ.get("RAW_URI", ""))),
                str(environ.get("SERVER_PROTOCOL", "-")),
            ]
        )
        atoms["q"] = "-"
        atoms["f"] = without_query(str(atoms.get("f", "-")))
        for key in ("{raw_uri}e", "{request_uri}e", "{http_referer}e", "{referer}i"):
            if key in atoms:
                atoms[key] = without_query(str(atoms[key]))
        for key in ("{query_string}e", "{authorization}i", "{cookie}i", "{http_authorization}e", "{http_cookie}e"):
            if key in atoms:
                atoms[key] = "-"
        return atoms
