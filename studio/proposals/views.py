"""The proposal pages, mounted under /p/<slug>/proposals/: the list, and one proposal with
its diff, evalset change, checks, timeline and the review and merge buttons. The same
rules as the API (studio.proposals.service); a refused step is shown on the page with
what to do, never as an error page."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from studio.accounts.access import proposal_for
from studio.accounts.models import Role
from studio.errors import Refused
from studio.evals.views.compare import shown_compare
from studio.http import StudioRequest
from studio.numbers import whole_number
from studio.projects.branches import MergeConflict
from studio.projects.storage import StaleBase
from studio.projects.views.common import changed_files, open_project, page
from studio.proposals import service
from studio.proposals.checks import checks_of
from studio.proposals.models import Proposal, ProposalEvent

LIST_PAGE = 100
MAX_LINE = 2**31 - 1  # a comment's line: what every database's integer column holds
ACTIONS = ("approve", "request_changes", "comment", "merge", "close", "reopen")


@require_http_methods(["GET", "POST"])
def proposal_list(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug, edit=request.method == "POST")
    if request.method == "POST":  # what a merge needs here (authors)
        try:
            service.set_rules(
                opened.project,
                approvals_required=whole_number(request.POST.get("approvals_required", ""), minimum=1, maximum=99),
                merge_needs_gate=request.POST.get("merge_needs_gate") == "1",
            )
        except Refused as exc:
            messages.error(request, f"Not changed: {exc}")
        else:
            messages.success(request, "Saved what a merge needs.")
        return redirect("proposals-list", slug=slug)
    shown = request.GET.get("status", "open")
    rows = Proposal.objects.filter(project=opened.project).select_related("author")
    if shown == "open":
        rows = rows.exclude(status__in=(Proposal.Status.MERGED, Proposal.Status.CLOSED))
    elif shown in Proposal.Status.values:
        rows = rows.filter(status=shown)
    elif shown != "all":
        shown = "open"
    context = opened.context("proposals", proposals=rows[:LIST_PAGE], shown=shown, statuses=Proposal.Status.values)
    return page(request, "proposals/list.html", context)


@require_http_methods(["GET", "POST"])
def proposal_detail(request: StudioRequest, slug: str, number: str) -> HttpResponse:
    n = whole_number(number)
    if n is None:
        raise Http404("No such proposal")
    proposal, role = proposal_for(request.user, slug, n)
    status, error, conflict = 200, "", None
    if request.method == "POST":
        try:
            answer = _act(request, proposal, role)
        except MergeConflict as exc:
            status, error, conflict = 409, str(exc), changed_files(exc.changes)
        except StaleBase as exc:
            status, error = 409, str(exc)
        except Refused as exc:
            status, error = exc.status if exc.status < 500 else 400, str(exc)
        else:
            return answer
    opened = open_project(request, slug)
    checks = checks_of(proposal)
    context = opened.context(
        "proposals",
        proposal=proposal,
        changes=changed_files(opened.repo.diff(proposal.base, proposal.head)),
        checks=checks,
        show=shown_compare(checks.delta) if checks.delta is not None else {},
        events=ProposalEvent.objects.filter(proposal=proposal).select_related("user"),
        approvals=service.approvals(proposal),
        merge_problems=service.merge_problems(proposal),
        can_review=role != Role.VIEWER and proposal.author_id != request.user.pk,
        can_comment=role != Role.VIEWER,
        error=error,
        conflict=conflict,
    )
    return page(request, "proposals/detail.html", context, status=status)


def _act(request: StudioRequest, proposal: Proposal, role: Role) -> HttpResponse:
    action = request.POST.get("action", "")
    body = request.POST.get("body", "")
    if action not in ACTIONS:
        raise Refused(f"unknown action {action!r}")
    if action in ("merge", "close", "reopen") and not role.can_edit:
        raise Refused(f"your role is {role.value}; only authors {action} proposals", status=403)
    if action == "comment" and role == Role.VIEWER:
        raise Refused("viewers read proposals; reviewers and authors comment", status=403)
    if action in ("approve", "request_changes"):
        head = request.POST.get("head", "")
        service.review(proposal, user=request.user, role=role, approve=action == "approve", body=body, head=head)
        messages.success(request, "Approved." if action == "approve" else "Changes requested.")
    elif action == "comment":
        line = whole_number(request.POST.get("line", ""), minimum=1, maximum=MAX_LINE)
        service.comment(proposal, user=request.user, body=body, path=request.POST.get("path", ""), line=line)
    elif action == "merge":
        merged = service.merge_proposal(proposal, user=request.user)
        messages.success(request, f"Merged into main as {merged.sha[:10]} ({merged.how}).")
    elif action == "close":
        service.close(proposal, user=request.user, body=body)
    else:
        service.reopen(proposal, user=request.user)
    return redirect("proposals-detail", slug=proposal.project.slug, number=proposal.number)
