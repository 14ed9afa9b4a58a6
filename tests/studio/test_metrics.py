"""GET /metrics: who may read it, and what it counts (studio/ops/metrics.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studio.accounts.models import ApiToken
from studio.deployments.models import Deployment, ServedRun
from studio.endpoints.models import Endpoint
from studio.evals.models import Eval, EvalCase
from studio.projects.models import Project
from studio.runs import start, worker
from studio.runs.models import TryRun
from tests.support.metrics import scrape, value
from tests.support.serving import TICKET
from tests.support.studio import bearer, client_for


def attempt(node: str, step: int, n: int = 1, *, ok: bool = True, **extra: Any) -> dict[str, Any]:
    stage = "sample" if n == 1 else "resample"
    return {"node": node, "step": step, "attempt": n, "stage": stage, "ok": ok, "prompt_tokens": 100,
            "completion_tokens": 10, "latency_s": 0.2, "request_id": f"r.{node}.{n}", **extra}  # fmt: skip


def step(node: str, n: int, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"node": node, "step": n, "kind": "generate", "status": status, **extra}


@pytest.fixture(autouse=True)
def no_watcher(settings: Any) -> None:
    # No lease-watcher thread: it would hold its own database connection past the test.
    settings.PACKFORGE_WORK_WATCH = False


@pytest.fixture
def as_staff_token(staff: User) -> Client:
    return bearer(staff)


@pytest.fixture
def evals(project: Project, owner: User, staff: User) -> Eval:
    endpoint = Endpoint.objects.create(name="small", spec="fake:/nowhere.json", created_by=staff)
    ev = Eval.objects.create(project=project, version="v", model_spec="x", endpoint=endpoint, created_by=owner,
                             status=Eval.Status.DONE)  # fmt: skip
    start = timezone.now()
    trace = {"attempts": [attempt("classify", 1, ok=False, category="schema"), attempt("classify", 1, 2)],
             "steps": [step("classify", 1)]}  # fmt: skip
    EvalCase.objects.create(eval=ev, case_id="a", status="passed", trace=trace, attempts=1,
                            started_at=start, finished_at=start + timedelta(seconds=0.4))  # fmt: skip
    EvalCase.objects.create(eval=ev, case_id="b", status="error", attempts=4,
                            started_at=start, finished_at=start + timedelta(seconds=40))  # fmt: skip
    EvalCase.objects.create(eval=ev, case_id="c", status="queued")
    return ev


@pytest.fixture
def deployment(project: Project, owner: User) -> Deployment:
    return Deployment.objects.create(project=project, name="triage-prod", version="v", created_by=owner)


def served(
    deployment: Deployment, run_id: str, status: str, trace: dict[str, Any] | None = None, **extra: Any
) -> ServedRun:
    return ServedRun.objects.create(deployment=deployment, run_id=run_id, input={}, input_digest="d", version="v",
                                    status=status, trace=trace or {}, **extra)  # fmt: skip


# -- who may read it --


def test_it_answers_staff_by_session_and_by_token(as_staff: Client, as_staff_token: Client) -> None:
    assert "packforge_eval_runs" in (as_staff.get("/metrics").content.decode())
    assert as_staff_token.get("/metrics").status_code == 200


def test_it_asks_anonymous_scrapers_for_a_token(db: None) -> None:
    answer = Client().get("/metrics")
    assert answer.status_code == 401 and answer["WWW-Authenticate"].startswith("Bearer")
    bad = Client(headers={"Authorization": "Bearer pf_nope"}).get("/metrics")
    assert bad.status_code == 401 and b"invalid or revoked token" in bad.content


@pytest.mark.parametrize("persona", ["owner", "reviewer", "viewer", "stranger"])
def test_it_refuses_users_who_are_not_staff(request: pytest.FixtureRequest, project: Project, persona: str) -> None:
    user = request.getfixturevalue(persona)
    assert client_for(user).get("/metrics").status_code == 403
    assert bearer(user).get("/metrics").status_code == 403


def test_it_refuses_a_deployment_token_and_a_revoked_one(staff: User, deployment: Deployment) -> None:
    _, scoped = ApiToken.issue(staff, "deploy", deployment=deployment)
    assert Client(headers={"Authorization": f"Bearer {scoped}"}).get("/metrics").status_code == 403
    row, token = ApiToken.issue(staff, "old")
    ApiToken.objects.filter(pk=row.pk).update(revoked=True)
    assert Client(headers={"Authorization": f"Bearer {token}"}).get("/metrics").status_code == 401


# -- what it counts --


def test_it_counts_evals_cases_durations_calls_and_poisoned_leases(as_staff: Client, evals: Eval) -> None:
    got = scrape(as_staff)
    assert value(got, "packforge_eval_runs", status="done") == 1
    assert value(got, "packforge_eval_cases", status="passed") == 1
    assert value(got, "packforge_eval_cases", status="queued") == 1
    assert value(got, "packforge_eval_case_duration_seconds_count") == 2
    assert value(got, "packforge_eval_case_duration_seconds_bucket", le="0.5") == 1
    assert value(got, "packforge_eval_case_duration_seconds_bucket", le="60.0") == 2
    assert value(got, "packforge_eval_case_duration_seconds_sum") == pytest.approx(40.4)
    assert value(got, "packforge_model_calls_total", source="eval", endpoint="small") == 2
    assert value(got, "packforge_model_prompt_tokens_total", source="eval", endpoint="small") == 200
    assert value(got, "packforge_model_errors_total", source="eval", endpoint="small", cause="schema") == 1
    assert value(got, "packforge_retries_total", source="eval", node="classify", tier="") == 1
    assert value(got, "packforge_leases_lost_total", kind="eval_case") == 3
    assert value(got, "packforge_poisoned_total", kind="eval_case") == 1


def test_it_counts_a_try_run_made_by_the_worker(as_staff: Client, project: Project, owner: User) -> None:
    run = start.new_try_run(project, user=owner, version=None, endpoint=None, input=TICKET)  # one the script answers
    worker.run_try(run.pk)
    run.refresh_from_db()
    made = len(run.trace["attempts"])
    assert made > 0
    got = scrape(as_staff)
    assert value(got, "packforge_try_runs", status=run.status) == 1
    assert value(got, "packforge_model_calls_total", source="try", endpoint="(pack model)") == made


def test_it_never_counts_a_replayed_step_as_a_model_call(as_staff: Client, project: Project, owner: User) -> None:
    # A resumed run: step 1 was replayed from its checkpoint (its one call was made once,
    # by the delivery that died), step 2 ran after the resume.
    trace = {"attempts": [attempt("classify", 1), attempt("extract", 2)],
             "steps": [step("classify", 1, replayed=True), step("extract", 2)]}  # fmt: skip
    TryRun.objects.create(project=project, version="v", input={}, created_by=owner, status="done", trace=trace,
                          attempts=2)  # fmt: skip
    got = scrape(as_staff)
    assert value(got, "packforge_model_calls_total", source="try", endpoint="(pack model)") == 2
    assert value(got, "packforge_replayed_steps_total", source="try") == 1
    assert value(got, "packforge_leases_lost_total", kind="try_run") == 1


def test_it_counts_served_runs_nodes_tiers_and_escalations(as_staff: Client, deployment: Deployment) -> None:
    start = timezone.now() - timedelta(seconds=3)
    trace = {
        "attempts": [
            attempt("classify", 1, ok=False, category="parse", tier="small"),
            attempt("classify", 1, 2, ok=False, category="parse", tier="small"),
            attempt("classify", 1, 1, tier="large"),
        ],
        "steps": [
            step("classify", 1, tier="large",
                 escalations=[{"from": "small", "to": "large", "reason": "fail: not JSON", "node": "classify"}]),
            step("end", 2, "end"),
        ],
    }  # fmt: skip
    served(deployment, "r1", "done", trace, started_at=start, finished_at=start + timedelta(seconds=2), attempts=1)
    served(deployment, "r2", "queued", created_at=timezone.now() - timedelta(seconds=30))
    served(deployment, "r3", "failed", attempts=9)
    got = scrape(as_staff)
    assert value(got, "packforge_served_runs", deployment="triage-prod", status="done") == 1
    assert value(got, "packforge_served_run_duration_seconds_count", deployment="triage-prod") == 1
    assert value(got, "packforge_served_run_duration_seconds_bucket", deployment="triage-prod", le="2.5") == 1
    assert value(got, "packforge_run_queue_depth", deployment="triage-prod") == 1
    assert value(got, "packforge_run_queue_oldest_age_seconds", deployment="triage-prod") >= 30
    assert value(got, "packforge_model_calls_total", source="served", endpoint="small") == 2
    assert value(got, "packforge_model_calls_total", source="served", endpoint="large") == 1
    assert value(got, "packforge_model_errors_total", source="served", endpoint="small", cause="parse") == 2
    assert value(got, "packforge_retries_total", source="served", node="classify", tier="small") == 1
    assert value(got, "packforge_escalations_total", deployment="triage-prod", node="classify", from_tier="small",
                 to_tier="large", reason="fail") == 1  # fmt: skip
    assert value(got, "packforge_node_outcomes_total", deployment="triage-prod", node="classify", tier="large",
                 outcome="ok") == 1  # fmt: skip
    assert value(
        got, "packforge_node_duration_seconds_sum", deployment="triage-prod", node="classify"
    ) == pytest.approx(0.6)
    assert value(got, "packforge_poisoned_total", kind="served_run") == 1
    assert value(got, "packforge_leases_lost_total", kind="served_run") == 8


def test_it_reads_the_database_in_a_bounded_number_of_queries(
    as_staff: Client, evals: Eval, deployment: Deployment, project: Project, owner: User
) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            scrape(as_staff)
        return len(seen)

    few = queries()
    for n in range(30):
        served(deployment, f"more{n}", "done", {"attempts": [attempt("classify", 1)], "steps": [step("classify", 1)]})
        TryRun.objects.create(project=project, version="v", input={}, created_by=owner, status="done")
        EvalCase.objects.create(eval=evals, case_id=f"more{n}", status="passed")
    assert queries() == few == 21  # 19 for the collector, 2 for the session and its user


def test_it_counts_the_review_queue_by_deployment_and_node(as_staff: Client, deployment: Deployment) -> None:
    from studio.review.models import ReviewItem

    def item(run_id: str, status: str, age_s: float) -> None:
        run = served(deployment, run_id, "waiting")
        ReviewItem.objects.create(run=run, deployment=deployment, project=deployment.project, node="approve", step=3,
                                  reason="human", status=status,
                                  created_at=timezone.now() - timedelta(seconds=age_s))  # fmt: skip

    item("w1", "open", 120)
    item("w2", "claimed", 10)
    item("w3", "decided", 900)
    got = scrape(as_staff)
    assert value(got, "packforge_review_queue_depth", deployment="triage-prod", node="approve", status="open") == 1
    assert value(got, "packforge_review_queue_depth", deployment="triage-prod", node="approve", status="claimed") == 1
    assert value(got, "packforge_review_queue_depth", deployment="triage-prod", node="approve", status="decided") == 0
    oldest = value(got, "packforge_review_queue_oldest_age_seconds", deployment="triage-prod", node="approve")
    assert 120 <= oldest < 900
