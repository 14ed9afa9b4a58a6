"""The compiles API (studio.compiles.api), with a bearer token like CI and the CLI:
start, read (progress + attempts), list, cancel, read an attempt, adopt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.compiles.models import Compile
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.proposals.models import Proposal
from tests.support.compile_stand_in import TWO_ATTEMPTS, Scripted, StandIn
from tests.support.studio import approve_and_merge, bearer, send


@pytest.fixture
def run_inline(
    stand_in: Callable[[list[Scripted]], StandIn], eager: None, django_capture_on_commit_callbacks: Any
) -> Callable[[Client, dict[str, Any]], Any]:
    stand_in(TWO_ATTEMPTS)

    def start(client: Client, body: dict[str, Any]) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return send(client, "post", "/api/compiles", body)

    return start


def test_it_starts_a_compile_and_reports_its_attempts(
    owner: User, project: Project, run_inline: Callable[[Client, dict[str, Any]], Any]
) -> None:
    api = bearer(owner)

    started = run_inline(api, {"project": "triage", "attempts": 2})

    assert started.status_code == 201, started.content
    body = started.json()
    assert (
        body["project"] == "triage"
        and body["planner"] == "rules"
        and body["version"] == PackRepo(project.repo_path).head()
    )
    got = api.get(f"/api/compiles/{body['id']}").json()
    assert (got["status"], got["final"], got["best_attempt"], got["full_marks"], got["stage"]) == (
        "done",
        True,
        2,
        True,
        "done",
    )
    assert [(a["number"], a["status"], a["offline_score"]) for a in got["attempts"]] == [(1, "ok", 0.6), (2, "ok", 1.0)]
    assert got["attempts"][0]["failing_nodes"] == ["prioritise"]


def test_it_lists_a_projects_compiles_newest_first(owner: User, project: Project) -> None:
    older = Compile.objects.create(project=project, version="a" * 40, created_by=owner)
    newer = Compile.objects.create(project=project, version="b" * 40, created_by=owner)

    listed = bearer(owner).get("/api/compiles?project=triage")

    assert listed.status_code == 200 and [c["id"] for c in listed.json()] == [newer.pk, older.pk]


def test_it_returns_one_attempt_with_its_plan_pack_and_evals(
    owner: User, project: Project, run_inline: Callable[[Client, dict[str, Any]], Any]
) -> None:
    api = bearer(owner)
    c = run_inline(api, {"project": "triage"}).json()

    attempt = api.get(f"/api/compiles/{c['id']}/attempts/1")

    body = attempt.json()
    assert attempt.status_code == 200
    assert body["plan"] == {"name": "support_triage", "attempt": 1}
    assert "graph.yaml" in body["pack_files"] and body["evals"]["offline"]["passed"] == 9
    assert api.get(f"/api/compiles/{c['id']}/attempts/7").status_code == 404


def test_it_adopts_an_attempt_as_a_proposal(
    owner: User, reviewer: User, project: Project, run_inline: Callable[[Client, dict[str, Any]], Any]
) -> None:
    api = bearer(owner)
    c = run_inline(api, {"project": "triage"}).json()
    repo = PackRepo(project.repo_path)
    main, evalset = repo.head(), repo.files(prefix="pack/")["evalset.jsonl"]

    adopted = api.post(f"/api/compiles/{c['id']}/attempts/2/adopt")

    assert adopted.status_code == 200, adopted.content
    body = adopted.json()
    assert body["proposal"] == 1 and body["version"] == repo.head("proposals/1") and repo.head() == main
    assert f"compile #{c['id']} attempt 2" in body["message"] and c["version"] in body["message"]
    assert repo.files(body["version"], prefix="pack/")["evalset.jsonl"] == evalset  # one gold: kept
    approve_and_merge(1, api, bearer(reviewer))
    assert repo.head() == body["version"]
    again = api.post(f"/api/compiles/{c['id']}/attempts/2/adopt")
    assert again.status_code == 409 and "nothing to adopt" in again.json()["detail"]


def test_it_cancels_a_compile_and_refuses_to_cancel_an_ended_one(owner: User, project: Project) -> None:
    api = bearer(owner)
    queued = Compile.objects.create(project=project, version="a" * 40, created_by=owner)
    done = Compile.objects.create(project=project, version="a" * 40, created_by=owner, status="done")

    cancelled = api.post(f"/api/compiles/{queued.pk}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert api.post(f"/api/compiles/{queued.pk}/cancel").status_code == 200  # cancelling twice is harmless
    refused = api.post(f"/api/compiles/{done.pk}/cancel")
    assert refused.status_code == 409 and "already ended" in refused.json()["detail"]


def test_it_lets_members_read_and_only_authors_change(
    owner: User, viewer: User, reviewer: User, stranger: User, project: Project
) -> None:
    c = Compile.objects.create(project=project, version="a" * 40, created_by=owner)

    assert bearer(viewer).get(f"/api/compiles/{c.pk}").status_code == 200
    assert send(bearer(viewer), "post", "/api/compiles", {"project": "triage"}).status_code == 403
    assert bearer(reviewer).post(f"/api/compiles/{c.pk}/cancel").status_code == 403
    assert bearer(reviewer).post(f"/api/compiles/{c.pk}/attempts/1/adopt").status_code == 403
    assert bearer(stranger).get(f"/api/compiles/{c.pk}").status_code == 404
    assert bearer(stranger).get("/api/compiles?project=triage").status_code == 404
    assert Client().get(f"/api/compiles/{c.pk}").status_code == 401


def test_it_refuses_an_unknown_planner_or_a_scripted_one(owner: User, project: Project, scripted: Endpoint) -> None:
    api = bearer(owner)

    unknown = send(api, "post", "/api/compiles", {"project": "triage", "planner": "nobody"})
    assert unknown.status_code == 400 and "no endpoint 'nobody' for the planner" in unknown.json()["detail"]
    fake = send(api, "post", "/api/compiles", {"project": "triage", "planner": "scripted"})
    assert fake.status_code == 400 and "cannot plan" in fake.json()["detail"]
    too_many = send(api, "post", "/api/compiles", {"project": "triage", "attempts": 0})
    assert too_many.status_code == 400 and "attempts must be from 1" in too_many.json()["detail"]
    assert not Compile.objects.exists()


def test_it_takes_the_planner_and_target_by_name(
    owner: User, project: Project, staff: User, scripted: Endpoint
) -> None:
    Endpoint.objects.create(name="frontier", spec="openai:http://127.0.0.1:9/v1#big", created_by=staff)

    started = send(
        bearer(owner), "post", "/api/compiles", {"project": "triage", "planner": "frontier", "target": "scripted"}
    )

    body = started.json()
    assert started.status_code == 201
    assert (body["planner"], body["planner_endpoint"], body["target_endpoint"], body["status"]) == (
        "endpoint",
        "frontier",
        "scripted",
        "queued",
    )


def test_it_opens_the_adoption_on_the_base_it_was_shown(
    owner: User, reviewer: User, project: Project, run_inline: Callable[[Client, dict[str, Any]], Any]
) -> None:
    api = bearer(owner)
    c = run_inline(api, {"project": "triage"}).json()
    repo = PackRepo(project.repo_path)
    seen = repo.head()
    repo.save({"pack/notes.txt": b"mine\n"}, base=seen, author="Tess", email="t@x", message="Notes")

    adopted = api.post(f"/api/compiles/{c['id']}/attempts/2/adopt?base={seen}")

    assert adopted.status_code == 200
    assert Proposal.objects.get(number=adopted.json()["proposal"]).base == seen
    merged = approve_and_merge(adopted.json()["proposal"], api, bearer(reviewer))
    assert merged["how"] == "merge commit"  # the teammate's save is kept, not overwritten unseen
    assert repo.files(prefix="pack/")["notes.txt"] == b"mine\n"
