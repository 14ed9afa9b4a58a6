"""Deployment pages, under /p/<slug>/deployments/: the project's deployments (authors
create one), and a deployment's page: its version and tiers (authors change them; each
change goes to the history shown there), webhook, deployment tokens (the plaintext shown
once), its health over time (health_page.py; `?bucket=hour` or `day`), escalation
reasons counted per node and tier (where is the small model weak?), and recent runs.
Members read; strangers get 404."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from studio.accounts.access import project_for
from studio.accounts.models import ApiToken
from studio.deployments import health_page, promotion, service
from studio.deployments.access import deployment_for
from studio.deployments.models import Deployment, DeploymentChange, RunEvent, ServedRun
from studio.endpoints.models import Endpoint
from studio.evals.models import Eval
from studio.evals.start import EvalRefused, start_deployment_eval
from studio.http import StudioRequest
from studio.projects.storage import PackRepo


class DeploymentForm(forms.Form):
    name = forms.SlugField(max_length=63)
    version = forms.ChoiceField(required=False)
    tiers = forms.CharField(
        required=False,
        help_text="endpoint names, smallest model first, comma-separated; empty: the pack's own model",
    )
    webhook_url = forms.URLField(required=False, max_length=500)
    webhook_secret = forms.CharField(required=False, max_length=200, widget=forms.PasswordInput)
    follow_main = forms.BooleanField(required=False, label="Follow main", help_text="promote on every merge into main")

    def __init__(self, *args: Any, versions: list[Any], editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        version = self.fields["version"]
        assert isinstance(version, forms.ChoiceField)
        version.choices = [("", "the newest")] + [(v.sha, f"{v.sha[:10]} {v.message}") for v in versions]
        if not editing:
            del self.fields["follow_main"]
        if editing:
            del self.fields["name"]
            self.fields["webhook_secret"].help_text = "leave empty to keep the current secret"

    def clean_tiers(self) -> list[int]:
        names = [n.strip() for n in (self.cleaned_data.get("tiers") or "").split(",") if n.strip()]
        found = dict(Endpoint.objects.filter(name__in=names).values_list("name", "pk"))
        missing = [n for n in names if n not in found]
        if missing:
            raise forms.ValidationError(f"no endpoint named {missing[0]!r}")
        return [found[n] for n in names]


def _tiers_text(deployment: Deployment) -> str:
    return ", ".join(service.tier_names(deployment))


@require_http_methods(["GET", "POST"])
def deployment_list(request: StudioRequest, slug: str) -> HttpResponse:
    project, role = project_for(request.user, slug)
    versions = PackRepo(project.repo_path).log(limit=50)
    form = DeploymentForm(request.POST or None, versions=versions)
    if request.method == "POST":
        if not role.can_edit:
            raise PermissionDenied("only authors can create deployments")
        if form.is_valid():
            data = form.cleaned_data
            try:
                made = service.create_deployment(
                    project,
                    user=request.user,
                    name=data["name"],
                    version=data["version"] or None,
                    tiers=data["tiers"],
                    webhook_url=data["webhook_url"],
                    webhook_secret=data["webhook_secret"],
                )
            except service.Refused as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("deployments-detail", slug=slug, name=made.name)
    rows = Deployment.objects.filter(project=project).order_by("name")
    listed = [{"d": d, "tiers": _tiers_text(d), "runs": d.runs.count()} for d in rows]
    context = {"project": project, "role": role, "rows": listed, "form": form, "endpoints": Endpoint.objects.all()}
    return render(request, "deployments/list.html", context)


def escalation_counts(deployment: Deployment) -> list[dict[str, Any]]:
    """Escalations of the deployment's runs, counted per node, tier climbed from, and
    reason (its first words: fail / unsure and the check), most first."""
    counts: Counter[tuple[str, str, str, str]] = Counter()
    rows = RunEvent.objects.filter(run__deployment=deployment, kind="escalated").values_list("data", flat=True)
    for data in rows.iterator():
        reason = str(data.get("reason", "")).split("(")[0].strip()[:80]
        counts[(str(data.get("node")), str(data.get("from")), str(data.get("to")), reason)] += 1
    return [{"node": n, "from": f, "to": t, "reason": r, "count": c} for (n, f, t, r), c in counts.most_common(50)]


@require_http_methods(["GET", "POST"])
def deployment_detail(request: StudioRequest, slug: str, name: str) -> HttpResponse:
    deployment, role = deployment_for(request.user, name)
    if deployment.project.slug != slug:
        raise Http404("No such deployment")
    project = deployment.project
    versions = PackRepo(project.repo_path).log(limit=50)
    initial = {
        "version": deployment.version,
        "tiers": _tiers_text(deployment),
        "webhook_url": deployment.webhook_url,
        "follow_main": deployment.follow_main,
    }
    form = DeploymentForm(None, versions=versions, editing=True, initial=initial)
    new_token = None
    if request.method == "POST":
        if not role.can_edit:
            raise PermissionDenied("only authors can change a deployment")
        action = request.POST.get("action", "change")
        if action == "delete":
            deployment.delete()
            return redirect("deployments-list", slug=slug)
        if action == "evaluate":
            return _evaluate(request, deployment)
        if action in ("promote", "rollback"):
            return _move(request, deployment, action)
        if action == "token":
            label = (request.POST.get("token_name") or "").strip()[:100] or "deployment"
            _, new_token = ApiToken.issue(request.user, label, deployment=deployment)
        else:
            form = DeploymentForm(request.POST, versions=versions, editing=True)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    service.change_deployment(
                        deployment,
                        user=request.user,
                        version=data["version"] or None,
                        tiers=data["tiers"],
                        webhook_url=data["webhook_url"],
                        webhook_secret=data["webhook_secret"] or None,
                        follow_main=data["follow_main"],
                    )
                except service.Refused as exc:
                    form.add_error(None, str(exc))
                else:
                    return redirect("deployments-detail", slug=slug, name=name)
    context = {
        "project": project,
        "role": role,
        "deployment": deployment,
        "tiers": _tiers_text(deployment) or "the pack's own model",
        "form": form,
        "changes": DeploymentChange.objects.filter(deployment=deployment).select_related("user")[:100],
        "main_versions": versions[:20],
        "served_before": [v for v in promotion.promoted_versions(deployment) if v != deployment.version][:20],
        "escalations": escalation_counts(deployment),
        "health": health_page.section(deployment, request.GET.get("bucket")),
        "runs": ServedRun.objects.filter(deployment=deployment).order_by("-created_at", "-pk")[:50],
        "tokens": ApiToken.objects.filter(deployment=deployment, revoked=False).select_related("user")
        if role.can_edit
        else [],
        "new_token": new_token,
        "evals": Eval.objects.filter(deployment=deployment).order_by("-created_at")[:10],
    }
    return render(request, "deployments/detail.html", context)


def _evaluate(request: StudioRequest, deployment: Deployment) -> HttpResponse:
    """ "Evaluate this deployment": an eval of its version over its tier ladder."""
    try:
        ev = start_deployment_eval(deployment, user=request.user)
    except EvalRefused as exc:
        messages.error(request, f"Could not evaluate {deployment.name}: {exc}")
        return redirect("deployments-detail", slug=deployment.project.slug, name=deployment.name)
    return redirect("evals-detail", slug=deployment.project.slug, eval_id=ev.pk)


def _move(request: StudioRequest, deployment: Deployment, action: str) -> HttpResponse:
    """Promote to a version on main, or roll back to one served before, with a note."""
    version = request.POST.get("version", "").strip() or None
    note = request.POST.get("note", "")
    try:
        if action == "promote":
            made = promotion.promote(deployment, version, user=request.user, note=note)
        else:
            made = promotion.rollback(deployment, version, user=request.user, note=note)
    except service.Refused as exc:
        messages.error(request, f"Could not {action.replace('rollback', 'roll back')} {deployment.name}: {exc}")
    else:
        messages.success(request, f"{deployment.name} now serves {str(made.new)[:10]}.")
    return redirect("deployments-detail", slug=deployment.project.slug, name=deployment.name)
