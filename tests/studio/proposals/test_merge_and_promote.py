"""Merging against a moving main, and moving deployments only through main: a merge commit
when main changed other files, a 409 with main's side when it changed the same file, a
gate the project may require; promote to a version on main only, rollback to a version
served before, a deployment that follows main moved by a merge. Each move in the history
with who and why."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.deployments import service as deployments
from studio.deployments.models import Deployment, DeploymentChange
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.proposals.models import Proposal
from tests.support.studio import head_of, pack_text, run_all, send, teammate_saves

URL = "/api/projects/triage/proposals"
PROMPT = "prompts/classify.txt"


def approved(as_owner: Client, as_reviewer: Client, files: dict[str, Any]) -> dict[str, Any]:
    made = send(as_owner, "post", URL, {"title": "Change", "files": files})
    assert made.status_code == 201, made.content
    number = made.json()["number"]
    assert send(as_reviewer, "post", f"{URL}/{number}/approve", {}).json()["status"] == "approved"
    return dict(made.json())


def test_main_moved_on_other_files_gives_a_merge_commit(
    project: Project, as_owner: Client, as_reviewer: Client
) -> None:
    proposal = approved(as_owner, as_reviewer, {PROMPT: "Classify the ticket.\n"})
    repo = PackRepo(project.repo_path)
    teammate_saves(repo, "prompts/extract.txt", "Extract the fields.\n")
    merged = send(as_owner, "post", f"{URL}/{proposal['number']}/merge")
    assert merged.status_code == 200 and merged.json()["how"] == "merge commit"
    assert pack_text(repo, PROMPT) == "Classify the ticket.\n"
    assert pack_text(repo, "prompts/extract.txt") == "Extract the fields.\n"


def test_main_moved_on_the_same_file_is_refused_with_its_diff(
    project: Project, as_owner: Client, as_reviewer: Client
) -> None:
    proposal = approved(as_owner, as_reviewer, {PROMPT: "Ours.\n"})
    repo = PackRepo(project.repo_path)
    theirs = teammate_saves(repo, PROMPT, "Theirs.\n")
    refused = send(as_owner, "post", f"{URL}/{proposal['number']}/merge")
    assert refused.status_code == 409
    body = refused.json()
    assert body["paths"] == [f"pack/{PROMPT}"] and "bring main into the proposal" in body["detail"]
    assert body["changes"] == [{"path": PROMPT, "status": "modified"}]
    assert head_of(project) == theirs and Proposal.objects.get().status == "approved"


def test_a_project_may_require_the_gate(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    Project.objects.filter(pk=project.pk).update(merge_needs_gate=True)
    grammar = pack_text(PackRepo(project.repo_path), "grammars/classify.json")
    narrower = grammar.replace('"enum": ["billing", ', '"enum": [', 1)  # billing answers now rejected
    assert narrower != grammar
    proposal = approved(as_owner, as_reviewer, {"grammars/classify.json": narrower})
    refused = send(as_owner, "post", f"{URL}/{proposal['number']}/merge").json()["detail"]
    assert "its checks are running" in refused
    row = Proposal.objects.get()
    assert row.base_eval is not None and row.head_eval is not None
    run_all(row.base_eval)
    run_all(row.head_eval)
    refused = send(as_owner, "post", f"{URL}/{proposal['number']}/merge").json()["detail"]
    assert "fails the gate against its base on pass_rate" in refused


def test_the_gate_does_not_judge_a_changed_evalset(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    Project.objects.filter(pk=project.pk).update(merge_needs_gate=True)
    lines = pack_text(PackRepo(project.repo_path), "evalset.jsonl").splitlines()
    proposal = approved(as_owner, as_reviewer, {"evalset.jsonl": "\n".join(lines[1:]) + "\n"})  # drops st-01
    row = Proposal.objects.get()
    assert row.base_eval is not None and row.head_eval is not None
    run_all(row.base_eval)
    run_all(row.head_eval)
    refused = send(as_owner, "post", f"{URL}/{proposal['number']}/merge").json()["detail"]
    assert "removes or changes gold cases" in refused


def deployment_of(project: Project, owner: User, **extra: Any) -> Deployment:
    made = deployments.create_deployment(project, user=owner, name="triage", version=None, tiers=[])
    Deployment.objects.filter(pk=made.pk).update(**extra)
    made.refresh_from_db()
    return made


def test_promote_only_to_main_and_roll_back(
    project: Project, owner: User, as_owner: Client, as_reviewer: Client, as_viewer: Client
) -> None:
    first = head_of(project)
    deployment_of(project, owner)
    proposal = approved(as_owner, as_reviewer, {PROMPT: "Classify.\n"})
    early = send(as_owner, "post", "/api/deployments/triage/promote", {"version": proposal["head"]})
    assert early.status_code == 400 and "not on main" in early.json()["detail"]
    patched = send(as_owner, "patch", "/api/deployments/triage", {"version": proposal["head"]})
    assert patched.status_code == 400 and "not on main" in patched.json()["detail"]

    send(as_owner, "post", f"{URL}/{proposal['number']}/merge")
    assert send(as_viewer, "post", "/api/deployments/triage/promote", {}).status_code == 403
    moved = send(as_owner, "post", "/api/deployments/triage/promote", {"note": "ship the shorter prompt"})
    assert moved.status_code == 200, moved.content
    assert moved.json()["old"] == first and moved.json()["new"] == proposal["head"]
    again = send(as_owner, "post", "/api/deployments/triage/promote", {})
    assert again.status_code == 400 and "already serves" in again.json()["detail"]

    back = send(as_owner, "post", "/api/deployments/triage/rollback", {"note": "pass rate fell"})
    assert back.status_code == 200
    assert (back.json()["field"], back.json()["new"], back.json()["note"]) == ("rollback", first, "pass rate fell")
    assert Deployment.objects.get().version == first
    unknown = send(as_owner, "post", "/api/deployments/triage/rollback", {"to": "abcdef12"})
    assert unknown.status_code == 400 and "not one version" in unknown.json()["detail"]
    forward = send(as_owner, "post", "/api/deployments/triage/rollback", {"to": proposal["head"][:8]})
    assert forward.json()["new"] == proposal["head"]
    history = send(as_owner, "get", "/api/deployments/triage/changes").json()
    assert [(c["field"], c["user"]) for c in history] == [
        ("rollback", "olive"),
        ("rollback", "olive"),
        ("version", "olive"),
        ("created", "olive"),
    ]


def test_a_deployment_that_follows_main_moves_on_merge(
    project: Project, owner: User, as_owner: Client, as_reviewer: Client
) -> None:
    following = deployment_of(project, owner, follow_main=True)
    proposal = approved(as_owner, as_reviewer, {PROMPT: "Classify.\n"})
    send(as_owner, "post", f"{URL}/{proposal['number']}/merge")
    following.refresh_from_db()
    assert following.version == proposal["head"]
    change = DeploymentChange.objects.filter(deployment=following, field="version").get()
    assert change.note == "follows main: proposal #1" and change.user == owner


def test_patch_turns_follow_main_on(project: Project, owner: User, as_owner: Client) -> None:
    deployment_of(project, owner)
    done = send(as_owner, "patch", "/api/deployments/triage", {"follow_main": True})
    assert done.status_code == 200 and done.json()["follow_main"] is True
    assert DeploymentChange.objects.filter(field="follow_main", new=True).exists()


def test_promote_and_roll_back_from_the_deployment_page(
    project: Project, owner: User, as_owner: Client, as_reviewer: Client
) -> None:
    first = head_of(project)
    deployment_of(project, owner)
    proposal = approved(as_owner, as_reviewer, {PROMPT: "Classify.\n"})
    page = "/p/triage/deployments/triage"
    refused = as_owner.post(page, {"action": "promote", "version": proposal["head"], "note": "too early"}, follow=True)
    assert "is not on main" in refused.content.decode() and Deployment.objects.get().version == first
    send(as_owner, "post", f"{URL}/{proposal['number']}/merge")
    as_owner.post(page, {"action": "promote", "version": proposal["head"], "note": "new prompt"})
    assert Deployment.objects.get().version == proposal["head"]
    shown = as_owner.get(page).content.decode()
    assert 'id="rollback-form"' in shown and "new prompt" in shown
    as_owner.post(page, {"action": "rollback", "version": first, "note": "worse on billing"})
    assert Deployment.objects.get().version == first
    assert "worse on billing" in as_owner.get(page).content.decode()


def test_authors_set_what_a_merge_needs(project: Project, as_owner: Client, as_viewer: Client) -> None:
    url = "/api/projects/triage/proposal-rules"
    assert send(as_viewer, "get", url).json() == {"approvals_required": 1, "merge_needs_gate": False}
    assert send(as_viewer, "patch", url, {"approvals_required": 2}).status_code == 403
    assert send(as_owner, "patch", url, {"approvals_required": 0}).status_code == 422
    changed = send(as_owner, "patch", url, {"approvals_required": 2, "merge_needs_gate": True})
    assert changed.json() == {"approvals_required": 2, "merge_needs_gate": True}
    assert as_owner.post("/p/triage/proposals/", {"approvals_required": "3"}).status_code == 302
    project.refresh_from_db()
    assert (project.approvals_required, project.merge_needs_gate) == (3, False)
    assert as_viewer.post("/p/triage/proposals/", {"approvals_required": "1"}).status_code == 403
    page = as_owner.get("/p/triage/proposals/").content.decode()
    assert "needs 3 approvals" in page
