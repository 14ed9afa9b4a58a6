"""The guard that keeps a worker alive when Redis goes away (studio/work/kombu_redis.py):
on a real Redis, a channel holding an unacknowledged message is closed after its
connection was released, the state a Redis restart leaves. Without the guard kombu raises
the AttributeError that ends a worker; with it the close completes and the message is
still in Redis, where it can be given back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kombu import Connection
from kombu.transport import redis as kombu_redis_transport

from studio.work import kombu_redis
from tests.support.services import Redis, redis


@pytest.fixture(scope="module")
def server() -> Iterator[Redis]:
    with redis() as rd:
        yield rd


def released_channel_holding_a_message(server: Redis) -> tuple[Connection, object]:
    conn = Connection(server.url)
    channel = conn.channel()
    channel.queue_declare("jobs")
    channel.basic_publish(channel.prepare_message("hello"), exchange="", routing_key="jobs")
    message = channel.basic_get("jobs", no_ack=False)
    assert message is not None and channel.qos._delivered
    conn.transport.client = None  # what a connection released by a reconnect leaves behind
    return conn, channel


def unacked_count(server: Redis) -> int:
    with Connection(server.url) as probe:
        client = probe.channel().client
        return int(client.hlen("unacked"))


def test_without_the_guard_kombu_raises_what_ends_a_worker(server: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kombu_redis_transport.QoS, "restore_unacked", kombu_redis._original)
    _, channel = released_channel_holding_a_message(server)
    with pytest.raises(AttributeError, match="hostname"):
        channel.close()  # type: ignore[attr-defined]


def test_with_the_guard_the_close_completes_and_the_message_stays(
    server: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kombu_redis_transport.QoS, "restore_unacked", kombu_redis._original)
    kombu_redis.install()
    kombu_redis.install()  # twice changes nothing
    assert kombu_redis_transport.QoS.restore_unacked is kombu_redis._restore_unacked
    before = unacked_count(server)
    _, channel = released_channel_holding_a_message(server)
    channel.close()  # type: ignore[attr-defined]
    assert channel.closed  # type: ignore[attr-defined]
    assert unacked_count(server) == before + 1  # left for restore_visible, not lost
