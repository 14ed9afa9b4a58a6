"""The evals API: start, read, list, cancel, baseline, gate. Per route: it works, a login
is needed (401), a stranger gets 404, a viewer may read but not write (403), bad input
gets 400 with a message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studio.evals.models import Eval, EvalCase
from studio.projects.models import Project
from tests.support.studio import bearer, run_all, scripted_endpoint, send, start

pytestmark = pytest.mark.django_db


def post(client: Client, url: str, body: Any = None) -> Any:
    return send(client, "post", url, body if body is not None else {})


# -- start ----------------------------------------------------------------------------------


def test_it_starts_one_eval_per_model_with_a_row_per_case_and_repeat(
    project: Project,
    owner: User,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[int] = []
    monkeypatch.setattr("studio.evals.shared.enqueue_cases", sent.extend)
    endpoint = scripted_endpoint(tmp_path, owner, {"nodes": {}})
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post(
            bearer(owner), "/api/evals", {"project": "triage", "endpoints": [None, endpoint.pk], "repeats": 2}
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert [e["endpoint"] for e in body["evals"]] == [None, "scripted"]
    assert {e["batch"] for e in body["evals"]} == {body["batch"]}
    assert [e["total"] for e in body["evals"]] == [30, 30]  # 15 cases x 2 repeats
    assert body["evals"][0]["counts"]["queued"] == 30 and body["evals"][0]["status"] == "queued"
    assert len(callbacks) == 1  # one send, after the commit
    assert sorted(sent) == sorted(EvalCase.objects.values_list("pk", flat=True)) and len(sent) == 60
    assert set(EvalCase.objects.values_list("repeat", flat=True)) == {0, 1}


def test_it_runs_only_the_cases_with_a_tag(project: Project, owner: User) -> None:
    response = post(bearer(owner), "/api/evals", {"project": "triage", "tags": ["ladder"]})
    assert response.status_code == 201
    assert response.json()["evals"][0]["total"] == 6 and response.json()["evals"][0]["tags"] == ["ladder"]


def test_it_runs_the_untagged_cases_or_leaves_tagged_ones_out(project: Project, owner: User) -> None:
    """support_triage: 6 cases tagged `ladder` (with more tags), 9 with no tag."""
    untagged = post(bearer(owner), "/api/evals", {"project": "triage", "untagged": True})
    assert untagged.status_code == 201, untagged.content
    ev = untagged.json()["evals"][0]
    assert ev["total"] == 9 and ev["untagged"] is True
    assert "st-05" not in set(EvalCase.objects.filter(eval_id=ev["id"]).values_list("case_id", flat=True))
    left_out = post(bearer(owner), "/api/evals", {"project": "triage", "exclude_tags": ["schema", " "]})
    assert left_out.status_code == 201 and left_out.json()["evals"][0]["total"] == 13
    assert left_out.json()["evals"][0]["exclude_tags"] == ["schema"]
    none = post(bearer(owner), "/api/evals", {"project": "triage", "tags": ["ladder"], "exclude_tags": ["ladder"]})
    assert none.status_code == 400
    assert none.json()["detail"].startswith("no case is selected (tags ladder; leaving out ladder)")


def test_it_names_endpoints_by_name_too(project: Project, owner: User, tmp_path: Path) -> None:
    scripted_endpoint(tmp_path, owner, {"nodes": {}}, name="local-fake")
    response = post(bearer(owner), "/api/evals", {"project": "triage", "endpoints": ["local-fake"]})
    assert response.status_code == 201 and response.json()["evals"][0]["endpoint"] == "local-fake"


def test_it_needs_a_login_to_start(project: Project) -> None:
    assert post(Client(), "/api/evals", {"project": "triage"}).status_code == 401


def test_it_hides_the_project_from_a_stranger(project: Project, stranger: User) -> None:
    assert post(bearer(stranger), "/api/evals", {"project": "triage"}).status_code == 404


def test_it_lets_only_authors_start(project: Project, viewer: User, reviewer: User) -> None:
    assert post(bearer(viewer), "/api/evals", {"project": "triage"}).status_code == 403
    assert post(bearer(reviewer), "/api/evals", {"project": "triage"}).status_code == 403
    assert not Eval.objects.exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"endpoints": [12345]}, "no endpoint 12345"),
        ({"repeats": 0}, "repeats must be from 1 to 100"),
        ({"tags": ["nope"]}, "no case is selected (tags nope)"),
        ({"version": "deadbeef"}, "no version deadbeef"),
    ],
)
def test_it_refuses_bad_input(project: Project, owner: User, body: dict[str, Any], message: str) -> None:
    response = post(bearer(owner), "/api/evals", {"project": "triage", **body})
    assert response.status_code == 400 and message in response.json()["detail"]
    assert not Eval.objects.exists()


def test_it_refuses_a_body_without_a_project(owner: User) -> None:
    assert post(bearer(owner), "/api/evals", {"repeats": 1}).status_code == 422


def test_it_refuses_a_pack_with_tools_the_studio_does_not_serve(refunds: Project, owner: User, settings: Any) -> None:
    settings.PACKFORGE_TOOLS = ""
    response = post(bearer(owner), "/api/evals", {"project": "refunds"})
    assert response.status_code == 400 and "PACKFORGE_TOOLS" in response.json()["detail"]


# -- read, list -----------------------------------------------------------------------------


def test_it_shows_status_and_counts(project: Project, owner: User, viewer: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["ladder"])
    run_all(ev)
    response = bearer(viewer).get(f"/api/evals/{ev.pk}")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["ended"], body["counts"]["finished"], body["counts"]["passed"]) == ("done", True, 6, 6)
    assert body["summary"]["counts"]["passed"] == 6


def test_it_needs_a_login_to_read(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    assert Client().get(f"/api/evals/{ev.pk}").status_code == 401


def test_it_hides_an_eval_from_a_stranger(project: Project, owner: User, stranger: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    assert bearer(stranger).get(f"/api/evals/{ev.pk}").status_code == 404
    assert bearer(stranger).get("/api/evals/999999").status_code == 404
    assert bearer(stranger).get("/api/evals?project=triage").status_code == 404


def test_it_lists_a_projects_evals_newest_first(project: Project, owner: User, viewer: User, sent: list[int]) -> None:
    first = start(project, owner, tags=["parse"])
    second = start(project, owner, tags=["schema"])
    response = bearer(viewer).get("/api/evals?project=triage")
    assert response.status_code == 200 and [e["id"] for e in response.json()] == [second.pk, first.pk]


def test_it_lists_evals_with_their_counts_in_queries_that_do_not_grow_with_rows(
    project: Project, owner: User, viewer: User, sent: list[int], django_assert_num_queries: Any
) -> None:
    client = bearer(viewer)
    start(project, owner)
    client.get("/api/evals?project=triage")  # warm: the token's last-used stamp, caches
    with CaptureQueriesContext(connection) as one_row:
        few_rows = client.get("/api/evals?project=triage").json()
    for _ in range(4):
        start(project, owner)
    with django_assert_num_queries(len(one_row.captured_queries)):
        many_rows = client.get("/api/evals?project=triage").json()
    assert len(few_rows) == 1 and len(many_rows) == 5
    assert many_rows[-1]["counts"] == few_rows[0]["counts"] and few_rows[0]["counts"]["queued"] == few_rows[0]["total"]


# -- cancel ---------------------------------------------------------------------------------


def test_it_cancels_an_eval(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner)
    response = post(bearer(owner), f"/api/evals/{ev.pk}/cancel")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["ended"], body["counts"]["cancelled"]) == ("cancelled", True, ev.total)
    assert post(bearer(owner), f"/api/evals/{ev.pk}/cancel").status_code == 200  # again: no change


def test_it_refuses_to_cancel_a_finished_eval(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    run_all(ev)
    response = post(bearer(owner), f"/api/evals/{ev.pk}/cancel")
    assert response.status_code == 409 and "already finished" in response.json()["detail"]


def test_it_lets_only_authors_cancel(
    project: Project, owner: User, viewer: User, stranger: User, sent: list[int]
) -> None:
    ev = start(project, owner)
    assert post(Client(), f"/api/evals/{ev.pk}/cancel").status_code == 401
    assert post(bearer(stranger), f"/api/evals/{ev.pk}/cancel").status_code == 404
    assert post(bearer(viewer), f"/api/evals/{ev.pk}/cancel").status_code == 403
    ev.refresh_from_db()
    assert ev.status == "queued"


# -- baseline and gate ----------------------------------------------------------------------


def finished(project: Project, owner: User, **options: Any) -> Eval:
    ev = start(project, owner, **options)
    run_all(ev)
    ev.refresh_from_db()
    return ev


def test_it_passes_the_gate_with_no_baseline(project: Project, owner: User, sent: list[int]) -> None:
    ev = finished(project, owner, tags=["ladder"])
    response = bearer(owner).get(f"/api/evals/{ev.pk}/gate")
    assert response.status_code == 200
    assert (response.json()["passes"], response.json()["baseline"]) == (True, None)


def test_it_gates_a_later_eval_against_the_baseline(
    project: Project, owner: User, viewer: User, tmp_path: Path, sent: list[int]
) -> None:
    base = finished(project, owner, tags=["ladder"])
    assert post(bearer(owner), f"/api/evals/{base.pk}/baseline").json()["is_baseline"] is True
    same = finished(project, owner, tags=["ladder"])
    body = bearer(viewer).get(f"/api/evals/{same.pk}/gate").json()
    assert (body["passes"], body["baseline"]) == (True, base.pk)
    assert {r["metric"] for r in body["rows"]} >= {"pass_rate", "cost_per_case"}
    broken = scripted_endpoint(tmp_path, owner, {"nodes": {}})  # every case errors: a regression
    worse = finished(project, owner, tags=["ladder"], endpoints=[broken.pk])
    body = bearer(viewer).get(f"/api/evals/{worse.pk}/gate").json()
    assert body["passes"] is False and "pass_rate" in body["detail"]
    assert [r["ok"] for r in body["rows"] if r["metric"] == "pass_rate"] == [False]


def test_it_gates_only_a_finished_eval(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    response = bearer(owner).get(f"/api/evals/{ev.pk}/gate")
    assert response.status_code == 409 and "queued" in response.json()["detail"]


def test_it_keeps_one_baseline_per_project(project: Project, owner: User, sent: list[int]) -> None:
    first = finished(project, owner, tags=["parse"])
    second = finished(project, owner, tags=["parse"])
    post(bearer(owner), f"/api/evals/{first.pk}/baseline")
    post(bearer(owner), f"/api/evals/{second.pk}/baseline")
    assert list(Eval.objects.filter(is_baseline=True).values_list("pk", flat=True)) == [second.pk]


def test_it_refuses_an_unfinished_baseline(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    assert post(bearer(owner), f"/api/evals/{ev.pk}/baseline").status_code == 409


def test_it_lets_only_authors_mark_the_baseline(
    project: Project, owner: User, viewer: User, stranger: User, sent: list[int]
) -> None:
    ev = finished(project, owner, tags=["parse"])
    assert post(Client(), f"/api/evals/{ev.pk}/baseline").status_code == 401
    assert post(bearer(stranger), f"/api/evals/{ev.pk}/baseline").status_code == 404
    assert post(bearer(viewer), f"/api/evals/{ev.pk}/baseline").status_code == 403
    assert bearer(stranger).get(f"/api/evals/{ev.pk}/gate").status_code == 404
    assert Client().get(f"/api/evals/{ev.pk}/gate").status_code == 401
