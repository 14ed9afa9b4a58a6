"""The one place that decides who may see and change a project, and the things inside it.

One helper per object kind (`project_for`, `eval_for`, `run_for`, `compile_for`), used by the pages and
the API alike. A stranger (no role) gets 404, so names and ids do not leak; a member
without the right role gets 403. An object asked for under another project's slug is
not found either (404), so a URL cannot pair one project's slug with another's eval."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404

from studio.accounts.models import Role
from studio.compiles.models import Compile
from studio.endpoints.models import Endpoint
from studio.evals.models import Eval
from studio.numbers import whole_number
from studio.projects.models import Project
from studio.proposals.models import Proposal
from studio.runs.models import TryRun


def project_for(user: User, slug: str, *, edit: bool = False) -> tuple[Project, Role]:
    """The project and the user's role on it; `edit` asks for an author (403 otherwise)."""
    if "\x00" in slug:  # no slug holds one, and Postgres refuses to compare with it
        raise Http404("No such project")
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise Http404("No such project")
    return project, _role_on(project, user, edit=edit)


def _role_on(project: Project, user: User, *, edit: bool) -> Role:
    role = project.role_of(user)
    if role is None:
        raise Http404("No such project")
    if edit and not role.can_edit:
        raise PermissionDenied(f"your role on {project.slug} is {role.value}; only authors can change it")
    return role


def eval_for(user: User, pk: int, *, slug: str | None = None, edit: bool = False) -> tuple[Eval, Role]:
    """The eval and the user's role on its project (project, endpoint and author joined)."""
    rows = Eval.objects.select_related("project", "endpoint", "created_by").filter(pk=pk)
    if slug is not None:
        rows = rows.filter(project__slug=slug)
    ev = rows.first()
    if ev is None:
        raise Http404("No such eval")
    return ev, _role_on(ev.project, user, edit=edit)


def run_for(
    user: User, pk: int, *, slug: str | None = None, edit: bool = False, trace: bool = True
) -> tuple[TryRun, Role]:
    """The try-it run and the user's role on its project (project, endpoint and author
    joined); `trace=False` leaves the trace unread (studio.runs.windows reads a window)."""
    rows = TryRun.objects.select_related("project", "endpoint", "created_by").filter(pk=pk)
    if not trace:
        rows = rows.defer("trace")
    if slug is not None:
        rows = rows.filter(project__slug=slug)
    run = rows.first()
    if run is None:
        raise Http404("No such run")
    return run, _role_on(run.project, user, edit=edit)


def compile_for(user: User, pk: int, *, slug: str | None = None, edit: bool = False) -> tuple[Compile, Role]:
    """The compile and the user's role on its project (project, endpoints and author joined)."""
    rows = Compile.objects.select_related("project", "planner_endpoint", "target_endpoint", "created_by").filter(pk=pk)
    if slug is not None:
        rows = rows.filter(project__slug=slug)
    found = rows.first()
    if found is None:
        raise Http404("No such compile")
    return found, _role_on(found.project, user, edit=edit)


def proposal_for(user: User, slug: str, number: int, *, edit: bool = False) -> tuple[Proposal, Role]:
    """The proposal `number` of project `slug` and the user's role on the project."""
    project, role = project_for(user, slug, edit=edit)
    if whole_number(number) is None:
        raise Http404("No such proposal")
    found = Proposal.objects.select_related("project", "author", "base_eval", "head_eval", "deployment").filter(
        project=project, number=number
    )
    proposal = found.first()
    if proposal is None:
        raise Http404("No such proposal")
    return proposal, role


def can_manage_endpoints(user: User) -> bool:
    """Model endpoints are shared by every project: staff add, change and check them."""
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))


def require_endpoint_manager(user: User) -> None:
    if not can_manage_endpoints(user):
        raise PermissionDenied("only staff may change model endpoints")


def endpoint_for(user: User, pk: int, *, manage: bool = False) -> Endpoint:
    """The endpoint (every signed-in user may read one; 404 when there is none); with
    `manage`, 403 unless the user is staff."""
    if manage:
        require_endpoint_manager(user)
    endpoint = Endpoint.objects.filter(pk=pk).first()
    if endpoint is None:
        raise Http404("No such endpoint")
    return endpoint


def visible_projects(user: User) -> list[Project]:
    qs = Project.objects.all()
    if not getattr(user, "is_superuser", False):
        qs = qs.filter(memberships__user=user)
    return list(qs.order_by("-updated_at"))
