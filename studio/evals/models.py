"""Eval runs: a pack version scored against its evalset on one endpoint, fanned out as
one Celery task per (case, repeat). Each case's run checkpoints into the database
(RunCheckpoint + JournalEntry) through the runtime's checkpoint interface, so a case
whose worker died resumes where it stopped."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Eval(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="evals")
    version = models.CharField(max_length=40)
    endpoint = models.ForeignKey(
        "endpoints.Endpoint", on_delete=models.PROTECT, null=True, blank=True, related_name="evals"
    )  # null: the pack's own (scripted) model
    model_spec = models.CharField(max_length=500)  # what was actually used, for the record
    batch = models.CharField(max_length=32, blank=True)  # evals started together (one per endpoint)
    tags = models.JSONField(default=list)  # only cases with any of these tags; [] = all
    # ... and, with `untagged`, the cases with no tag (alone when `tags` is []); less the
    # cases with any of `exclude_tags` (runtime.evaluate.select_cases)
    untagged = models.BooleanField(default=False)
    exclude_tags = models.JSONField(default=list)
    repeats = models.PositiveIntegerField(default=1)
    # The tier ladder, small to large: endpoint ids (the first is `endpoint`); a case
    # that fails its ladder on one tier climbs to the next, then to a person (docs/tiers.md).
    # [] = no ladder: the one endpoint, as before.
    tiers = models.JSONField(default=list, blank=True)
    # The deployment whose version and tier ladder this eval runs ("Evaluate this deployment").
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.SET_NULL, null=True, blank=True, related_name="evals"
    )
    # Recorded tool results (docs/tools.md, "Recorded tool results"): "" calls tools live;
    # "record" calls them live and keeps every call (the tape, once the eval ends);
    # "replay" answers every call from `tape` (copied from `tools_from` at the start)
    # and calls no tool; a case whose calls leave it is `diverged`.
    tools_mode = models.CharField(max_length=8, blank=True)
    tools_from = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="replays"
    )  # the recording eval a replay replays
    tape = models.TextField(blank=True)  # JSONL, one tool call a line (runtime.recordings.ToolTape)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)  # case runs = cases x repeats
    is_baseline = models.BooleanField(default=False)
    summary = models.JSONField(null=True, blank=True)  # computed when the eval ends
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When a worker's sweep last re-sent this eval's queued cases (lost messages); a
    # conditional UPDATE on it lets one sweeper per round do it (studio/evals/recovery.py).
    swept_at = models.DateTimeField(null=True, blank=True)

    ENDED = {Status.DONE, Status.CANCELLED}

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project"], condition=models.Q(is_baseline=True), name="one_baseline_per_project"
            )
        ]

    def __str__(self) -> str:
        return f"eval {self.pk} of {self.project} @ {self.version[:10]}"

    @property
    def is_final(self) -> bool:
        """No more cases will start (done, or cancelled). Cases already in flight when an
        eval is cancelled still finish; `finished_at` is set once the last one has."""
        return self.status in self.ENDED


class EvalCase(models.Model):
    """One run of one gold case. Keyed by (eval, case, repeat): the task is idempotent."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"
        ERROR = "error"  # the case could not be run to an outcome (e.g. kept killing workers)
        CANCELLED = "cancelled"
        # Replaying recorded tool results, the run called a tool otherwise than recorded:
        # not scored (neither a pass nor a failure of the pack or its model).
        DIVERGED = "diverged"

    FINAL = {Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.DIVERGED}

    eval = models.ForeignKey(Eval, on_delete=models.CASCADE, related_name="cases")
    case_id = models.CharField(max_length=200)
    repeat = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)  # task deliveries that started this case
    tier = models.CharField(max_length=16, blank=True)  # auto | escalated | failed
    settled_by = models.CharField(max_length=100, blank=True)  # with tiers: the tier (or "person") that settled it
    tool_live = models.PositiveIntegerField(default=0)  # tool calls made (returned) live
    tool_replayed = models.PositiveIntegerField(default=0)  # answered from the recording (or the journal)
    diverged = models.JSONField(default=list)  # why its calls left the replayed recording
    tape = models.JSONField(default=list)  # recording: the calls it made (RecordedCall dicts)
    blamed = models.CharField(max_length=100, blank=True)
    run_status = models.CharField(max_length=16, blank=True)  # the runtime's: done | failed | waiting ...
    path = models.JSONField(default=list)
    edges = models.JSONField(default=list)  # graph.yaml edge indexes taken
    diffs = models.JSONField(default=list)
    problems = models.JSONField(default=list)
    rejections = models.JSONField(default=dict)  # category -> count
    generations = models.PositiveIntegerField(default=0)
    model_calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)  # of prompt_tokens, from the server's prompt cache
    completion_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0.0)
    cost_usd = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    trace = models.JSONField(null=True, blank=True)  # for the drill-down
    # What a finished run answered (results.cases.output_of), stored when it is scored so
    # compare and matrix need not read every trace; null: no answer, or scored before
    # this column (those rows are read from their trace).
    output = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The lease of the delivery that runs the case (studio/evals/worker.py): its owner's
    # token and when it lapses unless renewed. A running case whose lease lapsed lost its
    # worker; an empty owner with a live lease means "re-sent, not yet claimed".
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    # When admission last held it back (studio.work.admission); the reason is in `error`.
    held_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["eval", "case_id", "repeat"], name="one_row_per_case_run")]
        indexes = [models.Index(fields=["eval", "status"]), models.Index(fields=["status", "lease_until"])]

    @property
    def run_id(self) -> str:
        return f"eval{self.eval_id}-{self.case_id}-{self.repeat}"

    @property
    def passed(self) -> bool:
        return self.status == self.Status.PASSED
