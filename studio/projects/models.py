"""A project indexes one git repository; file contents live only in git."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from studio.accounts.models import Membership, Role

slug_validator = RegexValidator(
    r"^(?!(upload|new)$)[a-z0-9][a-z0-9_-]{0,62}$",
    "use 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit ('upload' and 'new' are reserved)",
)


class Project(models.Model):
    slug = models.CharField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    head = models.CharField(max_length=40, blank=True)  # cached tip of main, for lists
    updated_at = models.DateTimeField(default=timezone.now)
    # Merging a proposal (docs/proposals.md): approvals on its current head it needs, and
    # whether its head must also pass the gate against its base.
    approvals_required = models.PositiveSmallIntegerField(default=1)
    merge_needs_gate = models.BooleanField(default=False)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.slug

    @property
    def repo_path(self) -> Path:
        return Path(settings.GIT_ROOT) / f"{self.slug}.git"

    def role_of(self, user: User | AnonymousUser) -> Role | None:
        if not user.is_authenticated:
            return None
        if user.is_superuser:
            return Role.AUTHOR
        membership = Membership.objects.filter(project=self, user=user).only("role").first()
        return Role(membership.role) if membership else None


def slug_unavailable(slug: str, user: User) -> str:
    """What `user` is told when a new project cannot have `slug` (docs/studio.md, "Taken
    slugs"). Who can see the project that holds it hears so; anyone else hears the same
    sentence whether a project they cannot see holds it, a repository left on disk does,
    or another create won a race, so a refused slug names no project to a stranger."""
    project = Project.objects.filter(slug=slug).first()
    if project is not None and project.role_of(user) is not None:
        return f"a project with slug {slug!r} exists (you can open it at /p/{slug}/); choose another slug"
    return f"the slug {slug!r} is unavailable; choose another slug"


def create_project(
    *,
    slug: str,
    name: str,
    owner: User,
    pack_files: dict[str, bytes],
    spec_files: dict[str, bytes] | None = None,
    message: str = "Create project",
    description: str = "",
) -> Project:
    """Make the repository (first commit: the pack under pack/, the spec under spec/),
    then the row and the owner's author membership. The row is only made once the
    repository exists, and a failed row insert removes the repository."""
    import shutil

    from django.db import transaction

    from studio.projects.gold import merge_gold
    from studio.projects.storage import PackRepo

    project = Project(slug=slug, name=name or slug, description=description, created_by=owner)
    # Uniqueness is the database's (and the callers' slug_unavailable); full_clean's own
    # check would name the project to a stranger who raced its create.
    project.full_clean(exclude=["created_by"], validate_unique=False)
    spec = dict(spec_files or {})
    gold = spec.pop("gold.jsonl", None)
    if gold is not None:  # one gold per project: the spec's gold cases are the pack's evalset
        pack_files = {**pack_files, "evalset.jsonl": merge_gold(pack_files.get("evalset.jsonl"), gold).data}
    files = {f"pack/{p}": d for p, d in pack_files.items()}
    files.update({f"spec/{p}": d for p, d in spec.items()})
    if not files:
        files = {"pack/.keep": b""}
    repo = PackRepo.create(project.repo_path, files, author=_display(owner), email=owner.email, message=message)
    try:
        with transaction.atomic():
            project.head = repo.head() or ""
            project.save()
            Membership.objects.create(user=owner, project=project, role=Role.AUTHOR)
    except Exception:
        shutil.rmtree(project.repo_path, ignore_errors=True)
        raise
    return project


def _display(user: User) -> str:
    return user.get_full_name() or user.username
