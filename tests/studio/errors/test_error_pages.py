"""The error pages (studio/errors.py, frontend/templates/errors/): 404, 403, 500 and 400 in
the studio's layout with its navigation and the favicon, a sentence and ways on, never a
stack trace; under /api/ the API's `{"detail": ...}` shape."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import Project

NAV = ['href="/endpoints/"', 'href="/review/"', 'href="/tokens/"', 'href="/api/docs"']
ICON = '<link rel="icon" href="/static/studio/favicon.svg" type="image/svg+xml">'


def _page(response: Any) -> str:
    text: str = response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    assert ICON in text and 'class="error-page"' in text
    assert "Traceback" not in text and 'id="traceback"' not in text
    return text


def test_it_answers_an_unknown_address_in_the_layout_with_navigation(as_owner: Client) -> None:
    response = as_owner.get("/no/such/page")
    assert response.status_code == 404
    text = _page(response)
    assert all(link in text for link in NAV)
    assert "There is nothing here" in text and '<code class="path">/no/such/page</code>' in text


def test_it_gives_a_stranger_the_same_page_as_a_project_that_does_not_exist(
    as_stranger: Client, project: Project
) -> None:
    hidden = as_stranger.get(f"/p/{project.slug}/")
    missing = as_stranger.get("/p/no-such-project/")
    assert hidden.status_code == missing.status_code == 404

    def shown(text: str, slug: str) -> str:
        return re.sub(r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")\w+', "", text.replace(slug, "X"))

    assert shown(_page(hidden), project.slug) == shown(_page(missing), "no-such-project")
    assert all(link in _page(hidden) for link in NAV)


def test_it_offers_an_anonymous_visitor_the_login_page(client: Client, db: None) -> None:
    text = _page(client.get("/no/such/page"))
    assert 'href="/login/?next=/no/such/page"' in text
    assert not any(link in text for link in NAV)


def test_it_says_why_a_role_is_refused(as_owner: Client, owner: User) -> None:
    response = as_owner.get("/endpoints/new")  # only staff change endpoints
    assert response.status_code == 403
    text = _page(response)
    assert all(link in text for link in NAV)
    assert "only staff may change model endpoints" in text


def test_it_answers_a_form_without_its_csrf_token_in_the_layout(owner: User) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    response = browser.post("/tokens/", {"name": "ci"})
    assert response.status_code == 403
    text = _page(response)
    assert all(link in text for link in NAV)
    assert "reload the page and send it again" in text


@pytest.fixture
def failing(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.studio.errors.urls"
    settings.DEBUG = False


def test_it_answers_a_server_error_in_the_layout_without_a_traceback(
    as_owner: Client, failing: None, caplog: pytest.LogCaptureFixture
) -> None:
    as_owner.raise_request_exception = False
    response = as_owner.get("/fails/")
    assert response.status_code == 500
    text = _page(response)
    assert all(link in text for link in NAV)
    assert "SECRET-INTERNALS" not in text and "RuntimeError" not in text
    assert "Something went wrong" in text
    assert any("SECRET-INTERNALS" in str(r.exc_info) for r in caplog.records)  # logged, not shown


def test_it_keeps_the_api_shape_for_api_errors(as_owner: Client, failing: None) -> None:
    as_owner.raise_request_exception = False
    failed = as_owner.get("/api/fails")
    assert failed.status_code == 500 and failed.json() == {"detail": "Server error"}
    missing = as_owner.get("/api/no-such-route")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not found"}


def test_it_serves_the_favicon_and_sends_the_conventional_address_to_it(client: Client, db: None) -> None:
    icon = client.get("/static/studio/favicon.svg")
    assert icon.status_code == 200 and icon["Content-Type"].startswith("image/svg+xml")
    assert b"<svg" in b"".join(icon.streaming_content) if icon.streaming else b"<svg" in icon.content
    moved = client.get("/favicon.ico")
    assert moved.status_code == 302 and moved["Location"] == "/static/studio/favicon.svg"
    assert ICON in client.get("/login/").content.decode()


def test_it_answers_a_refusal_no_view_caught_in_the_layout_with_its_status_and_message(
    as_owner: Client, failing: None
) -> None:
    response = as_owner.get("/refuses/")  # a MergeConflict: a refusal with status 409
    assert response.status_code == 409
    text = _page(response)
    assert all(link in text for link in NAV)
    assert "main changed 1 file(s) this proposal also changes (pack/prompts/a.txt)" in text
    assert "MergeConflict" not in text
    bad = as_owner.get("/refuses-bad/")  # a StorageError: 400, the 400 page with the reason
    assert bad.status_code == 400
    assert '<strong class="reason">no version cafe</strong>' in _page(bad)


def test_it_answers_a_refusal_in_an_htmx_partial_the_same_way(as_owner: Client, failing: None) -> None:
    response = as_owner.get("/refuses/", headers={"HX-Request": "true"})
    assert response.status_code == 409
    assert "bring main into the proposal with your version of them (sync), then merge" in _page(response)


def test_it_answers_a_refusal_under_api_in_the_api_shape(as_owner: Client, failing: None) -> None:
    response = as_owner.get("/api/refuses")
    assert response.status_code == 409
    assert response.json() == {
        "detail": "main changed 1 file(s) this proposal also changes (pack/prompts/a.txt); "
        "bring main into the proposal with your version of them (sync), then merge"
    }


def test_it_answers_a_refusal_marked_a_server_fault_as_a_server_error(
    as_owner: Client, failing: None, caplog: pytest.LogCaptureFixture
) -> None:
    as_owner.raise_request_exception = False
    response = as_owner.get("/storage-fault/")
    assert response.status_code == 500
    text = _page(response)
    assert "SECRET-INTERNALS" not in text and "Something went wrong" in text
    assert any("SECRET-INTERNALS" in str(r.exc_info) for r in caplog.records)


def test_it_logs_an_ordinary_refusal_as_no_line_of_its_own_and_a_server_error_with_its_traceback(
    as_owner: Client, failing: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The access log has the refusal's one line (scripts/start); Django's own warning for
    it, with the exception's traceback, is not written. A 500 still is."""
    caplog.set_level(logging.DEBUG)
    assert as_owner.get("/endpoints/new").status_code == 403  # raised as PermissionDenied
    assert as_owner.get("/no/such/page").status_code == 404
    assert [r.getMessage() for r in caplog.records if r.name.startswith("django")] == []
    as_owner.raise_request_exception = False
    assert as_owner.get("/fails/").status_code == 500
    logged = [r for r in caplog.records if r.name == "django.request"]
    assert [r.levelname for r in logged] == ["ERROR"] and logged[0].exc_info is not None
