"""Induction quality against hand-written grammars (benchmarks/induction.py and the
induction tests): precision and recall of induced facts per kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.induce import Induction


@dataclass(frozen=True)
class InductionScore:
    """Precision / recall of induced facts against hand-written grammars, per kind.

    A fact is (kind, field path, value): ("type", "order_id", "null|string"),
    ("enum", "intent", ""), ("pattern", "order_id", ""). Only fields that occur in both
    the grammars and the gold cases count (a grammar field no gold case sets cannot be
    induced; `unseen` lists them).
    """

    kinds: dict[str, dict[str, int]]  # kind -> {"induced", "hand", "matched"}
    enum_values: dict[str, int]  # {"hand", "induced", "matched"}: values of matched enums
    unseen: tuple[str, ...]
    mismatches: tuple[str, ...]

    def precision(self, kind: str) -> float | None:
        k = self.kinds[kind]
        return k["matched"] / k["induced"] if k["induced"] else None

    def recall(self, kind: str) -> float | None:
        k = self.kinds[kind]
        return k["matched"] / k["hand"] if k["hand"] else None


SCORED_KINDS = ("type", "enum", "pattern")


def _schema_facts(path: str, s: Mapping[str, Any], out: dict[tuple[str, str], str]) -> None:
    t = s.get("type")
    types = [t] if isinstance(t, str) else list(t or [])
    if types and path:
        out[("type", path)] = "|".join(sorted(types))
    if "enum" in s and path:
        out[("enum", path)] = "|".join(sorted(str(v) for v in s["enum"] if v is not None))
    if "pattern" in s:
        out[("pattern", path)] = str(s["pattern"])
    for k, sub in (s.get("properties") or {}).items():
        _schema_facts(f"{path}.{k}" if path else k, sub, out)
    if isinstance(s.get("items"), Mapping):
        _schema_facts(f"{path}[]", s["items"], out)


def score_against_grammars(induction: Induction, grammars: Sequence[Mapping[str, Any]]) -> InductionScore:
    hand: dict[tuple[str, str], str] = {}
    for g in grammars:
        _schema_facts("", g, hand)
    induced: dict[tuple[str, str], str] = {}
    for name, f in induction.fields.items():
        if f.present:
            _schema_facts(name, f.schema(), induced)
    hand_paths = {p for _, p in hand}
    induced_paths = {p for k, p in induced if k == "type"}
    both = hand_paths & induced_paths
    kinds = {k: {"induced": 0, "hand": 0, "matched": 0} for k in SCORED_KINDS}
    mismatches: list[str] = []
    values = {"hand": 0, "induced": 0, "matched": 0}
    for kind, path in sorted(induced):
        if path in both and kind in kinds:
            kinds[kind]["induced"] += 1
    for (kind, path), v in sorted(hand.items()):
        if path not in both or kind not in kinds:
            continue
        kinds[kind]["hand"] += 1
        got = induced.get((kind, path))
        matched = got is not None if kind != "type" else got == v
        if matched:
            kinds[kind]["matched"] += 1
        else:
            mismatches.append(f"{kind} {path}: hand {v!r}, induced {got!r}")
        if kind == "enum" and got is not None:
            hv, iv = set(v.split("|")), set(got.split("|"))
            values["hand"] += len(hv)
            values["induced"] += len(iv)
            values["matched"] += len(hv & iv)
    for (kind, path), v in sorted(induced.items()):
        if path in both and kind in kinds and (kind, path) not in hand:
            mismatches.append(f"{kind} {path}: induced {v!r}, not in the hand grammar")
    unseen = tuple(sorted(hand_paths - induced_paths))
    return InductionScore(kinds=kinds, enum_values=values, unseen=unseen, mismatches=tuple(mismatches))
