"""Try-it runs: one pack version on one input against one endpoint, as a Celery task."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class TryRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        WAITING = "waiting"
        CANCELLED = "cancelled"

    FINAL = {Status.DONE, Status.FAILED, Status.WAITING, Status.CANCELLED}

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="try_runs")
    version = models.CharField(max_length=40)
    endpoint = models.ForeignKey("endpoints.Endpoint", on_delete=models.SET_NULL, null=True, blank=True)
    # The spec the run opened, as it was then (an endpoint can be edited or deleted
    # later); it names the key's environment variable, never the key.
    model_spec = models.CharField(max_length=700, blank=True)
    input = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # The runtime's trace dict (Trace.to_dict, rejected text included), rewritten as the
    # run goes on (studio.runs.worker._Publishing); studio.redaction decides who reads
    # rejected text.
    trace = models.JSONField(default=dict)
    # Bumped with every write of `trace`: readers key their cache of trace windows on it
    # and never parse the whole trace of a run whose trace did not change
    # (studio.runs.windows).
    trace_rev = models.PositiveIntegerField(default=0)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The lease of the delivery that runs it (studio.work.leases, studio/runs/worker.py):
    # deliveries that claimed it, the holder's token, when the hold lapses unless
    # renewed. `swept_at`: when a sweep last re-sent it while queued (a lost message).
    attempts = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    swept_at = models.DateTimeField(null=True, blank=True)
    # When admission last held it back (its user or project had as many runs going as
    # the caps allow; studio.work.admission); the reason is in `error` while it waits.
    held_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "lease_until"]),
            # the runs list's order, across projects and within one (studio.runlist.query)
            models.Index(fields=["created_at"]),
            models.Index(fields=["project", "created_at"]),
        ]

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL
