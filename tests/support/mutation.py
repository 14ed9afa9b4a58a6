"""Helpers for fuzz tests that mutate parsed documents (YAML/JSON) in place: every place a
value can go, and putting, deleting or renaming at one. Used by the pack loader's and the
spec loader's fuzz tests."""

from __future__ import annotations

from typing import Any


def places(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed document a value can be put: each key and list index."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += places(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += places(value, (*prefix, i))
    return found


def put(doc: Any, path: tuple[Any, ...], value: Any, how: str) -> Any:
    """`doc` with the place `path` set to `value` ("set"), deleted ("delete"), or its key
    renamed to `value` ("rename", a string in a mapping); the root path replaces `doc`."""
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "rename" and isinstance(parent, dict) and isinstance(value, str):
        parent[value] = parent.pop(last)
    else:
        parent[last] = value
    return doc
