"""What a planner knows about the host's tools: a name, a description, the JSON schema of
its keyword arguments and of the object it returns (`ToolSpec`).

A registered function may declare itself:

```python
def lookup_order(order_id: str) -> dict[str, Any]: ...

lookup_order.__packforge_tool__ = {
    "description": "Fetch an order by id; an unknown id raises.",
    "args": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "result": {"type": "object", "properties": {"order": {"type": "object"}}, "required": ["order"]},
}
```

Without a declaration the arguments come from the function's signature (each parameter
a property, required when it has no default, untyped) and the result is `{"type":
"object"}`. The declaration is parsed once, by the runtime's registry
(runtime.tools.ToolDef); a ToolSpec is the part of it a planner reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import CompilerError
from runtime import BadSpec, Tool, ToolDef, tool_def

__all__ = ["ToolSpec", "catalogue", "tool_spec"]


@dataclass(frozen=True)
class ToolSpec:
    """A host tool as a planner sees it: `args` and `result` are JSON schemas of objects."""

    name: str
    description: str = ""
    args: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    result: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The argument names, in the schema's order."""
        return tuple(self.args.get("properties", {}))

    @property
    def result_fields(self) -> tuple[str, ...]:
        """The top-level keys of the result the schema names (the state fields a tool
        node writes); () when the result schema names none."""
        return tuple(self.result.get("properties", {}))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "args": self.args, "result": self.result}

    @classmethod
    def of(cls, tool: ToolDef) -> ToolSpec:
        """The planner's view of a registered tool."""
        return cls(tool.name, tool.description, dict(tool.args), dict(tool.result))


def tool_spec(name: str, function: Tool | ToolDef) -> ToolSpec:
    """The ToolSpec of one registered function (or ToolDef): its declaration, else its
    signature, as the runtime's registry reads them."""
    try:
        return ToolSpec.of(tool_def(name, function))
    except BadSpec as exc:
        raise CompilerError(str(exc)) from None


def catalogue(registry: Mapping[str, Tool | ToolDef] | None, names: Sequence[str]) -> dict[str, ToolSpec]:
    """The ToolSpecs of the tools `names` (a spec's `tools`), in that order. A name the
    registry lacks is a CompilerError naming every missing one. With no registry at all,
    the names get signature-less specs (no arguments known, result an object): a plan can
    still be made and emitted, and the runtime's loader refuses the pack later if the host
    does not register them."""
    if registry is None:
        return {name: ToolSpec(name) for name in names}
    missing = [n for n in names if n not in registry]
    if missing:
        known = ", ".join(sorted(registry)) or "none"
        raise CompilerError(
            f"the spec names tool{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"that the host registry does not have (it has: {known})"
        )
    return {name: tool_spec(name, registry[name]) for name in names}
