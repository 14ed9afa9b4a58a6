"""The database checkpoint store keeps the checkpoint-store contract
(tests/support/checkpoint_contract.py), as the runtime's own stores do."""

from __future__ import annotations

import pytest

from runtime.checkpoint import CheckpointStore
from studio.work.checkpoints import DatabaseStore
from tests.support.checkpoint_contract import CheckpointStoreContract


@pytest.mark.django_db
class TestDatabaseStore(CheckpointStoreContract):
    @pytest.fixture
    def store(self) -> CheckpointStore:
        return DatabaseStore()
