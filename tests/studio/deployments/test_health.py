"""A deployment's health over time (studio/deployments/health.py): the numbers of crafted
runs with known times, tiers, escalations and review items; the window's bounds; the
API (its refusals and who may read it); the page's section; the /metrics gauges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studio.accounts.models import ApiToken
from studio.deployments import health
from studio.deployments.models import Deployment, RunEvent, ServedRun
from studio.review.models import ReviewItem
from tests.support.metrics import scrape, value

DAY1 = datetime(2026, 3, 1, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
DAY3 = DAY1 + timedelta(days=2)
END = DAY1 + timedelta(days=3)
FAIL = "fail: every answer rejected (parse: not JSON)"
UNSURE = "unsure: draws disagreed"


def served(
    deployment: Deployment,
    run_id: str,
    status: str,
    at: datetime,
    *,
    tier: str = "",
    took: float | None = None,
    cost: float | None = None,
    escalations: tuple[str, ...] = (),
) -> ServedRun:
    run = ServedRun.objects.create(
        deployment=deployment,
        run_id=run_id,
        input={},
        input_digest="d",
        version="v",
        status=status,
        tier=tier,
        trace={"totals": {"cost_usd": cost}} if cost is not None else {},
        created_at=at,
        finished_at=at + timedelta(seconds=took) if took is not None else None,
    )
    for seq, reason in enumerate(escalations, start=1):
        data = {"node": "classify", "from": "large", "to": "person", "reason": reason}
        RunEvent.objects.create(run=run, seq=seq, kind="escalated", data=data)
    return run


def item(run: ServedRun, created: datetime, decided: datetime | None = None, step: int = 2) -> ReviewItem:
    return ReviewItem.objects.create(
        run=run,
        deployment=run.deployment,
        project=run.deployment.project,
        node="extract",
        step=step,
        reason="escalated",
        status="decided" if decided else "open",
        created_at=created,
        decided_at=decided,
    )


@pytest.fixture
def history(deployment: Deployment, other: Deployment) -> Deployment:
    """Three days of `deployment`: day 1 busy, day 2 one waiting run, day 3 nothing."""
    h = timedelta(hours=1)
    before = served(deployment, "r0", "waiting", DAY1 - h, escalations=(FAIL,))
    item(before, DAY1 - 4 * h, decided=DAY1 + 6 * h)  # open when the window starts, decided on day 1
    item(before, DAY1 - 5 * h, decided=DAY1 - 3 * h, step=3)  # decided before the window: never counted
    served(deployment, "r1", "done", DAY1 + 10 * h, tier="large", took=2, cost=0.01)
    served(deployment, "r2", "done", DAY1 + 11 * h, tier="large", took=4, cost=0.03, escalations=(FAIL,))
    person = served(deployment, "r3", "done", DAY1 + 12 * h, tier="person", took=3600, cost=0.02,
                    escalations=(UNSURE,))  # fmt: skip
    item(person, DAY1 + 12 * h, decided=DAY2 + 9 * h)
    served(deployment, "r4", "failed", DAY1 + 13 * h, took=10)
    served(deployment, "r5", "queued", DAY1 + 14 * h)
    served(deployment, "r6", "cancelled", DAY1 + 15 * h, took=1)
    waiting = served(deployment, "r7", "waiting", DAY2 + 8 * h, cost=0.5, escalations=(FAIL, UNSURE))
    item(waiting, DAY2 + 8 * h)
    served(other, "elsewhere", "done", DAY1 + 10 * h, tier="large", took=1, cost=9.0)
    return deployment


def test_it_counts_runs_shares_latency_cost_and_backlog_per_day(history: Deployment) -> None:
    found = health.health(history, health.window("day", DAY1, END))
    day1, day2, day3 = found.buckets
    assert [b.start for b in found.buckets] == [DAY1, DAY2, DAY3] and found.priced

    assert (day1.runs, day1.outcomes, day1.auto, day1.failed, day1.waiting) == (6, 4, 2, 1, 0)
    assert day1.auto_share == 0.5 and day1.escalated == 2 and day1.escalation_rate == 0.5
    assert {(r.reason, r.count) for r in day1.reasons} == {("fail: every answer rejected", 1), (UNSURE, 1)}
    assert [(t.tier, t.runs, t.share) for t in day1.tiers] == [("large", 2, 0.5), ("person", 1, 0.25)]
    # Done or failed without a person: 2 s, 4 s, 10 s (the person's hour and the cancel are left out).
    assert (day1.latency_runs, day1.latency_p50_s, day1.latency_p95_s) == (3, 4.0, 10.0)
    assert day1.cost_runs == 3 and day1.cost_per_run_usd == pytest.approx(0.02)
    assert day1.review_backlog == 1  # r3's item; r0's was decided on day 1

    assert (day2.runs, day2.outcomes, day2.waiting, day2.auto_share) == (1, 1, 1, 0.0)
    assert day2.escalated == 1 and day2.escalation_rate == 1.0
    assert sum(r.count for r in day2.reasons) == 2
    assert day2.latency_p50_s is None and day2.cost_per_run_usd is None  # a waiting run has not ended
    assert day2.review_backlog == 1  # r3's item decided, r7's opened

    assert (day3.runs, day3.auto_share, day3.escalation_rate, day3.review_backlog) == (0, None, None, 1)

    total = found.total
    assert (total.runs, total.outcomes, total.auto, total.escalated) == (7, 5, 2, 3)
    assert total.auto_share == 0.4 and total.review_backlog == 1


def test_it_counts_per_hour(history: Deployment) -> None:
    found = health.health(history, health.window("hour", DAY1 + timedelta(hours=10), DAY1 + timedelta(hours=13)))
    assert [b.runs for b in found.buckets] == [1, 1, 1]
    assert [b.auto_share for b in found.buckets] == [1.0, 1.0, 0.0]
    assert found.buckets[2].tiers[0].tier == "person"


def test_it_says_cost_is_unpriced_when_every_known_cost_is_zero(deployment: Deployment) -> None:
    served(deployment, "free", "done", DAY1, tier="large", took=1, cost=0.0)
    found = health.health(deployment, health.window("day", DAY1, DAY2))
    assert found.buckets[0].cost_per_run_usd == 0.0 and not found.priced


def test_it_reads_the_database_in_the_same_few_queries_whatever_the_runs(deployment: Deployment) -> None:
    win = health.window("hour", DAY1, DAY2)

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            health.health(deployment, win)
        return len(seen)

    few = queries()
    for n in range(120):
        run = served(deployment, f"m{n}", "done" if n % 3 else "waiting", DAY1 + timedelta(minutes=11 * n),
                     tier="large", took=n, cost=0.001, escalations=(FAIL,) * (n % 2))  # fmt: skip
        if n % 3 == 0:
            item(run, run.created_at)
    assert health.health(deployment, win).total.runs == 120
    assert queries() == few == 4  # the tier names, the escalations, the runs, the review items


# -- the window --------------------------------------------------------------------------


def test_it_defaults_to_seven_days_or_48_hours_up_to_now() -> None:
    now = datetime(2026, 3, 5, 13, 20, tzinfo=UTC)
    days = health.window("day", now=now)
    assert (days.count, days.until) == (7, datetime(2026, 3, 6, tzinfo=UTC))
    hours = health.window("hour", now=now)
    assert (hours.count, hours.until) == (48, datetime(2026, 3, 5, 14, tzinfo=UTC))
    naive = health.window("hour", datetime(2026, 3, 5, 1, 30), datetime(2026, 3, 5, 3))
    assert (naive.since, naive.count) == (datetime(2026, 3, 5, 1, tzinfo=UTC), 2)


@pytest.mark.parametrize(
    ("bucket", "since", "until", "says"),
    [
        ("hour", DAY1, DAY1 + timedelta(hours=91), "at most 90 buckets"),
        ("day", DAY1, DAY1 + timedelta(days=91), "at most 90 buckets"),
        ("day", DAY2, DAY1, "until must be after since"),
        ("week", None, None, "bucket is one of hour, day"),
        ("day", None, datetime(1, 1, 1, tzinfo=UTC), "between the years 1 and 9999"),
    ],
)
def test_it_refuses_a_window_it_will_not_count(
    bucket: str, since: datetime | None, until: datetime | None, says: str
) -> None:
    with pytest.raises(health.HealthRefused, match=says):
        health.window(bucket, since, until)


def test_it_takes_exactly_90_buckets() -> None:
    assert health.window("hour", DAY1, DAY1 + timedelta(hours=90)).count == 90


# -- the API -------------------------------------------------------------------------------

URL = "/api/deployments/triage-prod/health"


def test_it_answers_members_with_the_numbers(history: Deployment, as_viewer: Client) -> None:
    answer = as_viewer.get(URL, {"since": "2026-03-01T00:00:00Z", "until": "2026-03-04T00:00:00Z"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["deployment"] == "triage-prod" and body["bucket"] == "day" and len(body["buckets"]) == 3
    day1 = body["buckets"][0]
    assert day1["runs"] == 6 and day1["auto_share"] == 0.5 and day1["latency_p95_s"] == 10.0
    assert day1["tiers"] == [{"tier": "large", "runs": 2, "share": 0.5}, {"tier": "person", "runs": 1, "share": 0.25}]
    assert body["buckets"][2]["auto_share"] is None and body["total"]["runs"] == 7
    hourly = as_viewer.get(URL, {"bucket": "hour"})
    assert hourly.status_code == 200 and len(hourly.json()["buckets"]) == 48


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ({"bucket": "week"}, 422, "bucket"),
        ({"since": "yesterday"}, 422, "since"),
        ({"bucket": "hour", "since": "2026-03-01T00:00:00Z", "until": "2026-03-10T00:00:00Z"}, 400, "at most 90"),
        ({"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, 400, "until must be after since"),
    ],
)
def test_it_refuses_bad_parameters_with_a_clear_message(
    deployment: Deployment, as_viewer: Client, query: dict[str, str], status: int, says: str
) -> None:
    answer = as_viewer.get(URL, query)
    assert answer.status_code == status, answer.content
    assert says in str(answer.json()["detail"])


def test_it_reads_like_the_deployment(
    deployment: Deployment, as_stranger: Client, as_reviewer: Client, owner: User
) -> None:
    assert Client().get(URL).status_code == 401
    assert as_stranger.get(URL).status_code == 404
    assert as_reviewer.get(URL).status_code == 200
    _, scoped = ApiToken.issue(owner, "runs only", deployment=deployment)
    assert Client(headers={"Authorization": f"Bearer {scoped}"}).get(URL).status_code == 403


def test_it_is_in_the_openapi_document(as_owner: Client, db: None) -> None:
    document = as_owner.get("/api/openapi.json").json()
    operation = document["paths"]["/api/deployments/{name}/health"]["get"]
    assert {"200", "400", "401", "403", "404", "422"} <= set(operation["responses"])
    assert {p["name"] for p in operation["parameters"]} >= {"name", "bucket", "since", "until"}
    schemas = document["components"]["schemas"]
    assert {"HealthOut", "HealthBucketOut", "HealthTierOut"} <= set(schemas)
    assert "review_backlog" in schemas["HealthBucketOut"]["properties"]


# -- the page ------------------------------------------------------------------------------


def test_the_page_draws_and_writes_the_numbers_escaped(deployment: Deployment, as_viewer: Client) -> None:
    now = timezone.now()
    served(deployment, "p1", "done", now - timedelta(minutes=5), tier="large", took=2, cost=0.25)
    served(deployment, "p2", "done", now - timedelta(minutes=4), tier="<b>bold</b>", took=6,
           escalations=("fail: <script>alert(1)</script>",))  # fmt: skip
    page = as_viewer.get(f"/p/triage/deployments/{deployment.name}")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="health"' in html and "<strong>per day</strong>" in html
    assert html.count("<svg") >= 5  # runs, shares, tiers, latency, cost (priced)
    total = html.split('id="health-total"')[1].split("</tr>")[0]
    assert ">2<" in total and "100.0%" in total and "50.0%" in total and "$0.2500" in total
    table = html.split('id="health-table"')[1].split("</table>")[0]
    assert "<script>alert" not in html and "fail: &lt;script&gt;alert" in table  # a reason's head, cut at "("
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    hourly = as_viewer.get(f"/p/triage/deployments/{deployment.name}", {"bucket": "hour"}).content.decode()
    assert "<strong>per hour</strong>" in hourly
    assert hourly.split('id="health-table"')[1].split("</table>")[0].count("<tr>") == 1 + 48


# -- /metrics --------------------------------------------------------------------------------


def test_metrics_give_each_deployment_its_last_24_hours(deployment: Deployment, other: Deployment,
                                                        as_staff: Client) -> None:  # fmt: skip
    now = timezone.now()
    served(deployment, "a", "done", now - timedelta(hours=1), tier="large", took=2, cost=0.5)
    served(deployment, "b", "done", now - timedelta(hours=2), tier="person", took=600, cost=0.25)
    waiting = served(deployment, "c", "waiting", now - timedelta(hours=3), escalations=(FAIL,))
    item(waiting, now - timedelta(hours=3))
    served(deployment, "old", "done", now - timedelta(hours=30), tier="large", took=99)  # outside the window
    got = scrape(as_staff)

    def gauge(name: str, **labels: str) -> float:
        return value(got, f"packforge_deployment_{name}", deployment="triage-prod", **labels)

    assert gauge("recent_runs") == 3 and value(got, "packforge_deployment_recent_runs", deployment="triage-canary") == 0
    assert gauge("auto_share") == pytest.approx(1 / 3) and gauge("escalation_rate") == pytest.approx(1 / 3)
    assert gauge("tier_share", tier="large") == pytest.approx(1 / 3)
    assert gauge("tier_share", tier="person") == pytest.approx(1 / 3)
    # From the rows' stored times (run "a" finished 2 s after it was submitted), not a clock.
    assert gauge("latency_p50_seconds") == 2.0 and gauge("latency_p95_seconds") == 2.0
    assert gauge("cost_per_run_usd") == pytest.approx(0.375)
    assert gauge("review_backlog") == 1
    # Nothing to share or measure in an idle deployment: no sample rather than a made-up 0.
    assert (("deployment", "triage-canary"),) not in got["packforge_deployment_auto_share"]
