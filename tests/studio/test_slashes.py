"""One trailing slash too many (studio.slashes): the API serves the path without it, a
page redirects there; a path that does not exist either way is still 404."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

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
