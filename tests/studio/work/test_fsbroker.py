"""The filesystem broker the suite's workers use: a message file is never seen before it is
whole, and producers in several processes against two consumers lose and double nothing.
Real files, real processes; the one patch holds a producer between writing and renaming,
the window in which kombu's own transport shows consumers an empty file."""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from kombu import Connection

from studio.work import fsbroker


def connect(root: Path) -> Connection:
    queue = root / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    options = {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        "control_folder": str(root / "control"),
        "processed_folder": str(root / "processed"),
    }
    return Connection("filesystem://", transport=fsbroker.Transport, transport_options=options)


def test_a_consumer_finds_nothing_until_the_message_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    producer, consumer = connect(tmp_path).channel(), connect(tmp_path).channel()
    real_replace = os.replace
    seen_mid_write: list[str] = []

    def replace_after_a_look(src: Any, dst: Any) -> None:
        assert Path(src).read_bytes(), "the .part file holds the whole message before the rename"
        with pytest.raises(Empty):
            consumer._get("jobs")
        seen_mid_write.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(fsbroker.os, "replace", replace_after_a_look)
    producer._put("jobs", {"body": "x" * 4096})
    assert len(seen_mid_write) == 1 and seen_mid_write[0].endswith(".jobs.msg")
    assert consumer._get("jobs") == {"body": "x" * 4096}
    assert not list((tmp_path / "queue").iterdir()), "nothing is left behind: no .part file, no message"


def test_a_failed_write_leaves_no_part_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    channel = connect(tmp_path).channel()

    def disk_full(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsbroker.os, "replace", disk_full)
    with pytest.raises(Exception, match="cannot add message file"):
        channel._put("jobs", {"n": 1})
    assert not list((tmp_path / "queue").iterdir())


def produce(root: str, producer: int, count: int) -> None:
    channel = connect(Path(root)).channel()
    for n in range(count):
        channel._put("jobs", {"producer": producer, "n": n, "pad": "y" * (n % 7) * 512})


def test_producers_in_processes_and_two_consumers_lose_and_double_nothing(tmp_path: Path) -> None:
    producers, per_producer = 3, 300
    expected = {(p, n) for p in range(producers) for n in range(per_producer)}
    got: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    done = threading.Event()

    def consume() -> None:
        channel = connect(tmp_path).channel()
        while not done.is_set():
            try:
                message = channel._get("jobs")
            except Empty:
                continue
            except BaseException as exc:  # the failure this test is for: a half-written file
                errors.append(exc)
                done.set()
                return
            with lock:
                got.append((message["producer"], message["n"]))
                if len(got) >= len(expected):
                    done.set()

    consumers = [threading.Thread(target=consume) for _ in range(2)]
    for thread in consumers:
        thread.start()
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=produce, args=(str(tmp_path), p, per_producer)) for p in range(producers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    done.wait(120)
    done.set()
    for thread in consumers:
        thread.join(10)
    assert errors == []
    assert len(got) == len(expected), f"{len(expected) - len(got)} messages lost or doubled"
    assert set(got) == expected


def test_concurrent_binds_keep_every_binding_and_a_delete_removes_one(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()

    def bind(queue: str) -> None:
        try:
            connect(tmp_path).channel()._queue_bind("fan", "", "", queue)
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        channel = connect(tmp_path).channel()
        while not stop.is_set():
            try:
                channel.get_table("fan")  # never an empty, half-rewritten table
            except BaseException as exc:
                errors.append(exc)
                return

    reader = threading.Thread(target=read)
    reader.start()
    binders = [threading.Thread(target=bind, args=(f"q{i}",)) for i in range(8)]
    for thread in binders:
        thread.start()
    for thread in binders:
        thread.join(30)
    stop.set()
    reader.join(30)
    assert errors == []
    channel = connect(tmp_path).channel()
    assert sorted(q.queue for q in channel.get_table("fan")) == [f"q{i}" for i in range(8)]
    channel._delete("q3", "fan", "", "")
    assert sorted(q.queue for q in channel.get_table("fan")) == [f"q{i}" for i in range(8) if i != 3]
