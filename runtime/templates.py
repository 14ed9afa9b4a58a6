"""Prompt templates: `{{ field.path }}` placeholders filled from declared reads only."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_PATH = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")


class TemplateError(ValueError):
    def __init__(self, message: str, line: int) -> None:
        self.line = line
        super().__init__(message)


@dataclass(frozen=True)
class Template:
    source: str
    parts: tuple[str | tuple[str, ...], ...]  # literal text or a split field path

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(".".join(p) for p in self.parts if isinstance(p, tuple))

    def render(self, values: Mapping[str, Any]) -> str:
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            value = lookup(values, part)
            out.append(value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        return "".join(out)


def parse_template(source: str) -> Template:
    """Split `source` into literals and placeholders; raise TemplateError on a bad one."""
    parts: list[str | tuple[str, ...]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        name = m.group(1)
        if not _PATH.match(name):
            raise TemplateError(f"placeholder '{{{{ {name} }}}}' is not a field path like 'input.ticket'", line)
        parts.append(source[pos : m.start()])
        parts.append(tuple(name.split(".")))
        pos = m.end()
    parts.append(source[pos:])
    return Template(source, tuple(p for p in parts if p != ""))


def lookup(values: Mapping[str, Any], path: tuple[str, ...], missing: Any = None) -> Any:
    """Follow `path` through nested objects; a missing step gives `missing`."""
    current: Any = values
    for key in path:
        if not isinstance(current, Mapping) or key not in current:
            return missing
        current = current[key]
    return current
