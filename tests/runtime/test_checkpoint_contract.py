"""The checkpoint-store contract (tests/support/checkpoint_contract.py) on the runtime's
own stores; the studio's DatabaseStore runs it in tests/studio/evals/test_store.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.checkpoint import CheckpointStore, MemoryStore, SQLiteStore
from tests.support.checkpoint_contract import CheckpointStoreContract


class TestRuntimeStores(CheckpointStoreContract):
    @pytest.fixture(params=["memory", "sqlite"])
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckpointStore]:
        made: CheckpointStore = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.sqlite")
        yield made
        made.close()
