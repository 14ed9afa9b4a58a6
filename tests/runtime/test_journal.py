"""The runtime owns its journal (issue 21): Trace.from_journal and TraceBuilder rebuild a
run's trace from the checkpoint entries a real walk wrote, and the payload classes
write the journal's JSON key for key as before (old checkpoints still resume)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Entry,
    MemoryStore,
    RunStatus,
    Tier,
    ToolOutcome,
    ToolOutcomeKind,
    Trace,
    TraceBuilder,
    load_pack,
    open_backend,
    run_pack,
)
from runtime.journal import StepPayload, ToolPayload, WaitPayload
from tests.support.runtime_packs import ENUM_SCHEMA, Tools, tool_pack, write_pack


class Tapped(MemoryStore):
    """A memory store that feeds every entry, as it is appended, to a TraceBuilder."""

    def __init__(self, builder: TraceBuilder) -> None:
        super().__init__()
        self.builder = builder

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        super().append(run_id, fence, kind, node, step, payload)
        self.builder.add(kind, node, step, json.loads(json.dumps(payload)))  # as a database hands it back


def journal_of(store: MemoryStore, run_id: str) -> list[Entry]:
    _, _, entries = store.take_over(run_id)
    return entries


def rows(items: list[Any]) -> list[dict[str, Any]]:
    return [asdict(i) for i in items]


def run_tool_pack(tmp_path: Path, store: MemoryStore) -> Any:
    root = tool_pack(tmp_path)
    pack = load_pack(root)
    assert pack.model is not None
    backend = open_backend(pack.model, base_dir=pack.root)
    return run_pack(pack, {"order": "A1"}, backend=backend, tools=Tools().registry(), store=store, run_id="r1")


def test_it_rebuilds_a_runs_steps_attempts_and_tool_calls_from_its_journal(tmp_path: Path) -> None:
    store = MemoryStore()
    result = run_tool_pack(tmp_path, store)
    assert result.status == "done"
    rebuilt = Trace.from_journal(journal_of(store, "r1"), run_id="r1", pack=result.trace.pack)
    assert rows(rebuilt.steps) == rows(result.trace.steps)
    assert rows(rebuilt.attempts) == rows(result.trace.attempts) and rebuilt.attempts
    assert rows(rebuilt.tool_calls) == rows(result.trace.tool_calls) and len(rebuilt.tool_calls) == 2
    assert rebuilt.path == ["lookup", "refund", "confirm", "done"]


def test_the_builder_follows_a_run_one_entry_at_a_time(tmp_path: Path) -> None:
    builder = TraceBuilder("r1", "p")
    result = run_tool_pack(tmp_path, Tapped(builder))
    assert rows(builder.trace.steps) == rows(result.trace.steps)
    assert rows(builder.trace.attempts) == rows(result.trace.attempts)
    assert rows(builder.trace.tool_calls) == rows(result.trace.tool_calls)


def test_it_rebuilds_a_climb_and_a_wait_from_their_entries(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": "not json"}},
    )
    (root / "fakes" / "large.json").write_text(json.dumps({"nodes": {"classify": "not json either"}}))
    tiers = [
        Tier("small", open_backend("fake:fakes/scripted.json", base_dir=root)),
        Tier("large", open_backend("fake:fakes/large.json", base_dir=root)),
    ]
    store = MemoryStore()
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=tiers[0].backend, tiers=tiers, store=store, run_id="w")
    assert result.status == "waiting"
    journal = journal_of(store, "w")
    assert [e.kind for e in journal] == ["escalate", "wait"]
    rebuilt = Trace.from_journal(journal, run_id="w", pack="p")
    assert rows(rebuilt.attempts) == rows(result.trace.attempts)
    assert {a.tier for a in rebuilt.attempts} == {"small", "large"}
    assert rebuilt.steps == []  # a waiting run's step is the answer's; the wait itself is journaled
    wait = WaitPayload.from_payload("classify", journal[1].payload)
    assert (wait.reason, wait.tier, len(wait.escalations or [])) == ("escalated", "large", 2)


def test_it_reads_rows_marks_replays_and_takes_payloads_without_a_key() -> None:
    old_tool = {"tool": "lookup", "args": {"order_id": "A1"}, "result": {"total": 1}, "latency_s": 0.5}
    step = {
        "node": "lookup",
        "step": 1,
        "kind": "tool",
        "status": "ok",
        "writes": {"total": 1},
        "edge": {"index": 0, "kind": "next", "target": "done"},
        "attempts": [],
        "budget_left": 3,
    }
    trace = Trace.from_journal(
        [("tool", "lookup", 1, old_tool), ("step", "lookup", 1, step), ("note", "x", 2, {})],
        run_id="r",
        pack="p",
        replayed=True,
    )
    assert [(c.tool, c.key, c.replayed) for c in trace.tool_calls] == [("lookup", None, True)]
    assert [(s.node, s.replayed, s.edge and s.edge.target) for s in trace.steps] == [("lookup", True, "done")]


def test_the_payloads_write_the_journal_as_before(tmp_path: Path) -> None:
    store = MemoryStore()
    run_tool_pack(tmp_path, store)
    journal = journal_of(store, "r1")
    tool, step = journal[0].payload, journal[1].payload
    assert list(tool) == ["tool", "args", "result", "latency_s", "key"]
    assert ToolPayload.from_payload(tool).to_payload() == tool
    assert list(step)[-2:] == ["attempts", "budget_left"] and "replayed" not in step
    assert StepPayload.from_payload(step).to_payload() == step
    human = WaitPayload(node="ask", question="why?", reason="human", budget_left=2)
    assert human.to_payload() == {"question": "why?", "reason": "human", "attempts": [], "budget_left": 2}


def test_a_runs_status_is_a_run_status_stored_as_its_word(tmp_path: Path) -> None:
    store = MemoryStore()
    result = run_tool_pack(tmp_path, store)
    assert result.status is RunStatus.DONE and result.status == "done"
    assert json.loads(json.dumps(result.trace.to_dict()))["status"] == "done"
    assert store.get("r1").status == "done"


def test_a_tool_outcome_is_built_by_keyword() -> None:
    with pytest.raises(TypeError):
        ToolOutcome(True, 1, None, False, "ok", None)  # type: ignore[misc]
    failed = ToolOutcome.failed(ToolOutcomeKind.RAISED, "boom")
    assert (failed.ok, failed.kind, failed.replayed) == (False, "raised", False)
