"""evalset.jsonl: one gold case per line. The pack's contract; nothing edits it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime.errors import PackIssue
from runtime.nodes import kind_names
from runtime.pack.model import Case, Node, Pack
from runtime.pack.yamlsrc import nearest
from runtime.verify import describe_schema_error

CASE_KEYS = frozenset({"id", "input", "expected", "path", "end", "tags", "human", "note", "tools"})
FILE = "evalset.jsonl"


def parse_evalset(text: str, pack: Pack | None, issues: list[PackIssue], *, file: str = FILE) -> list[Case]:
    """The cases of an evalset's `text`; each bad line is an issue in `issues` naming `file`
    and the line. Without a `pack` (the compiler's gold.jsonl, before any graph exists),
    node names in `path`, `end` and `human` are not checked."""
    nodes: Mapping[str, Node] = pack.nodes if pack is not None else {}
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        found = len(issues)
        case = _parse_line(raw, lineno, nodes, issues, file, pack.tools if pack is not None else None)
        if case is None or len(issues) > found:
            continue
        if case.id in seen:
            issues.append(
                PackIssue(file, f"duplicate case id '{case.id}' (first on line {seen[case.id]})", lineno, "evalset")
            )
            continue
        seen[case.id] = lineno
        cases.append(case)
    return cases


def _parse_line(
    raw: str,
    lineno: int,
    nodes: Mapping[str, Node],
    issues: list[PackIssue],
    file: str,
    manifest_tools: tuple[str, ...] | None,
) -> Case | None:
    def bad(message: str) -> None:
        issues.append(PackIssue(file, message, lineno, "evalset"))

    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        bad(f"not valid JSON: {exc.msg} (column {exc.colno}); each line must be one JSON object")
        return None
    except RecursionError:
        bad("nested too deeply to read (thousands of levels); flatten this case")
        return None
    if not isinstance(body, dict):
        bad("each line must be a JSON object with 'input' and 'expected'")
        return None
    for key in body:
        if key not in CASE_KEYS:
            bad(f"unknown key '{key}'; {nearest(key, CASE_KEYS)}")
    case_id = body.get("id", f"line-{lineno}")
    if not isinstance(case_id, str) or not case_id:
        bad("'id' must be a non-empty string")
    inp, expected = body.get("input"), body.get("expected")
    if not isinstance(inp, dict):
        bad("'input' is required and must be a JSON object")
    if not isinstance(expected, dict):
        bad("'expected' is required and must be a JSON object (use {} to check only the path)")
    path = body.get("path")
    if path is not None:
        if not isinstance(path, list) or not all(isinstance(p, str) for p in path):
            bad("'path' must be a list of node ids")
            path = None
        else:
            for p in path:
                if nodes and p not in nodes:
                    bad(f"'path' names unknown node '{p}'")
    end = body.get("end")
    if not nodes:  # the graph did not load; node names cannot be checked
        pass
    elif end is not None and (not isinstance(end, str) or end not in nodes):
        bad(f"'end' names unknown node {end!r}")
    elif end is not None and nodes[end].kind not in _stops_at():
        bad(f"'end' must be {_kinds_in_words(_stops_at())} node; '{end}' is a {nodes[end].kind} node")
    tags = body.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        bad("'tags' must be a list of strings")
        tags = []
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            bad("'tools' must be a list of tool names, the calls the gold path makes in order")
            tools = None
        elif manifest_tools is not None:
            for name in tools:
                if name not in manifest_tools:
                    bad(f"'tools' names '{name}', which the manifest's 'tools' does not list")
    human = body.get("human", {})
    if not isinstance(human, dict):
        bad("'human' must map human node ids to their answers")
        human = {}
    for node_id, answer in human.items():
        node = nodes.get(node_id)
        if not nodes:
            continue
        if node is None or node.kind not in kind_names(waits=True):
            bad(f"'human' names '{node_id}', which is not {_kinds_in_words(kind_names(waits=True))} node")
        elif node.validator is not None:
            err = _first_error(node.validator, answer)
            if err:
                bad(f"'human.{node_id}' does not match grammars/{node_id}.json: {err}")
    if not isinstance(inp, dict) or not isinstance(expected, dict) or not isinstance(case_id, str):
        return None
    return Case(
        id=case_id,
        input=inp,
        expected=expected,
        path=tuple(path) if path else None,
        end=end,
        tags=tuple(tags),
        human=human,
        line=lineno,
        tools=tuple(tools) if tools is not None else None,
    )


def _stops_at() -> tuple[str, ...]:
    """The kinds a run can stop at: those that end it and those that wait for a person."""
    return kind_names(terminal=True) + kind_names(waits=True)


def _kinds_in_words(kinds: tuple[str, ...]) -> str:
    """("end", "human") -> "an end or human"."""
    words = " or ".join(kinds) or "a registered"
    return ("an " if words[0] in "aeiou" else "a ") + words


def _first_error(validator: Any, value: Any) -> str | None:
    for error in validator.iter_errors(value):
        return describe_schema_error(error)
    return None
