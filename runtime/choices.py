"""State-dependent choices: a generate node's enum taken, per call, from a label map.

    choices:
      sublabel: {labels: sublabels, key: label}

`labels/sublabels.yaml` maps each value of the state field `label` to the list of
labels `sublabel` may take then (or is a plain list when `key` is omitted). Per call,
the node's schema is copied with `sublabel`'s `enum` set to the allowed labels: that
copy is the grammar sent to the model and the schema verification checks, so a label
outside the allowed subset is never committed. A state value the map has no entry for
fails the node (on_fail), it is not a backend error.

A leaf module (the loaded pack's model refers to `Choice`); loading the key and its
files is runtime.nodes.generate_keys's job."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.schemas import schema_validator
from runtime.templates import lookup


@dataclass(frozen=True)
class Choice:
    """FIELD's allowed labels: `table[state value of key]`, or `plain` when key is None."""

    field: str
    labels: str  # NAME of labels/NAME.yaml
    key: str | None
    table: tuple[tuple[str, tuple[str, ...]], ...] = ()
    plain: tuple[str, ...] = ()


class NoChoices(Exception):
    """A choice has no allowed labels in the current state (the node fails)."""


def allowed(choice: Choice, view: Mapping[str, Any]) -> tuple[str, ...]:
    """The labels `choice.field` may take in this state. Raises NoChoices when the
    label map has no entry for the state's value."""
    if choice.key is None:
        return choice.plain
    value = lookup(view, tuple(choice.key.split(".")))
    for name, labels in choice.table:
        if name == value:
            return labels
    raise NoChoices(
        f"choices: labels/{choice.labels}.yaml has no entry for {choice.key} = {json.dumps(value)}, "
        f"so '{choice.field}' has no allowed labels"
    )


def call_schema(
    schema: dict[str, Any] | None, validator: Any, choices: Sequence[Choice], view: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, Any]:
    """The schema and validator for one call: the node's own when it has no choices,
    else a copy with each choice's enum set for the current state."""
    if not choices or schema is None:
        return schema, validator
    schema = copy.deepcopy(schema)
    for choice in choices:
        schema["properties"][choice.field] = {**schema["properties"][choice.field], "enum": list(allowed(choice, view))}
    return schema, _validator(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _validator(text: str) -> Any:
    return schema_validator(json.loads(text))
