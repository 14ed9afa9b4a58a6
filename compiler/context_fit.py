"""Fitting the target's context (docs/compiler.md, "The verdict"): the runtime cuts
few-shot examples first when a request does not fit (runtime.nodes.generate); a case
that still overflows with none left has an input too long for the target. For those,
the judged pack gets a truncation rule (the manifest's `truncate:`, docs/pack-format.md):
the string input field that is longest on the overflowing cases is cut, keeping its
head, to the longest value of that field that fit on the target during the search (half
the shortest overflowing one when none fit). The rule is measured, not guessed: it comes
from the cases the target answered, and the overflowing cases are run again under it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from compiler.spec import Spec
from compiler.trials import CaseOutcome

MANIFEST = "manifest.yaml"


@dataclass(frozen=True)
class FitRule:
    """Cut input `field` to `max_chars` characters, keeping its head."""

    field: str
    max_chars: int
    keep: str = "head"

    def sentence(self) -> str:
        return (
            f"input.{self.field} is cut to its first {self.max_chars} characters: the longest "
            f"{self.field} that fit the target's context during the search"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "max_chars": self.max_chars, "keep": self.keep, "sentence": self.sentence()}


def fit_rule(spec: Spec, outcomes: Sequence[CaseOutcome]) -> FitRule | None:
    """The rule for the overflowing cases among `outcomes` (None: none overflowed, or
    no string input field to cut)."""
    by_id = {c.id: c for c in spec.gold}
    over = [by_id[o.id] for o in outcomes if o.overflow and o.id in by_id]
    if not over:
        return None
    lengths: dict[str, int] = {}
    for case in over:
        for name, value in case.input.items():
            if isinstance(value, str):
                lengths[name] = max(lengths.get(name, 0), len(value))
    if not lengths:
        return None
    field = max(lengths, key=lambda name: (lengths[name], name))
    fitted = [
        len(by_id[o.id].input[field])
        for o in outcomes
        if not o.overflow and o.id in by_id and isinstance(by_id[o.id].input.get(field), str)
    ]
    shortest_over = min(len(c.input[field]) for c in over if isinstance(c.input.get(field), str))
    limit = max(fitted) if fitted else shortest_over // 2
    limit = min(limit, shortest_over - 1)  # the rule must cut every overflowing value
    return FitRule(field, max(1, limit))


def apply_rule(pack_dir: Path, rule: FitRule) -> None:
    """Add the rule to the pack's manifest (`truncate:`), keeping its other keys."""
    path = pack_dir / MANIFEST
    text = path.read_text(encoding="utf-8")
    head = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    doc = yaml.safe_load(text) or {}
    doc["truncate"] = {rule.field: {"max_chars": rule.max_chars, "keep": rule.keep}}
    path.write_text(
        head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False),
        encoding="utf-8",
    )


__all__ = ["FitRule", "apply_rule", "fit_rule"]
