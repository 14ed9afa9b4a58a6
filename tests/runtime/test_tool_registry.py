"""The host tool registry (runtime.tools) and the one call path (Walk.call_tool): a
missing dependency degrades one tool, declared schemas are checked on every call, a
side-effecting tool gets an idempotency key that survives a kill."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    BadSpec,
    HostFailed,
    MemoryStore,
    Registry,
    RunOptions,
    load_pack,
    load_tools,
    open_backend,
    resume_run,
    run_pack,
    tool,
)
from runtime.tools import Divergence, ToolDef, idempotency_key, tool_def
from runtime.walker import Walk, _new_walk, _replay
from tests.support.runtime_packs import pf, write_pack

REGISTRY = '''
from runtime import tool

CALLS = []

@tool(
    description="Add two numbers.",
    args={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
          "required": ["a", "b"], "additionalProperties": False},
    result={"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]},
)
def add(a, b):
    CALLS.append(("add", a, b))
    return {"sum": a + b}

@tool(description="Fit a curve.", requires=("numpy_not_installed_xyz",))
def fit(points):
    import numpy_not_installed_xyz  # never reached: the registry knows it is missing
    return {}

def shout(text):
    """Upper-case a text."""
    return {"loud": text.upper()}

registry = {"add": add, "fit": fit, "shout": shout}
'''


class ProcessDied(BaseException):
    """The process dies here: nothing in the runtime catches it, as nothing survives a SIGKILL."""


@pytest.fixture
def registry_file(tmp_path: Path) -> Path:
    path = tmp_path / "host_tools.py"
    path.write_text(REGISTRY)
    return path


def one_tool_pack(root: Path, tool_name: str, args: dict[str, str], writes: list[str]) -> Path:
    return write_pack(
        root,
        manifest={"tools": [tool_name]},
        nodes={
            "call": {
                "kind": "tool",
                "tool": tool_name,
                "reads": sorted({p.split(".")[0] + "." + p.split(".")[1] for p in args.values()}),
                "args": args,
                "writes": writes,
            },
            "done": {"kind": "end"},
            "failed": {"kind": "end"},
        },
        edges=[{"from": "call", "to": "done"}, {"from": "call", "on_fail": "failed"}],
        script={"nodes": {}},
    )


def run_one(root: Path, tools: Any, input: dict[str, Any], **kw: Any) -> Any:
    pack = load_pack(root, tools=set(tools))
    return run_pack(pack, input, backend=open_backend(pack.model or "", base_dir=root), tools=tools, **kw)


def test_it_loads_a_tool_with_a_missing_dependency_as_unavailable(registry_file: Path) -> None:
    tools = load_tools(f"{registry_file}:registry")
    assert tools is not None
    assert tools["fit"].state == "unavailable: install numpy_not_installed_xyz"
    assert not tools["fit"].available
    assert tools["add"].state == "available"
    assert [t["name"] for t in tools.catalogue()] == ["add", "fit", "shout"]
    assert "numpy_not_installed_xyz" not in sys.modules


def test_it_fails_the_node_of_an_unavailable_tool_and_runs_the_rest(registry_file: Path, tmp_path: Path) -> None:
    tools = load_tools(f"{registry_file}:registry")
    assert tools is not None
    fit = run_one(one_tool_pack(tmp_path / "fit", "fit", {"points": "input.points"}, ["c"]), tools, {"points": [1]})
    assert fit.trace.end_node == "failed"
    assert fit.trace.steps[0].reason == "tool 'fit' is unavailable: install numpy_not_installed_xyz"
    add = run_one(
        one_tool_pack(tmp_path / "add", "add", {"a": "input.a", "b": "input.b"}, ["sum"]), tools, {"a": 1, "b": 2}
    )
    assert add.status == "done" and add.output == {"sum": 3}


def test_it_refuses_arguments_that_break_the_declared_schema(registry_file: Path, tmp_path: Path) -> None:
    tools = load_tools(f"{registry_file}:registry")
    assert tools is not None
    root = one_tool_pack(tmp_path / "p", "add", {"a": "input.a", "b": "input.b"}, ["sum"])
    result = run_one(root, tools, {"a": "one", "b": 2})
    assert result.trace.end_node == "failed"
    assert result.trace.steps[0].reason == "tool 'add' was given bad arguments: a must be of type number"
    assert result.trace.tool_calls == []


def test_it_refuses_a_result_that_breaks_the_declared_schema(tmp_path: Path) -> None:
    @tool(result={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    def count(text: str) -> dict[str, Any]:
        return {"n": "many"}

    result = run_one(
        one_tool_pack(tmp_path / "p", "count", {"text": "input.text"}, ["n"]), {"count": count}, {"text": "x"}
    )
    assert result.trace.end_node == "failed"
    assert result.trace.steps[0].reason == "tool 'count' returned a bad result: n must be of type integer"


def test_it_asks_the_tools_own_check_after_the_schema(tmp_path: Path) -> None:
    calls: list[float] = []

    @tool(check=lambda args: "the amount must be positive" if args["amount"] <= 0 else None)
    def pay(amount: float) -> dict[str, Any]:
        calls.append(amount)
        return {"paid": amount}

    root = one_tool_pack(tmp_path / "p", "pay", {"amount": "input.amount"}, ["paid"])
    refused = run_one(root, {"pay": pay}, {"amount": -3})
    assert refused.trace.steps[0].reason == "tool 'pay' refused the arguments: the amount must be positive"
    assert run_one(root, {"pay": pay}, {"amount": 3}).output == {"paid": 3}
    assert calls == [3]


def test_it_passes_an_idempotency_key_only_to_side_effecting_tools(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    @tool(side_effects=True)
    def charge(amount: float, *, idempotency_key: str) -> dict[str, Any]:
        seen["charge"] = idempotency_key
        return {"charged": amount}

    def peek(amount: float, **kwargs: Any) -> dict[str, Any]:
        seen["peek"] = kwargs
        return {"charged": amount}

    root = one_tool_pack(tmp_path / "p", "charge", {"amount": "input.amount"}, ["charged"])
    result = run_one(root, {"charge": charge}, {"amount": 5}, run_id="run1")
    assert seen["charge"] == "run1:call:1" == result.trace.tool_calls[0].key
    peeking = one_tool_pack(tmp_path / "q", "peek", {"amount": "input.amount"}, ["charged"])
    assert run_one(peeking, {"peek": peek}, {"amount": 5}).status == "done"
    assert seen["peek"] == {}


def test_it_gives_the_call_re_executed_after_a_kill_the_same_key(tmp_path: Path) -> None:
    keys: list[str] = []

    @tool(side_effects=True)
    def charge(amount: float, *, idempotency_key: str) -> dict[str, Any]:
        keys.append(idempotency_key)
        if len(keys) == 1:
            raise ProcessDied()  # the process dies after the side effect, before its journal write
        return {"charged": amount}

    root = one_tool_pack(tmp_path / "p", "charge", {"amount": "input.amount"}, ["charged"])
    pack = load_pack(root, tools={"charge"})
    store = MemoryStore()
    backend = open_backend(pack.model or "", base_dir=root)
    with pytest.raises(ProcessDied):
        run_pack(pack, {"amount": 5}, backend=backend, tools={"charge": charge}, store=store, run_id="r9")
    result = resume_run(pack, "r9", backend=backend, store=store, tools={"charge": charge})
    assert result.status == "done"
    assert keys == ["r9:call:1", "r9:call:1"]


def test_it_keys_each_visit_of_a_node_apart() -> None:
    assert idempotency_key("r", "refund", 1) == "r:refund:1"
    assert idempotency_key("r", "refund", 2) == "r:refund:2"
    assert idempotency_key("r", "pick", 1, call=3) == "r:pick:1:3"


def test_it_reads_an_undeclared_function_from_its_signature() -> None:
    def ship(order_id: str, *, carrier: str = "post") -> dict[str, Any]:
        """Ship an order."""
        return {}

    found = tool_def("ship", ship)
    assert (found.description, found.side_effects, found.declared) == ("Ship an order.", False, False)
    assert found.args == {"type": "object", "properties": {"order_id": {}, "carrier": {}}, "required": ["order_id"]}
    assert found.result == {"type": "object"}


def test_it_refuses_a_malformed_declaration_naming_the_tool(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(
        "def f():\n    return {}\nf.__packforge_tool__ = {'args': {'type': 'object'}, 'colour': 'red'}\nreg = {'f': f}\n"
    )
    with pytest.raises(BadSpec, match=r"tool 'f': __packforge_tool__ must be a dict with keys among"):
        load_tools(f"{tmp_path / 'bad.py'}:reg")


def test_it_wraps_plain_functions_in_a_registry() -> None:
    def echo(x: int) -> dict[str, Any]:
        return {"x": x}

    registry = Registry.of({"echo": echo})
    assert isinstance(registry["echo"], ToolDef)
    assert registry["echo"](x=2) == {"x": 2}
    assert Registry.of(registry) is registry


def test_it_loads_a_registry_without_importing_a_missing_dependency(registry_file: Path) -> None:
    code = (
        "import sys\nfrom runtime import load_tools\n"
        f"tools = load_tools({str(registry_file) + ':registry'!r})\n"
        "assert 'numpy_not_installed_xyz' not in sys.modules\n"
        "print(tools['fit'].state)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "unavailable: install numpy_not_installed_xyz"


def test_it_lists_the_catalogue_with_each_tools_state(registry_file: Path) -> None:
    done = pf("tools", "list", "--tools", f"{registry_file}:registry")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["tool", "state", "effects", "description"]
    assert "unavailable: install numpy_not_installed_xyz" in next(line for line in lines if line.startswith("fit "))
    assert "    args: a: number, b: number" in lines
    assert lines[-1] == f"3 tools in {registry_file}:registry: 2 available, 1 unavailable"


def test_it_lists_the_catalogue_as_json(registry_file: Path) -> None:
    done = pf("tools", "list", "--tools", f"{registry_file}:registry", "--json")
    assert done.returncode == 0, done.stderr
    tools = {t["name"]: t for t in json.loads(done.stdout)["tools"]}
    assert tools["fit"]["state"] == "unavailable: install numpy_not_installed_xyz"
    assert tools["add"]["args"]["required"] == ["a", "b"]
    assert (tools["shout"]["declared"], tools["shout"]["side_effects"]) == (False, False)


def test_it_asks_for_a_registry_to_list() -> None:
    done = pf("tools", "list", env={"PACKFORGE_TOOLS": ""})
    assert done.returncode == 2
    assert "--tools MODULE:REGISTRY" in done.stderr


class Tape:
    """A stand-in for runtime.recordings.ToolTape: the hook contract Walk.call_tool uses."""

    def __init__(self, mode: str, answers: dict[str, Any] | None = None) -> None:
        self.mode = mode
        self.answers = answers or {}
        self.recorded: list[tuple[Any, ...]] = []

    def lookup(self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any]) -> Any:
        if tool not in self.answers:
            return Divergence(f"no recorded call of {tool} at {index}")
        return self.answers[tool]

    def record(self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], result: Any) -> None:
        self.recorded.append((case_id, node, index, tool, args, result))

    def record_failure(
        self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], kind: str, reason: str
    ) -> None:
        self.recorded.append((case_id, node, index, tool, args, kind, reason))


def test_it_answers_from_a_replaying_tape_without_calling_the_tool(tmp_path: Path) -> None:
    calls: list[float] = []

    @tool(side_effects=True)
    def pay(amount: float, *, idempotency_key: str) -> dict[str, Any]:
        calls.append(amount)
        return {"paid": amount}

    root = one_tool_pack(tmp_path / "p", "pay", {"amount": "input.amount"}, ["paid"])
    replayed = run_one(root, {"pay": pay}, {"amount": 3}, options=RunOptions(tape=Tape("replay", {"pay": {"paid": 9}})))
    assert replayed.output == {"paid": 9} and calls == []
    assert replayed.trace.tool_calls[0].replayed
    diverged = run_one(root, {"pay": pay}, {"amount": 3}, options=RunOptions(tape=Tape("replay")))
    assert diverged.trace.end_node == "failed" and calls == []
    assert diverged.trace.steps[0].reason == "tool 'pay' diverged from the recording: no recorded call of pay at 0"


def test_it_records_each_live_call_on_a_recording_tape(tmp_path: Path) -> None:
    def double(n: int) -> dict[str, Any]:
        return {"twice": 2 * n}

    tape = Tape("record")
    root = one_tool_pack(tmp_path / "p", "double", {"n": "input.n"}, ["twice"])
    run_one(root, {"double": double}, {"n": 4}, options=RunOptions(tape=tape), case_id="c1")
    assert tape.recorded == [("c1", "call", 0, "double", {"n": 4}, {"twice": 8})]


def test_it_keys_several_calls_in_one_visit_apart_and_replays_them_on_resume(tmp_path: Path) -> None:
    keys: list[str] = []

    @tool(side_effects=True)
    def send(to: str, *, idempotency_key: str) -> dict[str, Any]:
        keys.append(idempotency_key)
        return {"sent": to}

    root = one_tool_pack(tmp_path / "p", "send", {"to": "input.to"}, ["sent"])
    pack = load_pack(root, tools={"send"})
    store = MemoryStore()
    store.begin("r", pack=pack.name, digest=pack.digest, input={}, case_id=None)
    node = pack.nodes["call"]

    def walk() -> Walk:
        fence, _, journal = store.take_over("r")
        w = _new_walk(
            pack,
            open_backend(pack.model or "", base_dir=root),
            {"send": send},
            store,
            "r",
            fence,
            {},
            None,
            None,
            None,
            None,
        )
        _replay(w, journal)
        w.step = 1
        return w

    first = walk()
    assert [first.call_tool(node, "send", {"to": to}).key for to in ("a", "b")] == ["r:call:1", "r:call:1:2"]
    again = first.call_tool(node, "send", {"to": "a"})  # the same call in the same step: replayed
    assert (again.replayed, again.key, keys) == (True, "r:call:1", ["r:call:1", "r:call:1:2"])
    resumed = walk()  # a new process, from the journal
    assert [resumed.call_tool(node, "send", {"to": to}).replayed for to in ("a", "b")] == [True, True]
    assert resumed.call_tool(node, "send", {"to": "c"}).key == "r:call:1:3"
    assert keys == ["r:call:1", "r:call:1:2", "r:call:1:3"]


def test_it_stops_the_run_when_the_host_fails_around_a_call_instead_of_failing_the_node(tmp_path: Path) -> None:
    def flaky_host(n: int) -> dict[str, Any]:
        raise HostFailed("the host's database is locked")

    root = one_tool_pack(tmp_path / "p", "double", {"n": "input.n"}, ["twice"])
    store = MemoryStore()
    with pytest.raises(HostFailed):
        run_one(root, {"double": flaky_host}, {"n": 4}, store=store, run_id="r1")
    _, record, journal = store.take_over("r1")
    assert record.status == "running" and [e.kind for e in journal if e.node == "call"] == []  # nothing journaled
    pack = load_pack(root, tools={"double"})
    resumed = resume_run(
        pack,
        "r1",
        backend=open_backend(pack.model or "", base_dir=root),
        tools={"double": lambda n: {"twice": 2 * n}},
        store=store,
    )
    assert resumed.output == {"twice": 8}
