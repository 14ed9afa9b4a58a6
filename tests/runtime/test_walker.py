"""The walker: verify before commit, the ladder, agreement, tools, human pauses, resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import TRACE_VERSION, MemoryStore, SQLiteStore, Trace, load_pack, resume_run, run_pack
from runtime.errors import FencedOut, RunStateError
from runtime.walker import RunOptions
from tests.support.runtime_packs import ENUM_SCHEMA, GEN, Killed, Tools, backend_for, tool_pack, write_pack


def one_node(tmp_path: Path, answers: Any, **node: Any) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={"classify": {**GEN, **node}, "done": {"kind": "end"}, "fallback": {"kind": "end"}},
        edges=[{"from": "classify", "to": "done"}, {"from": "classify", "on_fail": "fallback"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": answers}},
    )


def test_it_commits_a_verified_answer_with_provenance(triage: Path) -> None:
    result = run_pack(load_pack(triage), {"ticket": "charged twice"}, backend=backend_for(triage))
    assert result.status == "done"
    assert result.output == {"category": "billing", "priority": "p1"}
    commits = [(s.node, s.step, s.attempt, s.writes) for s in result.trace.commits()]
    assert commits == [("classify", 1, 1, {"category": "billing"}), ("priority", 2, 1, {"priority": "p1"})]
    assert result.trace.path == ["classify", "priority", "done"]
    assert result.tier == "auto"


def test_it_routes_by_when_on_committed_state(triage: Path) -> None:
    script = triage / "fakes" / "scripted.json"
    script.write_text('{"nodes": {"classify": {"category": "other"}}}')
    result = run_pack(load_pack(triage), {"ticket": "hello"}, backend=backend_for(triage))
    assert result.trace.path == ["classify", "other"]


def test_it_resamples_then_gives_feedback_then_takes_on_fail(tmp_path: Path) -> None:
    root = one_node(tmp_path, [{"category": "refund"}, "not json", {"category": "x"}, {"category": "y"}])
    backend = backend_for(root)
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend)
    stages = [(a.stage, a.category) for a in result.trace.attempts]
    assert stages == [("sample", "schema"), ("resample", "parse"), ("resample", "schema"), ("feedback", "schema")]
    assert result.trace.path == ["classify", "fallback"]
    assert result.trace.steps[0].edge is not None and result.trace.steps[0].edge.kind == "on_fail"
    assert result.tier == "failed"
    assert "category" not in result.state
    feedback = backend.calls[-1].messages[-1]["content"]
    assert 'must be one of: "billing", "technical", "other"' in feedback


def test_it_fails_the_run_when_there_is_no_on_fail_edge(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"classify": GEN, "done": {"kind": "end"}},
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": {"category": "nope"}}},
    )
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.status == "failed"
    assert result.trace.error is not None and result.trace.error.startswith("classify: schema:")


def test_it_honours_a_per_node_retry_override(tmp_path: Path) -> None:
    root = one_node(tmp_path, [{"category": "bad"}, {"category": "billing"}], retry={"resamples": 0, "feedback": 0})
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert len(result.trace.attempts) == 1
    assert result.trace.path == ["classify", "fallback"]


def test_it_treats_a_truncated_answer_as_retryable(tmp_path: Path) -> None:
    class Cut:
        spec = "cut"

        def __init__(self) -> None:
            self.n = 0

        def complete(self, call: Any) -> Any:
            from runtime.backends.base import ModelReply

            self.n += 1
            if self.n == 1:
                return ModelReply(text='{"category": "bill', finish_reason="length")
            return ModelReply(text='{"category": "billing"}')

        def close(self) -> None:
            pass

    root = one_node(tmp_path, {"category": "billing"})
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=Cut())
    assert [a.category for a in result.trace.attempts] == ["truncated", None]
    assert result.output == {"category": "billing"}


def test_it_keeps_two_stage_reasoning_out_of_state_and_later_prompts(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "judge": {**GEN, "two_stage": True},
            "next": {"kind": "generate", "reads": ["category"], "writes": ["x"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "judge", "to": "next"}, {"from": "next", "to": "done"}],
        grammars={"judge": ENUM_SCHEMA},
        script={"nodes": {"judge": {"category": "billing"}, "next": {"x": 1}}, "reasoning": "SECRET-THOUGHT"},
    )
    backend = backend_for(root)
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend)
    purposes = [(c.node, c.purpose, c.schema is None) for c in backend.calls]
    assert purposes == [("judge", "reasoning", True), ("judge", "answer", False), ("next", "answer", False)]
    assert "SECRET-THOUGHT" in backend.calls[1].messages[-2]["content"]
    assert all("SECRET-THOUGHT" not in m["content"] for m in backend.calls[2].messages)
    assert "SECRET-THOUGHT" not in str(result.state)


def agreement_pack(tmp_path: Path, draws: list[Any]) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={"approve": {**GEN, "samples": 3, "agree": 2}, "done": {"kind": "end"}, "human": {"kind": "end"}},
        edges=[{"from": "approve", "to": "done"}, {"from": "approve", "on_unsure": "human"}],
        grammars={"approve": ENUM_SCHEMA},
        script={"nodes": {"approve": draws}},
    )


def test_it_commits_when_enough_draws_agree(tmp_path: Path) -> None:
    root = agreement_pack(tmp_path, [{"category": "billing"}, {"category": "other"}, {"category": "billing"}])
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.output == {"category": "billing"}
    assert result.trace.steps[0].attempt == 1
    assert result.tier == "auto"


def test_it_routes_disagreement_to_on_unsure_and_commits_nothing(tmp_path: Path) -> None:
    root = agreement_pack(tmp_path, [{"category": "billing"}, {"category": "other"}, {"category": "technical"}])
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.trace.path == ["approve", "human"]
    assert result.state == {}
    assert result.tier == "escalated"
    assert "draws disagreed" in result.trace.steps[0].reason


def test_it_stops_a_runaway_loop_at_the_step_bound(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"max_steps": 7},
        nodes={"a": {"kind": "generate", "reads": [], "writes": ["n"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "done", "when": "n > 100"}, {"from": "a", "to": "a"}],
        script={"nodes": {"a": {"n": 1}}},
    )
    result = run_pack(load_pack(root), {}, backend=backend_for(root))
    assert result.status == "failed"
    assert "step bound reached (7 steps)" in (result.trace.error or "")
    assert len(result.trace.steps) == 7


# -- tools -----------------------------------------------------------------------------


def test_it_calls_tools_with_args_from_state(tmp_path: Path) -> None:
    root = tool_pack(tmp_path)
    tools = Tools()
    result = run_pack(
        load_pack(root, tools={"lookup", "refund"}), {"order": "A1"}, backend=backend_for(root), tools=tools.registry()
    )
    assert tools.calls == [("lookup", {"order_id": "A1"}), ("refund", {"order_id": "A1", "amount": 40.0})]
    assert result.output["refund_id"] == "R-A1"
    assert [t.tool for t in result.trace.tool_calls] == ["lookup", "refund"]


def test_it_fails_the_node_when_a_tool_raises(tmp_path: Path) -> None:
    root = tool_pack(tmp_path)

    def boom(**kw: Any) -> Any:
        raise ConnectionError("db down")

    result = run_pack(
        load_pack(root), {"order": "A1"}, backend=backend_for(root), tools={"lookup": boom, "refund": boom}
    )
    assert result.status == "failed"
    assert "tool 'lookup' raised ConnectionError: db down" in (result.trace.error or "")


class KillAfterToolRecorded:
    """Fault injection at the store seam: die right after a tool result is journaled,
    before the step that commits it (the window invariant 4 is about)."""

    def __init__(self, inner: SQLiteStore, tool_node: str) -> None:
        self.inner = inner
        self.tool_node = tool_node

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        self.inner.append(run_id, fence, kind, node, step, payload)
        if kind == "tool" and node == self.tool_node:
            raise Killed()


def test_it_replays_a_tool_result_journaled_before_a_crash(tmp_path: Path, sqlite_store: Any) -> None:
    root = tool_pack(tmp_path)
    pack, tools = load_pack(root), Tools()
    store = sqlite_store()
    with pytest.raises(Killed):
        run_pack(
            pack,
            {"order": "A1"},
            backend=backend_for(root),
            tools=tools.registry(),
            store=KillAfterToolRecorded(store, "refund"),
            run_id="r1",
        )  # type: ignore[arg-type]
    result = resume_run(pack, "r1", backend=backend_for(root), store=store, tools=tools.registry())
    assert result.status == "done"
    assert [name for name, _ in tools.calls] == ["lookup", "refund"]
    assert result.output["refund_id"] == "R-A1"
    assert [t.replayed for t in result.trace.tool_calls] == [True, True]


def test_it_resumes_a_killed_run_without_repeating_model_calls(tmp_path: Path, triage: Path, sqlite_store: Any) -> None:
    pack = load_pack(triage)
    store = sqlite_store()

    def die_after_classify(step: Any) -> None:
        if step.node == "classify":
            raise Killed()

    first = backend_for(triage)
    with pytest.raises(Killed):
        run_pack(
            pack,
            {"ticket": "x"},
            backend=first,
            store=store,
            run_id="r1",
            options=RunOptions(on_step=die_after_classify),
        )
    assert store.get("r1").status == "running"
    second = backend_for(triage)
    result = resume_run(pack, "r1", backend=second, store=store)
    assert result.status == "done"
    assert [c.node for c in first.calls] == ["classify"]
    assert [c.node for c in second.calls] == ["priority"]
    assert result.trace.path == ["classify", "priority", "done"]
    assert result.trace.steps[0].replayed and not result.trace.steps[1].replayed


def test_it_refuses_to_resume_a_finished_run(tmp_path: Path, triage: Path, sqlite_store: Any) -> None:
    pack, store = load_pack(triage), sqlite_store()
    run_pack(pack, {"ticket": "x"}, backend=backend_for(triage), store=store, run_id="r1")
    with pytest.raises(RunStateError, match="already finished"):
        resume_run(pack, "r1", backend=backend_for(triage), store=store)


# -- human nodes -----------------------------------------------------------------------


def human_pack(tmp_path: Path) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={
            "classify": GEN,
            "review": {"kind": "human", "reads": ["category"], "writes": ["approved"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "review"}, {"from": "review", "to": "done"}],
        grammars={
            "classify": ENUM_SCHEMA,
            "review": {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}},
        },
        script={"nodes": {"classify": {"category": "billing"}}},
    )


def test_it_waits_at_a_human_node_and_resumes_with_an_answer(tmp_path: Path, sqlite_store: Any) -> None:
    root = human_pack(tmp_path)
    pack, store = load_pack(root), sqlite_store()
    waiting = run_pack(pack, {"ticket": "t"}, backend=backend_for(root), store=store, run_id="h1")
    assert (waiting.status, waiting.waiting_at, waiting.tier) == ("waiting", "review", "escalated")
    assert store.get("h1").status == "waiting"
    backend = backend_for(root)
    done = resume_run(pack, "h1", backend=backend, store=store, answers={"review": {"approved": True}})
    assert done.status == "done"
    assert done.output == {"category": "billing", "approved": True}
    assert backend.calls == []
    assert done.tier == "escalated"


def test_it_fails_the_human_node_on_an_answer_that_does_not_validate(tmp_path: Path) -> None:
    root = human_pack(tmp_path)
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root), answers={"review": {"ok": 1}})
    assert result.status == "failed"
    assert "human answer rejected" in (result.trace.error or "")


# -- fencing ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_it_refuses_a_write_from_a_fenced_out_process(tmp_path: Path, kind: str, sqlite_store: Any) -> None:
    store = MemoryStore() if kind == "memory" else sqlite_store()
    old = store.begin("r1", pack="p", digest="d", input={}, case_id=None)
    new, _, _ = store.take_over("r1")
    assert new == old + 1
    with pytest.raises(FencedOut):
        store.append("r1", old, "step", "a", 1, {})
    with pytest.raises(FencedOut):
        store.set_status("r1", old, "done")
    store.append("r1", new, "step", "a", 1, {})
    assert store.get("r1").status == "running"


def test_a_stalled_walker_cannot_overwrite_a_run_taken_over(tmp_path: Path, triage: Path, sqlite_store: Any) -> None:
    pack = load_pack(triage)
    store = sqlite_store()
    takeover: dict[str, Any] = {}

    def another_process_takes_over(step: Any) -> None:
        if step.node == "classify":
            takeover["result"] = resume_run(pack, "r1", backend=backend_for(triage), store=store)

    with pytest.raises(FencedOut):
        run_pack(
            pack,
            {"ticket": "x"},
            backend=backend_for(triage),
            store=store,
            run_id="r1",
            options=RunOptions(on_step=another_process_takes_over),
        )
    assert takeover["result"].status == "done"
    assert store.get("r1").status == "done"


def test_it_writes_the_trace_version_and_reads_the_trace_back(triage: Path) -> None:
    trace = run_pack(load_pack(triage), {"ticket": "charged twice"}, backend=backend_for(triage)).trace
    data = trace.to_dict()
    assert data["version"] == TRACE_VERSION
    again = Trace.from_dict(data)
    assert again == trace and again.to_dict() == data


def test_it_refuses_a_trace_from_a_newer_runtime() -> None:
    with pytest.raises(ValueError, match="newer"):
        Trace.from_dict({"version": TRACE_VERSION + 1, "run_id": "r", "pack": "p"})
