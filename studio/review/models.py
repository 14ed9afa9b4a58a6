"""The human-review queue: one ReviewItem per wait of a served run for a person
(docs/serving.md, "The review queue").

An item is made when a ServedRun goes `waiting` (the deployments app's `run_waiting`
signal, studio/review/items.py): at a `human` node, past the last model tier
("escalated"), or at a human node reached by an `on_unsure` edge ("unsure"). It holds
what a reviewer needs without reloading the run: the question, every candidate answer
the models gave (tier, status, reason), the node's JSON schema for the run's state, the
committed state the answer is checked against, and the best candidate.

Status moves open -> claimed -> decided. A claim is a lease (`claim_until`): the
holder alone may decide while it is live; once it lapses anyone may claim the item
again (studio/review/claims.py). `decided` is written by one conditional UPDATE, the
guard that makes a decision, and the run's resume, happen once."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


class ReviewItem(models.Model):
    class Reason(models.TextChoices):
        HUMAN = "human"  # the run reached a `human` node
        ESCALATED = "escalated"  # a model node went past the last model tier
        UNSURE = "unsure"  # a human node reached by an `on_unsure` edge

    class Status(models.TextChoices):
        OPEN = "open"
        CLAIMED = "claimed"
        DECIDED = "decided"

    class Decision(models.TextChoices):
        APPROVE = "approve"  # the best candidate, as it was
        EDIT = "edit"  # an answer the reviewer wrote or changed
        REJECT = "reject"  # no answer: the run ends failed with the note

    run = models.ForeignKey("deployments.ServedRun", on_delete=models.CASCADE, related_name="review_items")
    # Denormalised from the run, so the queue filters and counts without joins.
    deployment = models.ForeignKey("deployments.Deployment", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=100)
    step = models.PositiveIntegerField()  # the wait's step number in the run's trace: one item per wait
    reason = models.CharField(max_length=16, choices=Reason.choices)
    question = models.TextField(blank=True)
    candidates = models.JSONField(default=list)  # [{"tier", "answer", "status", "reason", "node"}]
    disagreement = models.JSONField(default=list)  # fields the verified candidates disagree on
    schema = models.JSONField(null=True, blank=True)  # the node's schema for the run's state
    state = models.JSONField(default=dict)  # committed state, the run's input under "input"
    best = models.JSONField(null=True, blank=True)  # the form's pre-fill
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    claim_until = models.DateTimeField(null=True, blank=True)
    decision = models.CharField(max_length=16, choices=Decision.choices, blank=True)
    answer = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Add to gold: the commit that added the case, its id, and the eval measuring it.
    gold_commit = models.CharField(max_length=40, blank=True)
    gold_case = models.CharField(max_length=200, blank=True)
    gold_eval = models.ForeignKey("evals.Eval", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    gold_error = models.TextField(blank=True)
    gold_proposal = models.PositiveIntegerField(null=True, blank=True)  # its number, when added as a proposal

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="one_review_item_per_wait")]
        indexes = [
            models.Index(fields=["status", "created_at"]),
            models.Index(fields=["project", "status", "created_at"]),
            models.Index(fields=["deployment", "node", "status"]),
        ]

    def __str__(self) -> str:
        return f"review {self.pk}: {self.run} at {self.node}"

    @property
    def is_decided(self) -> bool:
        return self.status == self.Status.DECIDED

    def claim_live(self, now: datetime | None = None) -> bool:
        """Held by someone, and the hold has not lapsed."""
        when = now or timezone.now()
        return self.status == self.Status.CLAIMED and self.claim_until is not None and self.claim_until >= when

    def held_by(self, user: object) -> bool:
        return self.claim_live() and self.claimed_by_id == getattr(user, "pk", None)

    @property
    def shown_status(self) -> str:
        """What the queue shows: a claim that lapsed is open again."""
        if self.status == self.Status.CLAIMED and not self.claim_live():
            return self.Status.OPEN
        return self.status
