"""One trailing slash too many (studio.slashes): the API serves the path without it, a
page redirects there; a path that does not exist either way is still 404."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from tests.support.studio import bearer


def test_the_api_serves_a_path_with_an_extra_slash_as_the_path_without(owner: User) -> None:
    api = bearer(owner)
    plain = api.post("/api/deployments", {"name": "x"}, content_type="application/json")
    slashed = api.post("/api/deployments/", {"name": "x"}, content_type="application/json")
    assert plain.status_code != 404
    assert (slashed.status_code, slashed.json()) == (plain.status_code, plain.json())
    assert api.get("/api/projects/").status_code == api.get("/api/projects").status_code == 200


def test_a_page_with_an_extra_slash_redirects_to_its_address(as_owner: Client) -> None:
    got = as_owner.get("/review/1/?tab=x")
    assert got.status_code == 301 and got["Location"] == "/review/1?tab=x"


def test_a_path_that_exists_neither_way_is_still_404(owner: User) -> None:
    assert bearer(owner).get("/api/no-such-thing/").status_code == 404


def test_a_page_without_its_slash_redirects_and_a_form_posted_there_is_served(as_owner: Client, owner: User) -> None:
    got = as_owner.get("/review")
    assert got.status_code == 301 and got["Location"] == "/review/"  # Django's APPEND_SLASH
    posted = as_owner.post("/tokens", {"name": "ci"})  # the page is /tokens/: no redirect that drops the body
    assert posted.status_code == as_owner.post("/tokens/", {"name": "cd"}).status_code
    assert sorted(ApiToken.objects.filter(user=owner).values_list("name", flat=True)) == ["cd", "ci"]
