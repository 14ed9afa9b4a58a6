"""The one strict parse of a whole number a client typed (a page, an id in a query string),
and how a share is written on a page (`pct`).

`str.isdigit()` is true for '²', '¹' and '①', which `int()` refuses, and `int()` takes
'٣', ' 3', '+3' and '3_000'; a URL's numbers are none of these. `whole_number` accepts
ASCII digits only, bounded, and answers None for anything else, so each view decides
what a bad value means (its default page, a 400 or a 404) and none of them is a 500."""

from __future__ import annotations

import re

__all__ = ["BIGGEST_ID", "pct", "whole_number"]

# The largest primary key the databases hold (a signed 64-bit integer).
BIGGEST_ID = 2**63 - 1

_DIGITS = re.compile(r"[0-9]+")


def whole_number(raw: object, *, maximum: int = BIGGEST_ID, minimum: int = 0) -> int | None:
    """`raw` as an int when it is ASCII digits from `minimum` to `maximum`; else None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if minimum <= raw <= maximum else None
    if not isinstance(raw, str) or len(raw) > len(str(maximum)) or not _DIGITS.fullmatch(raw):
        return None
    number = int(raw)
    return number if minimum <= number <= maximum else None


def pct(v: float | None) -> str:
    """A share as a page shows it: "12.5%", or "—" when there is none."""
    return "—" if v is None else f"{100 * v:.1f}%"
