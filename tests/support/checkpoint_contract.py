"""The checkpoint-store contract: what every CheckpointStore does, whoever keeps the rows.

A test module runs it by subclassing `CheckpointStoreContract` as `Test<Store>` and
giving it a `store` fixture (tests/runtime/test_checkpoint_contract.py: MemoryStore and
SQLiteStore; tests/studio/evals/test_store.py: the studio's DatabaseStore, on the test
database). A new store passes this before anything runs on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import load_pack, open_backend, resume_run, run_pack
from runtime.checkpoint import CheckpointStore
from runtime.errors import FencedOut, RunNotFound, RunStateError
from runtime.walker import RunOptions

PACKS = Path(__file__).resolve().parents[2] / "packs"
INPUT: dict[str, Any] = {"ticket": "Where is my refund?", "nested": {"n": [1, 2.5, None, True]}}


class Killed(Exception):
    """Raised from a step hook: the process dies here."""


class CheckpointStoreContract:
    def test_it_begins_a_run_at_fence_one_and_reads_it_back(self, store: CheckpointStore) -> None:
        assert store.begin("r1", pack="triage", digest="d1", input=INPUT, case_id="c1") == 1
        record = store.get("r1")
        assert (record.run_id, record.pack, record.digest, record.case_id) == ("r1", "triage", "d1", "c1")
        assert (record.input, record.status, record.fence, record.result) == (INPUT, "running", 1, None)

    def test_it_refuses_to_begin_a_run_twice(self, store: CheckpointStore) -> None:
        store.begin("r1", pack="p", digest="d", input={}, case_id=None)
        with pytest.raises(RunStateError):
            store.begin("r1", pack="p", digest="d", input={}, case_id=None)

    def test_it_says_when_a_run_is_not_there(self, store: CheckpointStore) -> None:
        with pytest.raises(RunNotFound):
            store.get("nope")
        with pytest.raises(RunNotFound):
            store.take_over("nope")
        with pytest.raises(RunNotFound):
            store.append("nope", 1, "step", "a", 1, {})
        with pytest.raises(RunNotFound):
            store.set_status("nope", 1, "done")

    def test_it_keeps_the_journal_in_order_per_run(self, store: CheckpointStore) -> None:
        fence = store.begin("r1", pack="p", digest="d", input={}, case_id=None)
        other = store.begin("r2", pack="p", digest="d", input={}, case_id=None)
        store.append("r1", fence, "step", "classify", 1, {"state": {"category": "billing"}})
        store.append("r2", other, "step", "x", 1, {"other": True})
        store.append("r1", fence, "tool", "refund", 2, {"result": [1, 2.5, None]})
        store.append("r1", fence, "step", "refund", 2, {})
        _, _, journal = store.take_over("r1")
        assert [(e.seq, e.kind, e.node, e.step) for e in journal] == [
            (1, "step", "classify", 1),
            (2, "tool", "refund", 2),
            (3, "step", "refund", 2),
        ]
        assert [e.payload for e in journal] == [{"state": {"category": "billing"}}, {"result": [1, 2.5, None]}, {}]
        assert [e.payload for e in store.take_over("r2")[2]] == [{"other": True}]

    def test_it_fences_out_the_writer_a_take_over_replaced(self, store: CheckpointStore) -> None:
        old = store.begin("r1", pack="p", digest="d", input={}, case_id="c")
        store.append("r1", old, "step", "a", 1, {"x": 1})
        new, record, journal = store.take_over("r1")
        assert new == old + 1 and record.fence == new and store.get("r1").fence == new
        assert (record.case_id, [e.payload for e in journal]) == ("c", [{"x": 1}])
        with pytest.raises(FencedOut):
            store.append("r1", old, "step", "b", 2, {})
        with pytest.raises(FencedOut):
            store.set_status("r1", old, "done")
        store.append("r1", new, "step", "b", 2, {"x": 2})
        newest, _, _ = store.take_over("r1")
        assert newest == new + 1
        with pytest.raises(FencedOut):
            store.append("r1", new, "step", "c", 3, {})
        assert [e.payload for e in store.take_over("r1")[2]] == [{"x": 1}, {"x": 2}]
        assert store.get("r1").status == "running"  # refused writes changed nothing

    def test_it_records_the_status_and_result(self, store: CheckpointStore) -> None:
        fence = store.begin("r1", pack="p", digest="d", input={}, case_id=None)
        store.set_status("r1", fence, "waiting")
        assert (store.get("r1").status, store.get("r1").result) == ("waiting", None)
        store.set_status("r1", fence, "done", {"state": {"answer": 42}, "end": "done"})
        record = store.get("r1")
        assert (record.status, record.result) == ("done", {"state": {"answer": 42}, "end": "done"})

    def test_it_hands_out_records_that_do_not_write_through(self, store: CheckpointStore) -> None:
        given = {"a": 1, "nested": {"n": [1]}}
        store.begin("r1", pack="p", digest="d", input=given, case_id=None)
        given["nested"]["n"].append(2)  # the caller's dict changes after begin
        record = store.get("r1")
        record.status, record.fence = "done", 99
        record.input["nested"]["n"].append(3)
        again = store.get("r1")
        assert (again.status, again.fence, again.input) == ("running", 1, {"a": 1, "nested": {"n": [1]}})

    def test_it_resumes_a_killed_run_without_repeating_a_step(self, store: CheckpointStore) -> None:
        pack = load_pack(PACKS / "support_triage")
        case = pack.cases[0]

        def die_after_first_step(step: object) -> None:
            raise Killed()

        with pytest.raises(Killed):
            run_pack(
                pack,
                case.input,
                backend=open_backend(pack.model or "", base_dir=pack.root),
                store=store,
                run_id="c1",
                case_id=case.id,
                options=RunOptions(on_step=die_after_first_step),
            )
        result = resume_run(pack, "c1", backend=open_backend(pack.model or "", base_dir=pack.root), store=store)
        assert result.status == "done"
        assert result.trace.steps[0].replayed and not result.trace.steps[1].replayed
        assert all(result.state[k] == v for k, v in case.expected.items())
        assert store.get("c1").status == "done"
