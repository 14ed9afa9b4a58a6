"""The example scorer registry and a pack field it scores, for the scorer tests of the
runtime (tests/runtime/test_scorers.py) and the studio (tests/studio/evals/test_scorers.py)."""

from __future__ import annotations

from tests.support.runtime_packs import REPO

EXAMPLE = f"{REPO / 'packs' / 'invoice_extract' / 'scorers.py'}:SCORERS"  # MODULE:SCORERS, as --scorers takes it
ITEMS_SCHEMA = {
    "type": "object",
    "required": ["items"],
    "properties": {"items": {"type": "array", "items": {"type": "object"}}},
}
WANT = [
    {"description": "Gel pens", "quantity": 2, "amount": 17.98},
    {"description": "Paper", "quantity": 4, "amount": 9.5},
]
