"""Evals over a tier ladder: started with `tiers`, each case climbing from a scripted
small endpoint that cannot answer `classify` to a large one that answers every case,
the tiers page's per-model-tier table, and evaluating a deployment (page and API, with
who may)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.deployments import service
from studio.deployments.models import Deployment
from studio.endpoints.models import Endpoint
from studio.evals.models import Eval, EvalCase
from studio.evals.results.summary import tiers_by_model
from studio.evals.start import EvalRefused, start_deployment_eval
from studio.projects.models import Project
from tests.support.studio import run_all, scripted_endpoint, send, start

pytestmark = pytest.mark.django_db

SCRIPT = settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json"
TAGS = ["schema"]  # two cases


def script(wrong: dict[str, Any] | None = None) -> dict[str, Any]:
    """support_triage's scripted answers; `wrong` (node -> answer) replaces that node's
    answer for every case and input."""
    data: dict[str, Any] = json.loads(SCRIPT.read_text())
    for answers in [*data["cases"].values(), *(e["answers"] for e in data["inputs"]), data["nodes"]]:
        answers.update(wrong or {})
    return data


@pytest.fixture
def small(tmp_path: Path, staff: User) -> Endpoint:
    """Tier 0: its `classify` answer is never JSON, so the node fails its ladder there."""
    return scripted_endpoint(tmp_path, staff, script({"classify": "not json at all"}), name="small")


@pytest.fixture
def large(tmp_path: Path, staff: User) -> Endpoint:
    return scripted_endpoint(tmp_path, staff, script(), name="large")


@pytest.fixture
def deployment(project: Project, owner: User, small: Endpoint, large: Endpoint) -> Deployment:
    return service.create_deployment(project, user=owner, name="triage-prod", version=None, tiers=[small.pk, large.pk])


def by_tier(ev: Eval) -> dict[str, dict[str, Any]]:
    return {r["tier"]: r for r in tiers_by_model(ev)}


def test_it_starts_one_eval_over_the_ladder(
    project: Project, owner: User, small: Endpoint, large: Endpoint, sent: list[int]
) -> None:
    ev = start(project, owner, tiers=[small.pk, "large"], tags=TAGS)
    assert (ev.tiers, ev.endpoint, ev.total) == ([small.pk, large.pk], small, 2)
    assert Eval.objects.filter(project=project).count() == 1
    assert ev.model_spec.count(" > ") == 1


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"tiers": ["small", "small"]}, "twice"),
        ({"tiers": ["nope"]}, "no endpoint"),
        ({"tiers": [None]}, "own model is not a tier"),
        ({"tiers": ["small"], "endpoints": ["large"]}, "not both"),
    ],
)
def test_it_refuses_a_ladder_it_cannot_run(
    project: Project, owner: User, small: Endpoint, large: Endpoint, options: dict[str, Any], says: str
) -> None:
    with pytest.raises(EvalRefused, match=says):
        start(project, owner, tags=TAGS, **options)


def test_it_settles_a_case_wrong_on_tier_0_on_tier_1(
    project: Project, owner: User, small: Endpoint, large: Endpoint, sent: list[int]
) -> None:
    ev = start(project, owner, tiers=[small.pk, large.pk], tags=TAGS)
    assert run_all(ev) == ["passed", "passed"]
    rows = list(EvalCase.objects.filter(eval=ev))
    assert {r.settled_by for r in rows} == {"large"}
    escalations = [e for r in rows for e in r.trace["escalations"]]
    assert [(e["node"], e["from"], e["to"]) for e in escalations] == [("classify", "small", "large")] * 2
    split = by_tier(ev)
    assert list(split) == ["small", "large", "person"]
    assert (split["small"]["cases"], split["large"]["cases"], split["person"]["cases"]) == (0, 2, 0)
    assert split["large"]["passed"] == 2 and split["small"]["escalations"]["fail"] == 2
    # only `classify` climbed (one call per case on tier 1); every other node stayed on tier 0
    assert split["large"]["model_calls"] == 2 and split["small"]["model_calls"] > 2
    assert split["small"]["tokens"] > 0 and split["large"]["tokens"] > 0
    assert split["small"]["cost_usd"] + split["large"]["cost_usd"] == pytest.approx(sum(r.cost_usd for r in rows))


def test_it_counts_the_cases_a_person_must_settle(
    project: Project, owner: User, tmp_path: Path, staff: User, sent: list[int]
) -> None:
    # `extract` has no on_fail edge: failing it on the last model tier waits for a person
    only = scripted_endpoint(tmp_path, staff, script({"extract": "not json"}), name="only")
    ev = start(project, owner, tiers=[only.pk], tags=TAGS)
    run_all(ev)
    split = by_tier(ev)
    assert (split["only"]["cases"], split["person"]["cases"]) == (0, 2)
    assert set(EvalCase.objects.filter(eval=ev).values_list("settled_by", flat=True)) == {"person"}


def test_it_keeps_one_row_named_by_the_model_without_a_ladder(
    project: Project, owner: User, large: Endpoint, sent: list[int]
) -> None:
    ev = start(project, owner, endpoints=[large.pk], tags=TAGS)
    run_all(ev)
    assert [(r["tier"], r["cases"]) for r in tiers_by_model(ev)] == [(ev.model_spec, 2)]


def test_it_shows_each_tiers_cases_tokens_and_cost(
    project: Project, owner: User, small: Endpoint, large: Endpoint, as_viewer: Client, sent: list[int]
) -> None:
    ev = start(project, owner, tiers=[small.pk, large.pk], tags=TAGS)
    run_all(ev)
    page = as_viewer.get(f"/p/{project.slug}/evals/{ev.pk}/tiers").content.decode()
    table = page.split('id="tiers-by-model"', 1)[1].split("</table>", 1)[0]
    rows = {r.split('"', 1)[0]: r for r in table.split('data-tier="')[1:]}
    assert list(rows) == ["small", "large", "person"]
    large_row = by_tier(ev)["large"]
    cells = rows["large"]
    assert '<td class="num">2</td>' in cells and f"{large_row['tokens']:,}" in cells
    assert "0 fail, 0 unsure" in cells and "2 fail, 0 unsure" in rows["small"]
    assert ">person<" in rows["person"]
    summary = as_viewer.get(f"/p/{project.slug}/evals/{ev.pk}/summary").content.decode()
    assert 'id="summary-tiers-by-model"' in summary and 'data-tier="large"' in summary


# -- evaluating a deployment ---------------------------------------------------------------


def test_it_evaluates_a_deployments_version_over_its_tiers(
    deployment: Deployment, owner: User, small: Endpoint, large: Endpoint, sent: list[int]
) -> None:
    ev = start_deployment_eval(deployment, user=owner, tags=TAGS)
    assert (ev.deployment, ev.version, ev.tiers) == (deployment, deployment.version, [small.pk, large.pk])
    assert run_all(ev) == ["passed", "passed"]
    ev.refresh_from_db()
    assert ev.status == "done" and ev.summary["tiers_by_model"] == tiers_by_model(ev)
    assert [(r["tier"], r["cases"]) for r in ev.summary["tiers_by_model"]] == [
        ("small", 0),
        ("large", 2),
        ("person", 0),
    ]


def test_it_starts_a_deployment_eval_from_its_page(
    deployment: Deployment, as_owner: Client, as_viewer: Client, sent: list[int]
) -> None:
    url = f"/p/{deployment.project.slug}/deployments/{deployment.name}"
    assert 'id="evaluate-deployment"' in as_owner.get(url).content.decode()
    assert 'id="evaluate-deployment"' not in as_viewer.get(url).content.decode()
    assert as_viewer.post(url, {"action": "evaluate"}).status_code == 403
    assert not Eval.objects.exists()
    response = as_owner.post(url, {"action": "evaluate"})
    ev = Eval.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/evals/{ev.pk}/")
    assert ev.deployment == deployment and ev.tiers == deployment.tiers
    assert f"Eval {ev.pk}" in as_owner.get(url).content.decode()


def token_client(deployment: Deployment, user: User) -> Client:
    _, token = ApiToken.issue(user, "scoped", deployment=deployment)
    return Client(headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize(
    ("who", "status"),
    [("anonymous", 401), ("stranger", 404), ("viewer", 403), ("reviewer", 403), ("token", 403), ("author", 201)],
)
def test_it_lets_only_authors_evaluate_a_deployment_over_the_api(
    deployment: Deployment, request: pytest.FixtureRequest, owner: User, who: str, status: int, sent: list[int]
) -> None:
    clients = {
        "anonymous": lambda: Client(),
        "stranger": lambda: request.getfixturevalue("as_stranger"),
        "viewer": lambda: request.getfixturevalue("as_viewer"),
        "reviewer": lambda: request.getfixturevalue("as_reviewer"),
        "token": lambda: token_client(deployment, owner),
        "author": lambda: request.getfixturevalue("as_owner"),
    }
    response = send(clients[who](), "post", "/api/evals", {"deployment": deployment.name, "tags": TAGS})
    assert response.status_code == status, response.content
    if status == 201:
        (made,) = response.json()["evals"]
        assert (made["deployment"], made["tiers"], made["version"]) == (
            deployment.name,
            deployment.tiers,
            deployment.version,
        )
    else:
        assert not Eval.objects.exists()


def test_it_starts_an_eval_over_tiers_through_the_api(
    project: Project, as_owner: Client, small: Endpoint, large: Endpoint, sent: list[int]
) -> None:
    body = {"project": project.slug, "tiers": ["small", large.pk], "tags": TAGS}
    (made,) = send(as_owner, "post", "/api/evals", body).json()["evals"]
    assert (made["tiers"], made["endpoint"], made["deployment"]) == ([small.pk, large.pk], "small", None)
    both = {**body, "endpoints": ["large"]}
    assert send(as_owner, "post", "/api/evals", both).status_code == 400
