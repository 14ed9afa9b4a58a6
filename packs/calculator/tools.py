"""Host tools for the calculator pack: four arithmetic operations and a unit conversion.

Register them with `--tools packs/calculator/tools.py:registry`. Each is declared with
`__packforge_tool__` (docs/tools.md): a description the model reads, the JSON schema of
its keyword arguments (the choose_tool node's grammar is built from these) and of its
result, no side effects, and for `divide` its own argument check (a zero divisor is an
invalid choice the model is told about, not a crash)."""

from __future__ import annotations

from typing import Any

# Factors to a base unit per dimension; temperatures convert by formula.
UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0),
    "ml": ("volume", 0.001),
    "gal": ("volume", 3.785411784),
    "c": ("temperature", 1.0),
    "f": ("temperature", 1.0),
}


def _two(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "args": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "result": RESULT,
        "side_effects": False,
    }


RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "number"}},
    "required": ["result"],
    "additionalProperties": False,
}


def add(a: float, b: float) -> dict[str, float]:
    return {"result": round(a + b, 10)}


def subtract(a: float, b: float) -> dict[str, float]:
    return {"result": round(a - b, 10)}


def multiply(a: float, b: float) -> dict[str, float]:
    return {"result": round(a * b, 10)}


def divide(a: float, b: float) -> dict[str, float]:
    return {"result": round(a / b, 10)}


def convert(value: float, unit_from: str, unit_to: str) -> dict[str, float]:
    dim_from, k_from = UNITS[unit_from]
    dim_to, k_to = UNITS[unit_to]
    if dim_from != dim_to:
        raise ValueError(f"cannot convert {dim_from} to {dim_to}")
    if dim_from == "temperature":
        celsius = value if unit_from == "c" else (value - 32) * 5 / 9
        out = celsius if unit_to == "c" else celsius * 9 / 5 + 32
    else:
        out = value * k_from / k_to
    return {"result": round(out, 4)}


def check_divide(args: dict[str, Any]) -> str | None:
    return "the divisor b must not be 0" if args.get("b") == 0 else None


def check_convert(args: dict[str, Any]) -> str | None:
    a, b = UNITS.get(args.get("unit_from", "")), UNITS.get(args.get("unit_to", ""))
    if a is not None and b is not None and a[0] != b[0]:
        return f"unit_from is a {a[0]} unit and unit_to a {b[0]} unit; convert within one kind"
    return None


add.__packforge_tool__ = _two("Add two numbers: a + b.")  # type: ignore[attr-defined]
subtract.__packforge_tool__ = _two("Subtract b from a: a - b.")  # type: ignore[attr-defined]
multiply.__packforge_tool__ = _two("Multiply two numbers: a * b.")  # type: ignore[attr-defined]
divide.__packforge_tool__ = {**_two("Divide a by b: a / b. b must not be 0."), "check": check_divide}  # type: ignore[attr-defined]
convert.__packforge_tool__ = {  # type: ignore[attr-defined]
    "description": "Convert a value between units of one kind (length, mass, volume, temperature).",
    "args": {
        "type": "object",
        "properties": {
            "value": {"type": "number"},
            "unit_from": {"type": "string", "enum": sorted(UNITS)},
            "unit_to": {"type": "string", "enum": sorted(UNITS)},
        },
        "required": ["value", "unit_from", "unit_to"],
        "additionalProperties": False,
    },
    "result": RESULT,
    "side_effects": False,
    "check": check_convert,
}

registry = {"add": add, "subtract": subtract, "multiply": multiply, "divide": divide, "convert": convert}
