"""Who may do what: per-project roles and API tokens (hashed at rest)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "pf_"
LAST_USED_EVERY = timedelta(minutes=1)  # how stale a token's last_used_at may get


class Role(models.TextChoices):
    AUTHOR = "author", "Author"  # edits the pack, runs evals
    REVIEWER = "reviewer", "Reviewer"  # reads everything, works the review queue
    VIEWER = "viewer", "Viewer"  # reads

    @property
    def can_edit(self) -> bool:
        return self == Role.AUTHOR


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="one_role_per_project")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.project}"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for the CLI and CI. Only its SHA-256 is stored; the token itself
    is shown once, when it is made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)  # to tell tokens apart in lists
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    # A deployment-scoped token: it may submit runs to this deployment and read its runs,
    # nothing else (studio.accounts.auth refuses it everywhere else with 403).
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.CASCADE, null=True, blank=True, related_name="tokens"
    )

    @classmethod
    def issue(cls, user: object, name: str, deployment: object | None = None) -> tuple[ApiToken, str]:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(user=user, name=name, prefix=token[:10], digest=_digest(token), deployment=deployment)
        return row, token

    def allows(self, path: str) -> bool:
        """Whether this token may be used on `path`: any path for a user's token; for a
        deployment-scoped one, only its deployment's runs (/api/deployments/NAME/runs...)."""
        if self.deployment is None:
            return True
        base = f"/api/deployments/{self.deployment.name}/runs"
        return path == base or path.startswith(base + "/")

    @classmethod
    def authenticate(cls, token: str) -> ApiToken | None:
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        row = cls.objects.select_related("user", "deployment").filter(digest=_digest(token), revoked=False).first()
        if row is None or not row.user.is_active:
            return None
        now = timezone.now()
        # At most once a minute: a write on every request would take SQLite's write
        # lock on every API call (docs/serving.md, "What a served run costs").
        if row.last_used_at is None or now - row.last_used_at >= LAST_USED_EVERY:
            cls.objects.filter(pk=row.pk).update(last_used_at=now)
            row.last_used_at = now
        return row
