"""Claims: how one reviewer at a time holds a review item.

A claim is a lease on the item's row: `status` claimed, `claimed_by`, `claim_until`.
It is taken by one conditional UPDATE that matches only an item nobody holds: open, or
claimed with a lapsed lease (an abandoned claim expires), or already held by the same
user (claiming again renews the lease). Of two reviewers claiming at once the database
lets exactly one UPDATE match; the other finds the row held and is told by whom.

A decision (studio/review/decide.py) is written by another conditional UPDATE that
matches only while the decider still holds a live claim; so a reviewer whose claim
lapsed and was taken by someone else cannot decide, and no item is decided twice."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from studio.review.models import ReviewItem

S = ReviewItem.Status


def claim_for() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "PACKFORGE_REVIEW_CLAIM_S", 900)))


def claimable(user: User) -> Q:
    now = timezone.now()
    return (
        Q(status=S.OPEN)
        | Q(status=S.CLAIMED, claim_until__lt=now)
        | Q(status=S.CLAIMED, claim_until__isnull=True)
        | Q(status=S.CLAIMED, claimed_by=user)
    )


def claim(item: ReviewItem, user: User) -> bool:
    """Take (or renew) the claim on `item` for `user`; False when someone else holds a
    live claim or the item is decided. `item` is refreshed either way."""
    until = timezone.now() + claim_for()
    won = bool(
        ReviewItem.objects.filter(claimable(user), pk=item.pk).update(
            status=S.CLAIMED, claimed_by=user, claim_until=until
        )
    )
    item.refresh_from_db()
    return won


def release(item: ReviewItem, user: User) -> bool:
    """Give a claim up (only its holder can); the item is open again."""
    gave = bool(
        ReviewItem.objects.filter(pk=item.pk, status=S.CLAIMED, claimed_by=user).update(
            status=S.OPEN, claimed_by=None, claim_until=None
        )
    )
    item.refresh_from_db()
    return gave


def holder(item: ReviewItem) -> str:
    """Who holds a live claim on the item ("" when nobody does)."""
    if item.claim_live() and item.claimed_by is not None:
        return item.claimed_by.username
    return ""
