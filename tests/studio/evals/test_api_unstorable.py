"""Text a database cannot store (Postgres refuses NUL in text and in JSON; SQLite keeps
it) is the request's fault: refused at the API's edge with 400 on every database, and a
database's refusal that gets past the edge is a 400 too, never a 500."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.db import DataError

from studio.evals import api as evals_api
from studio.evals.models import Eval
from studio.projects.models import Project
from tests.support.studio import bearer


def _post(user: User, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    answer = bearer(user).post("/api/evals", json.dumps(body), content_type="application/json")
    return answer.status_code, answer.json()


def test_it_refuses_a_body_holding_a_nul(owner: User, project: Project) -> None:
    assert _post(owner, {"project": "tri\x00age"}) == (400, {"detail": "Cannot parse request body"})
    assert _post(owner, {"project": "triage", "tags": ["a\x00b"]})[0] == 400
    assert Eval.objects.count() == 0


def test_it_refuses_a_query_string_holding_a_nul(owner: User, project: Project) -> None:
    answer = bearer(owner).get("/api/evals", {"project": "tri\x00age"})
    assert answer.status_code == 400 and "NUL" in answer.json()["detail"]


def test_it_answers_404_for_a_slug_holding_a_nul(owner: User, project: Project) -> None:
    assert bearer(owner).get("/api/projects/tri%00age").status_code == 404


def test_it_answers_400_when_the_database_refuses_the_text(
    owner: User, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the edge (a value built from the request) only Postgres refuses such text, so
    # the refusal is raised here by hand.
    def refuse(*args: object, **kwargs: object) -> None:
        raise DataError("unsupported Unicode escape sequence")

    monkeypatch.setattr(evals_api, "start_eval", refuse)
    status, body = _post(owner, {"project": "triage"})
    assert status == 400 and "NUL" in str(body["detail"])
