from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.endpoints.models import Endpoint

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]
NEW = {"name": "local", "spec": "openai:http://127.0.0.1:8080/v1#qwen", "price_in": 0.1, "concurrency": 2}


def bearer(user: User) -> dict[str, str]:
    _, token = ApiToken.issue(user, "tests")
    return {"Authorization": f"Bearer {token}"}


def test_it_lists_endpoints(viewer: User, scripted: Endpoint) -> None:
    page = Client().get("/api/endpoints", headers=bearer(viewer))
    assert page.status_code == 200
    assert [e["name"] for e in page.json()] == ["scripted"]


def test_it_gets_one_endpoint(viewer: User, scripted: Endpoint) -> None:
    page = Client().get(f"/api/endpoints/{scripted.pk}", headers=bearer(viewer))
    assert page.status_code == 200 and page.json()["spec"] == scripted.spec


def test_it_answers_404_in_the_detail_shape(viewer: User) -> None:
    page = Client().get("/api/endpoints/999", headers=bearer(viewer))
    assert page.status_code == 404 and page.json() == {"detail": "Not found"}


def test_it_creates_an_endpoint(staff: User) -> None:
    page = Client().post("/api/endpoints", NEW, content_type="application/json", headers=bearer(staff))
    assert page.status_code == 201, page.content
    assert page.json()["concurrency"] == 2 and Endpoint.objects.get(name="local").created_by == staff


def test_it_refuses_a_bad_spec_with_a_message(staff: User) -> None:
    page = Client().post(
        "/api/endpoints", {**NEW, "spec": "openai:http://x/v1"}, content_type="application/json", headers=bearer(staff)
    )
    assert page.status_code == 400
    assert "needs a model after" in page.json()["detail"]


def test_it_forbids_non_staff_to_create(owner: User) -> None:
    page = Client().post("/api/endpoints", NEW, content_type="application/json", headers=bearer(owner))
    assert page.status_code == 403 and "staff" in page.json()["detail"]


def test_it_queues_a_check(staff: User, scripted: Endpoint, django_capture_on_commit_callbacks: Capture) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        page = Client().post(f"/api/endpoints/{scripted.pk}/check", headers=bearer(staff))
    assert page.status_code == 202 and page.json()["last_check"]["state"] == "checking"
    assert len(callbacks) == 1


def test_it_forbids_non_staff_to_check(owner: User, scripted: Endpoint) -> None:
    assert Client().post(f"/api/endpoints/{scripted.pk}/check", headers=bearer(owner)).status_code == 403


def test_it_requires_authentication(scripted: Endpoint) -> None:
    page = Client().get("/api/endpoints")
    assert page.status_code == 401 and "detail" in page.json()
