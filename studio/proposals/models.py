"""A proposal: a branch of the project's repository (`proposals/<number>`) and its review
(docs/proposals.md). The files live in git; the row holds who, what and where it stands."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Proposal(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        APPROVED = "approved"
        CHANGES_REQUESTED = "changes_requested"
        MERGED = "merged"
        CLOSED = "closed"

    class Source(models.TextChoices):
        EDITOR = "editor"
        COMPILE = "compile"
        REVIEW = "review"
        API = "api"

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="proposals")
    number = models.PositiveIntegerField()  # per project; the branch is proposals/<number>
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    base = models.CharField(max_length=40)  # the commit of main the branch started at
    head = models.CharField(max_length=40)  # the branch's tip
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    # The checks: an eval of base and one of head on the same model(s); `deployment`'s
    # tiers when one is named, else the pack's own model.
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    base_eval = models.ForeignKey("evals.Eval", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    head_eval = models.ForeignKey("evals.Eval", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    checks_error = models.TextField(blank=True)  # why the checks could not start
    merged_sha = models.CharField(max_length=40, blank=True)
    merged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["project", "number"], name="proposal_number_per_project")]

    def __str__(self) -> str:
        return f"{self.project_id}#{self.number}"

    @property
    def branch(self) -> str:
        return f"proposals/{self.number}"

    @property
    def is_open(self) -> bool:
        return self.status not in (self.Status.MERGED, self.Status.CLOSED)


class ProposalEvent(models.Model):
    """One thing that happened to a proposal: its timeline, and where approvals are counted."""

    class Kind(models.TextChoices):
        OPENED = "opened"
        UPDATED = "updated"
        COMMENT = "comment"
        APPROVED = "approved"
        CHANGES_REQUESTED = "changes_requested"
        MERGED = "merged"
        CLOSED = "closed"
        REOPENED = "reopened"

    proposal = models.ForeignKey(Proposal, on_delete=models.CASCADE, related_name="events")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    body = models.TextField(blank=True)
    head = models.CharField(max_length=40)  # the proposal's head when it happened
    path = models.CharField(max_length=255, blank=True)  # a comment on a line of the diff
    line = models.PositiveIntegerField(null=True, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "pk"]
