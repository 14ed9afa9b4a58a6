"""The eval case's checkpoint store: the database store's fencing, with journal writes
in two statements and the run's final status held back for the outcome's transaction."""

from __future__ import annotations

import pytest

from runtime.errors import FencedOut, RunNotFound
from studio.work.checkpoints import OutcomeStore
from studio.work.models import JournalEntry, RunCheckpoint

pytestmark = pytest.mark.django_db


def test_it_refuses_a_journal_write_from_a_writer_that_was_fenced_out() -> None:
    old_writer, new_writer = OutcomeStore(), OutcomeStore()
    old = old_writer.begin("r1", pack="p", digest="d", input={}, case_id="c")
    old_writer.append("r1", old, "step", "a", 1, {"n": 1})
    new, _, journal = new_writer.take_over("r1")
    assert [e.seq for e in journal] == [1]
    with pytest.raises(FencedOut):
        old_writer.append("r1", old, "step", "b", 2, {"n": 2})
    new_writer.append("r1", new, "step", "b", 2, {"n": 2})
    assert list(JournalEntry.objects.order_by("seq").values_list("seq", "node", "payload")) == [
        (1, "a", {"n": 1}),
        (2, "b", {"n": 2}),
    ]


def test_it_holds_the_final_status_until_the_outcome_is_written() -> None:
    store = OutcomeStore()
    fence = store.begin("r1", pack="p", digest="d", input={}, case_id="c")
    store.set_status("r1", fence, "done", {"output": {}})
    assert RunCheckpoint.objects.get().status == "running"
    store.commit_final()
    assert (RunCheckpoint.objects.get().status, RunCheckpoint.objects.get().result) == ("done", {"output": {}})


def test_it_refuses_the_final_status_of_a_writer_that_was_fenced_out() -> None:
    old_writer = OutcomeStore()
    old = old_writer.begin("r1", pack="p", digest="d", input={}, case_id="c")
    old_writer.set_status("r1", old, "done", {})
    OutcomeStore().take_over("r1")
    with pytest.raises(FencedOut):
        old_writer.commit_final()
    assert RunCheckpoint.objects.get().status == "running"


def test_it_says_when_the_run_is_gone() -> None:
    store = OutcomeStore()
    fence = store.begin("r1", pack="p", digest="d", input={}, case_id="c")
    RunCheckpoint.objects.all().delete()
    with pytest.raises(RunNotFound):
        store.append("r1", fence, "step", "a", 1, {})
