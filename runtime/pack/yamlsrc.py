"""YAML loading that remembers the line of every key, so errors can name it."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any

import yaml

from runtime.errors import PackIssue

Path_ = tuple[str | int, ...]
# libyaml's parser when PyYAML was built with it (the wheels are): same nodes and marks, faster.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SourceMap:
    """Line numbers (1-based) of the keys and items of one YAML document."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._lines: dict[Path_, int] = {}

    def record(self, path: Path_, line: int) -> None:
        self._lines[path] = line

    def line(self, *path: str | int) -> int | None:
        """The line of `path`, or of its nearest recorded ancestor."""
        p: Path_ = tuple(path)
        while p:
            if p in self._lines:
                return self._lines[p]
            p = p[:-1]
        return self._lines.get((), None)

    def issue(self, message: str, *path: str | int, kind: str = "value") -> PackIssue:
        return PackIssue(self.file, message, self.line(*path), kind)


def nearest(key: str, valid: Collection[str]) -> str:
    """A hint for an unknown key: the closest valid one, and the list."""
    match = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.5)
    hint = f"did you mean '{match[0]}'? " if match else ""
    return f"{hint}valid keys: {', '.join(sorted(valid))}"


def load_yaml(text: str, source: SourceMap, issues: list[PackIssue]) -> Any:
    """Parse `text`; on a syntax error append an issue and return None."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        issues.append(PackIssue(source.file, f"YAML syntax error: {exc.problem}; fix the syntax", line, "syntax"))
        return None
    except yaml.YAMLError as exc:
        issues.append(PackIssue(source.file, f"YAML error: {exc}", kind="syntax"))
        return None
    if root is None:
        return None
    source.record((), root.start_mark.line + 1)
    try:
        return _build(root, (), source, issues, _Walk(yaml.constructor.SafeConstructor()))
    except _Unbounded as exc:
        issues.append(PackIssue(source.file, str(exc), exc.line, "syntax"))
        return None
    except yaml.MarkedYAMLError as exc:  # a tag or value the safe constructor refuses (`!!python/...`)
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        issues.append(
            PackIssue(source.file, f"YAML error: {exc.problem or exc.context}; use plain values", line, "syntax")
        )
        return None
    except (yaml.YAMLError, ValueError, TypeError) as exc:  # e.g. `!!int abc`, `!!binary` that is not base64
        issues.append(PackIssue(source.file, f"YAML error: {exc}; use plain values", kind="syntax"))
        return None


MAX_VALUES = 100_000  # values in one document, aliases expanded: a pack file is written by hand
MAX_DEPTH = 64  # collections inside collections (deeper ones would exhaust Python's stack)


class _Unbounded(Exception):
    """An alias that contains itself, aliases that expand past MAX_VALUES, or nesting past MAX_DEPTH."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class _Walk:
    """The constructor, plus what bounds a walk through aliases: the collections being
    built (an alias inside its own anchor never ends) and a count of values built (nested
    aliases multiply: nine levels of nine make 387 million)."""

    def __init__(self, constructor: yaml.constructor.SafeConstructor) -> None:
        self.constructor = constructor
        self.open: set[int] = set()
        self.values = 0


def _build(node: yaml.Node, path: Path_, source: SourceMap, issues: list[PackIssue], walk: _Walk) -> Any:
    walk.values += 1
    if walk.values > MAX_VALUES:
        raise _Unbounded(
            f"more than {MAX_VALUES} values once aliases are expanded; write the values out instead of nesting aliases",
            node.start_mark.line + 1,
        )
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if len(path) >= MAX_DEPTH:
            raise _Unbounded(f"nested more than {MAX_DEPTH} levels deep; flatten it", node.start_mark.line + 1)
        if id(node) in walk.open:
            raise _Unbounded("an alias refers to the collection it is in; remove the alias", node.start_mark.line + 1)
        walk.open.add(id(node))
        try:
            return _collection(node, path, source, issues, walk)
        finally:
            walk.open.discard(id(node))
    return walk.constructor.construct_object(node, deep=True)


def _collection(
    node: yaml.MappingNode | yaml.SequenceNode, path: Path_, source: SourceMap, issues: list[PackIssue], walk: _Walk
) -> Any:
    constructor = walk.constructor
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                issues.append(PackIssue(source.file, f"keys must be strings, got {key!r}", line, "syntax"))
                continue
            if key in out:
                issues.append(PackIssue(source.file, f"duplicate key '{key}'; keep one", line, "syntax"))
                continue
            source.record((*path, key), line)
            out[key] = _build(value_node, (*path, key), source, issues, walk)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            source.record((*path, i), item.start_mark.line + 1)
            items.append(_build(item, (*path, i), source, issues, walk))
    return items
