"""The review queue pages: the queue (counts and age per deployment and node, items
oldest first, filters, keyboard, live list), an item (input, trace so far, question,
candidates, the generated form) and its actions (claim, release, decide, add to gold).

Members of an item's project read it; reviewers and authors work it (studio/review/
access.py). Function views that return early; htmx gets the fragment named after the
DOM id it replaces; pollers stop with 286 when there is nothing left to wait for."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from studio.http import StudioRequest
from studio.numbers import whole_number
from studio.review import claims, gold, present
from studio.review.access import can_work, item_for, roles_of
from studio.review.decide import DecisionRefused, decide
from studio.review.forms import PREFIX, AnswerForm, DecisionForm
from studio.review.models import ReviewItem
from studio.review.queue import MAX_OFFSET, PAGE, STATUSES, Filters, age_text, counts, items_for, page_of


def _render(
    request: StudioRequest, template: str, context: dict[str, Any], fragment: str, status: int = 200
) -> HttpResponse:
    if request.htmx and request.htmx.target == fragment:
        return render(request, f"{template}#{fragment}", context, status=status)
    return render(request, template, context, status=status)


@require_GET
def queue(request: StudioRequest) -> HttpResponse:
    filters = Filters.of(request.GET)
    offset = whole_number(request.GET.get("offset"), maximum=MAX_OFFSET) or 0
    items = items_for(request.user, filters)
    groups = counts(items)
    total = sum(g.count for g in groups)
    rows = page_of(items, offset)
    roles = roles_of(request.user)
    context = {
        "filters": filters,
        "qs": urlencode(filters.query()),
        "poll_qs": urlencode({**filters.query(), **({"offset": str(offset)} if offset else {})}),
        "statuses": STATUSES,
        "reasons": ReviewItem.Reason.values,
        "groups": [(g, age_text(g.age_s)) for g in groups],
        "rows": [(item, age_text(_age(item)), _workable(request, roles, item)) for item in rows],
        "total": total,
        "offset": offset,
        "next_offset": offset + len(rows) if offset + len(rows) < total else None,
        "prev_offset": max(offset - PAGE, 0) if offset else None,
    }
    return _render(request, "review/queue.html", context, "review-list")


def _age(item: ReviewItem) -> float:
    return (timezone.now() - item.created_at).total_seconds()


def _workable(request: StudioRequest, roles: dict[int, Any], item: ReviewItem) -> bool:
    role = roles.get(item.project_id)
    return bool(request.user.is_superuser or (role is not None and can_work(role)))


def _item_context(
    request: StudioRequest, item: ReviewItem, role: Any, form: AnswerForm | None = None, **extra: Any
) -> dict[str, Any]:
    trace = present.trace_for(item, role)
    return {
        "item": item,
        "run": item.run,
        "role": role,
        "can_work": can_work(role),
        "held": item.held_by(request.user),
        "holder": claims.holder(item),
        "input_json": present.pretty(item.run.input),
        "state_json": present.pretty({k: v for k, v in item.state.items() if k != "input"}),
        "steps": [
            {**s, "writes_json": present.pretty(s["writes"]) if s.get("writes") else ""}
            for s in trace.get("steps") or []
            if s.get("status") != "wait"
        ],
        "candidates": present.visible_candidates(item, role),
        "form": form or AnswerForm(schema=item.schema, best=item.best),
        "decision_form": extra.pop("decision_form", None) or DecisionForm(),
        "reasons": extra.pop("reasons", []),
        "gold_blocked": gold.why_not(item),
        "delta": gold.delta_of(item),
        "answer_json": present.pretty(item.answer),
        "output_json": present.pretty(item.run.output) if item.run.output is not None else "",
        **extra,
    }


@require_GET
def item_page(request: StudioRequest, pk: int) -> HttpResponse:
    item, role = item_for(request.user, pk)
    if request.htmx and request.htmx.target == "item-status":
        context = _item_context(request, item, role)
        stop = (
            item.is_decided
            and item.run.is_final
            and (item.gold_eval is None or (context["delta"] and context["delta"].done))
        )
        response = render(request, "review/item.html#item-status", context)
        if stop and request.GET.get("poll") == "1":
            response.status_code = HttpResponseStopPolling.status_code
        return response
    return render(request, "review/item.html", _item_context(request, item, role))


@require_POST
def claim(request: StudioRequest, pk: int) -> HttpResponse:
    item, _ = item_for(request.user, pk, work=True)
    if not claims.claim(item, request.user):
        messages.error(request, _taken(item))
    return _back(request, item)


@require_POST
def release(request: StudioRequest, pk: int) -> HttpResponse:
    item, _ = item_for(request.user, pk, work=True)
    claims.release(item, request.user)
    return _back(request, item, to_queue=True)


def _taken(item: ReviewItem) -> str:
    if item.is_decided:
        return f"Item {item.pk} was already decided."
    return f"Item {item.pk} is claimed by {claims.holder(item) or 'another reviewer'}."


def _back(request: StudioRequest, item: ReviewItem, *, to_queue: bool = False) -> HttpResponse:
    url = reverse("review-queue") if to_queue else reverse("review-item", args=[item.pk])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
def decide_view(request: StudioRequest, pk: int) -> HttpResponse:
    item, role = item_for(request.user, pk, work=True)
    decision_form = DecisionForm(request.POST)
    form = AnswerForm(request.POST, schema=item.schema, best=item.best)
    if not decision_form.is_valid():
        return _refused(request, item, role, form, decision_form, 400)
    decision = decision_form.cleaned_data["decision"]
    answer = None
    # The queue's approve key posts no answer fields: it approves the best candidate.
    posted = any(k.startswith(PREFIX) or k == "answer" for k in request.POST)
    if decision != ReviewItem.Decision.REJECT and posted:
        if not form.is_valid():
            return _refused(request, item, role, form, decision_form, 400)
        answer = form.answer()
    try:
        decided = decide(item, request.user, decision, answer=answer, note=decision_form.cleaned_data["note"])
    except DecisionRefused as exc:
        if exc.reasons:
            return _refused(request, item, role, form, decision_form, exc.status, reasons=exc.reasons)
        decision_form.add_error(None, str(exc))
        return _refused(request, item, role, form, decision_form, exc.status)
    messages.success(
        request,
        f"Item {item.pk}: {decided.decision}; the run {'ends failed' if decided.decision == 'reject' else 'resumes'}.",
    )
    nxt = request.POST.get("next", "")
    url = reverse("review-item", args=[item.pk]) if nxt != "queue" else reverse("review-queue")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _refused(
    request: StudioRequest,
    item: ReviewItem,
    role: Any,
    form: AnswerForm,
    decision_form: DecisionForm,
    status: int,
    reasons: list[str] | None = None,
) -> HttpResponse:
    """The item page again, the form as typed, with why nothing was saved."""
    item.refresh_from_db()
    context = _item_context(request, item, role, form, decision_form=decision_form, reasons=reasons or [])
    return _render(request, "review/item.html", context, "review-form", status=status)


@require_POST
def add_gold(request: StudioRequest, pk: int) -> HttpResponse:
    item, role = item_for(request.user, pk, work=True)
    try:
        item = gold.add_to_gold(
            item, request.user, request.POST.get("message", ""), propose=request.POST.get("to") == "proposal"
        )
    except gold.GoldRefused as exc:
        item.refresh_from_db()
        context = _item_context(request, item, role, gold_refused=str(exc))
        return _render(request, "review/item.html", context, "review-gold", status=exc.status)
    messages.success(request, f"Added to gold as case {item.gold_case} ({item.gold_commit[:10]}).")
    return _back(request, item)
