"""Every run a user may see, try-it and served, in one list (the /runs/ page and GET /api/runs).

Newest first. A page is read with a keyset, not an offset: each table is asked for the
rows older than the cursor, `limit + 1` of them, in its (created_at, pk) index order, and
the two answers are merged here. So a page costs the same at run 100,000 as at run 50,
and the page's reads are a fixed number of queries (tested).

The order is (created_at, kind, pk), all descending, with "served" above "try" at the
same instant; the cursor is the last row's triple. Tier and waiting-node filters ask
for served runs only: a try-it run has one model, no ladder, and nobody answers it.
docs/runs.md has the rules."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.urls import reverse

from studio.deployments.models import Deployment, ServedRun
from studio.projects.models import Project
from studio.review.models import ReviewItem
from studio.runs.models import TryRun

__all__ = [
    "KINDS",
    "MAX_LIMIT",
    "STATUSES",
    "BadQuery",
    "Cursor",
    "ListedRun",
    "RunPage",
    "RunQuery",
    "query_from",
    "run_page",
]

KINDS = ("try", "served")
STATUSES = ("queued", "running", "waiting", "done", "failed", "cancelled")
MAX_LIMIT = 200
MAX_TEXT = 200  # characters of a text search


class BadQuery(ValueError):
    """A filter or cursor the list cannot use; the message says which and why."""


@dataclass(frozen=True)
class Cursor:
    at: datetime
    kind: str
    pk: int

    def encode(self) -> str:
        return f"{self.at.isoformat()}~{self.kind}~{self.pk}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        parts = text.split("~")
        if len(parts) != 3 or parts[1] not in KINDS or not (parts[2].isascii() and parts[2].isdigit()):
            raise BadQuery(f"cursor {text[:80]!r} is not one this list gave (time~kind~id)")
        try:
            at = datetime.fromisoformat(parts[0])
        except ValueError:
            raise BadQuery(f"cursor {text[:80]!r} does not start with a time") from None
        if at.tzinfo is None:
            raise BadQuery("the cursor's time has no UTC offset")
        return cls(_utc("the cursor's time", at), parts[1], int(parts[2]))


@dataclass(frozen=True)
class RunQuery:
    """The filters, each optional. `text` is looked for in the input and the output."""

    project: str = ""
    deployment: str = ""
    kind: str = ""
    status: str = ""
    tier: str = ""
    node: str = ""
    since: datetime | None = None
    until: datetime | None = None
    text: str = ""
    cursor: Cursor | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if self.kind and self.kind not in KINDS:
            raise BadQuery(f"kind {self.kind[:40]!r} is not one of: {', '.join(KINDS)}")
        if self.status and self.status not in STATUSES:
            raise BadQuery(f"status {self.status[:40]!r} is not one of: {', '.join(STATUSES)}")
        if "\x00" in self.text:
            raise BadQuery("the text to search for holds a NUL character")
        if len(self.text) > MAX_TEXT:
            raise BadQuery(f"the text to search for is {len(self.text)} characters; at most {MAX_TEXT}")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise BadQuery(f"limit is {self.limit}; it must be 1 to {MAX_LIMIT}")
        for name in ("project", "deployment", "tier", "node"):
            value = getattr(self, name)
            if "\x00" in value or len(value) > 100:
                raise BadQuery(f"{name} is not a name (at most 100 characters, no NUL)")
        if self.since and self.until and self.since >= self.until:
            raise BadQuery("since must be before until")

    @property
    def served_only(self) -> bool:
        return bool(self.deployment or self.tier or self.node)

    def wants(self, kind: str) -> bool:
        if kind == "try" and self.served_only:
            return False
        return not self.kind or self.kind == kind

    def params(self) -> dict[str, str]:
        """The filters as query parameters (for the page's links), empty ones left out."""
        got = {
            "project": self.project,
            "deployment": self.deployment,
            "kind": self.kind,
            "status": self.status,
            "tier": self.tier,
            "node": self.node,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "q": self.text,
        }
        return {k: v for k, v in got.items() if v}


@dataclass
class ListedRun:
    kind: str
    pk: int
    project: str
    status: str
    version: str
    input: dict[str, Any]
    output: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    by: str
    url: str  # the run's trace page
    deployment: str = ""
    run_id: str = ""  # a served run's id, the client's or generated
    tier: str = ""
    waiting_at: str = ""
    model: str = ""  # a try-it run's model spec
    endpoint: str = ""
    review_item: int | None = None
    review_url: str = ""
    deployment_url: str = ""

    @property
    def key(self) -> tuple[datetime, int, int]:
        return (self.created_at, KINDS.index(self.kind), self.pk)


@dataclass
class RunPage:
    runs: list[ListedRun] = field(default_factory=list)
    next: Cursor | None = None


def _when(name: str, text: str) -> datetime | None:
    """A time filter: an ISO date or date-time; without an offset it is UTC."""
    text = text.strip()
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text.replace(" ", "T", 1) if len(text) > 10 else text)
    except ValueError:
        raise BadQuery(f"{name} {text[:40]!r} is not a date or time (2026-12-03 or 2026-12-03T09:30)") from None
    return _utc(name, at if at.tzinfo else at.replace(tzinfo=UTC))


def _utc(name: str, at: datetime) -> datetime:
    """`at` in UTC, as the database compares it; a time that has none (near year 1 or 9999
    with an offset) is a BadQuery, not an overflow deep in the query."""
    try:
        return at.astimezone(UTC)
    except OverflowError:
        raise BadQuery(f"{name} is out of range (years 1 to 9999 in UTC)") from None


def query_from(params: Mapping[str, str], *, limit: int = 50) -> RunQuery:
    """The filters of a page's or the API's query string (`q` is the text, `cursor` the page)."""

    def get(name: str) -> str:
        return str(params.get(name) or "").strip()

    cursor = get("cursor")
    return RunQuery(
        project=get("project"),
        deployment=get("deployment"),
        kind=get("kind"),
        status=get("status"),
        tier=get("tier"),
        node=get("node"),
        since=_when("since", get("since")),
        until=_when("until", get("until")),
        text=get("q"),
        cursor=Cursor.decode(cursor) if cursor else None,
        limit=limit,
    )


def _visible(user: User | AnonymousUser) -> list[int] | None:
    """The ids of the projects the user is a member of; None for a superuser (all)."""
    if not isinstance(user, User):
        return []
    if user.is_superuser:
        return None
    return list(Project.objects.filter(memberships__user=user).values_list("pk", flat=True))


def _older(cursor: Cursor, kind: str) -> Q:
    """Rows of `kind` that come after the cursor in the list's order."""
    before = Q(created_at__lt=cursor.at)
    rank, cursor_rank = KINDS.index(kind), KINDS.index(cursor.kind)
    if rank > cursor_rank:  # at the cursor's instant this kind comes first: all of it was shown
        return before
    if rank < cursor_rank:  # and here it comes after: all of it is still to come
        return before | Q(created_at=cursor.at)
    return before | Q(created_at=cursor.at, pk__lt=cursor.pk)


def _text(q: str) -> Q:
    """The text in the input or the output, as stored (JSON text; a non-ASCII letter may
    be stored escaped, so both spellings are asked for)."""
    escaped = json.dumps(q)[1:-1]
    found = Q(input_text__icontains=q) | Q(output_text__icontains=q)
    if escaped != q:
        found |= Q(input_text__icontains=escaped) | Q(output_text__icontains=escaped)
    return found


def _common(rows: QuerySet[Any], query: RunQuery, kind: str) -> QuerySet[Any]:
    if query.status:
        rows = rows.filter(status=query.status)
    if query.since:
        rows = rows.filter(created_at__gte=query.since)
    if query.until:
        rows = rows.filter(created_at__lt=query.until)
    if query.text:
        rows = rows.annotate(input_text=Cast("input", TextField()), output_text=Cast("output", TextField())).filter(
            _text(query.text)
        )
    if query.cursor:
        rows = rows.filter(_older(query.cursor, kind))
    return rows.order_by("-created_at", "-pk")[: query.limit + 1]


def _try_rows(projects: list[int] | None, query: RunQuery) -> list[ListedRun]:
    rows = TryRun.objects.all()
    if projects is not None:
        rows = rows.filter(project_id__in=projects)
    if query.project:
        rows = rows.filter(project__slug=query.project)
    rows = rows.select_related("project", "endpoint", "created_by").defer("trace", "error")
    got = _common(rows, query, "try")
    return [
        ListedRun(
            kind="try",
            pk=r.pk,
            project=r.project.slug,
            status=r.status,
            version=r.version,
            input=r.input,
            output=r.output,
            created_at=r.created_at,
            finished_at=r.finished_at,
            by=r.created_by.username,
            url=reverse("runs-detail", args=[r.project.slug, r.pk]),
            model=r.model_spec,
            endpoint=r.endpoint.name if r.endpoint else "",
        )
        for r in got
    ]


def _served_rows(projects: list[int] | None, query: RunQuery) -> list[ListedRun]:
    # The deployments first (a short list), so the runs are read down their
    # (deployment, created_at) index with no join to sort through.
    deployments = Deployment.objects.all()
    if projects is not None:
        deployments = deployments.filter(project_id__in=projects)
    if query.project:
        deployments = deployments.filter(project__slug=query.project)
    if query.deployment:
        deployments = deployments.filter(name=query.deployment)
    rows = ServedRun.objects.filter(deployment_id__in=list(deployments.values_list("pk", flat=True)))
    if query.tier:
        rows = rows.filter(tier=query.tier)
    if query.node:
        rows = rows.filter(waiting_at=query.node)
    rows = rows.select_related("deployment__project", "submitted_by").defer("trace", "state", "question", "answer")
    got = list(_common(rows, query, "served"))
    items = dict(ReviewItem.objects.filter(run_id__in=[r.pk for r in got]).order_by("pk").values_list("run_id", "pk"))
    listed = []
    for r in got:
        slug, name = r.deployment.project.slug, r.deployment.name
        item = items.get(r.pk)
        listed.append(
            ListedRun(
                kind="served",
                pk=r.pk,
                project=slug,
                status=r.status,
                version=r.version,
                input=r.input,
                output=r.output,
                created_at=r.created_at,
                finished_at=r.finished_at,
                by=r.submitted_by.username if r.submitted_by else "",
                url=reverse("deployments-run", args=[slug, name, r.run_id]),
                deployment=name,
                run_id=r.run_id,
                tier=r.tier,
                waiting_at=r.waiting_at,
                review_item=item,
                review_url=reverse("review-item", args=[item]) if item else "",
                deployment_url=reverse("deployments-detail", args=[slug, name]),
            )
        )
    return listed


def run_page(user: User | AnonymousUser, query: RunQuery) -> RunPage:
    """One page of the runs the user may see that match `query`, and the cursor of the next."""
    projects = _visible(user)
    if projects == []:
        return RunPage()
    found: list[ListedRun] = []
    if query.wants("try"):
        found += _try_rows(projects, query)
    if query.wants("served"):
        found += _served_rows(projects, query)
    found.sort(key=lambda r: r.key, reverse=True)
    shown = found[: query.limit]
    more = len(found) > query.limit
    last = shown[-1] if shown else None
    return RunPage(shown, Cursor(last.created_at, last.kind, last.pk) if more and last else None)
