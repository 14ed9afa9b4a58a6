"""The `packforge` commands about the host: endpoints check, mcp (serve packs over
stdio), tools list, pull (a pack version from a studio)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from runtime.cli_common import EXIT_FAILED, EXIT_OK, UsageError
from runtime.pack import load_pack
from runtime.tools import load_tools


def cmd_endpoints(args: argparse.Namespace) -> int:
    from runtime.endpoints import check_endpoint

    result = check_endpoint(args.spec)
    print(json.dumps(result.to_dict(), indent=2) if args.json else "\n".join(result.lines()))
    return EXIT_OK if result.ok else EXIT_FAILED


def cmd_mcp(args: argparse.Namespace) -> int:
    from runtime.mcp_server import pack_entry, registry_entries, require_sdk, serve_stdio

    require_sdk()
    if args.expose_tools and not args.tools:
        raise UsageError("--expose-tools needs --tools MODULE:REGISTRY")
    tools = load_tools(args.tools)
    checkpoints = Path(args.checkpoints)
    entries = [
        pack_entry(load_pack(d, tools=set(tools or {})), model=args.model, checkpoints=checkpoints, tools=tools)
        for d in args.pack
    ]
    if args.expose_tools and tools:
        entries += registry_entries(tools)
    serve_stdio(entries)  # stdout is the protocol's: nothing else may print there
    return EXIT_OK


def cmd_tools(args: argparse.Namespace) -> int:
    """`packforge tools list`: the registry's catalogue. A tool whose dependency is
    missing is listed as unavailable, not an error (exit 0)."""
    ref = args.tools or os.environ.get("PACKFORGE_TOOLS", "").strip() or None
    if ref is None:
        raise UsageError("packforge tools list: name a registry with --tools MODULE:REGISTRY (or set PACKFORGE_TOOLS)")
    registry = load_tools(ref)
    assert registry is not None
    if args.json:
        print(json.dumps({"registry": ref, "tools": registry.catalogue()}, indent=2))
        return EXIT_OK
    rows = [(t["name"], t["state"], "side effects" if t["side_effects"] else "read-only") for t in registry.catalogue()]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(("tool", "state", "effects"))]
    print("  ".join(h.ljust(w) for h, w in zip(("tool", "state", "effects"), widths, strict=True)) + "  description")
    for row, entry in zip(rows, registry.catalogue(), strict=True):
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + "  " + entry["description"])
        print(" " * 4 + "args: " + entry["args_summary"])
    unavailable = sum(1 for t in registry.values() if not t.available)
    n = len(registry)
    print(f"{n} tool{'s' if n != 1 else ''} in {ref}: {n - unavailable} available, {unavailable} unavailable")
    return EXIT_OK


def cmd_pull(args: argparse.Namespace) -> int:
    from runtime.pull import pull

    pulled = pull(
        args.target, token=args.token, version=args.pack_version, out=args.out, force=args.force, fmt=args.format
    )
    print(pulled.summary())
    return EXIT_OK
