"""Hierarchy as a search coordinate: a generate node whose closed-choice field is split
by a parent field it reads, through keyed `choices` (runtime.choices), as the hand-written
routing pack does (`subissue` keyed on `department`).

The label map is learned from the train split only: for each parent value, the child
values train cases show with it. A child value train never shows with any parent stays
allowed under every parent, and a parent value train never shows allows every child
value, so the map narrows a grammar only where train has evidence for it. A node is a
candidate only when the map narrows something: some parent value allows fewer child
values than the field's whole set."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.plan import Plan, PlanNode
from compiler.spec import GoldCase


@dataclass(frozen=True)
class Keyed:
    """`field`'s allowed values per value of the state field `key` (labels/<field>.yaml)."""

    node: str
    field: str
    key: str
    table: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def labels(self) -> str:
        """The label file's name: per node, so two nodes keyed differently never share one."""
        return f"{self.node}-{self.field}"

    def yaml_text(self) -> str:
        """The label file: one line per parent value, its child values as a flow list."""
        lines = [
            f"# The values '{self.field}' may take for each value of '{self.key}', learned from the train split.",
        ]
        for parent, children in self.table:
            shown = ", ".join(json.dumps(c, ensure_ascii=False) for c in children)  # YAML reads JSON strings
            lines.append(f"{json.dumps(parent, ensure_ascii=False)}: [{shown}]")
        return "\n".join(lines) + "\n"


def _closed_strings(schema: Mapping[str, Any]) -> list[str] | None:
    values = schema.get("enum")
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
        return None
    return list(values)


def keyed_for(node: PlanNode, schemas: Mapping[str, Mapping[str, Any]], train: Sequence[GoldCase]) -> Keyed | None:
    """The keyed choices for `node`, or None when it is no candidate: a generate node that
    writes a closed string field and reads another closed string field from state, whose
    train cases narrow the first by the second."""
    if node.kind != "generate":
        return None
    parents = [r for r in node.reads if not r.startswith("input.") and "." not in r]
    for name in node.writes:
        children = _closed_strings(schemas.get(name, {}))
        if children is None:
            continue
        for parent in parents:
            parent_values = _closed_strings(schemas.get(parent, {}))
            if parent_values is None:
                continue
            table = _table(name, parent, children, parent_values, train)
            if table is not None:
                return Keyed(node.id, name, parent, table)
    return None


def _table(
    child: str, parent: str, children: list[str], parents: list[str], train: Sequence[GoldCase]
) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    seen: dict[str, set[str]] = {p: set() for p in parents}
    placed: set[str] = set()
    for case in train:
        p, c = case.expected.get(parent), case.expected.get(child)
        if p in seen and c in children:
            seen[p].add(c)
            placed.add(c)
    unplaced = [c for c in children if c not in placed]
    table: list[tuple[str, tuple[str, ...]]] = []
    for p in parents:
        allowed = [c for c in children if c in seen[p] or c in unplaced] if seen[p] else list(children)
        table.append((p, tuple(allowed)))
    if not any(len(allowed) < len(children) for _, allowed in table):
        return None
    return tuple(table)


def candidates(plan: Plan, schemas: Mapping[str, Mapping[str, Any]], train: Sequence[GoldCase]) -> dict[str, Keyed]:
    """Per generate node of `plan` that is a candidate, its keyed choices."""
    out: dict[str, Keyed] = {}
    for node in plan.nodes:
        keyed = keyed_for(node, schemas, train)
        if keyed is not None:
            out[node.id] = keyed
    return out


__all__ = ["Keyed", "candidates", "keyed_for"]
