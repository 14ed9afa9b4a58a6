"""One test per invariant in DESIGN.md. docs/invariants.md records how each was shown to
fail when its invariant was broken on purpose."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from runtime import PackInvalid, load_pack, open_backend, resume_run, run_pack
from runtime.pack.model import Pack
from tests.support.runtime_packs import ENUM_SCHEMA, Killed, Recorder, Tools, pf, tool_pack, write_pack

PRIORITY = {"type": "object", "required": ["priority"], "properties": {"priority": {"enum": ["p1", "p2", "p3"]}}}


def noisy_pack(tmp_path: Path, error: float = 0.5) -> tuple[Pack, Any]:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "priority": {
                "kind": "generate",
                "reads": ["category"],
                "writes": ["priority"],
                "assert": "priority != 'p3' or category == 'other'",
            },
            "done": {"kind": "end"},
            "failed": {"kind": "end"},
        },
        edges=[
            {"from": "classify", "to": "priority"},
            {"from": "classify", "on_fail": "failed"},
            {"from": "priority", "to": "done"},
            {"from": "priority", "on_fail": "failed"},
        ],
        grammars={"classify": ENUM_SCHEMA, "priority": PRIORITY},
        script={"nodes": {"classify": {"category": "billing"}, "priority": {"priority": "p1"}}},
    )
    pack = load_pack(root)
    return pack, open_backend(f"sim:error={error},seed=11", base_dir=pack.root, default=pack.model)


def test_invariant_1_nothing_unverified_is_committed(tmp_path: Path) -> None:
    pack, backend = noisy_pack(tmp_path)
    checked = rejected = 0
    for k in range(60):
        result = run_pack(pack, {"ticket": "t"}, backend=backend, run_id=f"r{k}")
        rejected += sum(1 for a in result.trace.attempts if not a.ok)
        state: dict[str, Any] = {"input": {"ticket": "t"}}
        for step in result.trace.commits():  # re-check every commit against the state it was made on
            node = pack.nodes[step.node]
            assert node.validator is not None
            assert not list(node.validator.iter_errors(step.writes)), step
            state.update(step.writes)
            if node.check is not None:
                assert node.check.truthy(state), step
            checked += 1
    assert checked > 60 and rejected > 20


def test_invariant_2_a_rejected_generation_never_reaches_the_model_again(tmp_path: Path) -> None:
    pack, backend = noisy_pack(tmp_path, error=0.6)
    recorder = Recorder(backend)
    rejections = 0
    for k in range(40):
        before = len(recorder.calls)
        result = run_pack(pack, {"ticket": "t"}, backend=recorder, run_id=f"r{k}")
        calls = recorder.calls[before:]
        for a in result.trace.attempts:
            if a.ok:
                continue
            rejections += 1
            later = calls[calls.index(next(c for c in calls if c.request_id == a.request_id)) + 1 :]
            for call in later:
                assert all(a.text not in m["content"] for m in call.messages), (a.text, call.messages)
    assert rejections > 20
    # ... and never logged above DEBUG: tests/runtime/test_logs.py::test_it_keeps_rejected_text_out_of_logs_above_debug


def test_invariant_3_the_model_never_chooses_the_next_node(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "decide": {"kind": "generate", "reads": [], "writes": ["verdict", "next", "goto"]},
            "safe": {"kind": "end"},
            "admin": {"kind": "end"},
        },
        edges=[{"from": "decide", "to": "admin", "when": "verdict == 'escalate'"}, {"from": "decide", "to": "safe"}],
        script={"nodes": {"decide": {"verdict": "ok", "next": "admin", "goto": "admin"}}},
    )
    pack = load_pack(root)
    result = run_pack(pack, {}, backend=open_backend(pack.model or "", base_dir=root))
    assert result.trace.path == ["decide", "safe"]


class Dying:
    """A store that dies (raises Killed) right after its `kill_at`-th journal write."""

    def __init__(self, store: Any, kill_at: int) -> None:
        self.store, self.kill_at, self.writes = store, kill_at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def append(self, *args: Any) -> None:
        self.store.append(*args)
        self.writes += 1
        if self.writes == self.kill_at:
            raise Killed()


def test_invariant_4_a_returned_tool_call_is_never_executed_again(tmp_path: Path, sqlite_store: Any) -> None:
    root = tool_pack(tmp_path)
    pack = load_pack(root, tools={"lookup", "refund"})
    for kill_at in range(1, 8):  # die after each journal write in turn, then resume
        tools = Tools()
        store = sqlite_store(f"runs{kill_at}.sqlite")

        backend = open_backend(pack.model or "", base_dir=root)
        try:
            run_pack(
                pack,
                {"order": "A1"},
                backend=backend,
                tools=tools.registry(),
                store=Dying(store, kill_at),  # type: ignore[arg-type]
                run_id="r",
            )
        except Killed:
            resume_run(pack, "r", backend=backend, store=store, tools=tools.registry())
        assert store.get("r").status == "done", kill_at
        assert sorted(name for name, _ in tools.calls) == ["lookup", "refund"], kill_at


def test_invariant_5_a_pack_reaches_only_registered_tools(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["os.system"]},
        nodes={"t": {"kind": "tool", "tool": "os.system", "writes": ["r"]}, "done": {"kind": "end"}},
        edges=[{"from": "t", "to": "done"}],
        script={"nodes": {}},
    )
    with pytest.raises(PackInvalid, match=r"tool 'os\.system' is not registered by the host"):
        load_pack(root, tools={"lookup"})
    # A host that skips the load-time check still cannot reach anything by name.
    pack = load_pack(root)
    result = run_pack(pack, {}, backend=open_backend(pack.model or "", base_dir=root), tools={"lookup": print})
    assert result.status == "failed"
    assert "tool 'os.system' is not registered" in (result.trace.error or "")


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return h.hexdigest()


def test_invariant_6_no_automated_process_edits_the_evalset(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": {"category": "billing"}}},
        cases=[{"id": "a", "input": {"ticket": "x"}, "expected": {"category": "technical"}}],
    )
    before = tree_digest(root)
    assert pf("validate", str(root)).returncode == 0
    assert pf("eval", str(root), "--write-baseline", str(tmp_path / "b.json")).returncode == 1
    assert pf("eval", str(root), "--baseline", str(tmp_path / "b.json"), "--json").returncode == 0  # gate held
    assert pf("run", str(root), "--input", '{"ticket": "x"}', "--db", str(tmp_path / "r.sqlite")).returncode == 0
    assert tree_digest(root) == before
