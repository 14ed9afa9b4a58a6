"""Loading the host's tools: a registry named `MODULE:REGISTRY`, where MODULE is a dotted
module name or a path to a .py file and REGISTRY a dict of tool name -> function.
A pack reaches only the tools in the registry its host loads (invariant 5)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from runtime.errors import BadSpec

__all__ = ["Tool", "load_tools"]

Tool = Callable[..., Any]  # a host function a tool node calls with keyword arguments


def load_tools(ref: str | None) -> dict[str, Tool] | None:
    """The registry `ref` names (`MODULE:REGISTRY` or `path/to/tools.py:REGISTRY`), or
    None when `ref` is None. Raises BadSpec when it cannot be imported or is not a dict
    of callables; the message names the reference, not how it was given."""
    if ref is None:
        return None
    module_ref, sep, attr = ref.rpartition(":")
    if not sep or not module_ref or not attr:
        raise BadSpec(f"tool registry {ref!r} must look like MODULE:REGISTRY or path/to/tools.py:REGISTRY")
    try:
        if module_ref.endswith(".py"):
            path = Path(module_ref)
            if not path.is_file():
                raise BadSpec(f"tool registry {ref!r}: no such file {module_ref}")
            spec = importlib.util.spec_from_file_location(f"packforge_tools_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_ref)
    except ImportError as exc:
        raise BadSpec(f"tool registry {ref!r}: cannot import {module_ref}: {exc}") from None
    registry = getattr(module, attr, None)
    if not isinstance(registry, Mapping) or not all(callable(f) for f in registry.values()):
        raise BadSpec(f"tool registry {ref!r}: {module_ref}:{attr} must be a dict of tool name -> function")
    return dict(registry)
