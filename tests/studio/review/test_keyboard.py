"""The queue worked with the keyboard alone, in a real browser (Debian's chromium driven
by Playwright) against the studio on pytest-django's live server: j/k move the
selection, `a` approves the best candidate, `e` opens the form to edit (Ctrl+Enter
saves), `r` rejects with a note."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from studio.deployments.models import ServedRun
from studio.review.items import open_item
from studio.review.models import ReviewItem
from tests.support.studio import client_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def page(live_server: Any, reviewer: User) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the ORM calls the test
    # makes between browser steps are plain synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    cookie = client_for(reviewer).cookies["sessionid"].value
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context()
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": live_server.url}])
            yield context.new_page()
            browser.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def _three(make_waiting: Callable[..., ServedRun]) -> list[ReviewItem]:
    made = []
    for i in range(3):
        item = open_item(make_waiting(run_id=f"k{i}"))
        assert item is not None
        ReviewItem.objects.filter(pk=item.pk).update(created_at=timezone.now() - timedelta(minutes=3 - i))
        made.append(item)
    return made


def _decided(pk: int) -> ReviewItem:
    return ReviewItem.objects.get(pk=pk)


def test_it_works_the_queue_with_the_keyboard(
    page: Any, live_server: Any, make_waiting: Callable[..., ServedRun]
) -> None:
    first, second, third = _three(make_waiting)
    page.goto(f"{live_server.url}/review/")
    page.wait_for_selector(f"#item-{first.pk}.selected")
    page.keyboard.press("j")
    page.wait_for_selector(f"#item-{second.pk}.selected")
    page.keyboard.press("k")
    page.wait_for_selector(f"#item-{first.pk}.selected")

    page.keyboard.press("a")  # approve the first: back on the queue
    page.wait_for_selector(f"#item-{first.pk}", state="detached")
    assert (_decided(first.pk).decision, _decided(first.pk).answer) == ("approve", first.best)

    page.wait_for_selector(f"#item-{second.pk}.selected")
    page.keyboard.press("e")  # edit the second: its page, the first answer field focused
    page.wait_for_url(f"**/review/{second.pk}?do=edit")
    page.wait_for_function("document.activeElement && document.activeElement.name === 'a_order_id'")
    page.keyboard.press("Tab")
    page.keyboard.press("Control+a")
    page.keyboard.type("61")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#item-decision")
    assert (_decided(second.pk).decision, _decided(second.pk).answer) == (
        "edit",
        {"order_id": "ORD-48213", "amount_usd": 61.0},
    )
    assert ServedRun.objects.get(pk=second.run_id).answered_by == "human:rita"

    page.keyboard.press("q")
    page.wait_for_selector(f"#item-{third.pk}.selected")
    page.keyboard.press("r")  # reject the third: its page, the note focused
    page.wait_for_url(f"**/review/{third.pk}?do=reject")
    page.wait_for_function("document.activeElement && document.activeElement.name === 'note'")
    page.keyboard.type("a duplicate of another ticket")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#item-decision")
    assert (_decided(third.pk).decision, _decided(third.pk).note) == ("reject", "a duplicate of another ticket")
    assert ServedRun.objects.get(pk=third.run_id).status == "failed"
