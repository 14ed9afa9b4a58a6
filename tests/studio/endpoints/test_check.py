from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from django.test import Client

from studio.endpoints.models import Endpoint
from tests.support.fault_server import FaultServer

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]
HX = {"HX-Request": "true"}


@pytest.fixture
def served(staff: object, fault: FaultServer) -> Endpoint:
    return Endpoint.objects.create(name="served", spec=fault.spec(), created_by=staff)


def test_it_queues_a_check_and_answers_with_a_poller(
    as_staff: Client, served: Endpoint, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        page = as_staff.post(f"/endpoints/{served.pk}/check", headers=HX)
    assert page.status_code == 200
    assert len(callbacks) == 1  # the Celery task, sent once the row is committed
    assert b"checking" in page.content and b'hx-trigger="every 1s"' in page.content
    served.refresh_from_db()
    assert served.last_check["state"] == "checking"


def test_it_checks_through_the_task_and_stores_the_reading(
    as_staff: Client, served: Endpoint, fault: FaultServer, eager: None, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        as_staff.post(f"/endpoints/{served.pk}/check", headers=HX)
    served.refresh_from_db()
    check = served.last_check
    assert check["state"] == "done" and check["ok"] is True
    assert check["answered"] is True and check["honoured"] is True and check["latency_s"] > 0
    # The answer, then one more call asking for logprobs (confidence gates need them).
    assert len(fault.completions()) == 2 and check["logprobs"] is True
    page = as_staff.get(f"/endpoints/{served.pk}/check", headers=HX)
    assert b"logprobs: yes" in page.content


def test_it_stops_polling_once_the_check_is_done(as_staff: Client, served: Endpoint) -> None:
    served.last_check = {
        "state": "done",
        "ok": True,
        "answered": True,
        "honoured": True,
        "latency_s": 0.02,
        "ttft_s": 0.01,
        "grammar": "json_schema",
        "checked_at": "2026-01-01T00:00:00+00:00",
    }
    served.save()
    page = as_staff.get(f"/endpoints/{served.pk}/check", headers=HX)
    assert page.status_code == 286
    assert b"honoured" in page.content and b"hx-trigger" not in page.content


def test_it_keeps_polling_while_checking(as_viewer: Client, served: Endpoint) -> None:
    from django.utils import timezone

    served.last_check = {"state": "checking", "requested_at": timezone.now().isoformat()}
    served.save()
    page = as_viewer.get(f"/endpoints/{served.pk}/check", headers=HX)
    assert page.status_code == 200 and b"hx-get" in page.content


def test_it_gives_up_polling_a_check_no_worker_took(as_viewer: Client, served: Endpoint) -> None:
    served.last_check = {"state": "checking", "requested_at": "2020-01-01T00:00:00+00:00"}
    served.save()
    page = as_viewer.get(f"/endpoints/{served.pk}/check", headers=HX)
    assert page.status_code == 286 and b"is a Celery worker running" in page.content


def test_it_redirects_a_plain_get_to_the_list(as_viewer: Client, served: Endpoint) -> None:
    page = as_viewer.get(f"/endpoints/{served.pk}/check")
    assert page.status_code == 302 and page["Location"] == "/endpoints/"


def test_it_forbids_non_staff(as_owner: Client, served: Endpoint, django_capture_on_commit_callbacks: Capture) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        page = as_owner.post(f"/endpoints/{served.pk}/check", headers=HX)
    assert page.status_code == 403 and callbacks == []


def test_it_answers_404_for_a_missing_endpoint(as_staff: Client) -> None:
    assert as_staff.post("/endpoints/999/check", headers=HX).status_code == 404


def test_it_requires_login(served: Endpoint) -> None:
    assert Client().post(f"/endpoints/{served.pk}/check").status_code == 302
