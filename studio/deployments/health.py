"""A deployment's health over time: its served runs counted per hour or per day (UTC).

Every run is counted in the bucket of its submission (`created_at`), so the numbers of a
bucket describe the same runs. Definitions (docs/serving.md, "Health over time"):

- runs: submitted in the bucket, whatever their status.
- outcomes: those that are done, failed or waiting for a person: the denominator of the
  shares. A queued or running run has no outcome yet; a cancelled one was stopped by its
  client, not settled.
- auto share: done by a model tier (tier != "person"), over outcomes.
- tier split: done runs by the tier that settled them (`person` included), over outcomes;
  failed and waiting are the rest (auto + person + failed + waiting = outcomes).
- escalation rate: outcomes with at least one `escalated` event, over outcomes; reasons:
  every escalation event of the bucket's runs, by the reason's head (`fail: ...`).
- latency: submission (created_at) to end (finished_at), queue wait included, of runs
  that ended done or failed without a person; p50/p95 by nearest rank. A person's time
  is the reviewer's, and shows as backlog instead.
- cost per run: the mean of the trace's `totals.cost_usd` (the sum of its model calls'
  cost) over ended runs whose trace has one; None when none has. `priced` is False when
  every known cost is 0 (endpoints without a price), so a page says "no price", not $0.
- review backlog: review items open (not decided) at the end of the bucket.

Three queries whatever the number of runs (runs, escalation events, review items; one
more for the tier names): each is read once, in one pass."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.apps import apps
from django.db.models import Count, Q
from django.utils import timezone

from runtime import percentile
from studio.deployments.models import Deployment, RunEvent, ServedRun
from studio.deployments.service import tier_names
from studio.errors import Refused

__all__ = [
    "BUCKETS",
    "MAX_BUCKETS",
    "Bucket",
    "Health",
    "HealthRefused",
    "Window",
    "health",
    "recent",
    "window",
]

WIDTH = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
BUCKETS = tuple(WIDTH)
DEFAULT_COUNT = {"hour": 48, "day": 7}  # the last 48 hours, the last 7 days (today included)
MAX_BUCKETS = 90
TOP_REASONS = 10  # per bucket; the rest are summed as "other"
PERSON = "person"
OUTCOMES = {ServedRun.Status.DONE, ServedRun.Status.FAILED, ServedRun.Status.WAITING}
ENDED = {ServedRun.Status.DONE, ServedRun.Status.FAILED, ServedRun.Status.CANCELLED}
REVIEW_ITEM = "review.ReviewItem"  # the review queue's (studio/review/), when installed


class HealthRefused(Refused):
    """A window the health view will not count (too many buckets, until before since)."""


@dataclass(frozen=True)
class Window:
    bucket: str  # hour | day
    since: datetime  # the first bucket's start (UTC)
    until: datetime  # the last bucket's end

    @property
    def width(self) -> timedelta:
        return WIDTH[self.bucket]

    @property
    def count(self) -> int:
        return (self.until - self.since) // self.width

    def starts(self) -> list[datetime]:
        return [self.since + i * self.width for i in range(self.count)]


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if timezone.is_naive(moment) else moment.astimezone(UTC)


def _floor(moment: datetime, bucket: str) -> datetime:
    moment = _utc(moment).replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if bucket == "day" else moment


def window(
    bucket: str = "day", since: datetime | None = None, until: datetime | None = None, *, now: datetime | None = None
) -> Window:
    """The buckets from `since` (floored to its bucket) to `until` (raised to the next
    bucket's start; the bucket holding now when left out); without `since`, the last 7
    days or 48 hours up to `until`. Naive times are UTC. At most MAX_BUCKETS."""
    if bucket not in WIDTH:
        raise HealthRefused(f"bucket is one of {', '.join(BUCKETS)}, not {bucket[:20]!r}")
    width = WIDTH[bucket]
    try:
        end = _floor(until or now or timezone.now(), bucket)
        if until is None or end != _utc(until):
            end += width
        start = _floor(since, bucket) if since is not None else end - DEFAULT_COUNT[bucket] * width
    except OverflowError:
        raise HealthRefused("since and until must be times between the years 1 and 9999") from None
    if start >= end:
        raise HealthRefused("until must be after since")
    count = (end - start) // width
    if count > MAX_BUCKETS:
        raise HealthRefused(
            f"that window is {count} {bucket}s; ask for at most {MAX_BUCKETS} buckets "
            f"(a shorter window{', or bucket=day' if bucket == 'hour' else ''})"
        )
    return Window(bucket, start, end)


@dataclass
class TierShare:
    tier: str
    runs: int
    share: float


@dataclass
class ReasonCount:
    reason: str
    count: int


@dataclass
class Bucket:
    start: datetime
    end: datetime
    runs: int
    outcomes: int
    auto: int
    auto_share: float | None
    failed: int
    waiting: int
    escalated: int
    escalation_rate: float | None
    reasons: list[ReasonCount]
    tiers: list[TierShare]
    latency_runs: int
    latency_p50_s: float | None
    latency_p95_s: float | None
    cost_runs: int
    cost_per_run_usd: float | None
    review_backlog: int


@dataclass
class Health:
    deployment: str
    bucket: str
    since: datetime
    until: datetime
    priced: bool  # some run had a cost above 0 (else the endpoints have no price set)
    buckets: list[Bucket]
    total: Bucket  # the whole window; its backlog is the one at the window's end


def reason_head(reason: Any) -> str:
    """An escalation's reason without its detail: `fail: every answer rejected`."""
    return str(reason or "").split("(")[0].strip()[:80] or "unknown"


@dataclass
class _Tally:
    runs: int = 0
    outcomes: int = 0
    failed: int = 0
    waiting: int = 0
    escalated: int = 0
    done_by: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)

    def add(self, run: _Run, reasons: list[str]) -> None:
        self.runs += 1
        self.reasons.update(reasons)
        if run.status in OUTCOMES:
            self.outcomes += 1
            self.escalated += bool(reasons)
            if run.status == ServedRun.Status.DONE:
                self.done_by[run.tier or "none"] += 1
            elif run.status == ServedRun.Status.FAILED:
                self.failed += 1
            else:
                self.waiting += 1
        ended_by_model = run.status in (ServedRun.Status.DONE, ServedRun.Status.FAILED) and run.tier != PERSON
        if ended_by_model and run.finished_at is not None:
            self.latencies.append(max(0.0, (run.finished_at - run.created_at).total_seconds()))
        if run.status in ENDED and run.cost is not None:
            self.costs.append(run.cost)

    def bucket(self, start: datetime, end: datetime, backlog: int, ladder: list[str]) -> Bucket:
        def share(n: int) -> float | None:
            return n / self.outcomes if self.outcomes else None

        auto = sum(n for tier, n in self.done_by.items() if tier != PERSON)
        order = {name: i for i, name in enumerate([*ladder, PERSON])}
        tiers = sorted(self.done_by.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
        top = self.reasons.most_common(TOP_REASONS)
        rest = sum(self.reasons.values()) - sum(n for _, n in top)
        reasons = [ReasonCount(r, n) for r, n in top] + ([ReasonCount("other", rest)] if rest else [])
        lat = self.latencies
        return Bucket(
            start=start,
            end=end,
            runs=self.runs,
            outcomes=self.outcomes,
            auto=auto,
            auto_share=share(auto),
            failed=self.failed,
            waiting=self.waiting,
            escalated=self.escalated,
            escalation_rate=share(self.escalated),
            reasons=reasons,
            tiers=[TierShare(t, n, n / self.outcomes) for t, n in tiers],
            latency_runs=len(lat),
            latency_p50_s=percentile(lat, 50) if lat else None,
            latency_p95_s=percentile(lat, 95) if lat else None,
            cost_runs=len(self.costs),
            cost_per_run_usd=sum(self.costs) / len(self.costs) if self.costs else None,
            review_backlog=backlog,
        )


@dataclass
class _Run:
    pk: int
    created_at: datetime
    status: str
    tier: str
    finished_at: datetime | None
    cost: float | None


RUN_FIELDS = ("pk", "created_at", "status", "tier", "finished_at", "trace__totals__cost_usd")


def _run(row: tuple[Any, ...]) -> _Run:
    pk, created, status, tier, finished, cost = row
    known = isinstance(cost, int | float) and not isinstance(cost, bool)
    return _Run(pk, created, status, tier, finished, float(cost) if known else None)


def _escalations(runs: Q) -> dict[int, list[str]]:
    """Each run's escalation reasons (heads), for the runs that `runs` picks."""
    out: dict[int, list[str]] = {}
    rows = RunEvent.objects.filter(kind="escalated").filter(runs).values_list("run_id", "data__reason")
    for run_pk, reason in rows.iterator(chunk_size=2000):
        out.setdefault(run_pk, []).append(reason_head(reason))
    return out


def _review_model() -> Any:
    try:
        return apps.get_model(REVIEW_ITEM)
    except LookupError:
        return None


class _Backlog:
    """Review items open at a moment: opened before it, not decided before it."""

    def __init__(self, rows: Iterable[tuple[datetime, datetime | None, str]]) -> None:
        self.opened: list[datetime] = []
        self.closed: list[datetime] = []
        for created, decided, status in rows:
            self.opened.append(created)
            if status == "decided" and decided is not None:
                self.closed.append(max(created, decided))
        self.opened.sort()
        self.closed.sort()

    def at(self, moment: datetime) -> int:
        return bisect_left(self.opened, moment) - bisect_left(self.closed, moment)


def health(deployment: Deployment, win: Window, *, ladder: list[str] | None = None) -> Health:
    """The deployment's runs in `win`, counted per bucket and over the whole window."""
    if ladder is None:
        ladder = tier_names(deployment)
    in_window = Q(created_at__gte=win.since, created_at__lt=win.until)
    reasons = _escalations(Q(run__deployment=deployment, run__created_at__gte=win.since, run__created_at__lt=win.until))
    tallies = [_Tally() for _ in range(win.count)]
    total = _Tally()
    rows = ServedRun.objects.filter(in_window, deployment=deployment).values_list(*RUN_FIELDS).order_by()
    for row in rows.iterator(chunk_size=2000):
        run = _run(row)
        said = reasons.get(run.pk, [])
        tallies[(run.created_at - win.since) // win.width].add(run, said)
        total.add(run, said)
    review = _review_model()
    items: list[tuple[datetime, datetime | None, str]] = []
    if review is not None:
        open_then = ~Q(status="decided") | Q(decided_at__gte=win.since)
        items = list(
            review.objects.filter(open_then, deployment=deployment, created_at__lt=win.until)
            .values_list("created_at", "decided_at", "status")
            .order_by()
        )
    backlog = _Backlog(items)
    buckets = [
        t.bucket(start, start + win.width, backlog.at(start + win.width), ladder)
        for t, start in zip(tallies, win.starts(), strict=True)
    ]
    return Health(
        deployment=deployment.name,
        bucket=win.bucket,
        since=win.since,
        until=win.until,
        priced=any(c > 0 for c in total.costs),
        buckets=buckets,
        total=total.bucket(win.since, win.until, backlog.at(win.until), ladder),
    )


def recent(since: datetime, until: datetime) -> dict[str, Bucket]:
    """Every deployment's runs submitted from `since` to `until` as one bucket, by
    deployment name, with the review backlog now (for /metrics: studio/ops/health_metrics.py).
    Deployments without runs in the window are there too, with zeros. Four queries."""
    tallies = {name: _Tally() for name in Deployment.objects.values_list("name", flat=True)}
    reasons = _escalations(Q(run__created_at__gte=since, run__created_at__lt=until))
    rows = (
        ServedRun.objects.filter(created_at__gte=since, created_at__lt=until)
        .values_list(*RUN_FIELDS, "deployment__name")
        .order_by()
    )
    for row in rows.iterator(chunk_size=2000):
        tallies.setdefault(row[-1], _Tally()).add(_run(row[:-1]), reasons.get(row[0], []))
    backlog: Counter[str] = Counter()
    review = _review_model()
    if review is not None:
        undecided = review.objects.exclude(status="decided").values("deployment__name").annotate(n=Count("pk"))
        backlog.update(dict(undecided.values_list("deployment__name", "n").order_by()))
    return {name: t.bucket(since, until, backlog[name], []) for name, t in sorted(tallies.items())}
