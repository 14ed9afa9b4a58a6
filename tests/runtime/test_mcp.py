"""`packforge mcp`: packs (and host tools) as MCP tools over stdio, driven by the SDK's
own client (`mcp.stdio_client` + `mcp.ClientSession`) against a real subprocess; and the
pack's tool as data (runtime.mcp_tools). docs/tools.md, "MCP"."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from runtime import SQLiteStore, load_pack, load_tools
from runtime.mcp_tools import RUN_RESULT_SCHEMA, pack_input_schema, pack_tool, tool_name
from tests.support.mcp import run_async

REPO = Path(__file__).resolve().parents[2]
TRIAGE = REPO / "packs" / "support_triage"
REFUND = REPO / "packs" / "refund_desk"
REFUND_TOOLS = f"{REFUND / 'tools.py'}:registry"
# A ticket the pack's scripted model answers (st-04's); it answers no other input.
TICKET = {"ticket": "When will order ORD-11873 ship? The page still says 'processing'."}


def _session(*args: str, cwd: Path) -> Callable[[Callable[[ClientSession], Awaitable[Any]]], Any]:
    """Run `body(session)` against `packforge mcp ARGS` spawned by the SDK's stdio client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runtime", "mcp", *args],
        cwd=str(cwd),
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )

    def run(body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)

        return run_async(main)

    return run


def test_it_lists_and_calls_a_pack_over_stdio(tmp_path: Path) -> None:
    session = _session("--pack", str(TRIAGE), "--checkpoints", "cp", cwd=tmp_path)

    async def body(s: ClientSession) -> Any:
        return await s.list_tools(), await s.call_tool("support_triage", TICKET)

    listed, called = session(body)
    (tool,) = listed.tools
    assert tool.name == "support_triage"
    assert tool.description.startswith("Triage one customer-support ticket")
    assert tool.input_schema["required"] == ["ticket"]
    assert tool.input_schema["properties"]["ticket"]["type"] == "string"
    assert tool.output_schema == RUN_RESULT_SCHEMA
    assert called.is_error is False
    result = called.structured_content
    assert result["status"] == "done" and result["tier"] == "pack"
    assert result["output"] == {
        "category": "other",
        "order_id": "ORD-11873",
        "amount_usd": None,
        "sentiment": "neutral",
        "priority": "p3",
    }
    assert json.loads(called.content[0].text) == result
    # an ordinary run: checkpointed and traced under --checkpoints
    run_id = result["run_id"]
    store = SQLiteStore(tmp_path / "cp" / "runs.sqlite")
    try:
        assert store.get(run_id).status == "done"
    finally:
        store.close()
    trace = json.loads((tmp_path / "cp" / "traces" / f"{run_id}.json").read_text())
    assert [s["node"] for s in trace["steps"]][:2] == ["classify", "extract"]


def test_it_serves_the_newer_protocol_to_the_sdks_high_level_client(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runtime", "mcp", "--pack", str(TRIAGE)],
        cwd=str(tmp_path),
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )

    async def main() -> tuple[str, Any]:
        async with Client(params) as client:  # mode "auto": discover first, then the handshake
            return client.protocol_version, await client.call_tool("support_triage", TICKET)

    protocol, called = run_async(main)
    assert protocol == "2026-07-28"
    assert called.structured_content["status"] == "done"


def test_it_answers_waiting_with_the_node_a_run_waits_at(tmp_path: Path) -> None:
    case = json.loads((REFUND / "evalset.jsonl").read_text().splitlines()[7])  # rd-08: a person decides
    script = json.loads((REFUND / "fakes" / "scripted.json").read_text())
    model = tmp_path / "unsure.json"
    model.write_text(json.dumps({"inputs": [{"match": case["input"], "answers": script["cases"][case["id"]]}]}))
    session = _session(
        "--pack", str(REFUND), "--tools", REFUND_TOOLS, "--model", f"fake:{model}", "--checkpoints", "cp", cwd=tmp_path
    )

    async def body(s: ClientSession) -> Any:
        return await s.call_tool("refund_desk", case["input"])

    called = session(body)
    result = called.structured_content
    assert called.is_error is False
    assert result["status"] == "waiting" and result["waiting_at"] == "review" and result["output"] is None
    assert result["tier"] == "person"
    store = SQLiteStore(tmp_path / "cp" / "runs.sqlite")
    try:
        assert store.get(result["run_id"]).status == "waiting"  # resumable with packforge run --resume
    finally:
        store.close()


def test_it_exposes_the_registrys_tools_with_expose_tools(tmp_path: Path) -> None:
    session = _session("--pack", str(REFUND), "--tools", REFUND_TOOLS, "--expose-tools", cwd=tmp_path)

    async def body(s: ClientSession) -> Any:
        listed = await s.list_tools()
        found = await s.call_tool("lookup_order", {"order_id": "ORD-10001"})
        bad = await s.call_tool("lookup_order", {"order": "ORD-10001"})
        return listed, found, bad

    listed, found, bad = session(body)
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {"refund_desk", "lookup_order", "issue_refund"}
    registry = load_tools(REFUND_TOOLS)
    assert registry is not None
    assert tools["lookup_order"].input_schema == registry["lookup_order"].args
    assert tools["lookup_order"].output_schema == registry["lookup_order"].result
    assert tools["issue_refund"].description == registry["issue_refund"].description
    assert found.is_error is False and found.structured_content["order"]["item"] == "Ceramic pour-over set"
    assert bad.is_error is True and "lookup_order" in bad.structured_content["error"]


HOST_TOOLS = """
from runtime import tool

@tool(
    description="Stamp a text.",
    args={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    result={"type": "object", "properties": {"text": {"type": "string"}, "key": {"type": "string"}}},
    side_effects=True,
)
def stamp(text, *, idempotency_key):
    return {"text": text, "key": idempotency_key}

@tool(description="Needs a module this host lacks.", requires=("no_such_module_pf14",))
def fancy():
    return {}

registry = {"stamp": stamp, "fancy": fancy}
"""


def test_it_leaves_unavailable_tools_out_and_keys_each_side_effecting_call(tmp_path: Path) -> None:
    (tmp_path / "host.py").write_text(HOST_TOOLS)
    session = _session("--pack", str(TRIAGE), "--tools", "host.py:registry", "--expose-tools", cwd=tmp_path)

    async def body(s: ClientSession) -> Any:
        listed = await s.list_tools()
        return listed, await s.call_tool("stamp", {"text": "a"}), await s.call_tool("stamp", {"text": "a"})

    listed, first, second = session(body)
    assert {t.name for t in listed.tools} == {"support_triage", "stamp"}  # fancy is unavailable
    keys = {first.structured_content["key"], second.structured_content["key"]}
    assert len(keys) == 2 and all(k.startswith("mcp:") for k in keys)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--expose-tools"], "--expose-tools needs --tools"),
        (["--model", "fake:no-such-file.json"], "no-such-file.json"),
    ],
)
def test_it_refuses_bad_usage_at_start_in_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "runtime", "mcp", "--pack", str(TRIAGE), *args],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stdout == ""  # stdout is the protocol's


BLOCK_MCP = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("mcp", "mcp_types"):
            raise ImportError("blocked: " + name)
        return None
sys.meta_path.insert(0, Block())
import pkgutil, importlib, runtime
for mod in pkgutil.walk_packages(runtime.__path__, "runtime."):
    if mod.name != "runtime.__main__":
        importlib.import_module(mod.name)
print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types")))
from runtime.cli import main
sys.exit(main(["mcp", "--pack", "packs/support_triage"]))
"""


def test_it_runs_without_the_sdk_and_says_how_to_install_it() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_MCP], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "LOADED []" in out.stdout  # every runtime module loads without the SDK
    assert out.returncode == 2 and "pip install 'packforge[mcp]'" in out.stderr


# -- the tool as data -----------------------------------------------------------------------


def test_it_types_each_declared_input_from_the_evalset() -> None:
    schema = pack_input_schema(load_pack(REFUND, tools={"lookup_order", "issue_refund"}))
    assert schema["type"] == "object" and schema["required"] == ["message"]
    assert schema["properties"]["message"]["type"] == "string"


def test_it_describes_a_pack_without_a_description_by_its_readme(tmp_path: Path) -> None:
    pack = load_pack(TRIAGE)
    pack.description = ""
    assert pack_tool(pack).description.startswith("Triages one customer-support ticket")
    pack.root = tmp_path  # no README either
    assert pack_tool(pack).description.startswith("Run the pack support_triage.")


@pytest.mark.parametrize(("name", "expected"), [("triage", "triage"), ("my pack/v2", "my_pack_v2"), ("", "pack")])
def test_it_makes_a_valid_tool_name(name: str, expected: str) -> None:
    assert tool_name(name) == expected


# -- the stateless HTTP bridge (what the studio's view hands a request to) ------------------


def test_it_answers_one_http_request_with_the_sdks_transport(tmp_path: Path) -> None:
    from runtime.mcp_server import answer_http, pack_entry

    entry = pack_entry(load_pack(TRIAGE), model=None, checkpoints=tmp_path, tools=None)
    headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]

    def post(message: dict[str, Any]) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, **message}).encode()
        answer = answer_http([entry], name="t", method="POST", path="/mcp", headers=headers, body=body)
        assert answer.status == 200 and ("content-type", "application/json") in answer.headers
        return json.loads(answer.body)

    assert [t["name"] for t in post({"method": "tools/list"})["result"]["tools"]] == ["support_triage"]
    called = post({"method": "tools/call", "params": {"name": "support_triage", "arguments": TICKET}})
    assert called["result"]["structuredContent"]["status"] == "done"
    refused = answer_http([entry], name="t", method="GET", path="/mcp", headers=headers, body=b"")
    assert refused.status == 405  # no server-sent stream to hold open


def test_it_answers_http_from_a_thread_where_an_event_loop_runs(tmp_path: Path) -> None:
    import asyncio
    import threading

    from runtime.mcp_server import answer_http, pack_entry

    entry = pack_entry(load_pack(TRIAGE), model=None, checkpoints=tmp_path, tools=None)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]

    async def inside_a_loop() -> int:  # an async host calling the (blocking) bridge
        return answer_http([entry], name="t", method="POST", path="/mcp", headers=headers, body=body).status

    # In a thread of its own: this test process may already run a loop in its main thread
    # (Playwright's sync API in the browser tests does), and asyncio.run refuses to nest.
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(asyncio.run(inside_a_loop())))
    thread.start()
    thread.join()
    assert got == [200]
