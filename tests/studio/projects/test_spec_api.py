"""The spec API: GET/PUT /api/projects/{slug}/spec and GET /api/projects/{slug}/spec/induction."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from compiler import induce, load_spec
from studio.projects.models import Project
from studio.projects.specs import spec_files
from studio.projects.storage import PackRepo
from tests.support.studio import bearer, send

SPEC_DIR = Path(settings.BASE_DIR) / "specs" / "support_triage"
URL = "/api/projects/triage/spec"


@pytest.fixture
def with_spec(project: Project, repo: PackRepo) -> PackRepo:
    repo.save(
        {"spec/spec.yaml": (SPEC_DIR / "spec.yaml").read_bytes()},  # its gold is the evalset already
        base=repo.head(),
        author="Olive",
        email="olive@example.com",
        message="Add the spec",
    )
    return repo


def stored(repo: PackRepo, name: str = "spec.yaml") -> str:
    """A spec file as the compiler reads it: gold.jsonl is the pack's evalset (one gold)."""
    return spec_files(repo)[name].decode()


def test_it_reads_the_spec_with_its_summary_and_gold_cases(viewer: User, with_spec: PackRepo) -> None:
    answer = bearer(viewer).get(URL)
    assert answer.status_code == 200
    body = answer.json()
    assert body["version"] == with_spec.head() and body["exists"] and body["valid"]
    assert body["spec_yaml"] == (SPEC_DIR / "spec.yaml").read_text()
    assert body["gold_jsonl"] == (SPEC_DIR / "gold.jsonl").read_text()
    assert body["problems"] == []
    assert body["summary"]["name"] == "support_triage" and body["summary"]["unsure_end"] == "manual_triage"
    assert [f["name"] for f in body["summary"]["inputs"]] == ["ticket"]
    assert "category" in [f["name"] for f in body["summary"]["outputs"]]
    assert body["gold"][0]["id"] == "st-01" and body["gold"][0]["line"] == 1 and body["gold"][0]["end"] == "billing_ops"


def test_it_reports_a_project_without_a_spec(owner: User, project: Project) -> None:
    body = bearer(owner).get(URL).json()
    assert body["exists"] is False and body["valid"] is False and body["spec_yaml"] == ""
    assert {p["file"] for p in body["problems"]} == {"spec.yaml", "gold.jsonl"}


def test_it_saves_the_spec_on_its_base(owner: User, project: Project, with_spec: PackRepo) -> None:
    base = with_spec.head()
    text = stored(with_spec).replace("Triage one", "Triage exactly one")
    answer = send(bearer(owner), "put", URL, {"base": base, "message": "Exactly one", "spec_yaml": text})
    assert answer.status_code == 200
    body = answer.json()
    assert body["valid"] and body["base"] == base and body["version"] == with_spec.head() != base
    assert stored(with_spec) == text
    project.refresh_from_db()
    assert project.head == with_spec.head()


def test_it_saves_gold_cases_with_the_spec(owner: User, with_spec: PackRepo) -> None:
    first = stored(with_spec, "gold.jsonl").splitlines()[0] + "\n"
    body = {"base": with_spec.head(), "message": "One case", "spec_yaml": stored(with_spec), "gold_jsonl": first}
    assert send(bearer(owner), "put", URL, body).status_code == 200
    assert stored(with_spec, "gold.jsonl") == first


def test_it_saves_a_spec_that_does_not_load_and_lists_its_problems(owner: User, with_spec: PackRepo) -> None:
    text = stored(with_spec) + "colour: blue\n"
    answer = send(bearer(owner), "put", URL, {"base": with_spec.head(), "message": "WIP", "spec_yaml": text})
    assert answer.status_code == 200
    body = answer.json()
    assert body["valid"] is False and stored(with_spec) == text
    [problem] = body["problems"]
    assert problem["file"] == "spec.yaml" and problem["line"] == len(text.splitlines())
    assert "unknown key 'colour'" in problem["message"]


def test_it_refuses_a_stale_base_with_409_and_writes_nothing(owner: User, with_spec: PackRepo) -> None:
    base = with_spec.head()
    with_spec.save({"spec/spec.yaml": b"name: theirs\n"}, base=base, author="Tess", email="t@e.com", message="Theirs")
    head = with_spec.head()
    answer = send(bearer(owner), "put", URL, {"base": base, "message": "Mine", "spec_yaml": "name: mine\n"})
    assert answer.status_code == 409
    body = answer.json()
    assert body["head"] == head and body["changes"] == [{"path": "spec/spec.yaml", "status": "modified"}]
    assert "nothing was saved" in body["detail"]
    assert with_spec.head() == head and stored(with_spec) == "name: theirs\n"


def test_it_refuses_a_save_without_a_message(owner: User, with_spec: PackRepo) -> None:
    answer = send(bearer(owner), "put", URL, {"base": with_spec.head(), "message": " ", "spec_yaml": "name: x\n"})
    assert answer.status_code == 400 and answer.json()["detail"] == "a save needs a message"


def test_it_refuses_a_body_without_the_spec_text(owner: User, with_spec: PackRepo) -> None:
    answer = send(bearer(owner), "put", URL, {"base": with_spec.head(), "message": "x"})
    assert answer.status_code == 422


@pytest.mark.parametrize("persona", ["viewer", "reviewer"])
def test_it_refuses_a_save_by_a_member_who_is_not_an_author(
    persona: str, request: pytest.FixtureRequest, with_spec: PackRepo
) -> None:
    user: User = request.getfixturevalue(persona)
    head = with_spec.head()
    answer = send(bearer(user), "put", URL, {"base": head, "message": "x", "spec_yaml": "name: x\n"})
    assert answer.status_code == 403
    assert with_spec.head() == head


def test_it_requires_authentication(with_spec: PackRepo) -> None:
    anonymous = Client()
    assert anonymous.get(URL).status_code == 401
    assert anonymous.get(f"{URL}/induction").status_code == 401
    body = {"base": with_spec.head(), "message": "x", "spec_yaml": "name: x\n"}
    assert send(anonymous, "put", URL, body).status_code == 401


def test_it_hides_the_project_from_a_stranger(stranger: User, with_spec: PackRepo) -> None:
    client = bearer(stranger)
    assert client.get(URL).status_code == 404
    assert client.get(f"{URL}/induction").status_code == 404
    body = {"base": with_spec.head(), "message": "x", "spec_yaml": "name: x\n"}
    assert send(client, "put", URL, body).status_code == 404


def test_it_reports_induction_with_evidence(viewer: User, with_spec: PackRepo) -> None:
    answer = bearer(viewer).get(f"{URL}/induction")
    assert answer.status_code == 200
    body = answer.json()
    assert body["version"] == with_spec.head() and body["cases"] == 15
    fields = {f["name"]: f for f in body["fields"]}
    assert list(fields) == ["category", "order_id", "amount_usd", "sentiment", "priority"]
    enum = next(c for c in fields["category"]["constraints"] if c["kind"] == "enum")
    assert set(enum["detail"]["values"]) == {"billing", "technical", "account", "other"}
    spec = load_spec(SPEC_DIR)  # the compiler's own answer, for the counts
    [expected] = [
        c for c in induce([(c.input, c.expected) for c in spec.gold]).fields["category"].constraints if c.kind == "enum"
    ]
    assert enum["evidence"] == expected.evidence and enum["evidence"]["violations"] == 0
    assert fields["order_id"]["induced_schema"]["pattern"] == "^ORD-[0-9]{5}$"
    assert body["copied"] == {"order_id": "ticket"}


def test_it_answers_409_for_induction_on_a_spec_that_does_not_load(owner: User, with_spec: PackRepo) -> None:
    with_spec.save({"spec/spec.yaml": b"name: [\n"}, base=with_spec.head(), author="T", email="", message="Broken")
    answer = bearer(owner).get(f"{URL}/induction")
    assert answer.status_code == 409 and "does not load" in answer.json()["detail"]


def test_it_reads_an_older_version(viewer: User, with_spec: PackRepo) -> None:
    old = with_spec.head()
    with_spec.save({"spec/spec.yaml": b"name: [\n"}, base=old, author="T", email="", message="Broken")
    body = bearer(viewer).get(URL, {"version": old}).json()
    assert body["version"] == old and body["valid"]
    assert bearer(viewer).get(URL, {"version": "ffff"}).status_code == 404
