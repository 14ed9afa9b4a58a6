"""What a host registers by reference, `MODULE:NAME` or `path/to/file.py:NAME`: a tool
registry (`--tools`, runtime.tools.registry) or a scorer registry (`--scorers`,
runtime.scorers). One importer for both; the message names the reference, not how it
was given."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from runtime.errors import BadSpec


def import_named(ref: str, noun: str, shape: str = "MODULE:NAME or path/to/file.py:NAME") -> object:
    """The object `ref` names; BadSpec (naming `noun`, e.g. "tool registry") when the
    reference is malformed, the module does not import, or it has no such name."""
    module_ref, sep, attr = ref.rpartition(":")
    if not sep or not module_ref or not attr:
        raise BadSpec(f"{noun} {ref!r} must look like {shape}")
    try:
        if module_ref.endswith(".py"):
            path = Path(module_ref)
            if not path.is_file():
                raise BadSpec(f"{noun} {ref!r}: no such file {module_ref}")
            spec = importlib.util.spec_from_file_location(f"packforge_host_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_ref)
    except ImportError as exc:
        raise BadSpec(f"{noun} {ref!r}: cannot import {module_ref}: {exc}") from None
    if not hasattr(module, attr):
        raise BadSpec(f"{noun} {ref!r}: {module_ref} has no {attr}")
    return getattr(module, attr)
