"""Waking `?wait` requests when a run settles (studio.deployments.settled), on a real
Redis: a mark pushed once the settling transaction commits, passed on to every request
waiting on the run, spent when it woke a request whose run had not settled, and a
database poll when Redis is away."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from studio.deployments import settled
from tests.support.services import Redis, redis

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def server() -> Iterator[Redis]:
    with redis() as rd:
        yield rd


@pytest.fixture
def on_redis(server: Redis, settings: Any) -> Iterator[None]:
    settings.REDIS_URL = server.url
    settled._client.clear()
    yield
    settled._client.clear()


@pytest.mark.usefixtures("on_redis")
def test_it_wakes_every_request_waiting_on_a_run_once_it_settles(django_capture_on_commit_callbacks: Any) -> None:
    first, second = settled.Waiter(101), settled.Waiter(101)
    with django_capture_on_commit_callbacks(execute=True):
        settled.announce(101)
    first.wait(30)
    assert first.woken
    first.pass_on()  # it found the run settled
    second.wait(30)
    assert second.woken


@pytest.mark.usefixtures("on_redis")
def test_it_pushes_nothing_for_a_transaction_that_rolls_back(django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        settled.announce(102)
    assert len(callbacks) == 1  # waits for the commit
    client = settled.client()
    assert client is not None and client.llen(settled.key(102)) == 0


@pytest.mark.usefixtures("on_redis")
def test_it_spends_a_mark_that_woke_a_request_whose_run_had_not_settled(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        settled.announce(103)  # an earlier settle, before the run was resumed
    waiter = settled.Waiter(103)
    waiter.wait(30)
    assert waiter.woken  # the row says running: no pass_on
    waiter.wait(0.05)
    assert not waiter.woken


def test_it_polls_the_database_when_redis_is_away(settings: Any) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # discard port: nothing answers
    settled._client.clear()
    try:
        waiter = settled.Waiter(104)
        waiter.wait(0.01)
        assert not waiter.woken and waiter.redis is None  # it polls from now on
    finally:
        settled._client.clear()


def test_it_polls_without_redis(settings: Any) -> None:
    settings.REDIS_URL = ""
    settled._client.clear()
    waiter = settled.Waiter(105)
    assert waiter.redis is None
    waiter.wait(0.01)
    assert not waiter.woken
