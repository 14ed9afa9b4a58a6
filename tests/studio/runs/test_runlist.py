"""The runs list across try-it and served runs (studio.runlist.query): who sees what, each
filter, cursor pages that neither skip nor repeat a row when many runs share an instant,
the page and the API, and a constant number of queries at 100,000 runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studio.accounts.models import Membership, Role
from studio.deployments.models import Deployment, ServedRun
from studio.projects.models import Project
from studio.review.models import ReviewItem
from studio.runlist.query import BadQuery, Cursor, RunQuery, query_from, run_page
from studio.runs.models import TryRun
from tests.support.studio import bearer, client_for

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def try_run(project: Project, user: User, at: datetime, **fields: Any) -> TryRun:
    fields.setdefault("input", {"ticket": "hello"})
    return TryRun.objects.create(project=project, version="v1", created_by=user, created_at=at, **fields)


def served(deployment: Deployment, run_id: str, at: datetime, **fields: Any) -> ServedRun:
    fields.setdefault("input", {"ticket": "served hello"})
    return ServedRun.objects.create(
        deployment=deployment, run_id=run_id, input_digest="d", version="v1", created_at=at, **fields
    )


@pytest.fixture
def prod(project: Project, owner: User) -> Deployment:
    return Deployment.objects.create(project=project, name="triage-prod", version="v1", created_by=owner)


@pytest.fixture
def elsewhere(stranger: User) -> Project:
    """A project only `stranger` is a member of."""
    made = Project.objects.create(slug="secret", name="Secret", created_by=stranger)
    Membership.objects.create(user=stranger, project=made, role=Role.AUTHOR)
    return made


def keys(runs: list[Any]) -> list[tuple[str, int]]:
    return [(r.kind, r.pk) for r in runs]


def test_a_member_sees_both_kinds_of_their_projects_only(
    project: Project, prod: Deployment, elsewhere: Project, owner: User, viewer: User, stranger: User
) -> None:
    mine = try_run(project, owner, T0)
    theirs = try_run(elsewhere, stranger, T0 + timedelta(minutes=5))
    hidden = Deployment.objects.create(project=elsewhere, name="secret-prod", version="v", created_by=stranger)
    served_mine = served(prod, "r1", T0 + timedelta(minutes=1))
    served(hidden, "r2", T0 + timedelta(minutes=2))
    assert keys(run_page(viewer, RunQuery()).runs) == [("served", served_mine.pk), ("try", mine.pk)]
    assert ("try", theirs.pk) in keys(run_page(stranger, RunQuery()).runs)
    assert ("try", mine.pk) not in keys(run_page(stranger, RunQuery()).runs)


def test_each_filter_narrows_the_list(project: Project, prod: Deployment, owner: User) -> None:
    t = try_run(project, owner, T0, status="done", output={"category": "billing"})
    canary = Deployment.objects.create(project=project, name="triage-canary", version="v1", created_by=owner)
    waiting = served(prod, "w", T0 + timedelta(hours=1), status="waiting", waiting_at="approve", tier="person")
    done = served(prod, "d", T0 + timedelta(hours=2), status="done", tier="small", output={"reply": "Grüße"})
    other = served(canary, "c", T0 + timedelta(hours=3), status="failed", input={"ticket": "refund please"})

    def pks(**filters: Any) -> list[tuple[str, int]]:
        return keys(run_page(owner, RunQuery(**filters)).runs)

    assert pks(kind="try") == [("try", t.pk)]
    assert pks(kind="served") == [("served", other.pk), ("served", done.pk), ("served", waiting.pk)]
    assert pks(deployment="triage-canary") == [("served", other.pk)]
    assert pks(status="waiting") == [("served", waiting.pk)]
    assert pks(tier="small") == [("served", done.pk)]
    assert pks(node="approve") == [("served", waiting.pk)]
    assert pks(kind="try", node="approve") == []  # a try-it run waits for no one
    assert pks(since=T0 + timedelta(minutes=30), until=T0 + timedelta(hours=2)) == [("served", waiting.pk)]
    assert pks(text="REFUND") == [("served", other.pk)]  # in the input, any case
    assert pks(text="billing") == [("try", t.pk)]  # in the output
    assert pks(text="Grüße") == [("served", done.pk)]  # stored escaped or not
    assert pks(project="triage", kind="served", status="done") == [("served", done.pk)]


def test_cursor_pages_cover_every_run_once_when_many_share_an_instant(
    project: Project, prod: Deployment, owner: User
) -> None:
    made = []
    for i in range(7):  # runs of both kinds, most of them at one instant
        at = T0 if i < 5 else T0 + timedelta(seconds=i)
        made.append(("try", try_run(project, owner, at).pk))
        made.append(("served", served(prod, f"r{i}", at).pk))
    whole = keys(run_page(owner, RunQuery(limit=200)).runs)
    assert sorted(whole) == sorted(made) and len(whole) == 14
    walked: list[tuple[str, int]] = []
    cursor = None
    for _ in range(20):
        page = run_page(owner, RunQuery(limit=3, cursor=cursor))
        walked += keys(page.runs)
        if page.next is None:
            break
        cursor = Cursor.decode(page.next.encode())
    assert walked == whole


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"kind": "cron"}, "kind 'cron' is not one of"),
        ({"status": "lost"}, "status 'lost' is not one of"),
        ({"since": "yesterday"}, "since 'yesterday' is not a date"),
        ({"cursor": "nonsense"}, "cursor 'nonsense' is not one this list gave"),
        ({"cursor": "2026-01-01T00:00:00~try~1"}, "no UTC offset"),
        ({"q": "x" * 201}, "at most 200"),
        ({"since": "2026-12-02", "until": "2026-12-01"}, "since must be before until"),
        ({"cursor": "2026-01-01T00:00:00+00:00~try~\u00b2"}, "not one this list gave"),  # a digit, not ASCII
        ({"since": "9999-12-31T23:00-05:00"}, "out of range"),
        ({"until": "0001-01-01T00:00+05:00"}, "out of range"),
        ({"q": "a\x00b"}, "NUL"),
    ],
)
def test_a_bad_filter_says_what_is_wrong(params: dict[str, str], says: str) -> None:
    with pytest.raises(BadQuery, match=says):
        query_from(params)


def test_the_page_shows_a_waiting_served_run_with_its_review_item_and_deployment(
    project: Project, prod: Deployment, owner: User, viewer: User
) -> None:
    try_run(project, owner, T0)
    run = served(prod, "wait-1", T0 + timedelta(minutes=1), status="waiting", waiting_at="approve")
    item = ReviewItem.objects.create(run=run, deployment=prod, project=project, node="approve", step=2, reason="human")
    page = client_for(viewer).get("/runs/?kind=served&status=waiting&node=approve")
    text = page.content.decode()
    assert page.status_code == 200
    assert "/p/triage/deployments/triage-prod/runs/wait-1" in text
    assert f'href="/review/{item.pk}"' in text and 'href="/p/triage/deployments/triage-prod"' in text
    assert "/p/triage/runs/" not in text  # the try-it run is filtered out
    bad = client_for(viewer).get("/runs/?status=lost&node=approve&since=yesterday")
    said = bad.content.decode()
    assert bad.status_code == 400 and "since &#x27;yesterday&#x27; is not a date" in said
    assert 'name="node" value="approve"' in said and 'name="since" value="yesterday"' in said  # kept to fix


def test_the_page_links_to_older_runs_with_the_filters_kept(project: Project, owner: User) -> None:
    for i in range(55):
        try_run(project, owner, T0 + timedelta(seconds=i))
    first = client_for(owner).get("/runs/?kind=try").content.decode()
    assert first.count('<tr class="run try">') == 50
    older = first.split('id="runs-newest"')[0].split('href="?')[-1].split('"')[0].replace("&amp;", "&")
    assert "kind=try" in older and "cursor=" in older
    second = client_for(owner).get(f"/runs/?{older}").content.decode()
    assert second.count('<tr class="run try">') == 5 and 'id="runs-older"' not in second
    assert 'href="?kind=try" id="runs-newest"' in second
    unfiltered = client_for(owner).get("/runs/").content.decode()
    cursor = unfiltered.split('id="runs-older"')[0].split('href="?')[-1].split('"')[0].replace("&amp;", "&")
    assert 'href="?" id="runs-newest"' in client_for(owner).get(f"/runs/?{cursor}").content.decode()


def test_the_api_lists_both_kinds_and_gives_the_next_page_in_headers(
    project: Project, prod: Deployment, owner: User, stranger: User
) -> None:
    t = try_run(project, owner, T0)
    s = served(prod, "api-1", T0 + timedelta(seconds=1), status="done", tier="small")
    got = bearer(owner).get("/api/runs?limit=1")
    assert got.status_code == 200
    [row] = got.json()
    assert row["kind"] == "served" and row["id"] == s.pk and row["tier"] == "small"
    assert row["api"] == "/api/deployments/triage-prod/runs/api-1"
    cursor = got.headers["X-Next-Cursor"]
    assert 'rel="next"' in got.headers["Link"] and "limit=1" in got.headers["Link"]
    rest = bearer(owner).get("/api/runs", {"limit": 1, "cursor": cursor})
    assert [(r["kind"], r["id"]) for r in rest.json()] == [("try", t.pk)] and "X-Next-Cursor" not in rest.headers
    assert bearer(owner).get("/api/runs?kind=cron").status_code == 400
    assert bearer(owner).get("/api/runs?limit=0").status_code == 422
    assert bearer(stranger).get("/api/runs").json() == []
    assert Client().get("/api/runs").status_code == 401


def test_a_page_reads_a_fixed_number_of_queries_at_100k_runs(project: Project, prod: Deployment, owner: User) -> None:
    def queries(user: User, **filters: Any) -> int:
        with CaptureQueriesContext(connection) as seen:
            page = run_page(user, RunQuery(**filters))
        assert page.runs
        return len(seen.captured_queries)

    served(prod, "seed", T0)
    try_run(project, owner, T0)
    few = queries(owner), queries(owner, kind="served", deployment="triage-prod")
    TryRun.objects.bulk_create(
        [TryRun(project=project, version="v", input={"n": i}, created_by=owner, created_at=T0) for i in range(50_000)],
        batch_size=5_000,
    )
    ServedRun.objects.bulk_create(
        [
            ServedRun(deployment=prod, run_id=f"b{i}", input={"n": i}, input_digest="d", version="v", created_at=T0)
            for i in range(50_000)
        ],
        batch_size=5_000,
    )
    assert (queries(owner), queries(owner, kind="served", deployment="triage-prod")) == few
    assert few[0] <= 5  # the projects, try-it runs, the deployments, their runs, their review items
