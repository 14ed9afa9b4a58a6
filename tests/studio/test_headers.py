"""Every page says where it may load from (a Content-Security-Policy without inline
script), never to sniff types, and to send no Referer off the site (docs/deploy.md,
"Headers")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from studio.projects.models import Project

SAMPLES = {"slug": "triage", "int": "1", "path": "graph.yaml", "str": "graph.yaml", "name": "x"}


def _routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found += _routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            found.append(route)
    return found


def _url(route: str) -> str:
    def sample(match: re.Match[str]) -> str:
        converter, _, name = match.group(1).rpartition(":")
        return SAMPLES.get(converter or "str", SAMPLES.get(name, "x"))

    return "/" + re.sub(r"<([^>]+)>", sample, route).lstrip("^").rstrip("$")


def _page_urls() -> list[str]:
    routes = _routes(get_resolver().url_patterns)
    return sorted({_url(r) for r in routes if not r.startswith(("api/", "mcp/")) and "(?P" not in r})


def _assert_headers(url: str, answer: Any) -> None:
    policy = answer.get("Content-Security-Policy", "")
    assert "script-src 'self'" in policy and "default-src 'self'" in policy, url
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy, url
    assert answer.get("X-Content-Type-Options") == "nosniff", url
    assert answer.get("Referrer-Policy") == "same-origin", url
    if answer.streaming:  # a static file's answer holds the file open: read it to its end,
        b"".join(answer.streaming_content)  # so the test client closes it as a server would
    # (answer.close() sends request_finished, which closes the test's database connection)


def test_it_sends_the_headers_on_every_page(as_owner: Client, project: Project) -> None:
    urls = _page_urls()
    assert len(urls) > 40 and "/p/triage/files/graph.yaml" in urls
    for url in urls:
        _assert_headers(url, as_owner.get(url))


@pytest.mark.parametrize("url", ["/login/", "/api/docs", "/api/projects", "/no/such/page/", "/static/studio/studio.js"])
def test_it_sends_them_on_the_login_page_the_api_errors_and_static_files(client: Client, db: None, url: str) -> None:
    _assert_headers(url, client.get(url))


def test_it_sends_them_with_the_pages_of_a_stranger_and_a_form_error(as_stranger: Client, project: Project) -> None:
    _assert_headers("stranger", as_stranger.get("/p/triage/"))
    _assert_headers("form error", as_stranger.post("/new", {"slug": "no good"}))


def test_no_template_carries_inline_script_or_handlers() -> None:
    templates = sorted((Path(__file__).resolve().parents[2] / "frontend" / "templates").rglob("*.html"))
    assert templates
    for template in templates:
        text = template.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)", text), template
        assert not re.search(r"\son[a-z]+\s*=", text), template
        assert "javascript:" not in text, template
