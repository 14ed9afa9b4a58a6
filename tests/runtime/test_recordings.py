"""Recorded tool results (runtime.recordings, docs/tools.md "Recorded tool results"): a
tape records every tool call of an eval, a replay answers them without calling a tool,
and a case whose calls leave the recording is `diverged`, not a pass or a failure.
refund_desk's tools count their real calls here."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runtime import Registry, ToolTape, evaluate, load_pack, load_tools, open_backend
from runtime.cli import main
from runtime.recordings import RecordedCall, TapeError
from runtime.tools import Divergence, RecordedFailure

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "packs" / "refund_desk"
TOOLS = f"{PACK / 'tools.py'}:registry"


# -- the tape ------------------------------------------------------------------------------


def test_it_answers_the_call_recorded_at_the_same_case_and_index() -> None:
    tape = ToolTape("record")
    tape.record("c1", "lookup", 0, "lookup_order", {"order_id": "A"}, {"order": 1})
    replay = ToolTape("replay", tape.calls())
    assert replay.lookup("c1", "renamed_node", 0, "lookup_order", {"order_id": "A"}) == {"order": 1}


@pytest.mark.parametrize(
    ("case", "index", "tool", "args", "says"),
    [
        ("c1", 0, "lookup_order", {"order_id": "B"}, 'recorded as lookup_order(order_id="A")'),
        ("c1", 0, "issue_refund", {"order_id": "A"}, "this run called issue_refund"),
        ("c1", 1, "lookup_order", {"order_id": "A"}, "has no recorded tool call #2"),
        ("c2", 0, "lookup_order", {"order_id": "A"}, "case 'c2' has no recorded tool call #1"),
    ],
)
def test_it_says_how_a_call_diverges(case: str, index: int, tool: str, args: dict[str, Any], says: str) -> None:
    tape = ToolTape("replay", [RecordedCall("c1", "lookup", 0, "lookup_order", {"order_id": "A"}, {"order": 1})])
    found = tape.lookup(case, "lookup", index, tool, args)
    assert isinstance(found, Divergence) and says in found.reason


def test_it_fails_a_replayed_call_as_it_failed_when_recorded() -> None:
    tape = ToolTape("record")
    tape.record_failure("c1", "lookup", 0, "lookup_order", {"order_id": "X"}, "raised", "no order X")
    tape.record("c1", "other", 0, "lookup_order", {"order_id": "A"}, {"order": 1})  # shares the index
    replay = ToolTape.from_jsonl(tape.to_jsonl())
    assert replay.lookup("c1", "lookup", 0, "lookup_order", {"order_id": "X"}) == RecordedFailure(
        "raised", "no order X"
    )
    assert replay.lookup("c1", "other", 0, "lookup_order", {"order_id": "A"}) == {"order": 1}


def test_it_answers_a_recorded_failure_once_per_run_then_the_retry_that_worked() -> None:
    tape = ToolTape("record")
    tape.record_failure("c1", "lookup", 0, "lookup_order", {"order_id": "A"}, "raised", "timed out")
    tape.record("c1", "lookup", 0, "lookup_order", {"order_id": "A"}, {"order": 1})  # the retry, same index
    replay = ToolTape.from_jsonl(tape.to_jsonl())
    for run in (replay.for_run(), replay.for_run()):  # every run replays the same story
        assert run.lookup("c1", "lookup", 0, "lookup_order", {"order_id": "A"}) == RecordedFailure(
            "raised", "timed out"
        )
        assert run.lookup("c1", "lookup", 0, "lookup_order", {"order_id": "A"}) == {"order": 1}


def test_it_keeps_the_first_recording_of_a_call() -> None:
    tape = ToolTape("record")
    tape.record("c1", "lookup", 0, "t", {}, {"first": True})
    tape.record("c1", "lookup", 0, "t", {}, {"first": False})
    assert [c.result for c in tape.calls()] == [{"first": True}]


def test_it_writes_and_reads_one_call_per_line(tmp_path: Path) -> None:
    tape = ToolTape("record")
    tape.record("b", "n", 0, "t", {"x": 1}, {"y": 2})
    tape.record("a", "n", 1, "t", {"x": 2}, {"y": 3})
    tape.record(None, "n", 0, "t", {}, {})
    path = tmp_path / "tape.jsonl"
    tape.save(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(d["case_id"], d["index"]) for d in lines] == [("", 0), ("a", 1), ("b", 0)]
    assert set(lines[1]) == {"case_id", "node", "index", "tool", "args", "result"}
    again = ToolTape.load(path)
    assert again.mode == "replay" and again.calls() == tape.calls()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json\n", "line 1: not JSON"),
        ('{"case_id": "a"}\n', "missing node, index, tool, args, result"),
        ('\n{"case_id": "a", "node": "n", "index": -1, "tool": "t", "args": {}, "result": 1}\n', "line 2"),
        ('{"case_id": "a", "node": "n", "index": 0, "tool": "t", "args": [], "result": 1}\n', "args must be"),
    ],
)
def test_it_refuses_a_file_that_is_not_a_tape(text: str, says: str) -> None:
    with pytest.raises(TapeError, match=says):
        ToolTape.from_jsonl(text)


def test_it_refuses_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="record or replay"):
        ToolTape("live")


# -- evaluating with a tape: refund_desk, whose tools count their calls ---------------------


def counted_tools() -> tuple[Registry, Counter[str]]:
    """refund_desk's registry with each tool counting its real calls."""
    calls: Counter[str] = Counter()
    registry = load_tools(TOOLS)
    assert registry is not None

    def counting(name: str, fn: Any) -> Any:
        def call(**kwargs: Any) -> Any:
            calls[name] += 1
            return fn(**kwargs)

        return call

    return Registry({n: dataclasses.replace(t, function=counting(n, t.function)) for n, t in registry.items()}), calls


def run_eval(tape: ToolTape | None) -> tuple[Any, Counter[str]]:
    tools, calls = counted_tools()
    pack = load_pack(PACK, tools=set(tools))
    backend = open_backend(pack.model or "", base_dir=pack.root, default=pack.model)
    return evaluate(pack, backend, tools=tools, tape=tape, concurrency=2), calls


def test_it_re_evaluates_from_a_recording_without_calling_a_tool() -> None:
    recording = ToolTape("record")
    first, live = run_eval(recording)
    assert live["lookup_order"] > 0 and live["issue_refund"] > 0  # refunds were issued once, recording
    assert first.tool_recording()["live"] == sum(live.values()) - 1  # the call that raised is not journaled
    assert len(recording) == sum(live.values())
    again, calls = run_eval(ToolTape.from_jsonl(recording.to_jsonl()))
    assert sum(calls.values()) == 0  # no tool called: no refund issued
    summary = again.tool_recording()
    assert (summary["mode"], summary["live"], summary["diverged"]) == ("replay", 0, 0)
    assert summary["replayed"] == first.tool_recording()["live"]
    assert (again.passed, again.total) == (first.passed, first.total)
    assert [c.status for c in again.cases] == [c.status for c in first.cases]


def test_it_reports_a_case_that_leaves_the_recording_as_diverged() -> None:
    recording = ToolTape("record")
    first, _ = run_eval(recording)
    # the recording of rd-01 looked up another order: today's run calls otherwise
    calls = [
        dataclasses.replace(c, args={"order_id": "ORD-10002"}) if (c.case_id, c.index) == ("rd-01", 0) else c
        for c in recording.calls()
    ]
    report, live = run_eval(ToolTape("replay", calls))
    assert sum(live.values()) == 0  # a diverged call is not made live either
    (diverged,) = [c for c in report.cases if c.diverged]
    assert diverged.case_id == "rd-01" and diverged.status == "diverged" and not diverged.passed
    assert "ORD-10002" in diverged.diverged[0] and diverged.blamed is None
    assert report.total == first.total - 1 and report.passed == first.passed - 1
    assert "(none)" not in report.failures_by_node() and sum(report.failures_by_node().values()) == (
        first.total - first.passed
    )
    doc = report.to_dict()
    assert doc["tool_recording"]["diverged_cases"] == [{"id": "rd-01", "repeat": 1, "reasons": diverged.diverged}]
    assert {c["id"]: c["status"] for c in doc["cases"]}["rd-01"] == "diverged"


def test_it_records_and_replays_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tape = tmp_path / "tools.jsonl"
    base = ["eval", str(PACK), "--tools", TOOLS, "--json"]
    assert main([*base, "--record-tools", str(tape)]) == 0
    recorded = json.loads(capsys.readouterr().out)["tool_recording"]
    assert recorded["mode"] == "record" and recorded["live"] > 0 and tape.read_text().count("\n") > 0
    assert main([*base, "--replay-tools", str(tape)]) == 0
    replayed = json.loads(capsys.readouterr().out)["tool_recording"]
    assert (replayed["live"], replayed["replayed"], replayed["diverged"]) == (0, recorded["live"], 0)


def test_it_fails_the_command_when_a_case_diverged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tape = tmp_path / "tools.jsonl"
    tape.write_text("")  # nothing recorded: every case with a tool call diverges
    assert main(["eval", str(PACK), "--tools", TOOLS, "--replay-tools", str(tape)]) == 1
    out = capsys.readouterr().out
    assert "DIVERGED rd-01" in out and "0 live tool calls" in out


def test_it_takes_one_of_record_and_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", str(PACK), "--tools", TOOLS, "--record-tools", "a", "--replay-tools", "b"]
    assert main(args) == 2
    assert "not both" in capsys.readouterr().err
