"""Packs for runtime tests, built in plain sight from small dicts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.backends import Backend, open_backend
from runtime.checkpoint import SQLiteStore
from tests.support.fault_server import FaultServer
from tests.support.runtime_packs import ENUM_SCHEMA, write_pack


@pytest.fixture
def fault() -> Iterator[FaultServer]:
    """The fault-injecting OpenAI-compatible server on loopback (tests/support/fault_server.py)."""
    with FaultServer() as server:
        yield server


@pytest.fixture
def backend(fault: FaultServer) -> Iterator[Backend]:
    """A backend on `fault` (a module's own `fault` fixture, when it has one)."""
    opened = open_backend(fault.spec("backoff=0.01"))
    yield opened
    opened.close()


@pytest.fixture
def triage(tmp_path: Path) -> Path:
    """classify -> (billing) refund_check -> done | (else) done."""
    return write_pack(
        tmp_path / "triage",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "priority": {
                "kind": "generate",
                "reads": ["category"],
                "writes": ["priority"],
                "assert": "priority in ['p1', 'p2']",
            },
            "done": {"kind": "end"},
            "other": {"kind": "end"},
        },
        edges=[
            {"from": "classify", "to": "priority", "when": "category == 'billing'"},
            {"from": "classify", "to": "other"},
            {"from": "priority", "to": "done"},
        ],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": {"category": "billing"}, "priority": {"priority": "p1"}}},
        cases=[
            {
                "id": "b",
                "input": {"ticket": "charged twice"},
                "expected": {"category": "billing", "priority": "p1"},
                "end": "done",
            },
        ],
    )


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Callable[..., SQLiteStore]]:
    """Make SQLite checkpoint stores that are closed when the test ends."""
    made: list[SQLiteStore] = []

    def make(name: str = "runs.sqlite", **kw: Any) -> SQLiteStore:
        store = SQLiteStore(tmp_path / name, **kw)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
