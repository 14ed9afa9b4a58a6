"""Compiles: a project's spec, at one version of its repository, turned into a pack by
the compiler's loop (`compiler.loop.build`), as one durable Celery job.

A compile is one leased row (studio.work.leases: claim, renew, sweep, like a try-it run);
its attempts are rows too, written from the loop's work dir as each attempt finishes
(`attempts/<n>/attempt.json`), so a worker that dies mid-compile leaves every finished
attempt behind, and the delivery that takes the compile over resumes after the last of
them (studio/compiles/worker.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Compile(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"  # the loop ran to its end (full marks or not: see `full_marks`)
        FAILED = "failed"  # it could not run (the spec does not load, a crash, poisoned)
        CANCELLED = "cancelled"

    FINAL = {Status.DONE, Status.FAILED, Status.CANCELLED}

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="compiles")
    version = models.CharField(max_length=40)  # the repository commit the spec was read at
    # The planner: "rules" (the model-free planner), or a staff-configured endpoint whose
    # key the worker reads from its environment (never from the spec).
    planner = models.CharField(max_length=16, default="rules")  # rules | endpoint
    planner_endpoint = models.ForeignKey(
        "endpoints.Endpoint", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    target_endpoint = models.ForeignKey(
        "endpoints.Endpoint", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )  # null: no target model; attempts are scored on the offline test model only
    max_attempts = models.PositiveIntegerField(null=True, blank=True)  # null: the spec's budget
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    cancel_requested = models.BooleanField(default=False)  # the worker's watcher polls it into the loop's Event
    # progress, as the loop reports it (compiler.loop.Progress)
    attempt = models.PositiveIntegerField(default=0)
    stage = models.CharField(max_length=32, blank=True)
    message = models.TextField(blank=True)
    tokens = models.PositiveIntegerField(default=0)  # planner tokens, all attempts together
    offline_score = models.FloatField(null=True, blank=True)
    target_score = models.FloatField(null=True, blank=True)
    best_attempt = models.PositiveIntegerField(null=True, blank=True)
    full_marks = models.BooleanField(default=False)
    # What judging on the target left (compiler.judge, written with the final status): the
    # judged pack, path -> text (its manifest's model is the target; null when nothing was
    # judged, neither arm beat the trivial baseline, or it was too large to keep), which
    # arm won ("pack" | "one_call"), the manifest's model, and the verdict's sentence.
    judged_pack_files = models.JSONField(null=True, blank=True)
    judged_arm = models.CharField(max_length=16, blank=True)
    judged_model = models.TextField(blank=True)
    judged_sentence = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The lease (studio.work.leases): deliveries that claimed it, the holder's token, when the
    # hold lapses unless renewed; `swept_at`: when a sweep last re-sent it while queued.
    attempts = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    swept_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "lease_until"])]

    def __str__(self) -> str:
        return f"compile {self.pk} of {self.project} @ {self.version[:10]}"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def has_judged_pack(self) -> bool:
        return bool(self.judged_pack_files)

    @property
    def judged_arm_label(self) -> str:
        return {"pack": "the planned pack", "one_call": "one call"}.get(self.judged_arm, self.judged_arm)

    @property
    def planner_label(self) -> str:
        if self.planner_endpoint_id is not None and self.planner_endpoint is not None:
            return f"endpoint {self.planner_endpoint.name}"
        return "rules (model-free)"


class CompileAttempt(models.Model):
    """One finished attempt of the loop (its `attempt.json`), with what the pages show:
    the plan, the emitted pack's files, and a summary of its evals."""

    compile = models.ForeignKey(Compile, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=32)  # ok | plan_invalid | pack_invalid | cancelled | error
    offline_score = models.FloatField(null=True, blank=True)
    target_score = models.FloatField(null=True, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    seconds = models.FloatField(default=0.0)
    failing_nodes = models.JSONField(default=list)
    problems = models.JSONField(default=list)
    plan = models.JSONField(null=True, blank=True)  # the plan document
    # The emitted pack, path -> text (packs are text); null when the plan did not emit.
    # Kept in the database so any web process can draw, diff and adopt it.
    pack_files = models.JSONField(null=True, blank=True)
    evals = models.JSONField(default=dict)  # {"offline": summary, "target": summary}
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["compile", "number"], name="one_row_per_compile_attempt")]

    def __str__(self) -> str:
        return f"attempt {self.number} of compile {self.compile_id}"

    @property
    def has_pack(self) -> bool:
        return bool(self.pack_files)
