"""Recorded tool results in studio evals: an eval that records its tool calls keeps
the tape on the Eval when it ends; an eval replaying it calls no tool (refund_desk's
tools count their real calls) and reports a case whose calls leave it as diverged."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.evals.models import Eval, EvalCase
from studio.evals.results.common import scored
from studio.evals.start import EvalRefused
from studio.projects.models import Project
from tests.support.studio import run_all, send, start

pytestmark = pytest.mark.django_db


def recorded(project: Project, owner: User) -> Eval:
    ev = start(project, owner, record_tools=True)
    run_all(ev)
    ev.refresh_from_db()
    assert ev.status == Eval.Status.DONE
    return ev


def test_it_keeps_the_tape_of_an_eval_that_records(
    tool_calls: list[tuple[str, str]], refunds: Project, owner: User, sent: list[int]
) -> None:
    ev = recorded(refunds, owner)
    lines = [json.loads(line) for line in ev.tape.splitlines()]
    assert ev.tools_mode == "record" and len(lines) == len(tool_calls) > 0
    assert {(d["tool"], json.dumps(d["args"], sort_keys=True)) for d in lines} == set(tool_calls)
    tools = ev.summary["tools"]
    assert (tools["mode"], tools["recorded"], tools["replayed"], tools["diverged"]) == ("record", len(lines), 0, 0)
    assert tools["live"] == len(tool_calls) - sum(1 for d in lines if "error" in d)


def test_it_re_evaluates_by_replay_without_calling_a_tool(
    tool_calls: list[tuple[str, str]], refunds: Project, owner: User, sent: list[int]
) -> None:
    source = recorded(refunds, owner)
    live_before = source.summary["tools"]["live"]
    tool_calls.clear()
    ev = start(refunds, owner, replay_tools_from=source.pk)
    assert (ev.tools_mode, ev.tools_from, ev.tape) == ("replay", source, source.tape)
    run_all(ev)
    assert tool_calls == []  # no lookup made, no refund issued
    ev.refresh_from_db()
    tools = ev.summary["tools"]
    assert (tools["live"], tools["replayed"], tools["diverged"]) == (0, live_before, 0)
    outcomes = dict(EvalCase.objects.filter(eval=ev).values_list("case_id", "status"))
    assert outcomes == dict(EvalCase.objects.filter(eval=source).values_list("case_id", "status"))


def test_it_reports_a_case_whose_calls_left_the_recording(
    tool_calls: list[tuple[str, str]], refunds: Project, owner: User, sent: list[int], as_viewer: Client
) -> None:
    source = recorded(refunds, owner)
    lines = [json.loads(line) for line in source.tape.splitlines()]
    for d in lines:  # the recording of rd-01 looked up another order
        if (d["case_id"], d["index"]) == ("rd-01", 0):
            d["args"] = {"order_id": "ORD-10002"}
    Eval.objects.filter(pk=source.pk).update(tape="".join(json.dumps(d) + "\n" for d in lines))
    tool_calls.clear()
    ev = start(refunds, owner, replay_tools_from=source.pk)
    run_all(ev)
    assert tool_calls == []  # the diverged call was not made live either
    row = EvalCase.objects.get(eval=ev, case_id="rd-01")
    assert row.status == "diverged" and "ORD-10002" in row.diverged[0] and row.blamed == ""
    assert not scored(ev).filter(case_id="rd-01").exists()  # neither a pass nor a failure
    ev.refresh_from_db()
    assert ev.summary["tools"]["diverged"] == 1 and ev.summary["counts"]["diverged"] == 1
    assert ev.summary["scored"] == ev.total - 1
    page = as_viewer.get(f"/p/{refunds.slug}/evals/{ev.pk}/summary").content.decode()
    panel = page.split('id="tool-recording"', 1)[1].split("</section>", 1)[0]
    assert f"eval {source.pk}" in panel and "0 live" in panel and "rd-01" in panel and "ORD-10002" in panel


def test_it_replays_only_a_finished_recording_of_the_project(
    tool_calls: list[tuple[str, str]], refunds: Project, owner: User, sent: list[int]
) -> None:
    live = start(refunds, owner, tags=["agreement"])
    running = start(refunds, owner, record_tools=True, tags=["agreement"])
    for source, says in [(live, "did not record"), (running, "once its eval is done"), (9999, "no eval #9999")]:
        with pytest.raises(EvalRefused, match=says):
            start(refunds, owner, replay_tools_from=source)
    with pytest.raises(EvalRefused, match="not both"):
        start(refunds, owner, record_tools=True, replay_tools_from=running.pk)


def test_it_records_and_replays_through_the_api(
    tool_calls: list[tuple[str, str]], refunds: Project, owner: User, sent: list[int], as_owner: Client
) -> None:
    body = {"project": refunds.slug, "record_tools": True}
    (made,) = send(as_owner, "post", "/api/evals", body).json()["evals"]
    assert (made["tools_mode"], made["tools_from"]) == ("record", None)
    run_all(Eval.objects.get(pk=made["id"]))
    again = send(as_owner, "post", "/api/evals", {"project": refunds.slug, "replay_tools_from": made["id"]})
    assert again.status_code == 201, again.content
    (replay,) = again.json()["evals"]
    assert (replay["tools_mode"], replay["tools_from"]) == ("replay", made["id"])
    tape = as_owner.get(f"/p/{refunds.slug}/evals/{made['id']}/tools.jsonl")
    assert tape.status_code == 200 and tape.content.decode() == Eval.objects.get(pk=made["id"]).tape


def test_it_starts_a_recording_and_a_replay_from_the_start_form(
    tool_calls: list[tuple[str, str]], refunds: Project, owner: User, sent: list[int], as_owner: Client
) -> None:
    base = {"version": refunds.head, "endpoints": ["own"], "repeats": 1, "tags": "agreement"}
    as_owner.post(f"/p/{refunds.slug}/evals/new", {**base, "tools": "record"})
    source = Eval.objects.get()
    assert source.tools_mode == "record"
    assert f"replay:{source.pk}" not in as_owner.get(f"/p/{refunds.slug}/evals/new").content.decode()
    run_all(source)
    assert f"replay:{source.pk}" in as_owner.get(f"/p/{refunds.slug}/evals/new").content.decode()
    as_owner.post(f"/p/{refunds.slug}/evals/new", {**base, "tools": f"replay:{source.pk}"})
    replay = Eval.objects.exclude(pk=source.pk).get()
    assert (replay.tools_mode, replay.tools_from_id) == ("replay", source.pk)
