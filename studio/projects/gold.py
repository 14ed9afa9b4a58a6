"""One gold per project (docs/proposals.md, "One gold"): the pack's `evalset.jsonl` is the
only file of gold cases; the compiler reads it as the spec's `gold.jsonl`
(studio.projects.specs). Projects made before this kept a second file, `spec/gold.jsonl`;
`merge_gold` folds it into the evalset without losing a case: a new project's spec gold
(create_project), and an existing project's old file (the `one_gold` command, run by
scripts/start, one commit on main)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

OLD_GOLD = "spec/gold.jsonl"
EVALSET = "pack/evalset.jsonl"


@dataclass
class GoldMerge:
    data: bytes
    added: list[str] = field(default_factory=list)  # cases only the old gold had: appended
    renamed: dict[str, str] = field(default_factory=dict)  # a case both had, differently: old gold's kept as the new id
    unreadable: int = 0  # old gold lines that are not a case with an id: appended as they are


def _case_id(line: str) -> str | None:
    try:
        case = json.loads(line)
    except ValueError:
        return None
    return case["id"] if isinstance(case, dict) and isinstance(case.get("id"), str) else None


def merge_gold(evalset: bytes | None, gold: bytes | None) -> GoldMerge:
    """`evalset` with every case of `gold` it lacks appended: a case with an id the
    evalset does not have as is; one whose id the evalset has with other content under a
    new id (`<id>-gold`, `-gold2`, ...); one identical to the evalset's, not again."""
    lines = (evalset or b"").decode("utf-8").splitlines()
    have: dict[str, str] = {}
    for line in lines:
        cid = _case_id(line)
        if cid is not None:
            have[cid] = line
    merged = GoldMerge(b"")
    for line in (gold or b"").decode("utf-8").splitlines():
        if not line.strip():
            continue
        cid = _case_id(line)
        if cid is None:
            merged.unreadable += 1
            lines.append(line)
            continue
        if cid not in have:
            merged.added.append(cid)
        elif json.loads(have[cid]) == json.loads(line):
            continue
        else:
            new = f"{cid}-gold"
            n = 2
            while new in have:
                new, n = f"{cid}-gold{n}", n + 1
            case = json.loads(line)
            case["id"] = new
            line = json.dumps(case, ensure_ascii=False)
            merged.renamed[cid] = new
            cid = new
        have[cid] = line
        lines.append(line)
    merged.data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    return merged


def describe(merged: GoldMerge) -> str:
    parts = [
        f"{len(merged.added)} case(s) only the old gold had, added"
        + (f": {', '.join(merged.added)}" if merged.added else "")
    ]
    if merged.renamed:
        parts.append(
            "cases both had, differently (the old gold's kept under a new id): "
            + ", ".join(f"{a} -> {b}" for a, b in merged.renamed.items())
        )
    if merged.unreadable:
        parts.append(f"{merged.unreadable} old gold line(s) that are not cases, kept as they are")
    return "; ".join(parts)
