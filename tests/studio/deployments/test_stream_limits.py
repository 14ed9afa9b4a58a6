"""Event streams are bounded (studio.deployments.streams): a user may hold only
PACKFORGE_SSE_MAX_PER_USER streams open, a web process serves only
PACKFORGE_SSE_MAX_PER_PROCESS at once, the next one is answered 429 with Retry-After,
and a stream that ends gives its place back. Counted, not timed."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from studio.deployments import streams
from studio.deployments.models import Deployment
from tests.support.serving import TICKET
from tests.support.studio import send

pytestmark = pytest.mark.usefixtures("eager")


def _end(response: Any) -> None:
    """Read a stream to its end (the run is over: a few frames), which closes it as a
    server would. (Calling close() directly would send request_finished, which closes
    the test's database connection.)"""
    b"".join(response.streaming_content)


@pytest.fixture
def run_url(as_owner: Client, deployment: Deployment, django_capture_on_commit_callbacks: Any) -> str:
    with django_capture_on_commit_callbacks(execute=True):
        assert send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"run_id": "r-1", "input": TICKET})
    return f"/api/deployments/{deployment.name}/runs/r-1/events"


def test_a_user_over_the_stream_cap_gets_429_and_a_closed_stream_frees_its_place(
    as_owner: Client, as_reviewer: Client, run_url: str, settings: Any
) -> None:
    settings.PACKFORGE_SSE_MAX_PER_USER = 3
    settings.PACKFORGE_SSE_MAX_PER_PROCESS = 10
    held = [as_owner.get(run_url) for _ in range(3)]  # opened, not read: each holds its place
    assert [r.status_code for r in held] == [200, 200, 200] and streams.open_here() == 3
    over = as_owner.get(run_url)
    assert over.status_code == 429 and over["Retry-After"] == str(streams.RETRY_AFTER_S)
    assert "PACKFORGE_SSE_MAX_PER_USER" in over.json()["detail"]
    other = as_reviewer.get(run_url)
    assert other.status_code == 200  # another user is not held up by this one's streams
    assert as_owner.get("/login/").status_code in (200, 302)  # pages answer while the streams are open
    _end(held[0])
    again = as_owner.get(run_url)
    assert again.status_code == 200
    for response in [*held[1:], again]:
        _end(response)
    assert streams.open_here() == 1  # the reviewer's
    last = as_owner.get(run_url)
    assert last.status_code == 200
    for response in (other, last):
        _end(response)
    assert streams.open_here() == 0


def test_a_process_serves_only_its_share_of_streams(
    as_owner: Client, as_reviewer: Client, run_url: str, settings: Any
) -> None:
    settings.PACKFORGE_SSE_MAX_PER_USER = 10
    settings.PACKFORGE_SSE_MAX_PER_PROCESS = 2
    start = streams.open_here()
    held = [as_owner.get(run_url), as_reviewer.get(run_url)]
    assert [r.status_code for r in held] == [200, 200] and streams.open_here() == start + 2
    over = as_reviewer.get(run_url)
    assert over.status_code == 429 and "PACKFORGE_SSE_MAX_PER_PROCESS" in over.json()["detail"]
    for response in held:
        _end(response)
    assert streams.open_here() == start


def test_a_stream_that_has_no_new_event_closes_when_idle(as_owner: Client, run_url: str, settings: Any) -> None:
    settings.PACKFORGE_SSE_IDLE_S = 0.01
    settings.PACKFORGE_SSE_POLL_S = 0.01
    done = as_owner.get(run_url)
    frames = b"".join(done.streaming_content).decode()  # type: ignore[attr-defined]
    assert "run.end" in frames  # a finished run: all of it, then the end
    quiet = as_owner.get(run_url, headers={"Last-Event-ID": "999"})  # nothing after 999: idle at once
    assert b"".join(quiet.streaming_content).decode() == "retry: 1000\n\n"  # type: ignore[attr-defined]
