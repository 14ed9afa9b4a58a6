"""Numbers in query strings (issue 9, item 10): `?page=²` was a 500 because `isdigit()` is
not `int()`. One strict parse (studio/numbers.py) serves every page and operation that
reads a number a client typed; each answers its default, a 400 or a 404, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.evals.models import Eval
from studio.numbers import whole_number
from studio.projects.models import Project
from tests.support.eval_results import make_eval
from tests.support.studio import bearer, send

# Unicode digits isdigit() accepts and int() refuses, digits int() accepts that a URL
# should not carry, and numbers past what any page or database holds.
NOT_NUMBERS = ["²", "¹", "①", "٣", "３", " 3", "+3", "3_0", "-1", "0x1", "1e3", "", "9" * 5000]


@pytest.mark.parametrize("raw", [*NOT_NUMBERS, str(2**63)])
def test_it_parses_only_ascii_digits_within_bounds(raw: str) -> None:
    assert whole_number(raw) is None


def test_it_parses_a_plain_number() -> None:
    assert whole_number("42") == 42 and whole_number("0") == 0 and whole_number(str(2**63 - 1)) == 2**63 - 1
    assert whole_number("0", minimum=1) is None and whole_number("11", maximum=10) is None
    assert whole_number(7) == 7 and whole_number(True) is None and whole_number(None) is None


@pytest.mark.parametrize("raw", [*NOT_NUMBERS, "0", "10001"])
def test_it_shows_the_first_history_page_for_a_bad_page(as_owner: Client, project: Project, raw: str) -> None:
    page = as_owner.get("/p/triage/history/", {"page": raw})
    assert page.status_code == 200
    assert b"Create from example" in page.content  # the first (and only) page


def test_it_shows_a_later_history_page(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/history/", {"page": "2"})
    assert page.status_code == 200 and b"Create from example" not in page.content


@pytest.mark.parametrize("raw", NOT_NUMBERS)
def test_it_shows_the_first_cost_page_for_a_bad_page(as_owner: Client, project: Project, owner: User, raw: str) -> None:
    ev = make_eval(project, owner)
    assert as_owner.get(f"/p/triage/evals/{ev.pk}/cost", {"page": raw}).status_code == 200


@pytest.mark.parametrize("raw", ["²", "①", "٣", str(2**64), "-1"])
def test_it_answers_400_to_a_compare_of_a_bad_eval_id(
    as_owner: Client, project: Project, owner: User, raw: str
) -> None:
    ev = make_eval(project, owner)
    assert as_owner.get("/p/triage/evals/compare", {"a": raw, "b": ev.pk}).status_code == 400
    assert as_owner.get("/p/triage/evals/compare", {"a": ev.pk, "b": raw}).status_code == 400


@pytest.mark.parametrize("raw", ["²", "①", "٣", str(2**64)])
def test_it_answers_404_to_the_old_compare_url_with_a_bad_eval_id(
    as_owner: Client, project: Project, owner: User, raw: str
) -> None:
    assert as_owner.get("/evals/compare", {"a": raw}).status_code == 404


@pytest.mark.parametrize("ref", ["²", "①", "٣", str(2**64), 2**64, -1])
def test_it_refuses_an_eval_on_a_bad_endpoint_id(project: Project, owner: User, ref: Any) -> None:
    answer = send(bearer(owner), "post", "/api/evals", {"project": "triage", "endpoints": [ref]})
    assert answer.status_code == 400 and "no endpoint" in answer.json()["detail"]
    assert not Eval.objects.exists()


@pytest.mark.parametrize(
    "url", ["/p/triage/evals/{n}/", "/p/triage/evals/{n}/cost", "/p/triage/runs/{n}", "/evals/{n}/"]
)
def test_it_answers_404_to_an_id_past_any_database(as_owner: Client, project: Project, url: str) -> None:
    assert as_owner.get(url.format(n=2**64)).status_code == 404
