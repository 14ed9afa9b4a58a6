"""Compile pages: the project's Compile tab (its compiles, and the start form for
authors), a compile's page (live progress polled by htmx until it ends, the attempt
history, cancel; the split, trials, learning curve and verdict of the search on the
target, read from the work dir by studio/compiles/search.py; the pack judged on the
target, its diff against the project's pack/, and Adopt) and an attempt's page (its plan
drawn as a graph with blame, its eval summaries, the diff of its pack against the
project's pack/, and Adopt: an attempt's pack runs on the offline test model, for
structure tests only).

Authors start, cancel and adopt; every member watches; strangers get 404. Function
views that return early; htmx gets the fragment named after the DOM id it replaces,
and the poller stops with 286 once the compile has ended."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from studio.accounts.access import compile_for
from studio.compiles.forms import CompileStartForm
from studio.compiles.models import Compile, CompileAttempt
from studio.compiles.search import read_search
from studio.compiles.shared import work_dir
from studio.compiles.start import (
    CompileRefused,
    adopt_attempt,
    adopt_judged,
    cancel_compile,
    start_compile,
)
from studio.http import StudioRequest
from studio.projects.diff_rows import side_by_side
from studio.projects.graph_svg import draw
from studio.projects.storage import FileChange, PackRepo, StorageError
from studio.projects.validation import validate_files
from studio.projects.views.common import fold, open_project, pack_files, page

# A compile still queued after this long gets a hint on its page (is a worker running?).
QUEUE_PATIENCE = timedelta(seconds=30)


@require_http_methods(["GET", "POST"])
def compiles_list(request: StudioRequest, slug: str) -> HttpResponse:
    opened = open_project(request, slug, edit=request.method == "POST")
    form = CompileStartForm(request.POST or None) if opened.can_edit else None
    status = 200
    if request.method == "POST" and form is not None:
        if form.is_valid():
            data = form.cleaned_data
            try:
                made = start_compile(
                    opened.project,
                    user=request.user,
                    planner=data["planner"],
                    target=data["target"],
                    attempts=data["attempts"],
                )
            except CompileRefused as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("compiles-detail", slug=opened.project.slug, compile_id=made.pk)
        status = 400
    compiles = (
        Compile.objects.filter(project=opened.project)
        .select_related("planner_endpoint", "created_by")
        .defer("judged_pack_files")[:50]
    )
    context = opened.context("compiles", form=form, compiles=compiles)
    return page(request, "compiles/list.html", context, status=status)


def progress_context(c: Compile, can_edit: bool) -> dict[str, Any]:
    return {
        "compile": c,
        "project": c.project,
        "attempts": list(c.attempt_rows.defer("plan", "pack_files", "evals")),
        "can_cancel": can_edit and not c.is_final and not c.cancel_requested,
        "slow_queue": c.status == Compile.Status.QUEUED and timezone.now() - c.created_at > QUEUE_PATIENCE,
        # the split, the trials and the verdict the loop wrote in the work dir (files: no query)
        "search": read_search(work_dir(c.pk)),
        **judged_context(c, can_edit),
    }


def judged_context(c: Compile, can_edit: bool) -> dict[str, Any]:
    """The pack judged on the target, against the project's pack/ (read only once there
    is one: the poller of a running compile reads no repository)."""
    if not c.has_judged_pack:
        return {"can_adopt_judged": False}
    base, current = _project_pack(c)
    return {
        "can_adopt_judged": can_edit,
        "judged_changes": pack_diff(current, c.judged_pack_files or {}),
        "base": base,  # the version the diff is against: the adoption is refused if the project moved on
    }


def _project_pack(c: Compile) -> tuple[str, dict[str, bytes]]:
    """The project's head and the files of its pack/ there ("", {} when unreadable)."""
    try:
        repo = PackRepo(c.project.repo_path)
        head = repo.head() or ""
        return head, pack_files(repo, head or None)
    except StorageError:
        return "", {}


def compile_detail(request: StudioRequest, slug: str, compile_id: int) -> HttpResponse:
    c, role = compile_for(request.user, compile_id, slug=slug)
    context = {**progress_context(c, role.can_edit), "role": role, "can_edit": role.can_edit}
    if not request.htmx:
        return render(request, "compiles/detail.html", context)
    fragment = render(request, "compiles/detail.html#compile-progress", context)
    if c.is_final:
        return HttpResponseStopPolling(fragment.content)
    return fragment


@require_POST
def compile_cancel(request: StudioRequest, slug: str, compile_id: int) -> HttpResponse:
    c, role = compile_for(request.user, compile_id, slug=slug, edit=True)
    if not cancel_compile(c):
        messages.info(request, f"Compile #{c.pk} had already ended.")
    if request.htmx:
        c.refresh_from_db()
        return render(request, "compiles/detail.html#compile-progress", progress_context(c, role.can_edit))
    return redirect("compiles-detail", slug=c.project.slug, compile_id=c.pk)


def _attempt(c: Compile, number: int) -> CompileAttempt:
    attempt = CompileAttempt.objects.filter(compile=c, number=number).first()
    if attempt is None:
        raise Http404("No such attempt")
    attempt.compile = c
    return attempt


def pack_diff(current: dict[str, bytes], files: dict[str, str]) -> list[FileChange]:
    """The attempt's pack against the project's pack/, file by file, folded."""
    old = {p: d.decode("utf-8", errors="replace") for p, d in current.items() if p != ".keep"}
    changes = []
    for path in sorted(set(old) | set(files)):
        a, b = old.get(path), files.get(path)
        if a == b:
            continue
        status = "added" if a is None else "deleted" if b is None else "modified"
        rows = fold(side_by_side(a or "", b or ""))
        changes.append(FileChange(path, status, a or "", b or "", rows))
    return changes


def attempt_context(c: Compile, attempt: CompileAttempt, can_edit: bool) -> dict[str, Any]:
    files = attempt.pack_files or {}
    pack, problems = validate_files({p: t.encode("utf-8") for p, t in files.items()}) if files else (None, [])
    offline = (attempt.evals or {}).get("offline")
    shares = {b["node"]: b["share"] for b in (offline or {}).get("blame", [])} if offline else None
    drawing = None
    if pack is not None:
        label = f"The graph of attempt {attempt.number} of compile {c.pk}"
        drawing = draw(pack, label=label, shares=shares if shares else None)
    head, current = _project_pack(c)
    return {
        "compile": c,
        "project": c.project,
        "attempt": attempt,
        "pack": pack,
        "problems": problems,
        "drawing": drawing,
        "evals": [(name, (attempt.evals or {}).get(name)) for name in ("offline", "target")],
        "changes": pack_diff(current, files) if files else [],
        "plan_json": json.dumps(attempt.plan, indent=2, ensure_ascii=False) if attempt.plan is not None else "",
        "can_adopt": can_edit and bool(files),
        "base": head,  # the version the diff is against: the adoption is refused if the project moves on
    }


def attempt_detail(request: StudioRequest, slug: str, compile_id: int, number: int) -> HttpResponse:
    c, role = compile_for(request.user, compile_id, slug=slug)
    attempt = _attempt(c, number)
    context = {**attempt_context(c, attempt, role.can_edit), "role": role}
    return render(request, "compiles/attempt.html", context)


@require_POST
def attempt_adopt(request: StudioRequest, slug: str, compile_id: int, number: int) -> HttpResponse:
    c, role = compile_for(request.user, compile_id, slug=slug, edit=True)
    attempt = _attempt(c, number)
    try:
        made = adopt_attempt(attempt, user=request.user, base=request.POST.get("base", "").strip() or None)
    except CompileRefused as exc:
        context = {**attempt_context(c, attempt, role.can_edit), "role": role, "adopt_error": str(exc)}
        return render(request, "compiles/attempt.html", context, status=exc.status)
    messages.success(request, f"Opened proposal #{made.number} with attempt {attempt.number} of compile #{c.pk}.")
    return redirect("proposals-detail", slug=c.project.slug, number=made.number)


@require_POST
def compile_adopt(request: StudioRequest, slug: str, compile_id: int) -> HttpResponse:
    """Adopt the pack judged on the compile's target (its manifest's model is the target)."""
    c, role = compile_for(request.user, compile_id, slug=slug, edit=True)
    try:
        made = adopt_judged(c, user=request.user, base=request.POST.get("base", "").strip() or None)
    except CompileRefused as exc:
        context = {**progress_context(c, role.can_edit), "role": role, "can_edit": role.can_edit}
        context["adopt_error"] = str(exc)
        return render(request, "compiles/detail.html", context, status=exc.status)
    messages.success(request, f"Opened proposal #{made.number} with the judged pack of compile #{c.pk}.")
    return redirect("proposals-detail", slug=c.project.slug, number=made.number)
