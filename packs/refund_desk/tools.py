"""Host tools for the refund_desk pack: an order lookup and a refund call.

Register them with `--tools packs/refund_desk/tools.py:registry`. Both are plain
functions taking keyword arguments and returning JSON objects; both read a static
order table, so every run is repeatable offline. A real deployment would replace
them with calls to the order system and the payment provider."""

from __future__ import annotations

from typing import Any

# order_id -> order. days_since_delivery is null for orders not delivered yet.
ORDERS: dict[str, dict[str, Any]] = {
    "ORD-10001": {
        "customer": "Ana Ruiz",
        "item": "Ceramic pour-over set",
        "total_usd": 89.99,
        "status": "delivered",
        "days_since_delivery": 3,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10002": {
        "customer": "Ben Okafor",
        "item": "Wool beanie, grey",
        "total_usd": 45.50,
        "status": "delivered",
        "days_since_delivery": 10,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10003": {
        "customer": "Chen Wei",
        "item": "Clearance sneakers, size 42",
        "total_usd": 39.00,
        "status": "delivered",
        "days_since_delivery": 5,
        "final_sale": True,
        "refunded_usd": 0.0,
    },
    "ORD-10004": {
        "customer": "Dana Kim",
        "item": "Bluetooth speaker",
        "total_usd": 129.00,
        "status": "delivered",
        "days_since_delivery": 75,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10005": {
        "customer": "Eli Novak",
        "item": "Desk lamp",
        "total_usd": 54.00,
        "status": "shipped",
        "days_since_delivery": None,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10006": {
        "customer": "Fatima Zahra",
        "item": "Rain jacket, M",
        "total_usd": 129.00,
        "status": "delivered",
        "days_since_delivery": 28,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10007": {
        "customer": "Gus Lindqvist",
        "item": "Cast-iron skillet",
        "total_usd": 64.00,
        "status": "delivered",
        "days_since_delivery": 33,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10008": {
        "customer": "Hana Sato",
        "item": "Standing desk + express shipping",
        "total_usd": 479.00,
        "status": "delivered",
        "days_since_delivery": 2,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10009": {
        "customer": "Ivan Petrov",
        "item": "Noise-cancelling headphones",
        "total_usd": 199.00,
        "status": "delivered",
        "days_since_delivery": 6,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10010": {
        "customer": "Jo Mensah",
        "item": "Yoga mat",
        "total_usd": 35.00,
        "status": "delivered",
        "days_since_delivery": 14,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10011": {
        "customer": "Kai Müller",
        "item": "Coffee grinder",
        "total_usd": 149.00,
        "status": "delivered",
        "days_since_delivery": 8,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10012": {
        "customer": "Lena Rossi",
        "item": "Linen bedding set",
        "total_usd": 220.00,
        "status": "delivered",
        "days_since_delivery": 12,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10013": {
        "customer": "Marta Silva",
        "item": "Running watch",
        "total_usd": 249.00,
        "status": "delivered",
        "days_since_delivery": 20,
        "final_sale": False,
        "refunded_usd": 249.00,
    },
    "ORD-10014": {
        "customer": "Nico Laurent",
        "item": "Espresso cups (6)",
        "total_usd": 42.00,
        "status": "processing",
        "days_since_delivery": None,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
    "ORD-10015": {
        "customer": "Omar Haddad",
        "item": "Hiking boots",
        "total_usd": 180.00,
        "status": "delivered",
        "days_since_delivery": 18,
        "final_sale": False,
        "refunded_usd": 0.0,
    },
}


def lookup_order(order_id: str) -> dict[str, Any]:
    """Return {"order": {...}}; an unknown order id raises LookupError (the node's on_fail)."""
    order = ORDERS.get(order_id)
    if order is None:
        raise LookupError(f"no order {order_id}")
    return {"order": {"order_id": order_id, **order}}


def issue_refund(order_id: str, amount_usd: float, *, idempotency_key: str | None = None) -> dict[str, Any]:
    """Refund `amount_usd` on `order_id`. Refuses more than is left to refund.

    A side effect: the runtime passes `idempotency_key` (the same on a re-execution after
    a kill); a real payment provider takes it as its idempotency key, so the refund is
    made once however often it is asked for (docs/tools.md#idempotency)."""
    order = ORDERS.get(order_id)
    if order is None:
        raise LookupError(f"no order {order_id}")
    left = round(order["total_usd"] - order["refunded_usd"], 2)
    if not 0 < amount_usd <= left:
        raise ValueError(f"refund of {amount_usd} is outside 0..{left}")
    return {"refund_id": f"R-{order_id}", "refunded": True}


# The declarations the host registry reads (runtime.tools, docs/tools.md): a description,
# the JSON schema of the keyword arguments and of the object returned (both checked on
# every call), and whether the tool has side effects. A compiler's planner sees the same.
# The result schemas are the pack's grammars/lookup.json and grammars/refund.json (a test
# keeps them equal).
lookup_order.__packforge_tool__ = {  # type: ignore[attr-defined]
    "description": "Fetch an order by its id (like ORD-10001). An unknown id raises, which takes the node's on_fail.",
    "side_effects": False,
    "args": {
        "type": "object",
        "properties": {"order_id": {"type": "string", "description": "The order number, as the customer wrote it."}},
        "required": ["order_id"],
    },
    "result": {
        "type": "object",
        "properties": {
            "order": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$"},
                    "customer": {"type": "string"},
                    "item": {"type": "string"},
                    "total_usd": {"type": "number", "minimum": 0},
                    "status": {"type": "string", "enum": ["processing", "shipped", "delivered", "cancelled"]},
                    "days_since_delivery": {"type": ["integer", "null"], "minimum": 0},
                    "final_sale": {"type": "boolean"},
                    "refunded_usd": {"type": "number", "minimum": 0},
                },
                "required": ["order_id", "total_usd", "status", "days_since_delivery", "final_sale", "refunded_usd"],
                "additionalProperties": False,
            }
        },
        "required": ["order"],
        "additionalProperties": False,
    },
}

issue_refund.__packforge_tool__ = {  # type: ignore[attr-defined]
    "description": "Refund an amount in dollars on an order. Refuses more than is left to refund on it.",
    "side_effects": True,
    "args": {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": "The order to refund."},
            "amount_usd": {"type": "number", "description": "Dollars to refund, more than 0."},
        },
        "required": ["order_id", "amount_usd"],
    },
    "result": {
        "type": "object",
        "properties": {
            "refund_id": {"type": "string", "pattern": "^R-ORD-[0-9]{5}$"},
            "refunded": {"type": "boolean", "const": True},
        },
        "required": ["refund_id", "refunded"],
        "additionalProperties": False,
    },
}


registry = {"lookup_order": lookup_order, "issue_refund": issue_refund}
