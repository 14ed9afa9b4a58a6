"""The global per-endpoint cap: never more calls in flight than the cap, across threads
and processes; a killed holder's slots come back; waiting stops on cancel. Each test
runs on lock files (no Redis) and on a real Redis that the harness starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.backends import open_backend
from runtime.backends.base import ModelCall, ModelReply
from runtime.errors import Cancelled, NoSpareSlot
from studio.work.slots import CappedBackend, FileSlots, RedisSlots, Slots, acquire, holding
from tests.support import services

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    try:
        with services.redis() as server:
            yield server.url
    except services.ServiceError as exc:
        pytest.skip(f"no Redis: {exc}")


@pytest.fixture(params=["files", "redis"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make(kind: str, tmp_path: Path, request: pytest.FixtureRequest, ttl: float = 30.0) -> tuple[Slots, str]:
    """Slots of `kind`, and the argument a subprocess needs to open the same ones."""
    if kind == "files":
        return FileSlots(tmp_path / "slots"), f"files:{tmp_path / 'slots'}"
    url = request.getfixturevalue("redis_url")
    prefix = f"test:{request.node.name}:{time.monotonic_ns()}:"
    return RedisSlots(url, ttl=ttl, prefix=prefix), f"redis:{url}|{prefix}|{ttl}"


def test_it_never_hands_out_more_slots_than_the_cap(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    slots, _ = make(kind, tmp_path, request)
    in_flight, most, lock = [0], [0], threading.Lock()

    def call() -> None:
        for _ in range(5):
            with holding(slots, "endpoint-1", 3):
                with lock:
                    in_flight[0] += 1
                    most[0] = max(most[0], in_flight[0])
                time.sleep(0.005)  # the behaviour: a call holding its slot for a while
                with lock:
                    in_flight[0] -= 1

    threads = [threading.Thread(target=call) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 3


def test_it_keeps_endpoints_apart(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    slots, _ = make(kind, tmp_path, request)
    held = slots.try_acquire("endpoint-1", 1)
    assert held is not None
    assert slots.try_acquire("endpoint-1", 1) is None
    assert slots.try_acquire("endpoint-2", 1) is not None
    slots.release(held)
    assert slots.try_acquire("endpoint-1", 1) is not None


HOLDER = """
import sys, time
sys.path.insert(0, {root!r})
from studio.work.slots import FileSlots, RedisSlots
kind, _, where = sys.argv[1].partition(":")
if kind == "files":
    slots = FileSlots(where)
else:
    url, prefix, ttl = where.split("|")
    slots = RedisSlots(url, ttl=float(ttl), prefix=prefix)
held = slots.try_acquire("endpoint-1", 1)
print("held" if held else "full", flush=True)
time.sleep(60)  # the behaviour: hold the slot until killed
"""


def test_it_frees_the_slots_of_a_killed_worker(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    slots, where = make(kind, tmp_path, request, ttl=1.0)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(root=str(ROOT)), where],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert slots.try_acquire("endpoint-1", 1) is None
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        # Lock files: the kernel dropped the lock with the process, so the slot is free at
        # once. Redis: free once the slot's lease (1 s) lapses; 10 s is when to give up.
        held = slots.try_acquire("endpoint-1", 1) if kind == "files" else acquire(slots, "endpoint-1", 1, timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert held is not None


def test_it_renews_a_slot_held_longer_than_its_lease(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    slots, _ = make("redis", tmp_path, request, ttl=0.4)
    held = slots.try_acquire("endpoint-1", 1)
    assert held is not None
    time.sleep(1.0)  # the behaviour: hold it for more than twice the lease; only renewal keeps it
    assert slots.try_acquire("endpoint-1", 1) is None
    slots.release(held)
    assert slots.try_acquire("endpoint-1", 1) is not None


def test_it_stops_waiting_for_a_slot_when_cancelled(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    slots, _ = make(kind, tmp_path, request)
    assert slots.try_acquire("endpoint-1", 1) is not None
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    with pytest.raises(Cancelled):  # no timeout: only the cancel can end this wait
        acquire(slots, "endpoint-1", 1, cancel)


class Recording:
    spec = "fake:recording"

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self.free_during: list[bool] = []

    def complete(self, call: ModelCall) -> ModelReply:
        probe = self.slots.try_acquire("endpoint-9", 1)
        self.free_during.append(probe is not None)
        if probe is not None:
            self.slots.release(probe)
        return ModelReply(text="{}")

    def close(self) -> None:
        pass


def test_it_holds_a_slot_for_every_model_call(tmp_path: Path) -> None:
    slots = FileSlots(tmp_path / "slots")
    inner = Recording(slots)
    backend: Any = CappedBackend(inner, slots, "endpoint-9", 1)
    backend.complete(ModelCall(run_id="r", node="n", attempt=1, messages=[], schema=None))
    assert inner.free_during == [False]  # the call held the only slot
    assert slots.try_acquire("endpoint-9", 1) is not None  # and gave it back


def test_a_call_made_ahead_takes_a_free_slot_or_none_at_once(tmp_path: Path) -> None:
    """runtime.lookahead's calls (`spare`) never wait for the studio's cap."""
    slots = FileSlots(tmp_path / "slots")
    inner = Recording(slots)
    backend: Any = CappedBackend(inner, slots, "endpoint-9", 1)
    spare = ModelCall(run_id="r", node="n", attempt=1, messages=[], schema=None, spare=True)
    backend.complete(spare)
    assert inner.free_during == [False]  # it held the slot while in flight
    held = slots.try_acquire("endpoint-9", 1)
    assert held is not None
    with pytest.raises(NoSpareSlot, match="no free slot of endpoint-9"):
        backend.complete(spare)
    assert inner.free_during == [False]  # the second never reached the model
    slots.release(held)


def test_it_passes_the_endpoints_lookahead_on(tmp_path: Path) -> None:
    inner = open_backend("openai:http://127.0.0.1:9/v1#m;concurrency=3;lookahead=2")
    try:
        assert CappedBackend(inner, FileSlots(tmp_path / "slots"), "endpoint-9", 3).lookahead == 2
    finally:
        inner.close()
    assert CappedBackend(Recording(FileSlots(tmp_path)), FileSlots(tmp_path), "endpoint-9", 1).lookahead == 0
