"""A proposal through the API, as a team would use it: opened by an author with its checks
started, the checks' delta on the cases both sides ran (the evalset change flagged, a case
only the head has kept apart), reviewed by a teammate (never by its author, never by a
viewer, not seen by a stranger), updated (the old approval stops counting), merged."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.evals.models import Eval
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.proposals.models import Proposal
from tests.support.studio import head_of, pack_text, run_all, send

URL = "/api/projects/triage/proposals"


def evalset_edited(project: Project) -> str:
    """st-01 expects another category (the head breaks it); a new case only the head has."""
    lines = pack_text(PackRepo(project.repo_path), "evalset.jsonl").splitlines()
    first = json.loads(lines[0])
    first["expected"]["category"] = "shipping"
    lines[0] = json.dumps(first)
    lines.append(json.dumps({"id": "st-new", "input": {"ticket": "Where is my parcel?"}, "expected": {}}))
    return "\n".join(lines) + "\n"


def open_one(client: Client, files: dict[str, Any], title: str = "Tighter billing") -> Any:
    return send(client, "post", URL, {"title": title, "description": "why", "files": files})


def finish_checks(number: int) -> None:
    """Deliver both check evals' cases in this process (what a worker does)."""
    proposal = Proposal.objects.get(number=number)
    assert proposal.base_eval is not None and proposal.head_eval is not None
    run_all(proposal.base_eval)
    run_all(proposal.head_eval)


def test_open_check_review_update_and_merge(
    project: Project, as_owner: Client, as_reviewer: Client, as_viewer: Client, as_stranger: Client, owner: User
) -> None:
    main = head_of(project)
    made = open_one(as_owner, {"evalset.jsonl": evalset_edited(project)})
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["number"] == 1 and body["branch"] == "proposals/1" and body["base"] == main
    assert body["status"] == "open" and body["source"] == "api"
    assert [c["path"] for c in body["changes"]] == ["evalset.jsonl"]
    assert head_of(project) == main, "opening a proposal leaves main alone"
    assert body["checks"]["state"] == "running"
    assert body["checks"]["evalset_changed"] == ["st-01"] and body["checks"]["evalset_added"] == ["st-new"]
    evals = Eval.objects.filter(project=project)
    assert sorted(evals.values_list("version", flat=True)) == sorted([main, body["head"]])

    finish_checks(1)
    checks = send(as_owner, "get", f"{URL}/1").json()["checks"]
    assert checks["state"] == "done"
    assert [f["case_id"] for f in checks["broken"]] == ["st-01"] and checks["fixed"] == []
    assert checks["only_head"] == ["st-new"] and checks["only_base"] == []
    assert checks["pairs"] == 15 and checks["pass_base"] == 15 and checks["pass_head"] == 14
    assert checks["gate_passes"] is False  # pass rate fell
    metrics = {m["metric"]: m for m in checks["metrics"]}
    assert {"pass_rate", "escalation_rate", "cost_per_case", "latency_p50_s", "latency_p95_s"} <= set(metrics)
    shares = {name: m for name, m in metrics.items() if name.startswith("tier share: ")}
    assert shares and all(0.0 <= m["a"] <= 1.0 and 0.0 <= m["b"] <= 1.0 for m in shares.values())
    assert abs(sum(m["a"] for m in shares.values()) - 1.0) < 1e-9  # every scored case is in one tier

    assert send(as_owner, "post", f"{URL}/1/approve", {}).status_code == 403
    assert send(as_viewer, "post", f"{URL}/1/approve", {}).status_code == 403
    assert send(as_stranger, "get", f"{URL}/1").status_code == 404
    assert send(as_stranger, "post", f"{URL}/1/approve", {}).status_code == 404
    assert send(as_viewer, "post", f"{URL}/1/comments", {"body": "hm"}).status_code == 403

    asked = send(as_reviewer, "post", f"{URL}/1/request-changes", {"body": "st-01 really is billing"})
    assert asked.status_code == 200 and asked.json()["status"] == "changes_requested"
    refused = send(as_owner, "post", f"{URL}/1/merge")
    assert refused.status_code == 409 and "asked for changes" in refused.json()["detail"]

    line = send(as_reviewer, "post", f"{URL}/1/comments", {"body": "this one", "path": "evalset.jsonl", "line": 1})
    assert line.status_code == 201 and line.json()["line"] == 1

    fixed_files = {"evalset.jsonl": pack_text(PackRepo(project.repo_path), "evalset.jsonl")}
    stale = send(as_owner, "put", f"{URL}/1", {"base": main, "message": "undo", "files": fixed_files})
    assert stale.status_code == 409 and stale.json()["head"] == body["head"]
    updated = send(as_owner, "put", f"{URL}/1", {"base": body["head"], "message": "Keep st-01", "files": fixed_files})
    assert updated.status_code == 200, updated.content
    again = updated.json()
    assert again["status"] == "open" and again["approvals"] == [] and again["head"] != body["head"]
    assert again["checks"]["evalset_changed"] == [] and again["checks"]["state"] == "running"

    assert send(as_reviewer, "post", f"{URL}/1/approve", {"body": "good"}).json()["status"] == "approved"
    merged = send(as_owner, "post", f"{URL}/1/merge")
    assert merged.status_code == 200, merged.content
    assert merged.json() == {"version": again["head"], "how": "fast-forward"}
    assert head_of(project) == again["head"] == Project.objects.get(pk=project.pk).head
    final = send(as_owner, "get", f"{URL}/1").json()
    assert final["status"] == "merged" and final["merged_sha"] == again["head"]
    kinds = [e["kind"] for e in final["events"]]
    assert kinds == ["opened", "changes_requested", "comment", "updated", "approved", "merged"]
    assert send(as_owner, "post", f"{URL}/1/merge").status_code == 409


def test_an_approval_of_an_earlier_head_does_not_count(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    first = open_one(as_owner, {"prompts/classify.md": "Classify the ticket.\n"}).json()
    assert send(as_reviewer, "post", f"{URL}/1/approve", {}).json()["approvals"] == ["rita"]
    files = {"prompts/classify.md": "Classify the ticket, briefly.\n"}
    updated = send(as_owner, "put", f"{URL}/1", {"base": first["head"], "message": "shorter", "files": files}).json()
    assert updated["approvals"] == [] and updated["status"] == "open"
    refused = send(as_owner, "post", f"{URL}/1/merge")
    assert refused.status_code == 409 and "0 approval(s) of its current head" in refused.json()["detail"]


def test_a_project_may_need_more_approvals(
    project: Project, as_owner: Client, as_reviewer: Client, owner: User
) -> None:
    Project.objects.filter(pk=project.pk).update(approvals_required=2)
    open_one(as_owner, {"prompts/classify.md": "Classify.\n"})
    assert send(as_reviewer, "post", f"{URL}/1/approve", {}).json()["status"] == "open"
    assert "1 approval(s)" in send(as_owner, "post", f"{URL}/1/merge").json()["detail"]


def test_who_may_open_and_list(project: Project, as_viewer: Client, as_reviewer: Client, as_stranger: Client) -> None:
    files = {"prompts/classify.md": "x\n"}
    assert open_one(as_viewer, files).status_code == 403
    assert open_one(as_reviewer, files).status_code == 403
    assert open_one(as_stranger, files).status_code == 404
    assert send(as_stranger, "get", URL).status_code == 404
    assert send(as_viewer, "get", URL).json() == []
    assert not Proposal.objects.exists()


def test_a_refused_open_leaves_no_row_and_no_branch(project: Project, as_owner: Client) -> None:
    same = {"graph.yaml": pack_text(PackRepo(project.repo_path), "graph.yaml")}
    refused = open_one(as_owner, same)
    assert refused.status_code == 400 and "nothing changed" in refused.json()["detail"]
    bad = open_one(as_owner, {"../escape": "x"})
    assert bad.status_code == 400
    assert not Proposal.objects.exists()
    assert not [r for r in PackRepo(project.repo_path).repo.refs.allkeys() if r.startswith(b"refs/heads/proposals/")]
    assert open_one(as_owner, {"prompts/classify.md": "x\n"}).json()["number"] == 1


def test_close_and_reopen(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    open_one(as_owner, {"prompts/classify.md": "x\n"})
    assert send(as_reviewer, "post", f"{URL}/1/close", {}).status_code == 403
    assert send(as_owner, "post", f"{URL}/1/close", {"body": "not now"}).json()["status"] == "closed"
    assert send(as_reviewer, "post", f"{URL}/1/approve", {}).status_code == 400
    assert send(as_owner, "post", f"{URL}/1/reopen").json()["status"] == "open"
    assert [p["number"] for p in send(as_owner, "get", f"{URL}?status=open").json()] == [1]
    assert send(as_owner, "get", f"{URL}?status=bogus").status_code == 400


def test_long_text_is_refused_not_cut(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    long = "x" * 20_001
    refused = send(as_owner, "post", URL, {"title": "t", "description": long, "files": {"prompts/a.txt": "x\n"}})
    assert refused.status_code == 400 and "at most 20000" in refused.json()["detail"]
    assert not Proposal.objects.exists()
    open_one(as_owner, {"prompts/a.txt": "x\n"})
    too_long = send(as_reviewer, "post", f"{URL}/1/comments", {"body": long})
    assert too_long.status_code == 400 and "comment is 20001 characters" in too_long.json()["detail"]


def test_the_list_costs_the_same_queries_for_one_proposal_or_many(
    project: Project, as_owner: Client, as_reviewer: Client
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert send(as_owner, "get", URL).status_code == 200
        return len(seen)

    open_one(as_owner, {"prompts/a.txt": "a\n"})
    send(as_reviewer, "post", f"{URL}/1/approve", {})
    one = queries()
    for n in range(2, 5):
        open_one(as_owner, {f"prompts/p{n}.txt": "x\n"})
        send(as_reviewer, "post", f"{URL}/{n}/approve", {})
    assert queries() == one
    listed = send(as_owner, "get", URL).json()
    assert [p["approvals"] for p in listed] == [["rita"]] * 4 and listed[0]["merge_problems"] is None
