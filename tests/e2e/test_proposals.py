"""Proposals end to end, in a real browser against a real studio and Celery worker, with
two people. The admin makes a project from an example, invites rita on the Users page
(rita sets her password through the one-time link, in a browser of her own, and logs
in), makes her a reviewer on the project's Members tab, and creates a deployment of the
newest version. The admin edits a prompt and saves it as a proposal instead of on main:
main does not move, the proposal's checks (an eval of its base and one of its head) run
on the worker and show the per-case delta, and the admin, its author, may neither
approve it nor merge it yet. Rita approves it; the admin merges it (a confirm dialog),
promotes the deployment to the merged version with a note, and rolls it back to the
version it served before, each move in the deployment's history with its note.
Screenshots of the checks and of the deployment's history go to the folder
tests/support/screenshots.py names."""

from __future__ import annotations

import re
from typing import Any

from tests.support.screenshots import save_screenshot
from tests.support.started import Studio

SLUG = "e2e-proposals"
DEPLOYMENT = "e2e-proposals-live"
RITA = "rita"
RITA_PASSWORD = "a-long-Reviewer-passphrase-42"
MESSAGE = "Ask for a short, plain answer"
PROMOTE_NOTE = "ship the shorter prompt"
ROLLBACK_NOTE = "back to the old prompt for now"


def history_head(page: Any, studio: Studio) -> tuple[str, str]:
    """Main's newest commit as the History tab shows it: (short sha, message)."""
    page.goto(f"{studio.url}/p/{SLUG}/history/")
    first = page.locator("#history table tr").nth(1)
    first.wait_for()
    return first.locator("td").nth(2).inner_text().strip(), first.locator("td").nth(3).inner_text()


def test_a_proposal_is_checked_approved_merged_promoted_and_rolled_back(
    page: Any, browser: Any, studio: Studio
) -> None:
    page.goto(f"{studio.url}/new")
    page.fill("input[name=slug]", SLUG)
    page.select_option("select[name=example]", "support_triage")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/{SLUG}/")

    # invite rita; she sets her password through the link, in a browser of her own
    page.goto(f"{studio.url}/users/")
    page.fill("#invite input[name=username]", RITA)
    page.fill("#invite input[name=email]", "rita@example.com")
    page.click("#invite button[type=submit]")
    link = page.locator("#invite-link pre.mono")
    link.wait_for()
    invite = link.inner_text().strip()
    assert invite.startswith(studio.url), invite

    rita_context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        rita_context.set_default_timeout(20_000)
        rita_console: list[str] = []
        rita_context.on("console", lambda message: rita_console.append(message.text))
        rita = rita_context.new_page()
        rita.goto(invite)
        rita.locator("#set-password").wait_for()
        rita.fill("input[name=new_password1]", RITA_PASSWORD)
        rita.fill("input[name=new_password2]", RITA_PASSWORD)
        rita.click("#set-password button[type=submit]")
        rita.wait_for_url(f"{studio.url}/login/")
        rita.fill("input[name=username]", RITA)
        rita.fill("input[name=password]", RITA_PASSWORD)
        rita.click("button[type=submit]")
        rita.wait_for_url(f"{studio.url}/")

        # the admin makes her a reviewer of the project
        page.goto(f"{studio.url}/p/{SLUG}/members/")
        page.fill("#add-member input[name=username]", RITA)
        page.select_option("#add-member select[name=role]", "reviewer")
        page.click("#add-member button[type=submit]")
        page.locator("#members tr.member", has_text=RITA).wait_for()
        assert page.locator(f"#members select[aria-label='Role of {RITA}']").input_value() == "reviewer"

        # a deployment of the newest version, on the pack's own model
        page.goto(f"{studio.url}/p/{SLUG}/deployments/")
        page.fill("#new-deployment input[name=name]", DEPLOYMENT)
        page.select_option("#new-deployment select[name=version]", "")
        page.fill("#new-deployment input[name=tiers]", "")
        page.click("#new-deployment button[type=submit]")
        page.wait_for_url(f"{studio.url}/p/{SLUG}/deployments/{DEPLOYMENT}")
        original = page.locator("#deployment-version").inner_text().strip()
        assert re.fullmatch(r"[0-9a-f]{40}", original), original

        # edit a prompt and save it as a proposal: main does not move
        main_before = history_head(page, studio)
        assert main_before[0] == original[: len(main_before[0])]
        page.goto(f"{studio.url}/p/{SLUG}/files/prompts/classify.txt")
        editor = page.locator("textarea#content")
        editor.wait_for()
        text = editor.input_value()
        assert "Reply with JSON only" in text
        editor.fill(text.rstrip("\n") + "\nKeep the answer short and plain.\n")
        page.locator("#problems .valid").first.wait_for()
        page.fill("input[name=message]", MESSAGE)
        page.click("#save-as-proposal")
        page.wait_for_url(f"{studio.url}/p/{SLUG}/proposals/1")
        assert MESSAGE in page.locator("#proposal-title").inner_text()
        assert page.locator("#proposal-status").inner_text() == "open"
        proposal_url = page.url
        main_after = history_head(page, studio)
        assert main_after == main_before
        assert MESSAGE not in main_after[1]

        # its checks run on the worker; the page refreshes them by itself until done
        page.goto(proposal_url)
        page.locator("#checks[data-state=done]").wait_for(timeout=180_000)
        assert re.fullmatch(r"\d+", page.locator("#n-fixed").inner_text().strip())
        assert re.fullmatch(r"\d+", page.locator("#n-broken").inner_text().strip())
        assert page.locator("#gate").inner_text().strip() in ("passes", "fails")
        assert page.locator("#check-metrics").count() == 1
        assert page.locator("#check-metrics tr").count() >= 2
        save_screenshot(page, "proposal-checks")

        # the author may not approve their own, nor merge before a teammate approves
        assert page.locator("#approve").count() == 0
        assert page.locator("#merge").is_disabled()
        assert "approval" in page.locator("#merge-problems").inner_text()

        # rita approves it
        rita.goto(proposal_url)
        rita.locator("#approve-form").wait_for()
        assert rita.locator("#merge").count() == 0  # a reviewer does not merge
        rita.click("#approve")
        rita.locator("#proposal-status", has_text="approved").wait_for()
        assert rita.locator("#proposal-status").inner_text() == "approved"
        assert RITA in rita.locator("#approvals").inner_text()
        assert [m for m in rita_console if "Content Security Policy" in m or "CSP violation" in m] == []
    finally:
        rita_context.close()

    # the admin merges it, past the confirm dialog
    page.goto(proposal_url)
    assert page.locator("#merge-problems").count() == 0
    merge = page.locator("#merge")
    assert merge.is_enabled()
    page.once("dialog", lambda dialog: dialog.accept())
    merge.click()
    page.locator("#proposal-status", has_text="merged").wait_for()
    assert page.locator("#proposal-status").inner_text() == "merged"
    merged = page.locator("#merged-sha").inner_text().strip()
    assert re.fullmatch(r"[0-9a-f]{10}", merged), merged
    assert merged != original[:10]
    assert history_head(page, studio)[0] == merged[: len(main_before[0])]

    # promote the deployment to the merged version
    page.goto(f"{studio.url}/p/{SLUG}/deployments/{DEPLOYMENT}")
    promote = page.locator("#promote-form")
    newest = promote.locator("select[name=version] option").first.get_attribute("value")
    assert newest is not None and newest.startswith(merged), newest
    promote.locator("select[name=version]").select_option(newest)
    promote.locator("input[name=note]").fill(PROMOTE_NOTE)
    promote.locator("button:has-text('Promote')").click()
    page.locator("#deployment-version", has_text=merged).wait_for()
    assert page.locator("#deployment-version").inner_text().strip()[:10] == merged
    promoted = page.locator("#deployment-history tr", has_text=PROMOTE_NOTE)
    assert promoted.count() == 1
    assert "promote" in promoted.inner_text()

    # roll it back to the version it served before
    rollback = page.locator("#rollback-form")
    earlier = rollback.locator("select[name=version] option").first.get_attribute("value")
    assert earlier == original
    rollback.locator("select[name=version]").select_option(original)
    rollback.locator("input[name=note]").fill(ROLLBACK_NOTE)
    rollback.locator("button:has-text('Roll back')").click()
    page.locator("#deployment-version", has_text=original).wait_for()
    assert page.locator("#deployment-version").inner_text().strip() == original
    rolled = page.locator("#deployment-history tr", has_text=ROLLBACK_NOTE)
    assert rolled.count() == 1
    assert "rollback" in rolled.inner_text()
    save_screenshot(page, "deployment-promote-rollback")
