"""An example host scorer registry (docs/pack-format.md, "Host scorers"): the studio's
one-command start registers it (PACKFORGE_SCORERS=packs/invoice_extract/scorers.py:SCORERS),
as the CLI does with `packforge eval --scorers packs/invoice_extract/scorers.py:SCORERS`.

`line_items` gives partial credit to an invoice's line items, where `compare: exact`
gives none: an item matches when its description is the same text (case, spacing and
punctuation aside), its quantity is equal and its amount is within `amount_tolerance`;
the score is the share of items matched, over the longer of the two lists. To use it,
the manifest says

    fields:
      line_items: {compare: "scorer:line_items", options: {amount_tolerance: 0.005}, pass: 1}

(`pass: 0.75` would also accept an answer that misread one item in four)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any


def _text(value: Any) -> str:
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def _same(want: Any, got: Any, tolerance: float) -> bool:
    if not isinstance(want, dict) or not isinstance(got, dict):
        return False
    try:
        amount_ok = abs(float(want.get("amount", 0)) - float(got.get("amount", 0))) <= tolerance
    except (TypeError, ValueError):
        return False
    return (
        amount_ok
        and want.get("quantity") == got.get("quantity")
        and _text(want.get("description", "")) == _text(got.get("description", ""))
    )


def line_items(expected: Any, actual: Any, *, amount_tolerance: float = 0.005) -> tuple[float, str]:
    """(share of line items matched, which were not)."""
    want = expected if isinstance(expected, list) else []
    got = list(actual) if isinstance(actual, list) else []
    if not want and not got:
        return 1.0, "no line items, as expected"
    missing = []
    for item in want:
        hit = next((i for i, g in enumerate(got) if _same(item, g, amount_tolerance)), None)
        if hit is None:
            missing.append(str(item.get("description", "?")) if isinstance(item, dict) else "?")
        else:
            got.pop(hit)
    matched = len(want) - len(missing)
    total = max(len(want), matched + len(got))
    reason = f"{matched} of {len(want)} line items match"
    if missing:
        reason += "; not found: " + ", ".join(repr(m) for m in missing[:3])
    if got:
        reason += f"; {len(got)} answered item{'s match' if len(got) != 1 else ' matches'} none"
    return matched / total, reason


SCORERS = {"line_items": line_items}
