"""Packs (and host tools) served as MCP tools with the official `mcp` SDK: over stdio
(`packforge mcp`) and, for the studio, one stateless streamable-HTTP request at a time
(`answer_http`). The SDK is an optional extra (`pip install packforge[mcp]`): it is
imported inside these functions only, so loading the runtime never loads it
(tests/test_layering.py checks that no module imports it at import time).

A tool call runs in a worker thread (`anyio.to_thread`), so the server keeps answering
pings and cancellations while a pack runs, and a caller's call may use blocking code
(the studio's ORM refuses to run inside an event loop's thread)."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.backends import open_backend
from runtime.checkpoint import SQLiteStore
from runtime.errors import PackforgeError
from runtime.mcp_tools import McpTool, pack_tool, payload_text, run_payload, tool_name
from runtime.pack.model import Pack
from runtime.tools import Registry, ToolDef, args_problem, result_problem
from runtime.walker import RunResult, run_pack

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = [
    "HttpAnswer",
    "McpEntry",
    "McpUnavailable",
    "ToolAnswer",
    "answer_http",
    "build_server",
    "pack_entry",
    "registry_entries",
    "require_sdk",
    "serve_stdio",
]

INSTALL_HINT = "the MCP SDK is not installed: pip install 'packforge[mcp]' (mcp==2.3.0)"


class McpUnavailable(PackforgeError):
    """The `mcp` SDK is not installed."""


@dataclass(frozen=True)
class ToolAnswer:
    """What one tool call answers: `payload` is the structured content (and, as JSON,
    the text); `is_error` marks a call that failed (the client's model sees why)."""

    payload: dict[str, Any]
    is_error: bool = False


@dataclass(frozen=True)
class McpEntry:
    """One MCP tool and the blocking function that answers its calls."""

    tool: McpTool
    call: Callable[[dict[str, Any]], ToolAnswer]


def require_sdk() -> None:
    """Raise McpUnavailable (one line: how to install it) when the SDK is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpUnavailable(INSTALL_HINT) from None


def _run_loop(main: Callable[[], Awaitable[None]]) -> None:
    """anyio.run(main) here, or in a thread of its own when an event loop already runs in
    this thread (an async host, a test harness): a second loop cannot start in it."""
    import anyio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        anyio.run(main)
        return
    failed: list[BaseException] = []

    def target() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=target, name="packforge-mcp")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


# -- packs ------------------------------------------------------------------------------


def _settled_by(result: RunResult, tier0: str) -> str:
    """The tier that settled the run, as the studio's runs API names it: a tier's name,
    or "person" when a person answered or is waited for."""
    if result.status == "waiting" or any(s.provenance for s in result.trace.steps):
        return "person"
    return result.settled_by or tier0


def pack_entry(pack: Pack, *, model: str | None, checkpoints: Path, tools: Registry | None) -> McpEntry:
    """The MCP tool that runs `pack`: each call is an ordinary run (run_pack) with its
    checkpoint in `checkpoints/runs.sqlite` (resumable with `packforge run --db ...
    --resume RUN_ID`) and its trace in `checkpoints/traces/RUN_ID.json`."""
    spec = model or pack.model
    if not spec:
        raise PackforgeError(f"pack {pack.name}: no model; pass --model SPEC or set 'model' in its manifest")
    tier0 = "pack" if model is None or model == pack.model else spec
    open_backend(spec, base_dir=pack.root, default=pack.model).close()  # a bad spec fails at start, not per call
    checkpoints.mkdir(parents=True, exist_ok=True)
    (checkpoints / "traces").mkdir(exist_ok=True)
    db = checkpoints / "runs.sqlite"

    def call(arguments: dict[str, Any]) -> ToolAnswer:
        run_id = f"mcp-{uuid.uuid4().hex[:12]}"
        backend = open_backend(spec, base_dir=pack.root, default=pack.model)
        store = SQLiteStore(db)
        try:
            result = run_pack(pack, dict(arguments), backend=backend, tools=tools, store=store, run_id=run_id)
        except PackforgeError as exc:
            return ToolAnswer(
                run_payload(run_id=run_id, status="failed", output=None, tier="", error=str(exc)), is_error=True
            )
        finally:
            backend.close()
            store.close()
        trace = json.dumps(result.trace.to_dict(), indent=2, default=str)
        (checkpoints / "traces" / f"{run_id}.json").write_text(trace, encoding="utf-8")
        payload = run_payload(
            run_id=result.run_id,
            status=result.status,
            output=result.output,
            tier=_settled_by(result, tier0),
            waiting_at=result.waiting_at,
            error=result.trace.error if result.status in ("failed", "cancelled") else None,
        )
        return ToolAnswer(payload, is_error=result.status in ("failed", "cancelled"))

    return McpEntry(pack_tool(pack), call)


# -- host tools -------------------------------------------------------------------------


def registry_entries(registry: Registry) -> list[McpEntry]:
    """One MCP tool per available tool of the host registry, with its declared
    description and `args` / `result` schemas as input / output schema (a tool whose
    optional dependency is missing is left out). A call is checked as a run's tool call
    is (runtime.tools: the args schema, the tool's own check, then the result schema);
    a side-effecting tool gets a fresh `idempotency_key` per MCP call."""
    return [
        McpEntry(
            McpTool(tool_name(t.name), t.description or f"The host tool {t.name}.", t.args, t.result),
            _tool_call(t),
        )
        for t in registry.values()
        if t.available
    ]


def _tool_call(tool: ToolDef) -> Callable[[dict[str, Any]], ToolAnswer]:
    def call(arguments: dict[str, Any]) -> ToolAnswer:
        problem = args_problem(tool, arguments)
        if problem:
            return ToolAnswer({"error": problem}, is_error=True)
        extra = {"idempotency_key": f"mcp:{uuid.uuid4().hex}"} if tool.side_effects else {}
        try:
            value = tool(**arguments, **extra)
        except Exception as exc:  # the tool's own failure: the caller's model sees it
            return ToolAnswer({"error": f"tool '{tool.name}' raised {type(exc).__name__}: {exc}"}, is_error=True)
        problem = result_problem(tool, value)
        if problem:
            return ToolAnswer({"error": problem}, is_error=True)
        return ToolAnswer(value if isinstance(value, dict) else {"result": value})

    return call


# -- the SDK server ---------------------------------------------------------------------


def build_server(entries: Sequence[McpEntry], *, name: str, version: str = "") -> Server[Any]:
    """An SDK low-level server listing `entries` and answering their calls."""
    require_sdk()
    import anyio.to_thread
    import mcp.types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    by_name: dict[str, McpEntry] = {}
    for entry in entries:
        if entry.tool.name in by_name:
            raise PackforgeError(f"two MCP tools are named {entry.tool.name!r}; serve one of them")
        by_name[entry.tool.name] = entry

    listed = [
        types.Tool(
            name=e.tool.name,
            description=e.tool.description,
            input_schema=e.tool.input_schema,
            output_schema=e.tool.output_schema,
        )
        for e in entries
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        entry = by_name.get(params.name)
        if entry is None:
            answer = ToolAnswer({"error": f"no tool named {params.name!r}"}, is_error=True)
        else:
            answer = await anyio.to_thread.run_sync(entry.call, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(text=payload_text(answer.payload))],
            structured_content=answer.payload,
            is_error=answer.is_error,
        )

    return Server(name, version=version, on_list_tools=list_tools, on_call_tool=call_tool)


def serve_stdio(entries: Sequence[McpEntry], *, name: str = "packforge") -> None:
    """Serve `entries` over stdin/stdout until the client closes the connection."""
    server = build_server(entries, name=name)
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    _run_loop(main)


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def answer_http(
    entries: Sequence[McpEntry],
    *,
    name: str,
    method: str,
    path: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
) -> HttpAnswer:
    """One HTTP request to a stateless streamable-HTTP MCP endpoint serving `entries`,
    answered by the SDK's own transport (JSON responses, no sessions, no server-sent
    stream): the request is handed to its ASGI app in a fresh event loop and the
    response collected. For a WSGI host (the studio under gunicorn); the caller
    authenticates first. Only POST reaches the SDK: a GET (the server-sent stream a
    stateless server does not have) would be held open for ever, so any other method
    answers 405, as the spec has a server without a stream answer."""
    if method.upper() != "POST":
        return HttpAnswer(405, [("allow", "POST"), ("content-type", "application/json")], b'{"detail": "POST only"}')
    server = build_server(entries, name=name)
    import anyio
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 80),
    }
    status: list[int] = []
    out_headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()  # the client stays connected until the answer is sent
        raise AssertionError("unreachable")

    async def send(message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(int(message["status"]))
            out_headers.extend((k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    async def main() -> None:
        manager = StreamableHTTPSessionManager(
            app=server,
            json_response=True,
            stateless=True,
            # The host (Django's ALLOWED_HOSTS) checks Host; the bearer token is the guard.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    _run_loop(main)
    return HttpAnswer(status[0] if status else 500, out_headers, b"".join(chunks))
