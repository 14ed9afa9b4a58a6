"""The host's tools for try-it runs and evals (settings.PACKFORGE_TOOLS, MODULE:REGISTRY
as the CLI's --tools), and its scorers (settings.PACKFORGE_SCORERS, MODULE:SCORERS as the
CLI's --scorers). Packs reach only these (docs/invariants.md, 5): a pack names a tool or
a scorer, never contains one."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from django.conf import settings

from runtime import Pack, Registry, Scorer, load_scorers, load_tools

_cache: dict[str, Registry] = {}
_scorers: dict[str, dict[str, Scorer]] = {}
_lock = threading.Lock()


def tool_registry() -> Registry | None:
    """The registered tools (name -> runtime ToolDef), or None when no registry is configured. Loaded once per
    process: a worker imports the registry module once, not per case. Raises BadSpec when
    one is configured but cannot be imported."""
    ref = str(settings.PACKFORGE_TOOLS).strip()
    if not ref:
        return None
    with _lock:
        if ref not in _cache:
            _cache[ref] = load_tools(ref) or Registry(ref=ref)
        return _cache[ref]


def scorer_registry() -> dict[str, Scorer] | None:
    """The registered scorers (name -> function), or None when none is configured; loaded
    once per process. Raises BadSpec when one is configured but cannot be imported."""
    ref = str(getattr(settings, "PACKFORGE_SCORERS", "")).strip()
    if not ref:
        return None
    with _lock:
        if ref not in _scorers:
            _scorers[ref] = load_scorers(ref) or {}
        return _scorers[ref]


def forget() -> None:
    """Drop the loaded registries (tests change PACKFORGE_TOOLS between runs)."""
    with _lock:
        _cache.clear()
        _scorers.clear()


def scorers_problem(pack: Pack, scorers: Mapping[str, object] | None) -> str | None:
    """Why `pack` cannot be scored in the studio for want of its scorers, or None."""
    used = sorted(f"{r.name} (scorer:{r.scorer})" for r in pack.fields.values() if r.compare == "scorer")
    if not used or scorers is not None:
        return None
    return (
        f"this pack compares {', '.join(used)} with host scorers and the studio has no scorer registry; set "
        "PACKFORGE_SCORERS=MODULE:SCORERS for the studio and its workers"
    )


def registry_broken(exc: Exception) -> str:
    return f"the studio's tool registry (PACKFORGE_TOOLS) does not load: {exc}"


def tools_problem(pack: Pack, tools: Mapping[str, object] | None) -> str | None:
    """Why `pack` cannot run in the studio for want of tools, or None."""
    if not pack.tools or tools is not None:
        return None
    return (
        f"this pack calls host tools ({', '.join(pack.tools)}) and the studio has no tool registry; set "
        "PACKFORGE_TOOLS=MODULE:REGISTRY for the studio and its workers, or run it with "
        "`packforge run --tools MODULE:REGISTRY`"
    )
