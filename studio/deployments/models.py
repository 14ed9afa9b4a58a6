"""Deployments: a project's pack version served over the runs API, on an ordered ladder
of tiers (endpoints, small to large; the human review queue is implicit after the last).

A ServedRun is one run submitted to a deployment. It executes on Celery with the same
durability as an eval case (studio/deployments/worker.py): a lease held by one task
delivery at a time (studio.work.leases), the runtime's checkpoint in the database with a
fencing token (studio.work.checkpoints), resumed after a worker dies with no tool call
repeated, closed as failed ("poisoned") after too many deliveries. RunEvents are the
run's event stream (the fixed taxonomy in EVENT_KINDS), numbered 1.. per run."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

deployment_name = RegexValidator(
    r"^[a-z0-9][a-z0-9-]{0,62}$", "lowercase letters, digits and dashes, starting with a letter or digit"
)

# The event stream's taxonomy, fixed (docs/serving.md): no other kind is ever written.
EVENT_KINDS = (
    "run.start",
    "node.start",
    "model.call",
    "attempt.rejected",
    "escalated",
    "tool.call",
    "tool.result",
    "waiting",
    "review.decided",
    "run.end",
)


class Deployment(models.Model):
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="deployments")
    name = models.CharField(max_length=63, unique=True, validators=[deployment_name])
    version = models.CharField(max_length=40)  # a commit of the project's pack
    # Endpoint ids, in order: tier 0 first (the smallest). A person is the implicit last tier.
    tiers = models.JSONField(default=list, blank=True)  # [] = the pack's own model, one tier
    webhook_url = models.URLField(max_length=500, blank=True)
    # Stored as given; shown once, when set, never again (the form and the API only say
    # whether there is one).
    webhook_secret = models.CharField(max_length=200, blank=True)
    # Opt-in: every merge into main promotes this deployment to main's new tip.
    follow_main = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class DeploymentChange(models.Model):
    """One change of a deployment's version, tiers or webhook: its history."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="changes")
    at = models.DateTimeField(default=timezone.now)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # created | version (a promote) | rollback | tiers | webhook_url | webhook_secret | follow_main
    field = models.CharField(max_length=32)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True)  # why: given with a promote or a rollback

    class Meta:
        ordering = ["-at", "-pk"]


class ServedRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"  # for a person (a review item); resumed by resume_served_run
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    FINAL = {Status.DONE, Status.FAILED, Status.CANCELLED}

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="runs")
    run_id = models.CharField(max_length=64)  # the client's, or generated
    input = models.JSONField()
    input_digest = models.CharField(max_length=64)  # sha256 of the canonical JSON of input
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    version = models.CharField(max_length=40)  # the deployment's version when submitted
    tier = models.CharField(max_length=100, blank=True)  # the tier that settled it ("person" for a human)
    trace = models.JSONField(default=dict)  # the runtime's Trace.to_dict, rewritten after each step
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    waiting_at = models.CharField(max_length=100, blank=True)  # the node it waits at
    # While waiting: why ("human": a human node; "escalated": past the last model tier),
    # the node's question (its rendered prompt), and the committed state with the run's
    # input under "input" (what runtime.check_answer / node_schema take).
    waiting_reason = models.CharField(max_length=16, blank=True)
    question = models.TextField(blank=True)
    state = models.JSONField(null=True, blank=True)
    # Nodes the run has visited, space-separated with a space at each end (" a b "), for
    # the list's node filter on any database.
    path = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)  # task deliveries that claimed it
    # The lease (studio.work.leases): the holding delivery's token, named lease_owner as the
    # shared lease helpers expect (`lease_token` is an alias), and when it lapses.
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    fence = models.PositiveIntegerField(default=0)  # the checkpoint's fencing token of the last holder
    cancel_requested = models.BooleanField(default=False)
    # A person's answer waiting to be committed by the resume task (resume_served_run).
    answer = models.JSONField(null=True, blank=True)
    answer_node = models.CharField(max_length=100, blank=True)
    answered_by = models.CharField(max_length=200, blank=True)  # "human:<username>"
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    swept_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["deployment", "run_id"], name="one_served_run_per_id")]
        indexes = [
            models.Index(fields=["deployment", "status", "created_at"]),
            models.Index(fields=["status", "lease_until"]),
            # the runs list, across deployments and within one (studio.runlist.query)
            models.Index(fields=["created_at"]),
            models.Index(fields=["deployment", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.deployment.name}/{self.run_id}"

    @property
    def lease_token(self) -> str:
        return self.lease_owner

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def checkpoint_id(self) -> str:
        """The runtime's run id for this run (its checkpoint row)."""
        return f"served{self.pk}"


class RunEvent(models.Model):
    run = models.ForeignKey(ServedRun, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()  # 1.. per run; the SSE id (Last-Event-ID)
    kind = models.CharField(max_length=32)  # one of EVENT_KINDS
    data = models.JSONField(default=dict)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="one_event_per_seq")]
