"""The checkpoint of every studio run (an eval case's, a try-it run's, a served run's) and
its journal: the runtime's CheckpointStore kept in the database (checkpoints.py). The
tables keep the names they had in the eval app."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RunCheckpoint(models.Model):
    """runtime.checkpoint.RunRecord, in the database (studio.work.checkpoints)."""

    run_id = models.CharField(max_length=255, primary_key=True)
    pack = models.CharField(max_length=200)
    digest = models.CharField(max_length=64)
    input = models.JSONField()
    case_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (mirrors RunRecord.case_id: None, not "")
    status = models.CharField(max_length=16)
    fence = models.PositiveIntegerField()
    result = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "evals_runcheckpoint"  # the table it had in the eval app


class JournalEntry(models.Model):
    run = models.ForeignKey(RunCheckpoint, on_delete=models.CASCADE, related_name="journal")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=8)
    node = models.CharField(max_length=100)
    step = models.PositiveIntegerField()
    payload = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="one_entry_per_seq")]
        ordering = ["seq"]
        db_table = "evals_journalentry"
