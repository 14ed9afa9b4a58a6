"""Eval pages for starting an eval and watching it run: the start form, the eval page
(progress bar and running counts, polled by htmx until the eval ends) and the cancel
button. The result pages are studio/evals/views/summary.py, blame.py, cost.py, compare.py.

Authors start and cancel evals; every member watches them; strangers get 404. Function
views that return early; htmx gets the fragment named after the DOM id it replaces,
and the poller stops with 286 once the eval has ended."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from studio.accounts.access import eval_for, project_for
from studio.endpoints.models import Endpoint
from studio.evals import shared, start
from studio.evals.models import Eval
from studio.host_tools import registry_broken, tool_registry, tools_problem
from studio.http import StudioRequest
from studio.projects.models import Project
from studio.projects.storage import PackRepo, StorageError
from studio.projects.validation import PACK_PREFIX, validate_files

# An eval with nothing started after this long gets a hint on its page.
QUEUE_PATIENCE = timedelta(seconds=30)
OWN_MODEL = "own"


# -- start ----------------------------------------------------------------------------------


class EvalStartForm(forms.Form):
    version = forms.ChoiceField(label="Version")
    endpoints = forms.MultipleChoiceField(
        label="Models", widget=forms.CheckboxSelectMultiple, error_messages={"required": "choose at least one model"}
    )
    tags = forms.CharField(
        label="Only cases tagged", required=False, max_length=500, help_text="comma-separated; empty runs every case"
    )
    untagged = forms.BooleanField(
        label="Cases with no tag", required=False, help_text="alone, or with the tags above (e.g. held-out cases)"
    )
    exclude_tags = forms.CharField(
        label="Leave out cases tagged", required=False, max_length=500, help_text="comma-separated"
    )
    repeats = forms.IntegerField(
        label="Repeats",
        min_value=1,
        max_value=100,
        initial=1,
        help_text="run each case this many times (small models are noisy)",
    )
    tools = forms.ChoiceField(
        label="Tool results",
        required=False,
        help_text="record them to replay later; a replay calls no tool (a refund is not issued again)",
    )

    def __init__(
        self,
        *args: Any,
        versions: list[tuple[str, str]],
        default_model: str | None,
        recordings: Sequence[Eval] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["tools"]).choices = [
            ("", "call the tools"),
            ("record", "record tool results"),
            *((f"replay:{r.pk}", f"replay tools from eval #{r.pk} ({r.version[:7]})") for r in recordings),
        ]
        # both declared above as choice fields; `fields` is typed as holding any Field
        cast(forms.ChoiceField, self.fields["version"]).choices = versions
        choices = [(OWN_MODEL, f"the pack's own model ({default_model})")] if default_model else []
        choices += [(str(e.pk), f"{e.name} ({e.spec})") for e in Endpoint.objects.all()]
        cast(forms.ChoiceField, self.fields["endpoints"]).choices = choices
        if choices:
            self.fields["endpoints"].initial = [choices[0][0]]

    def endpoint_refs(self) -> list[int | None]:
        return [None if v == OWN_MODEL else int(v) for v in self.cleaned_data["endpoints"]]

    def tool_options(self) -> dict[str, Any]:
        """start_eval's record_tools / replay_tools_from from the "Tool results" choice."""
        chosen = self.cleaned_data.get("tools") or ""
        if chosen.startswith("replay:"):
            return {"replay_tools_from": int(chosen.removeprefix("replay:"))}
        return {"record_tools": chosen == "record"}

    def tag_list(self, name: str = "tags") -> list[str]:
        return [t.strip() for t in self.cleaned_data.get(name, "").split(",") if t.strip()]


def _head_pack(project: Project) -> tuple[Any, str | None]:
    """The pack at the head (for its model, tags and case count), or why it does not load."""
    try:
        repo = PackRepo(project.repo_path)
        pack, problems = validate_files(repo.files(None, prefix=PACK_PREFIX))
    except StorageError as exc:
        return None, str(exc)
    if pack is None:
        return None, f"the pack at the head does not load ({problems[0].file}: {problems[0].message})"
    try:
        tools = tool_registry()
    except Exception as exc:  # a registry that does not import: the start would say so too
        return pack, registry_broken(exc)
    return pack, tools_problem(pack, tools)


@require_http_methods(["GET", "POST"])
def eval_new(request: StudioRequest, slug: str) -> HttpResponse:
    project, _ = project_for(request.user, slug, edit=True)
    try:
        log = PackRepo(project.repo_path).log(limit=50)
    except StorageError:
        log = []
    versions = [(v.sha, f"{v.sha[:10]} {v.message.splitlines()[0][:60] if v.message else ''}") for v in log]
    pack, problem = _head_pack(project)
    recorded = Eval.objects.filter(project=project, tools_mode="record", status=Eval.Status.DONE)[:20]
    form = EvalStartForm(
        request.POST or None, versions=versions, default_model=pack.model if pack else None, recordings=list(recorded)
    )
    if request.method == "POST" and form.is_valid():
        try:
            evals = start.start_eval(
                project,
                user=request.user,
                version=form.cleaned_data["version"],
                endpoints=form.endpoint_refs(),
                tags=form.tag_list(),
                untagged=bool(form.cleaned_data.get("untagged")),
                exclude_tags=form.tag_list("exclude_tags"),
                repeats=form.cleaned_data["repeats"],
                **form.tool_options(),
            )
        except start.EvalRefused as exc:
            form.add_error(None, str(exc))
        else:
            if len(evals) > 1:
                messages.success(request, f"Started {len(evals)} evals, one per model (batch {evals[0].batch}).")
            return redirect("evals-detail", slug=project.slug, eval_id=evals[0].pk)
    tags = sorted({t for c in pack.cases for t in c.tags}) if pack else []
    context = {
        "project": project,
        "form": form,
        "problem": problem,
        "pack": pack,
        "tags": tags,
        "recent": Eval.objects.filter(project=project).select_related("endpoint")[:10],
    }
    return render(request, "evals/run_new.html", context, status=400 if request.method == "POST" else 200)


# -- progress -------------------------------------------------------------------------------


def _results_url(ev: Eval) -> str | None:
    try:
        return reverse("evals-summary", args=[ev.project.slug, ev.pk])
    except NoReverseMatch:  # the result pages are not mounted
        return None


def progress_context(ev: Eval, can_edit: bool) -> dict[str, Any]:
    counts = shared.counts_of(ev)
    total = counts["total"] or 1
    ended = ev.is_final and counts["running"] == 0
    bar = []  # (status, count, x, width) in percent: the progress bar's segments, left to right
    x = 0.0
    for key in ("passed", "failed", "error", "cancelled", "running"):
        if counts[key]:
            width = 100 * counts[key] / total
            bar.append((key, counts[key], x, width))
            x += width
    return {
        "ev": ev,
        "counts": counts,
        "ended": ended,
        "bar": bar,
        "percent": round(100 * counts["finished"] / total),
        "ran": counts["passed"] + counts["failed"] + counts["error"],
        "can_cancel": can_edit and not ev.is_final,
        "slow_queue": (
            ev.status == Eval.Status.QUEUED
            and counts["queued"] == counts["total"]
            and timezone.now() - ev.created_at > QUEUE_PATIENCE
        ),
        "results_url": _results_url(ev),
    }


def _progress(request: StudioRequest, ev: Eval, can_edit: bool) -> HttpResponse:
    context = progress_context(ev, can_edit)
    page = render(request, "evals/run_detail.html#eval-progress", context)
    if context["ended"]:
        return HttpResponseStopPolling(page.content)
    return page


def eval_detail(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = eval_for(request.user, eval_id, slug=slug)
    project = ev.project
    if request.htmx:
        return _progress(request, ev, role.can_edit)
    batch = (
        list(Eval.objects.filter(batch=ev.batch, project=project).exclude(pk=ev.pk).select_related("endpoint"))
        if ev.batch
        else []
    )
    context = {**progress_context(ev, role.can_edit), "project": project, "role": role, "batch": batch}
    return render(request, "evals/run_detail.html", context)


@require_POST
def eval_cancel(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, _ = eval_for(request.user, eval_id, slug=slug, edit=True)
    cancelled = start.cancel_eval(ev)
    ev.refresh_from_db()
    if request.htmx:
        return _progress(request, ev, True)
    if cancelled:
        messages.success(request, f"Eval {ev.pk} cancelled: queued cases will not run, running ones are stopping.")
    else:
        messages.info(request, f"Eval {ev.pk} had already ended ({ev.status}).")
    return redirect("evals-detail", slug=ev.project.slug, eval_id=ev.pk)
