"""The tools catalogue: what a planner knows about the host's tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from compiler import CompilerError, ToolSpec, catalogue
from runtime import load_tools

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "packs" / "refund_desk"


@pytest.fixture
def refund_registry() -> dict[str, Any]:
    registry = load_tools(f"{REFUND / 'tools.py'}:registry")
    assert registry is not None
    return registry


def test_it_reads_a_tools_declaration(refund_registry: dict[str, Any]) -> None:
    tools = catalogue(refund_registry, ["lookup_order", "issue_refund"])
    assert list(tools) == ["lookup_order", "issue_refund"]
    lookup = tools["lookup_order"]
    assert lookup.arg_names == ("order_id",)
    assert lookup.result_fields == ("order",)
    assert "unknown id raises" in lookup.description
    assert tools["issue_refund"].arg_names == ("order_id", "amount_usd")
    assert tools["issue_refund"].result_fields == ("refund_id", "refunded")


def test_it_declares_the_result_schemas_the_pack_validates_with(refund_registry: dict[str, Any]) -> None:
    tools = catalogue(refund_registry, ["lookup_order", "issue_refund"])
    for tool, grammar in (("lookup_order", "lookup.json"), ("issue_refund", "refund.json")):
        assert tools[tool].result == json.loads((REFUND / "grammars" / grammar).read_text())


def test_it_declares_results_the_functions_really_return(refund_registry: dict[str, Any]) -> None:
    tools = catalogue(refund_registry, ["lookup_order", "issue_refund"])
    order = refund_registry["lookup_order"](order_id="ORD-10001")
    jsonschema.validate(order, tools["lookup_order"].result)
    jsonschema.validate({"order_id": "ORD-10001"}, tools["lookup_order"].args)
    refund = refund_registry["issue_refund"](order_id="ORD-10002", amount_usd=10.0)
    jsonschema.validate(refund, tools["issue_refund"].result)
    jsonschema.validate({"order_id": "ORD-10002", "amount_usd": 10.0}, tools["issue_refund"].args)


def test_it_falls_back_to_the_signature_without_a_declaration() -> None:
    def ship(order_id: str, *, carrier: str = "post") -> dict[str, Any]:
        """Ship an order.

        More words."""
        return {}

    spec = catalogue({"ship": ship}, ["ship"])["ship"]
    assert spec == ToolSpec(
        "ship",
        "Ship an order.",
        {"type": "object", "properties": {"order_id": {}, "carrier": {}}, "required": ["order_id"]},
        {"type": "object"},
    )


def test_it_names_every_spec_tool_the_registry_lacks(refund_registry: dict[str, Any]) -> None:
    with pytest.raises(CompilerError) as caught:
        catalogue(refund_registry, ["lookup_order", "cancel_order", "ship"])
    assert "cancel_order, ship" in str(caught.value)
    assert "issue_refund, lookup_order" in str(caught.value)


def test_it_refuses_a_declaration_that_is_not_an_object_schema() -> None:
    def bad() -> dict[str, Any]:
        return {}

    bad.__packforge_tool__ = {"args": {"type": "array"}}  # type: ignore[attr-defined]
    with pytest.raises(CompilerError, match="must be a JSON schema of an object"):
        catalogue({"bad": bad}, ["bad"])


def test_it_knows_only_names_without_a_registry() -> None:
    tools = catalogue(None, ["lookup_order"])
    assert tools == {"lookup_order": ToolSpec("lookup_order")}
