"""An endpoint check never stores the endpoint's key, and its details are for staff: a
real loopback server that echoes the Authorization header it was sent into its answer
(tests/support/fault_server.py, echo_auth) must leave no trace of the key in
`last_check`, and a signed-in user who is not staff sees whether the check passed and
when, never the answer or the error (API and page)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.endpoints.models import Endpoint
from tests.support.fault_server import FaultServer

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]
KEY_ENV = "PROVIDER_CREDS"  # a name the log redactor would not guess is a secret (so on the allowlist here)
KEY = "pk-live-0123456789abcdef"


@pytest.fixture(autouse=True)
def allowed(settings: Any) -> None:
    settings.ENDPOINT_KEY_VARS = [KEY_ENV]


@pytest.fixture
def echoing(staff: User, fault: FaultServer, monkeypatch: pytest.MonkeyPatch) -> Endpoint:
    monkeypatch.setenv(KEY_ENV, KEY)
    fault.configure(echo_auth=True)
    return Endpoint.objects.create(name="echo", spec=fault.spec(), key_env=KEY_ENV, created_by=staff)


@pytest.fixture
def checked(
    as_staff: Client, echoing: Endpoint, fault: FaultServer, eager: None, django_capture_on_commit_callbacks: Capture
) -> Endpoint:
    with django_capture_on_commit_callbacks(execute=True):
        as_staff.post(f"/endpoints/{echoing.pk}/check", headers={"HX-Request": "true"})
    assert fault.completions()[0].headers["authorization"] == f"Bearer {KEY}"  # the key was sent...
    echoing.refresh_from_db()
    return echoing


def test_it_stores_no_key_a_server_echoes_back(checked: Endpoint) -> None:
    check = checked.last_check
    assert check["state"] == "done" and check["answered"] is True
    # ...and is not kept: an answer that is not one of the check's own words is not kept at all
    assert check["answer"] == "" and check["answer_chars"] > len("you sent Authorization: Bearer ")
    assert KEY not in str(check)


def test_it_shows_check_details_to_staff_only_in_the_api(checked: Endpoint, as_staff: Client) -> None:
    viewer = User.objects.create_user("vic", "vic@example.com", "correct horse battery staple")
    member = Client()
    member.force_login(viewer)
    seen = member.get(f"/api/endpoints/{checked.pk}").json()["last_check"]
    assert set(seen) == {"state", "ok", "checked_at"}
    listed = member.get("/api/endpoints").json()[0]["last_check"]
    assert set(listed) == {"state", "ok", "checked_at"}
    full = as_staff.get(f"/api/endpoints/{checked.pk}").json()["last_check"]
    assert "answer" in full and KEY not in str(full)


def test_it_shows_check_details_to_staff_only_on_the_page(checked: Endpoint, as_staff: Client) -> None:
    viewer = User.objects.create_user("vic", "vic@example.com", "correct horse battery staple")
    member = Client()
    member.force_login(viewer)
    page = member.get("/endpoints/").content.decode()
    assert "FAIL" in page or "OK" in page
    assert "reachable:" not in page and "latency:" not in page
    assert "reachable:" in as_staff.get("/endpoints/").content.decode()
