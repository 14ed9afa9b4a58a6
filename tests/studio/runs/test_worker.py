"""What a worker does with a try-it run: studio.runs.worker.run_try."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.endpoints.models import Endpoint
from studio.projects.models import Project, create_project
from studio.projects.views import example_files
from studio.runs import start, steps, worker
from studio.runs.models import TryRun
from tests.support.fault_server import FaultServer
from tests.support.studio import CHARGED_TWICE, REJECTED_TEXT

CASE = CHARGED_TWICE
EXPECTED = {"category": "billing", "order_id": "ORD-48213", "amount_usd": 59.98, "sentiment": "angry", "priority": "p1"}


def _queued(project: Project, owner: User, endpoint: Endpoint | None = None, input: dict | None = None) -> TryRun:
    return start.new_try_run(project, user=owner, version=None, endpoint=endpoint, input=input or CASE)


def test_it_runs_the_pack_on_its_own_model(project: Project, owner: User) -> None:
    run = _queued(project, owner)
    assert worker.run_try(run.pk) == "done"
    run.refresh_from_db()
    assert run.status == "done" and run.output == EXPECTED and run.error == "" and run.finished_at
    assert [s["node"] for s in steps.trace_steps(run.trace)] == [
        "classify",
        "extract",
        "sentiment",
        "prioritise",
        "billing_ops",
    ]
    first = steps.trace_steps(run.trace)[0]
    assert first["writes"] == {"category": "billing"} and first["edge"] == {"kind": "next", "target": "extract"}
    assert first["attempts"][0]["ok"] and first["prompt_tokens"] > 0


def test_it_writes_each_step_to_the_row_as_it_happens(project: Project, owner: User) -> None:
    run = _queued(project, owner)
    with CaptureQueriesContext(connection) as queries:
        worker.run_try(run.pk)
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "runs_tryrun"')]
    # claim + one per step (5) + the final write
    assert len(updates) == 7
    run.refresh_from_db()
    assert run.trace_rev == 6  # each write of the trace bumps it (studio.runs.windows reads on it)


def test_it_keeps_every_attempt_with_its_rejection(project: Project, owner: User, stumbling: Endpoint) -> None:
    run = _queued(project, owner, stumbling)
    worker.run_try(run.pk)
    run.refresh_from_db()
    attempts = steps.trace_steps(run.trace)[0]["attempts"]
    assert [(a["attempt"], a["stage"], a["ok"], a["category"]) for a in attempts] == [
        (1, "sample", False, "parse"),
        (2, "resample", True, None),
    ]
    assert attempts[0]["text"] == REJECTED_TEXT and attempts[0]["reason"]
    assert run.status == "done" and run.output == EXPECTED


def test_it_keeps_the_runtimes_trace_with_its_rejected_text(project: Project, owner: User, stumbling: Endpoint) -> None:
    run = _queued(project, owner, stumbling)
    worker.run_try(run.pk)
    run.refresh_from_db()
    assert run.trace["status"] == "done" and run.trace["path"][-1] == "billing_ops" and run.trace["totals"]
    rejected = [a for a in run.trace["attempts"] if not a["ok"]]
    assert [(a["node"], a["text"]) for a in rejected] == [("classify", REJECTED_TEXT)]


def test_it_keeps_the_trace_so_far_of_a_run_that_fails(
    project: Project, owner: User, staff: User, fault: FaultServer
) -> None:
    fault.configure(script=[{"status": 400, "message": "model 'nope' not found"}])
    endpoint = Endpoint.objects.create(name="served", spec=fault.spec(), created_by=staff)
    run = _queued(project, owner, endpoint)
    worker.run_try(run.pk)
    run.refresh_from_db()
    assert run.trace["status"] == "failed" and "model 'nope' not found" in (run.trace["error"] or "")


def test_it_calls_an_openai_endpoint_with_the_key_from_its_variable(
    project: Project, owner: User, staff: User, fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKFORGE_KEY_TEST", "sk-run-secret-42")
    endpoint = Endpoint.objects.create(name="served", spec=fault.spec(), key_env="PACKFORGE_KEY_TEST", created_by=staff)
    run = _queued(project, owner, endpoint)
    assert run.model_spec.endswith(";key_env=PACKFORGE_KEY_TEST;concurrency=4;price_in=0;price_out=0")
    worker.run_try(run.pk)
    run.refresh_from_db()
    assert run.status in ("done", "failed") and steps.trace_steps(run.trace), run.error
    calls = fault.completions()
    assert calls and all(c.headers["authorization"] == "Bearer sk-run-secret-42" for c in calls)
    assert calls[0].body["response_format"]["type"] == "json_schema"  # the node's schema, as a grammar
    assert "sk-run-secret-42" not in str(run.trace) + run.error


def test_it_fails_the_run_when_the_key_variable_is_unset(
    project: Project, owner: User, staff: User, fault: FaultServer
) -> None:
    endpoint = Endpoint.objects.create(
        name="served", spec=fault.spec(), key_env="PACKFORGE_KEY_UNSET_IN_TESTS", created_by=staff
    )
    run = _queued(project, owner, endpoint)
    assert worker.run_try(run.pk) == "failed"
    run.refresh_from_db()
    assert "PACKFORGE_KEY_UNSET_IN_TESTS" in run.error and run.finished_at


def test_it_fails_a_run_whose_model_gives_up(project: Project, owner: User, staff: User, fault: FaultServer) -> None:
    fault.configure(script=[{"status": 400, "message": "model 'nope' not found"}])
    endpoint = Endpoint.objects.create(name="served", spec=fault.spec(), created_by=staff)
    run = _queued(project, owner, endpoint)
    worker.run_try(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "model 'nope' not found" in run.error


def test_it_runs_a_pack_with_tools_when_the_studio_has_a_registry(owner: User, settings: object) -> None:
    settings.PACKFORGE_TOOLS = str(settings.EXAMPLE_PACKS / "refund_desk" / "tools.py") + ":registry"  # type: ignore[attr-defined]
    project = create_project(slug="refunds", name="Refunds", owner=owner, pack_files=example_files("refund_desk"))
    script = json.loads((settings.EXAMPLE_PACKS / "refund_desk" / "fakes" / "scripted.json").read_text())  # type: ignore[attr-defined]
    run = _queued(project, owner, input=script["inputs"][0]["match"])  # an input the script answers
    worker.run_try(run.pk)
    run.refresh_from_db()
    assert steps.trace_steps(run.trace)[1]["node"] == "lookup", run.error
    assert steps.trace_steps(run.trace)[1]["tool_calls"][0]["tool"] == "lookup_order"
    assert steps.trace_steps(run.trace)[1]["tool_calls"][0]["result"]["order"]["status"] == "delivered"


def test_it_refuses_a_pack_with_tools_without_a_registry(owner: User, settings: object) -> None:
    settings.PACKFORGE_TOOLS = ""  # type: ignore[attr-defined]
    project = create_project(slug="refunds", name="Refunds", owner=owner, pack_files=example_files("refund_desk"))
    with pytest.raises(start.TryRefused, match="calls host tools"):
        _queued(project, owner, input={"message": "refund please"})


def test_it_leaves_a_final_run_alone(project: Project, owner: User) -> None:
    run = _queued(project, owner)
    worker.run_try(run.pk)
    run.refresh_from_db()
    finished = run.finished_at
    assert worker.run_try(run.pk) is None  # a redelivered task
    run.refresh_from_db()
    assert run.finished_at == finished


def test_it_does_nothing_for_a_deleted_run(db: None) -> None:
    assert worker.run_try(424242) is None


def test_it_asks_the_model_recorded_when_the_run_started(project: Project, owner: User, stumbling: Endpoint) -> None:
    run = _queued(project, owner, stumbling)
    Endpoint.objects.filter(pk=stumbling.pk).update(spec="openai:http://127.0.0.1:9/v1#gone")
    worker.run_try(run.pk)
    run.refresh_from_db()
    assert run.status == "done" and run.model_spec == stumbling.spec


def test_it_walks_an_evalset_cases_input_as_that_case(project: Project, owner: User) -> None:
    from studio import packs

    with packs.loaded(project, None, own_model=True) as got:
        case = got.pack.cases[2]
        assert start.case_for_input(got.pack, dict(case.input)) == case.id
        assert start.case_for_input(got.pack, {"ticket": "something else"}) is None
        assert start.scripted_by_case(got.pack)
