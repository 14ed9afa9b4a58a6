"""The review rules at their edges: an approval names the head it read, a co-author cannot
approve, a request for changes outlives a close and reopen, a conflict is resolved by
bringing main in (sync) and then merges, a follow-main deployment that cannot take the
merged version does not undo the merge, a cancelled check gives no gate, bad form input
gets a clear refusal."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import Membership, Role
from studio.deployments import service as deployments
from studio.deployments.models import Deployment
from studio.evals.models import Eval
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.proposals.checks import checks_of
from studio.proposals.models import Proposal
from tests.support.studio import bearer, client_for, head_of, make_user, pack_text, run_all, send, teammate_saves

URL = "/api/projects/triage/proposals"
PROMPT = "prompts/classify.txt"


def opened(client: Client, text: str = "Classify.\n") -> dict[str, Any]:
    made = send(client, "post", URL, {"title": "t", "files": {PROMPT: text}})
    assert made.status_code == 201, made.content
    return dict(made.json())


def test_an_approval_names_the_head_it_read(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    first = opened(as_owner)
    send(as_owner, "put", f"{URL}/1", {"base": first["head"], "message": "more", "files": {PROMPT: "Classify!\n"}})
    stale = send(as_reviewer, "post", f"{URL}/1/approve", {"head": first["head"]})
    assert stale.status_code == 409 and "read it again" in stale.json()["detail"]
    now = Proposal.objects.get().head
    assert send(as_reviewer, "post", f"{URL}/1/approve", {"head": now}).json()["status"] == "approved"


def test_a_co_author_cannot_approve(project: Project, as_owner: Client) -> None:
    ann = make_user("ann")
    Membership.objects.create(user=ann, project=project, role=Role.AUTHOR)
    first = opened(as_owner)
    as_ann = bearer(ann)
    send(as_ann, "put", f"{URL}/1", {"base": first["head"], "message": "mine too", "files": {PROMPT: "C.\n"}})
    refused = send(as_ann, "post", f"{URL}/1/approve", {})
    assert refused.status_code == 403 and "wrote part of this proposal" in refused.json()["detail"]


def test_a_request_for_changes_outlives_close_and_reopen(
    project: Project, as_owner: Client, as_reviewer: Client
) -> None:
    opened(as_owner)
    send(as_reviewer, "post", f"{URL}/1/request-changes", {"body": "no"})
    send(as_owner, "post", f"{URL}/1/close", {})
    send(as_owner, "post", f"{URL}/1/reopen")
    problems = send(as_owner, "get", f"{URL}/1").json()["merge_problems"]
    assert "a reviewer asked for changes to this head" in problems


def test_a_conflict_is_resolved_by_bringing_main_in(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    first = opened(as_owner, "Ours.\n")
    repo = PackRepo(project.repo_path)
    main = teammate_saves(repo, PROMPT, "Theirs.\n")
    send(as_reviewer, "post", f"{URL}/1/approve", {})
    assert send(as_owner, "post", f"{URL}/1/merge").status_code == 409
    unresolved = send(as_owner, "post", f"{URL}/1/sync", {"head": first["head"]})
    assert unresolved.status_code == 409 and unresolved.json()["paths"] == [f"pack/{PROMPT}"]
    synced = send(as_owner, "post", f"{URL}/1/sync", {"head": first["head"], "files": {PROMPT: "Both.\n"}})
    assert synced.status_code == 200, synced.content
    body = synced.json()
    assert body["base"] == main and body["status"] == "open" and body["approvals"] == []  # review again
    send(as_reviewer, "post", f"{URL}/1/approve", {})
    merged = send(as_owner, "post", f"{URL}/1/merge").json()
    assert merged["how"] == "fast-forward" and pack_text(repo, PROMPT) == "Both.\n"


def test_a_follow_main_deployment_that_cannot_move_does_not_undo_the_merge(
    project: Project, owner: User, as_owner: Client, as_reviewer: Client
) -> None:
    made = deployments.create_deployment(project, user=owner, name="triage", version=None, tiers=[])
    Deployment.objects.filter(pk=made.pk).update(follow_main=True)
    opened(as_owner, "")  # the pack still loads; break it instead by removing a grammar
    head = Proposal.objects.get().head
    send(as_owner, "put", f"{URL}/1", {"base": head, "message": "drop", "files": {"grammars/classify.json": None}})
    send(as_reviewer, "post", f"{URL}/1/approve", {})
    merged = send(as_owner, "post", f"{URL}/1/merge")
    assert merged.status_code == 200
    assert head_of(project) == merged.json()["version"]
    assert Deployment.objects.get().version == made.version  # stayed on what loads
    events = send(as_owner, "get", f"{URL}/1").json()["events"]
    assert "triage not promoted" in events[-1]["body"]


def test_a_cancelled_check_gives_no_gate(project: Project, as_owner: Client) -> None:
    opened(as_owner)
    proposal = Proposal.objects.get()
    assert proposal.base_eval is not None and proposal.head_eval is not None
    run_all(proposal.base_eval)
    Eval.objects.filter(pk=proposal.head_eval.pk).update(status=Eval.Status.CANCELLED)
    found = checks_of(Proposal.objects.get())
    assert found.state == "cancelled" and found.gate is None and found.delta is not None
    page = as_owner.get("/p/triage/proposals/1").content.decode()
    assert 'id="checks-cancelled"' in page and 'id="gate"' not in page


def test_bad_form_input_is_refused_on_the_page(project: Project, as_owner: Client, reviewer: User) -> None:
    opened(as_owner)
    as_reviewer = client_for(reviewer)
    nul = as_reviewer.post("/p/triage/proposals/1", {"action": "comment", "body": "a\x00b"})
    assert nul.status_code == 400 and "NUL" in nul.content.decode()
    huge = as_reviewer.post(
        "/p/triage/proposals/1", {"action": "comment", "body": "x", "path": PROMPT, "line": str(10**20)}
    )
    assert huge.status_code == 400 and "names its line" in huge.content.decode()
    assert (
        send(as_reviewer, "post", f"{URL}/1/comments", {"body": "x", "path": PROMPT, "line": 2**40}).status_code == 422
    )
