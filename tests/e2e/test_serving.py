"""Issue 12 end to end, in a real browser against a real studio and Celery worker: a
deployment of support_triage on two tiers (a real HTTP model server on loopback that
answers garbage, then a scripted model that cannot read one ticket's order), runs
submitted through the API with a deployment token, one run climbing past the last tier
to a person, the review queue worked with the keyboard alone, the run finishing with
the person's answer, and that answer added to gold: a new evalset case and its eval
delta."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.support.fault_server import FaultServer
from tests.support.serving_e2e import script_breaking, scripted_answers, tickets
from tests.support.started import Studio
from tests.support.waiting import wait_until

DEPLOYMENT = "triage-live"
WAIT = 120_000  # ms: how long the page may take before the test gives up (not a bound it asserts)


def make_endpoint(page: Any, studio: Studio, name: str, spec: str) -> None:
    page.goto(f"{studio.url}/endpoints/new")
    page.fill("input[name=name]", name)
    page.fill("input[name=spec]", spec)
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/endpoints/")
    assert name in page.locator("main").inner_text()


def settled(api: httpx.Client, run_id: str) -> dict[str, Any]:
    def read() -> dict[str, Any] | None:
        got = api.get(f"/api/deployments/{DEPLOYMENT}/runs/{run_id}")
        assert got.status_code == 200, got.text
        body = dict(got.json())
        assert body["status"] not in ("failed", "cancelled"), body
        return body if body["status"] in ("done", "waiting") else None

    return wait_until(read, timeout=WAIT / 1000, message=f"run {run_id} did not finish or wait for a person")


def test_a_person_settles_an_escalated_run_from_the_keyboard_and_keeps_it_as_gold(
    page: Any, studio: Studio, tmp_path: Path
) -> None:
    hard, easy = tickets()[0], tickets()[1]
    right = scripted_answers(0)["extract"]
    with FaultServer(answer="this is not JSON") as garbage:
        make_endpoint(page, studio, "garbage-small", garbage.spec(model="small"))
        script = script_breaking(tmp_path / "careful.json", ticket=0, nodes=["extract"])
        make_endpoint(page, studio, "careful-large", f"fake:{script}")

        # A deployment on both tiers, and a token for it, made in the browser.
        page.goto(f"{studio.url}/p/support_triage/deployments/")
        page.fill("#new-deployment input[name=name]", DEPLOYMENT)
        page.fill("#new-deployment input[name=tiers]", "garbage-small, careful-large")
        page.click("#new-deployment button[type=submit]")
        page.wait_for_url(f"{studio.url}/p/support_triage/deployments/{DEPLOYMENT}")
        expect(page.locator("#deployment-tiers")).to_have_text("garbage-small, careful-large → a person")
        page.fill("input[name=token_name]", "the helpdesk")
        page.click("button:has-text('Make a token')")
        token = page.locator("#new-token code").inner_text().strip()
        assert token

        # Two runs through the API, as a client holding the deployment token would.
        with httpx.Client(base_url=studio.url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as api:
            for run_id, ticket in (("easy-1", easy), ("hard-1", hard)):
                sent = api.post(f"/api/deployments/{DEPLOYMENT}/runs", json={"run_id": run_id, "input": ticket})
                assert sent.status_code in (200, 202), sent.text
            assert api.get("/api/deployments").status_code == 403  # the token opens this deployment only
            easy_run = settled(api, "easy-1")
            hard_run = settled(api, "hard-1")
            assert easy_run["status"] == "done" and easy_run["tier"] == "careful-large"
            assert hard_run["status"] == "waiting" and hard_run["waiting_at"] == "extract"
            assert hard_run["waiting_reason"] == "escalated"
        assert garbage.completions()  # tier 0 was a real server, asked and answered with garbage

        # The deployment page shows where the small model is weak and the waiting run.
        page.goto(f"{studio.url}/p/support_triage/deployments/{DEPLOYMENT}")
        escalations = page.locator("#escalations")
        expect(
            escalations.locator("tr", has_text="garbage-small").filter(has_text="careful-large").first
        ).to_contain_text("fail")
        expect(escalations.locator("tr", has_text="extract").filter(has_text="person")).to_have_count(1)
        expect(page.locator("#served-runs tr", has_text="hard-1")).to_contain_text("waiting at extract")
        expect(page.locator("#served-runs tr", has_text="easy-1")).to_contain_text("done")

        # The queue, with the keyboard only: the item is there; e opens it to edit (and
        # claims it), the answer is typed field by field, Ctrl+Enter saves it.
        page.goto(f"{studio.url}/review/?deployment={DEPLOYMENT}")
        row = page.locator("tr.review-row", has_text="hard-1")
        expect(row).to_contain_text("extract")
        expect(row).to_contain_text("escalated")
        expect(page.locator("tr.review-row")).to_have_count(1)  # the easy run needed nobody
        expect(row).to_have_class(re.compile(r"\bselected\b"))
        page.keyboard.press("e")
        page.wait_for_url(re.compile(r".*/review/\d+\?do=edit$"))
        item_url = page.url.split("?")[0]
        expect(page.locator("#item-state")).to_have_text("claimed", timeout=WAIT)
        expect(page.locator("#candidates")).to_contain_text("garbage-small")
        expect(page.locator("#candidates")).to_contain_text("careful-large")
        typed = _type_answer(page, {f"a_{k}": v for k, v in right.items()})
        assert typed == {f"a_{k}" for k in right}
        page.keyboard.press("Control+Enter")
        page.wait_for_url(item_url)

        # The run resumes with the person's answer and finishes.
        expect(page.locator("#item-decision")).to_have_text("edit", timeout=WAIT)
        expect(page.locator("#run-status")).to_have_text("done", timeout=WAIT)
        expect(page.locator("#run-output")).to_contain_text(right["order_id"])
        with httpx.Client(base_url=studio.url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as api:
            done = api.get(f"/api/deployments/{DEPLOYMENT}/runs/hard-1").json()
        assert done["status"] == "done" and done["output"]["order_id"] == right["order_id"]
        extract = next(s for s in done["steps"] if s["node"] == "extract")
        assert extract["provenance"] == "human:admin"

        # Add to gold: a commit with the new case, then the eval of it and its delta.
        page.click("#gold-form button[type=submit]")
        added = page.locator("#gold-added")
        expect(added).to_contain_text("In the evalset as case review-", timeout=WAIT)
        case_id = re.search(r"case (review-\S+?),", added.inner_text()).group(1)  # type: ignore[union-attr]
        delta = page.locator("#gold-delta")
        expect(delta).to_contain_text("pass rate with the new case", timeout=WAIT)  # the eval is done
        shown = re.search(
            r"with the new case (\d+)/(\d+).*without (\d+)/(\d+).*the new case (passes|fails)", delta.inner_text()
        )
        assert shown, delta.inner_text()
        with_total, without_total = int(shown.group(2)), int(shown.group(4))
        assert with_total == without_total + 1  # the same eval, with and without the new case
        assert shown.group(5) == "fails"  # tier 0 answers garbage: the new case shows the small model's gap

    page.goto(f"{studio.url}/p/support_triage/evalset/")
    evalset = page.locator("main")
    expect(evalset).to_contain_text(case_id)
    expect(evalset).to_contain_text(right["order_id"])


def _type_answer(page: Any, values: dict[str, str]) -> set[str]:
    """Type each value into the answer field named for it, moving with Tab from the field
    the edit key focused; the names typed into."""
    typed: set[str] = set()
    for _ in range(4 * len(values) + 4):
        name = page.evaluate("document.activeElement && document.activeElement.name")
        if name in values and name not in typed:
            page.keyboard.press("Control+a")
            page.keyboard.type(str(values[name]))
            typed.add(name)
        if typed == set(values):
            break
        page.keyboard.press("Tab")
    return typed
