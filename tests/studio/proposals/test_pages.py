"""The proposal pages: opened from the editor's "Save as a proposal" (main untouched), the
page with its diff, checks and evalset change, review buttons only for a teammate, a
refused step shown on the page (never an error page), a merge from the page; the compare
page showing each side's own expected value where the evalset changed."""

from __future__ import annotations

import json

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.proposals.models import Proposal
from tests.support.studio import head_of, pack_text, run_all, send

PROMPT = "prompts/classify.txt"


def propose_from_editor(client: Client, project: Project, text: str, message: str = "Shorter classify prompt") -> str:
    answer = client.post(
        f"/p/triage/files/{PROMPT}",
        {"base": head_of(project), "content": text, "message": message, "to": "proposal"},
    )
    assert answer.status_code == 302, answer.content[:500]
    return str(answer["Location"])


def test_save_as_a_proposal_from_the_editor_leaves_main_alone(project: Project, as_owner: Client) -> None:
    main = head_of(project)
    where = propose_from_editor(as_owner, project, "Classify the ticket.\n")
    assert where == "/p/triage/proposals/1"
    proposal = Proposal.objects.get()
    assert (proposal.source, proposal.title, proposal.base) == ("editor", "Shorter classify prompt", main)
    assert head_of(project) == main
    assert pack_text(PackRepo(project.repo_path), PROMPT, proposal.head) == "Classify the ticket.\n"
    page = as_owner.get(where).content.decode()
    assert "Shorter classify prompt" in page and "Classify the ticket." in page
    assert 'id="approve"' not in page and "cannot approve your own" in page
    assert 'data-state="running"' in page


def test_the_editor_refuses_an_unchanged_proposal_on_the_page(project: Project, as_owner: Client) -> None:
    same = pack_text(PackRepo(project.repo_path), PROMPT)
    answer = as_owner.post(
        f"/p/triage/files/{PROMPT}", {"base": head_of(project), "content": same, "message": "m", "to": "proposal"}
    )
    assert answer.status_code == 400
    assert "Nothing to save" in answer.content.decode()
    assert not Proposal.objects.exists()


def test_review_and_merge_from_the_page(
    project: Project, as_owner: Client, as_reviewer: Client, as_viewer: Client, reviewer: User
) -> None:
    where = propose_from_editor(as_owner, project, "Classify the ticket.\n")
    proposal = Proposal.objects.get()
    assert proposal.base_eval is not None and proposal.head_eval is not None
    run_all(proposal.base_eval)
    run_all(proposal.head_eval)

    viewer_page = as_viewer.get(where).content.decode()
    assert 'id="approve"' not in viewer_page and 'id="merge"' not in viewer_page
    assert as_viewer.post(where, {"action": "approve"}).status_code == 403

    early = as_owner.post(where, {"action": "merge"})
    assert early.status_code == 409
    assert "0 approval(s) of its current head" in early.content.decode()

    page = as_reviewer.get(where).content.decode()
    assert 'id="approve"' in page and 'data-state="done"' in page and 'id="gate"' in page
    assert "latency_p95_s" in page and "tier share: " in page
    assert as_reviewer.post(where, {"action": "approve", "body": "fine"}).status_code == 302
    done = as_owner.post(where, {"action": "merge"})
    assert done.status_code == 302
    proposal.refresh_from_db()
    assert proposal.status == "merged" and head_of(project) == proposal.head
    listing = as_owner.get("/p/triage/proposals/?status=merged").content.decode()
    assert "Shorter classify prompt" in listing


def test_a_conflict_shows_what_main_changed(project: Project, as_owner: Client, as_reviewer: Client) -> None:
    where = propose_from_editor(as_owner, project, "Ours.\n")
    as_reviewer.post(where, {"action": "approve"})
    repo = PackRepo(project.repo_path)
    repo.save({f"pack/{PROMPT}": b"Theirs.\n"}, base=repo.head(), author="t", email="t@x", message="theirs")
    refused = as_owner.post(where, {"action": "merge"})
    assert refused.status_code == 409
    page = refused.content.decode()
    assert "What main changed meanwhile" in page and "Theirs." in page


def test_a_stranger_and_a_bad_number_get_404(project: Project, as_stranger: Client, as_owner: Client) -> None:
    propose_from_editor(as_owner, project, "x\n")
    assert as_stranger.get("/p/triage/proposals/1").status_code == 404
    assert as_stranger.get("/p/triage/proposals/").status_code == 404
    assert as_owner.get("/p/triage/proposals/99").status_code == 404
    assert as_owner.get("/p/triage/proposals/x1").status_code == 404


def test_compare_shows_each_sides_expected_where_the_evalset_changed(project: Project, as_owner: Client) -> None:
    lines = pack_text(PackRepo(project.repo_path), "evalset.jsonl").splitlines()
    first = json.loads(lines[0])
    first["expected"]["category"] = "shipping"
    lines[0] = json.dumps(first)
    made = send(
        as_owner,
        "post",
        "/api/projects/triage/proposals",
        {"title": "t", "files": {"evalset.jsonl": "\n".join(lines) + "\n"}},
    )
    assert made.status_code == 201
    proposal = Proposal.objects.get()
    assert proposal.base_eval is not None and proposal.head_eval is not None
    run_all(proposal.base_eval)
    run_all(proposal.head_eval)
    a, b = proposal.base_eval.pk, proposal.head_eval.pk
    pairs = send(as_owner, "get", f"/api/evals/compare?a={a}&b={b}").json()["cases"]
    st01 = next(p for p in pairs if p["case_id"] == "st-01")
    assert st01["evalset_changed"] is True
    assert (st01["expected_a"]["category"], st01["expected_b"]["category"]) == ("billing", "shipping")
    assert not next(p for p in pairs if p["case_id"] == "st-02")["evalset_changed"]
    page = as_owner.get(f"/p/triage/evals/compare?a={a}&b={b}").content.decode()
    assert "evalset changed" in page and "before:" in page and "shipping" in page
    matrix = send(as_owner, "get", f"/api/evals/matrix?evals={a},{b}").json()
    row = next(r for r in matrix["rows"] if r["case_id"] == "st-01")
    assert row["evalset_changed"] and [e["category"] for e in row["expected_by_eval"]] == ["billing", "shipping"]


def test_run_eval_and_deployment_pages_carry_the_project_tabs(project: Project, as_owner: Client) -> None:
    for url in ("/p/triage/runs/new", "/p/triage/evals/new", "/p/triage/deployments/"):
        page = as_owner.get(url).content.decode()
        nav = page[page.index('<nav class="tabs project-nav"') :]
        nav = nav[: nav.index("</nav>")]
        assert 'href="/p/triage/proposals/"' in nav and 'href="/p/triage/files/"' in nav, url
