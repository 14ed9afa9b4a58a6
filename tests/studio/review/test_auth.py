"""Every review route, page and API, for each persona: anonymous (login / 401),
stranger (404), viewer (reads, 403 on work), reviewer and author (work), and a token
scoped to a deployment (403)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.review.models import ReviewItem
from tests.support.studio import client_for

READS = [("get", "/review/"), ("get", "/review/{pk}")]
WORKS = [
    ("post", "/review/{pk}/claim"),
    ("post", "/review/{pk}/release"),
    ("post", "/review/{pk}/decide"),
    ("post", "/review/{pk}/gold"),
]
API_READS = [("get", "/api/review/items"), ("get", "/api/review/items/{pk}")]
API_WORKS = [
    ("post", "/api/review/items/{pk}/claim"),
    ("post", "/api/review/items/{pk}/release"),
    ("post", "/api/review/items/{pk}/decide"),
    ("post", "/api/review/items/{pk}/gold"),
]
BODIES = {"decide": {"decision": "approve"}, "gold": {}}


def _call(client: Client, method: str, url: str, api: bool) -> Any:
    body = next((b for k, b in BODIES.items() if url.endswith(k)), None)
    if api:
        return getattr(client, method)(url, body or {}, content_type="application/json")
    return getattr(client, method)(url, {"decision": "approve"} if url.endswith("decide") else {})


def _user(name: str, request: pytest.FixtureRequest) -> User:
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("method", "url"), READS + WORKS)
def test_it_sends_anonymous_users_to_log_in(item: ReviewItem, client: Client, method: str, url: str) -> None:
    response = _call(client, method, url.format(pk=item.pk), api=False)
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.parametrize(("method", "url"), API_READS + API_WORKS)
def test_it_answers_401_to_anonymous_api_calls(item: ReviewItem, client: Client, method: str, url: str) -> None:
    assert _call(client, method, url.format(pk=item.pk), api=True).status_code == 401


@pytest.mark.parametrize(
    ("method", "url", "api"),
    [(m, u, False) for m, u in READS[1:] + WORKS] + [(m, u, True) for m, u in API_READS[1:] + API_WORKS],
)
def test_it_hides_items_from_strangers(item: ReviewItem, stranger: User, method: str, url: str, api: bool) -> None:
    assert _call(client_for(stranger), method, url.format(pk=item.pk), api).status_code == 404


def test_it_lists_nothing_to_a_stranger(item: ReviewItem, stranger: User) -> None:
    assert client_for(stranger).get("/api/review/items").json()["total"] == 0
    assert f"/review/{item.pk}" not in client_for(stranger).get("/review/").content.decode()


@pytest.mark.parametrize(
    ("method", "url", "api"), [(m, u, False) for m, u in READS] + [(m, u, True) for m, u in API_READS]
)
@pytest.mark.parametrize("persona", ["viewer", "reviewer", "owner"])
def test_it_lets_every_member_read(
    item: ReviewItem, request: pytest.FixtureRequest, persona: str, method: str, url: str, api: bool
) -> None:
    assert _call(client_for(_user(persona, request)), method, url.format(pk=item.pk), api).status_code == 200


@pytest.mark.parametrize(
    ("method", "url", "api"), [(m, u, False) for m, u in WORKS] + [(m, u, True) for m, u in API_WORKS]
)
def test_it_forbids_a_viewer_to_work_an_item(item: ReviewItem, viewer: User, method: str, url: str, api: bool) -> None:
    assert _call(client_for(viewer), method, url.format(pk=item.pk), api).status_code == 403
    assert ReviewItem.objects.get(pk=item.pk).status == "open"


@pytest.mark.parametrize("persona", ["reviewer", "owner"])
@pytest.mark.parametrize("api", [False, True])
def test_it_lets_reviewers_and_authors_decide(
    item: ReviewItem, request: pytest.FixtureRequest, persona: str, api: bool
) -> None:
    user = _user(persona, request)
    url = f"/api/review/items/{item.pk}/decide" if api else f"/review/{item.pk}/decide"
    response = _call(client_for(user), "post", url, api)
    assert response.status_code == (200 if api else 302), response.content
    item.refresh_from_db()
    assert (item.status, item.decided_by) == ("decided", user)


def test_it_forbids_a_deployment_scoped_token(item: ReviewItem, reviewer: User) -> None:
    _, token = ApiToken.issue(reviewer, "runs only", deployment=item.deployment)
    client = Client(headers={"Authorization": f"Bearer {token}"})
    for method, url in API_READS + API_WORKS:
        assert _call(client, method, url.format(pk=item.pk), api=True).status_code == 403
    assert ReviewItem.objects.get(pk=item.pk).status == "open"


def test_it_lets_a_user_token_work_the_queue(item: ReviewItem, reviewer: User) -> None:
    _, token = ApiToken.issue(reviewer, "cli")
    client = Client(headers={"Authorization": f"Bearer {token}"})
    assert client.post(f"/api/review/items/{item.pk}/claim").status_code == 200
    assert ReviewItem.objects.get(pk=item.pk).claimed_by == reviewer
