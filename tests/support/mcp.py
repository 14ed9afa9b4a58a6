"""Driving the MCP SDK's async clients from a synchronous test: `run_async(main)` runs
`main()` under anyio in a thread of its own, so a test never meets an event loop another
test (or a browser driver) left set on the main thread ("Already running asyncio in this
thread")."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio


def run_async(main: Callable[[], Awaitable[Any]]) -> Any:
    """`main()`'s result, or its exception raised here."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = anyio.run(main)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="mcp-client")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
