"""The runs list across try-it and served runs (/runs/, docs/runs.md) and a deployment's
health over time, in a real browser against a real studio and Celery worker.

Once per module: a project made from the support_triage example, a deployment of it on
one scripted tier that cannot read one ticket's extract (that run climbs to a person and
waits at `extract`), two runs the tier settles, and a try-it run. Then a person filters
the runs list down to the waiting served run, follows it to its trace page, meets a bad
filter, and reads the deployment's health per day and per hour. Screenshots go to the
folder tests/support/screenshots.py names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.screenshots import save_screenshot
from tests.support.serving_e2e import script_breaking, tickets
from tests.support.started import Studio
from tests.support.waiting import wait_until

SLUG = "e2e-runs"
DEPLOYMENT = "e2e-runs-live"
ENDPOINT = "e2e-runs-careful"
NODE = "extract"
HARD = "rl-hard-1"  # ticket 0: the tier cannot read its extract, a person is asked
EASY = ("rl-easy-1", "rl-easy-2")  # tickets 1 and 2: the tier settles them
WAIT = 120.0  # s: how long a run may take before the test gives up (not a bound it asserts)


@dataclass(frozen=True)
class Served:
    try_run: str  # the try-it run's page, /p/<slug>/runs/<id>


def _log_in(page: Any, studio: Studio) -> None:
    page.goto(f"{studio.url}/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", studio.password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{studio.url}/")


def _settled(api: httpx.Client, run_id: str) -> dict[str, Any]:
    def read() -> dict[str, Any] | None:
        got = api.get(f"/api/deployments/{DEPLOYMENT}/runs/{run_id}")
        assert got.status_code == 200, got.text
        body = dict(got.json())
        assert body["status"] not in ("failed", "cancelled"), body
        return body if body["status"] in ("done", "waiting") else None

    return wait_until(read, timeout=WAIT, message=f"run {run_id} did not finish or wait for a person")


def _make_served_runs(page: Any, studio: Studio, script: Path) -> None:
    page.goto(f"{studio.url}/new")
    page.fill("input[name=slug]", SLUG)
    page.select_option("select[name=example]", "support_triage")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/{SLUG}/")

    page.goto(f"{studio.url}/endpoints/new")
    page.fill("input[name=name]", ENDPOINT)
    page.fill("input[name=spec]", f"fake:{script}")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/endpoints/")

    page.goto(f"{studio.url}/p/{SLUG}/deployments/")
    page.fill("#new-deployment input[name=name]", DEPLOYMENT)
    page.fill("#new-deployment input[name=tiers]", ENDPOINT)
    page.click("#new-deployment button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/{SLUG}/deployments/{DEPLOYMENT}")
    page.fill("input[name=token_name]", "the runs list test")
    page.click("button:has-text('Make a token')")
    token = page.locator("#new-token code").inner_text().strip()
    assert token

    every = tickets()
    with httpx.Client(base_url=studio.url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as api:
        for run_id, ticket in ((EASY[0], every[1]), (HARD, every[0]), (EASY[1], every[2])):
            sent = api.post(f"/api/deployments/{DEPLOYMENT}/runs", json={"run_id": run_id, "input": ticket})
            assert sent.status_code in (200, 202), sent.text
        hard = _settled(api, HARD)
        assert hard["status"] == "waiting" and hard["waiting_at"] == NODE, hard
        for run_id in EASY:
            easy = _settled(api, run_id)
            assert easy["status"] == "done" and easy["tier"] == ENDPOINT, easy


@pytest.fixture(scope="module")
def served(browser: Any, studio: Studio, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The module's project, deployment, served runs and try-it run, made once."""
    script = script_breaking(tmp_path_factory.mktemp("runs-list") / "careful.json", ticket=0, nodes=[NODE])
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(20_000)
    try:
        page = context.new_page()
        _log_in(page, studio)
        _make_served_runs(page, studio, script)
        page.goto(f"{studio.url}/p/{SLUG}/runs/new")
        page.click("#try-run")
        page.wait_for_url(re.compile(rf".*/p/{SLUG}/runs/\d+$"))
        yield Served(try_run=page.url.removeprefix(studio.url))
    finally:
        context.close()


def _rows(page: Any) -> Any:
    return page.locator("table#all-runs tr.run")


def test_the_runs_list_filters_to_the_waiting_served_run_and_opens_its_trace(
    page: Any, studio: Studio, served: Served
) -> None:
    # Unfiltered: both kinds, this project's try-it run and all three served runs.
    page.goto(f"{studio.url}/runs/?project={SLUG}")
    expect(_rows(page)).to_have_count(4)
    expect(page.locator("table#all-runs tr.run.try")).to_have_count(1)
    expect(page.locator(f"table#all-runs tr.run.try a[href='{served.try_run}']")).to_have_count(1)
    expect(page.locator("table#all-runs tr.run.served")).to_have_count(3)

    # The filter form, as a person fills it: served runs waiting at the node.
    page.goto(f"{studio.url}/runs/")
    form = page.locator("form#runs-filter")
    form.locator("select[name=kind]").select_option("served")
    form.locator("select[name=status]").select_option("waiting")
    form.locator("input[name=node]").fill(NODE)
    form.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r".*/runs/\?.*kind=served.*status=waiting.*node=extract"))
    expect(page.locator("#runs-problem")).to_have_count(0)
    # The studio is shared with other browser tests: any other row must match the filter too.
    rows = _rows(page)
    rows.first.wait_for()
    for i in range(rows.count()):
        row = rows.nth(i)
        expect(row).to_have_class(re.compile(r"\bserved\b"))
        expect(row.locator("td").nth(3)).to_contain_text(f"waiting at {NODE}")
    for run_id in EASY:
        expect(page.locator("table#all-runs")).not_to_contain_text(run_id)
    expect(page.locator(f"table#all-runs a[href='{served.try_run}']")).to_have_count(0)
    # The filters are kept in the form.
    expect(form.locator("select[name=kind]")).to_have_value("served")
    expect(form.locator("select[name=status]")).to_have_value("waiting")
    expect(form.locator("input[name=node]")).to_have_value(NODE)

    # Narrowed to this project: exactly the waiting run.
    form.locator("select[name=project]").select_option(SLUG)
    form.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(rf".*project={SLUG}.*"))
    expect(_rows(page)).to_have_count(1)
    row = page.locator("table#all-runs tr.run.served", has_text=HARD)
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text("served")
    expect(row.locator("td").nth(2)).to_have_text(SLUG)
    expect(row.locator("td").nth(3)).to_contain_text(f"waiting at {NODE}")
    deployment_url = f"/p/{SLUG}/deployments/{DEPLOYMENT}"
    run_url = f"{deployment_url}/runs/{HARD}"
    expect(row.locator(f"a[href='{deployment_url}']")).to_have_text(DEPLOYMENT)
    review = row.locator("a[href^='/review/']")
    expect(review).to_have_count(1)
    item_href = review.get_attribute("href") or ""
    item = re.fullmatch(r"/review/(\d+)", item_href)
    assert item, item_href
    expect(review).to_have_text(f"review item {item.group(1)}")
    save_screenshot(page, "runs-list-waiting-served")

    # The run's link opens the served run's page.
    row.locator(f"a[href='{run_url}']").click()
    page.wait_for_url(f"{studio.url}{run_url}")
    expect(page.locator("h1")).to_contain_text(HARD)
    expect(page.locator("#run-deployment")).to_have_attribute("href", deployment_url)
    expect(page.locator("#run-status")).to_have_text("waiting")
    expect(page.locator("#run-waiting")).to_contain_text(f"Waiting at {NODE} for a person")
    expect(page.locator("#steps")).to_be_visible()
    expect(page.locator("#steps tr.step").first).to_be_visible()
    expect(page.locator("#steps")).to_contain_text(NODE)
    expect(page.locator(f"#run-review a[href='{item_href}']")).to_have_text(f"item {item.group(1)}")
    save_screenshot(page, "served-run-page")

    # A bad filter: the sentence that names it, and no runs.
    response = page.goto(f"{studio.url}/runs/?since=yesterday")
    assert response is not None and response.status == 400
    expect(page.locator("#runs-problem")).to_have_text(
        "since 'yesterday' is not a date or time (2026-12-03 or 2026-12-03T09:30)"
    )
    expect(_rows(page)).to_have_count(0)
    expect(page.locator("table#all-runs")).to_contain_text("No runs")


def _table(page: Any) -> list[tuple[str, int]]:
    """The health table's bucket rows (the total row left out): (bucket, runs)."""
    cells = page.locator("#health-table tr:not(#health-total)").evaluate_all(
        "rows => rows.filter(r => r.querySelector('td')).map(r => [r.cells[0].innerText, r.cells[1].innerText])"
    )
    return [(str(when).strip(), int(runs)) for when, runs in cells]


def _charted_runs(page: Any) -> list[int]:
    """The runs per bucket the first chart's points say (their tooltips: "...: runs N (N runs)")."""
    tips = page.locator("#health-charts .chart-box").first.locator("svg title").all_text_contents()
    return [int(m.group(1)) for t in tips if (m := re.search(r": runs (\d+) \(", t))]


def test_the_deployment_page_shows_its_health_per_day_and_per_hour(page: Any, studio: Studio, served: Served) -> None:
    deployment_url = f"{studio.url}/p/{SLUG}/deployments/{DEPLOYMENT}"
    page.goto(deployment_url)
    health = page.locator("section#health")
    expect(health.locator("h2")).to_have_text("Health over time")
    expect(page.locator("#health-window")).to_contain_text("in the last 7 days, per day")

    # Per day: the runs, counted in the table and drawn in the charts.
    charts = page.locator("#health-charts .chart-box svg")
    # The script prices its tokens (packs/support_triage/fakes/scripted.json), so cost is drawn too.
    expect(charts).to_have_count(5)
    titles = [charts.nth(i).locator("> title").text_content() for i in range(5)]
    assert titles == [
        "Runs and review backlog",
        "Auto share and escalation rate",
        "Tier split",
        "Latency",
        "Cost per run",
    ]
    expect(page.locator("#health-table tr").first).to_contain_text("Day")
    daily = _table(page)
    assert len(daily) == 7, daily
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", when) for when, _ in daily), daily
    assert sum(runs for _, runs in daily) == 3
    total = page.locator("#health-total")
    expect(total.locator("th").nth(1)).to_have_text("3")
    expect(total.locator("th").nth(3)).to_have_text("33.3%")  # one of three escalated, to a person
    expect(total.locator("th").nth(2)).to_have_text("66.7%")  # two of three settled by the tier
    expect(total.locator("td").nth(1)).to_contain_text(ENDPOINT)
    expect(total.locator("th").nth(6)).to_contain_text("$")  # cost per run, from the traces
    expect(total.locator("th").last).to_have_text("1")  # the review item still open
    assert sorted(_charted_runs(page)) == sorted(runs for _, runs in daily)
    health.scroll_into_view_if_needed()
    save_screenshot(page, "deployment-health")

    # Per hour: the switch, the same runs in hourly rows.
    page.locator("#health-window a", has_text="per hour").click()
    page.wait_for_url(f"{deployment_url}?bucket=hour#health")
    expect(page.locator("#health-window")).to_contain_text("in the last 48 hours, per hour")
    expect(page.locator("#health-table tr").first).to_contain_text("Hour")
    hourly = _table(page)
    assert len(hourly) == 48, hourly
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:00", when) for when, _ in hourly), hourly
    assert sum(runs for _, runs in hourly) == 3
    expect(total.locator("th").nth(1)).to_have_text("3")
    assert sorted(_charted_runs(page)) == sorted(runs for _, runs in hourly)
    save_screenshot(page, "deployment-health-hourly")

    # And back to days.
    page.locator("#health-window a", has_text="per day").click()
    page.wait_for_url(f"{deployment_url}?bucket=day#health")
    assert len(_table(page)) == 7
