"""Train / validation / test splits of a spec's gold cases (docs/compiler.md, "Splits").

- **train** is the only source of few-shot examples and of anything learned;
- **validation** scores every choice the search makes;
- **test** is reported, never used for a choice.

A spec names its splits by tags (`train:`, `validation:`, `test:`); a case with none of
the tags it names goes to the split left unnamed (or, with every split named, is
left out and reported). With no tags the split is seeded and stratified: cases are
grouped by their closed-choice expected values (the `values:` fields, or, without any,
every scalar output), each group shuffled with the seed and dealt to test, validation
and train in turn so every label that has enough cases shows up in each split. The same
spec and seed always give the same split, byte for byte.

Cases the spec sends to its unsure end, and cases whose input equals another case's,
stay together in one split (a duplicate input across splits would leak its answer)."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compiler.spec import GoldCase, Spec

SplitName = Literal["train", "validation", "test"]
SPLITS: tuple[SplitName, ...] = ("train", "validation", "test")


@dataclass(frozen=True)
class Split:
    """Case ids per split, in gold order, and how they were made."""

    method: Literal["tags", "seeded"]
    seed: int | None
    train: tuple[str, ...]
    validation: tuple[str, ...]
    test: tuple[str, ...]
    left_out: tuple[str, ...] = ()
    unseen_labels: dict[str, list[Any]] = field(default_factory=dict)

    def ids(self, name: SplitName) -> tuple[str, ...]:
        return {"train": self.train, "validation": self.validation, "test": self.test}[name]

    def cases(self, spec: Spec, name: SplitName) -> list[GoldCase]:
        wanted = set(self.ids(name))
        return [c for c in spec.gold if c.id in wanted]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "seed": self.seed,
            "train": list(self.train),
            "validation": list(self.validation),
            "test": list(self.test),
            "left_out": list(self.left_out),
            "unseen_labels": {k: list(v) for k, v in self.unseen_labels.items()},
        }

    def summary(self) -> str:
        text = (
            f"split ({self.method}): train {len(self.train)}, validation {len(self.validation)}, test {len(self.test)}"
        )
        if self.unseen_labels:
            shown = "; ".join(f"{f}: {', '.join(map(str, v))}" for f, v in self.unseen_labels.items())
            text += f"; labels train never shows: {shown}"
        return text


def without_test(spec: Spec, split: Split) -> Spec:
    """`spec` with its test cases left out: their gold lines, and the cases. What the
    planner and the offline structure check see when the build is judged on a target, so
    no test case shapes a plan."""
    test = set(split.test)
    if not test:
        return spec
    dropped = {c.line for c in spec.gold if c.id in test}
    lines = spec.gold_bytes.splitlines(keepends=True)
    kept = b"".join(line for n, line in enumerate(lines, 1) if n not in dropped)
    return dataclasses.replace(spec, gold=tuple(c for c in spec.gold if c.id not in test), gold_bytes=kept)


def split_gold(spec: Spec) -> Split:
    """The split of `spec`'s gold cases: by its tags when it names any, else seeded."""
    tags = {"train": spec.train, "validation": spec.validation, "test": spec.test}
    result = _by_tags(spec.gold, tags) if any(tags.values()) else _seeded(spec)
    return _with_unseen(spec, result)


def _by_tags(gold: Sequence[GoldCase], tags: Mapping[str, str | None]) -> Split:
    named = {name: tag for name, tag in tags.items() if tag}
    unnamed = [name for name in SPLITS if name not in named]
    parts: dict[str, list[str]] = {name: [] for name in SPLITS}
    left_out: list[str] = []
    for case in gold:
        home = next((name for name, tag in named.items() if tag in case.tags), None)
        if home is None:
            home = unnamed[-1] if unnamed else None  # untagged cases: the last unnamed split (test, then validation)
        if home is None:
            left_out.append(case.id)
        else:
            parts[home].append(case.id)
    if len(unnamed) == 2:  # only one split named: the rest is shared between the two others, half each
        rest = parts[unnamed[-1]]
        half = len(rest) // 2
        parts[unnamed[0]], parts[unnamed[1]] = rest[:half], rest[half:]
    return Split("tags", None, tuple(parts["train"]), tuple(parts["validation"]), tuple(parts["test"]), tuple(left_out))


def _seeded(spec: Spec) -> Split:
    """Bundles ordered by stratum (shuffled with the seed inside each), then dealt one by
    one to the split furthest below its share of the bundles dealt so far: systematic
    sampling, so each stratum is spread over the three splits in proportion."""
    rule = spec.split
    rng = random.Random(rule.seed)
    strata: dict[str, list[list[str]]] = defaultdict(list)
    for key, members in _groups(spec):
        strata[key].append(members)
    shares: dict[SplitName, float] = {"test": rule.test, "validation": rule.validation}
    shares["train"] = 1.0 - rule.test - rule.validation
    parts: dict[SplitName, list[str]] = {name: [] for name in SPLITS}
    dealt = 0
    for key in sorted(strata):
        bundles = strata[key]
        rng.shuffle(bundles)
        for members in bundles:
            dealt += len(members)
            home = max(SPLITS, key=lambda n: (shares[n] * dealt - len(parts[n]), -SPLITS.index(n)))
            parts[home].extend(members)
    order = {c.id: i for i, c in enumerate(spec.gold)}
    train, validation, test = (tuple(sorted(parts[n], key=order.__getitem__)) for n in SPLITS)
    return Split("seeded", rule.seed, train, validation, test)


def _groups(spec: Spec) -> list[tuple[str, list[str]]]:
    """Bundles of case ids that must share a split (same input), each with its stratum
    key (the case's closed-choice expected values)."""
    fields = _strata_fields(spec)
    bundles: dict[str, list[GoldCase]] = {}
    for case in spec.gold:
        bundles.setdefault(json.dumps(case.input, sort_keys=True), []).append(case)
    out = []
    for members in bundles.values():
        first = members[0]
        key = json.dumps([_label(first.expected.get(f)) for f in fields] + [first.end or ""], sort_keys=True)
        out.append((key, [c.id for c in members]))
    return out


def _strata_fields(spec: Spec) -> list[str]:
    declared = [name for name, f in spec.outputs.items() if f.values is not None]
    if declared:
        return declared[:2]  # the first two closed fields: finer strata leave most groups of one case
    return []


def _label(value: Any) -> Any:
    return sorted(map(str, value)) if isinstance(value, list) else value


def _with_unseen(spec: Spec, split: Split) -> Split:
    """The same split, with the closed-field labels that validation or test hold and
    train never shows (per field; list items count one by one)."""
    fields = [name for name, f in spec.outputs.items() if f.values is not None]
    by_id = {c.id: c for c in spec.gold}

    def labels(ids: Iterable[str], name: str) -> set[str]:
        found: set[str] = set()
        for i in ids:
            value = by_id[i].expected.get(name)
            for item in value if isinstance(value, list) else [value]:
                if item is not None:
                    found.add(json.dumps(item))
        return found

    unseen: dict[str, list[Any]] = {}
    for name in fields:
        missing = (labels(split.validation, name) | labels(split.test, name)) - labels(split.train, name)
        if missing:
            unseen[name] = [json.loads(v) for v in sorted(missing)]
    return Split(
        split.method, split.seed, split.train, split.validation, split.test, split.left_out, unseen_labels=unseen
    )


__all__ = ["SPLITS", "Split", "SplitName", "split_gold"]
