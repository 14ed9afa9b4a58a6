"""studio.sqlwrites writes the rows the ORM would write (read back through the ORM), on
whichever database the suite runs on (SQLite here, Postgres in CI's second stage)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction

from studio import sqlwrites
from studio.work.checkpoints import CHECKPOINT, JOURNAL
from studio.work.models import JournalEntry, RunCheckpoint

pytestmark = pytest.mark.django_db

PAYLOAD = {
    "text": "naïve \"quoted\" 'single' \\ back; DROP TABLE x; -- 😀",
    "nested": {"list": [1, 2.5, None, True, {"k": []}], "empty": {}},
    "zero": 0,
}
AT = datetime(2026, 12, 1, 18, 59, 38, 123456, tzinfo=UTC)


def checkpoint(run_id: str, case_id: str | None = None) -> None:
    sqlwrites.insert(RunCheckpoint, CHECKPOINT, [(run_id, "pack", "d" * 64, PAYLOAD, case_id, "running", 1, AT)])


def test_an_inserted_row_reads_back_as_the_orm_writes_it() -> None:
    checkpoint("r-1")
    checkpoint("r-2", case_id="c-7")
    row = RunCheckpoint.objects.get(run_id="r-1")
    assert row.input == PAYLOAD and row.case_id is None and row.fence == 1 and row.updated_at == AT
    assert row.result is None  # a column left out takes its database default (NULL)
    assert RunCheckpoint.objects.get(run_id="r-2").case_id == "c-7"


def test_many_rows_go_in_one_statement_in_order() -> None:
    checkpoint("r-1")
    rows = [("r-1", seq, "step", f"n{seq}", seq, {"seq": seq, "text": PAYLOAD["text"]}) for seq in range(1, 6)]
    sqlwrites.insert(JournalEntry, JOURNAL, rows)
    got = list(JournalEntry.objects.filter(run_id="r-1").order_by("seq").values_list("seq", "node", "payload"))
    assert got == [(seq, f"n{seq}", {"seq": seq, "text": PAYLOAD["text"]}) for seq in range(1, 6)]
    assert sqlwrites.max_of(JournalEntry, "seq", {"run": "r-1"}) == 5
    assert sqlwrites.max_of(JournalEntry, "seq", {"run": "none"}) == 0
    sqlwrites.insert(JournalEntry, JOURNAL, [])  # nothing to write: no statement


def test_a_unique_clash_is_djangos_integrity_error_and_rolls_back_alone() -> None:
    checkpoint("r-1")
    with pytest.raises(IntegrityError), transaction.atomic():
        checkpoint("r-1")
    assert RunCheckpoint.objects.filter(run_id="r-1").count() == 1


def test_an_update_matches_every_condition_and_says_how_many_rows() -> None:
    checkpoint("r-1")
    result = {"output": {"a": [1, "é"]}, "error": None}
    assert sqlwrites.update(RunCheckpoint, {"run_id": "r-1", "fence": 2}, {"status": "done"}) == 0
    assert sqlwrites.update(RunCheckpoint, {"run_id": "r-1", "fence": 1}, {"status": "done", "result": result}) == 1
    row = RunCheckpoint.objects.get(run_id="r-1")
    assert row.status == "done" and row.result == result
    assert sqlwrites.update(RunCheckpoint, {"run_id": "r-1", "fence": 1}, {"result": None}) == 1
    assert RunCheckpoint.objects.get(run_id="r-1").result is None
