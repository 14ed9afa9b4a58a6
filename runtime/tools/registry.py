"""The host's tool registry: a module the host names as `MODULE:REGISTRY` (MODULE a dotted
module name or a path to a .py file, REGISTRY a dict of tool name -> function). A pack
reaches only the tools in the registry its host loads (docs/invariants.md, 5).

A function may declare itself, with the `runtime.tool` decorator or by hand:

```python
@tool(
    description="Refund an amount on an order.",
    args={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    result={"type": "object", "properties": {"refund_id": {"type": "string"}}},
    side_effects=True,  # gets idempotency_key=...
    requires=("stripe",),  # importable modules it needs; missing -> unavailable, not an error
)
def refund(order_id: str, *, idempotency_key: str) -> dict: ...
```

An undeclared function still works: its arguments come from its signature (each
parameter a property, required when it has no default), its result is any object, and
it counts as free of side effects (so it gets no idempotency key: declare it).

A tool whose `requires` names a module that is not importable is *unavailable*: it stays
in the catalogue with its state, and calling it is a node failure ("unavailable: install
X"), never an import error at start-up. The modules are looked up with
importlib.util.find_spec, never imported here."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jsonschema.exceptions import SchemaError

from runtime.errors import BadSpec
from runtime.host_import import import_named
from runtime.schemas import check_schema, schema_validator

__all__ = ["DECLARATION", "Registry", "Tool", "ToolDef", "load_tools", "tool", "tool_def"]

Tool = Callable[..., Any]  # a host function a tool node calls with keyword arguments
Check = Callable[[dict[str, Any]], "str | None"]  # a tool's own argument check: a problem, or None
F = TypeVar("F", bound=Callable[..., Any])

DECLARATION = "__packforge_tool__"
DECLARATION_KEYS = frozenset({"description", "args", "result", "side_effects", "requires", "check"})
ANY_OBJECT: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True, eq=False)
class ToolDef:
    """One registered tool: its function and what it declared (or what its signature says).

    `args` and `result` are JSON schemas of objects, checked on every call. `side_effects`
    False means idempotent / read-only; True means the tool is passed
    `idempotency_key=` (docs/tools.md#idempotency). `requires`: module names it needs;
    `missing`: those of them not importable when the registry was loaded. `check`: the
    tool's own argument check, called after the schema with the arguments; returns a
    problem (a sentence) or None. Calling a ToolDef calls its function."""

    name: str
    function: Tool
    description: str = ""
    args: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    result: dict[str, Any] = field(default_factory=lambda: dict(ANY_OBJECT))
    side_effects: bool = False
    requires: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    check: Check | None = None
    declared: bool = False  # False: everything above came from the function's signature
    args_validator: Any = field(init=False, repr=False)
    result_validator: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args_validator", schema_validator(self.args))
        object.__setattr__(self, "result_validator", schema_validator(self.result))

    @property
    def available(self) -> bool:
        return not self.missing

    @property
    def state(self) -> str:
        """ "available", or "unavailable: install X, Y" (the missing modules)."""
        return "available" if self.available else f"unavailable: install {', '.join(self.missing)}"

    @property
    def effects(self) -> str:
        """ "side effects" or "read-only", as the catalogue shows it."""
        return "side effects" if self.side_effects else "read-only"

    @property
    def args_summary(self) -> str:
        """The arguments in one line: `order_id: string, amount_usd?: number` (? optional)."""
        props = self.args.get("properties") or {}
        required = set(self.args.get("required") or [])
        parts = []
        for name, schema in props.items():
            kind = schema.get("type") if isinstance(schema, Mapping) else None
            shown = "|".join(kind) if isinstance(kind, list) else kind
            parts.append(f"{name}{'' if name in required else '?'}" + (f": {shown}" if shown else ""))
        return ", ".join(parts) or "(none)"

    def __call__(self, **kwargs: Any) -> Any:
        return self.function(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The catalogue entry: what `packforge tools list --json` prints."""
        return {
            "name": self.name,
            "state": self.state,
            "available": self.available,
            "side_effects": self.side_effects,
            "description": self.description,
            "args_summary": self.args_summary,
            "args": self.args,
            "result": self.result,
            "requires": list(self.requires),
            "missing": list(self.missing),
            "declared": self.declared,
        }


class Registry(Mapping[str, ToolDef]):
    """The host's tools by name (a read-only mapping name -> ToolDef), in declaration order."""

    def __init__(self, tools: Mapping[str, ToolDef] | None = None, ref: str | None = None) -> None:
        self._tools: dict[str, ToolDef] = dict(tools or {})
        self.ref = ref

    @classmethod
    def of(cls, tools: Mapping[str, Any] | None) -> Registry:
        """A Registry from a mapping of name -> function or ToolDef (what run_pack's
        `tools=` accepts); a Registry is returned as it is."""
        if isinstance(tools, Registry):
            return tools
        return cls({name: tool_def(name, t) for name, t in (tools or {}).items()})

    def __getitem__(self, name: str) -> ToolDef:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Registry({', '.join(f'{n}: {t.state}' for n, t in self._tools.items())})"

    def catalogue(self) -> list[dict[str, Any]]:
        """Every tool's catalogue entry (ToolDef.to_dict), sorted by name."""
        return [self._tools[name].to_dict() for name in sorted(self._tools)]


def tool(
    *,
    description: str = "",
    args: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
    side_effects: bool = False,
    requires: tuple[str, ...] | list[str] = (),
    check: Check | None = None,
) -> Callable[[F], F]:
    """Declare a host function as a tool (sets its `__packforge_tool__`). Omitted
    schemas come from the signature (args) or accept any object (result)."""

    def declare(function: F) -> F:
        declaration: dict[str, Any] = {"description": description, "side_effects": side_effects}
        if args is not None:
            declaration["args"] = args
        if result is not None:
            declaration["result"] = result
        if requires:
            declaration["requires"] = tuple(requires)
        if check is not None:
            declaration["check"] = check
        setattr(function, DECLARATION, declaration)
        return function

    return declare


def tool_def(name: str, function: Any) -> ToolDef:
    """The ToolDef of one registered function: its declaration, else its signature.
    A ToolDef is returned as it is. Raises BadSpec (naming the tool) on a malformed
    declaration; a missing dependency is not an error (the tool is unavailable)."""
    if isinstance(function, ToolDef):
        return function
    if not callable(function):
        raise BadSpec(f"tool {name!r} is not a function")
    declared = getattr(function, DECLARATION, None)
    if declared is None:
        return ToolDef(name, function, _first_line(function), _signature_args(function), dict(ANY_OBJECT))
    if not isinstance(declared, Mapping) or not set(declared) <= DECLARATION_KEYS:
        keys = ", ".join(sorted(DECLARATION_KEYS))
        raise BadSpec(f"tool {name!r}: {DECLARATION} must be a dict with keys among {keys}")
    args = declared.get("args") or _signature_args(function)
    result = declared.get("result") or dict(ANY_OBJECT)
    for key, schema in (("args", args), ("result", result)):
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise BadSpec(f"tool {name!r}: {DECLARATION}['{key}'] must be a JSON schema of an object")
        try:
            check_schema(dict(schema))
        except SchemaError as exc:
            raise BadSpec(f"tool {name!r}: {DECLARATION}['{key}'] is not a valid JSON schema: {exc.message}") from None
    requires = declared.get("requires") or ()
    if isinstance(requires, str) or not all(isinstance(r, str) and r for r in requires):
        raise BadSpec(f"tool {name!r}: {DECLARATION}['requires'] must be a list of module names")
    check = declared.get("check")
    if check is not None and not callable(check):
        raise BadSpec(f"tool {name!r}: {DECLARATION}['check'] must be a function of the arguments")
    side_effects = declared.get("side_effects", False)
    if not isinstance(side_effects, bool):
        raise BadSpec(f"tool {name!r}: {DECLARATION}['side_effects'] must be true or false")
    return ToolDef(
        name=name,
        function=function,
        description=str(declared.get("description") or _first_line(function)),
        args=dict(args),
        result=dict(result),
        side_effects=side_effects,
        requires=tuple(requires),
        missing=tuple(r for r in requires if not _importable(r)),
        check=check,
        declared=True,
    )


def _importable(module: str) -> bool:
    """Whether `module` could be imported, without importing it (nor running a parent
    package's code beyond what find_spec needs)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a bad name
        return False


def load_tools(ref: str | None) -> Registry | None:
    """The registry `ref` names (`MODULE:REGISTRY` or `path/to/tools.py:REGISTRY`), or
    None when `ref` is None. Raises BadSpec when it cannot be imported, is not a dict of
    callables, or a declaration is malformed; the message names the reference, not how
    it was given. A tool whose dependencies are missing loads, unavailable."""
    if ref is None:
        return None
    module_ref, _, attr = ref.rpartition(":")
    registry = import_named(ref, "tool registry", "MODULE:REGISTRY or path/to/tools.py:REGISTRY")
    if not isinstance(registry, Mapping) or not all(callable(f) for f in registry.values()):
        raise BadSpec(f"tool registry {ref!r}: {module_ref}:{attr} must be a dict of tool name -> function")
    try:
        tools = {str(name): tool_def(str(name), f) for name, f in registry.items()}
    except BadSpec as exc:
        raise BadSpec(f"tool registry {ref!r}: {exc}") from None
    return Registry(tools, ref=ref)


def _signature_args(function: Tool) -> dict[str, Any]:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return {"type": "object", "properties": {}}
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "idempotency_key"]
    return {
        "type": "object",
        "properties": {p.name: {} for p in named},
        "required": [p.name for p in named if p.default is inspect.Parameter.empty],
    }


def _first_line(function: Tool) -> str:
    doc = inspect.getdoc(function) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
