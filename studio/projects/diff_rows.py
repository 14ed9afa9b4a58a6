"""Two versions of a text file as the side-by-side diff pages show it: one row per line
pair (left number, left text, right number, right text, kind: same/change/del/add)."""

from __future__ import annotations

import difflib


def side_by_side(old: str, new: str) -> list[tuple[int | None, str, int | None, str, str]]:
    a, b = old.splitlines(), new.splitlines()
    rows: list[tuple[int | None, str, int | None, str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [(i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k], "same") for k in range(i2 - i1)]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            left = (i1 + k + 1, a[i1 + k]) if i1 + k < i2 else (None, "")
            right = (j1 + k + 1, b[j1 + k]) if j1 + k < j2 else (None, "")
            kind = "change" if left[0] and right[0] else ("del" if left[0] else "add")
            rows.append((left[0], left[1], right[0], right[1], kind))
    return rows
