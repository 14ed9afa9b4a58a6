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
    return _build(root, (), source, issues, yaml.constructor.SafeConstructor())


def _build(
    node: yaml.Node,
    path: Path_,
    source: SourceMap,
    issues: list[PackIssue],
    constructor: yaml.constructor.SafeConstructor,
) -> Any:
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
            out[key] = _build(value_node, (*path, key), source, issues, constructor)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            source.record((*path, i), item.start_mark.line + 1)
            items.append(_build(item, (*path, i), source, issues, constructor))
        return items
    return constructor.construct_object(node, deep=True)
