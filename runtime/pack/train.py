"""The manifest's train split: `train_tag` (evalset cases with this tag are the train
split: few-shot examples may equal them, and the eval report scores the other cases
apart) and `train_cases` (ids given the tag in memory, for a compiled pack whose split
was seeded rather than tagged: the compiler may not edit gold, docs/invariants.md 6)."""

from __future__ import annotations

import dataclasses
from typing import Any

from runtime.errors import PackIssue
from runtime.pack.model import Case, Pack
from runtime.pack.yamlsrc import SourceMap


def train_tag(value: Any, src: SourceMap, issues: list[PackIssue]) -> str | None:
    """`train_tag: TAG`: evalset cases with this tag are the train split (few-shot
    examples may equal them; the eval report scores the other cases apart)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        issues.append(src.issue("train_tag must be a tag (a non-empty string), e.g. train", "train_tag"))
        return None
    return value


def tag_train_cases(pack: Pack, value: Any, src: SourceMap, issues: list[PackIssue]) -> list[Case]:
    """`train_cases: [ID, ...]` (with `train_tag`): the evalset cases that are the train
    split without carrying the tag in evalset.jsonl (a compiled pack's seeded split: the
    compiler may not edit gold). Each listed case gets the train tag in memory."""
    if value is None:
        return pack.cases
    if pack.train_tag is None:
        issues.append(src.issue("train_cases needs train_tag: the tag the listed cases are given", "train_cases"))
        return pack.cases
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        issues.append(src.issue("train_cases must be a list of evalset case ids", "train_cases"))
        return pack.cases
    known = {c.id for c in pack.cases}
    for missing in [v for v in value if v not in known and known][:5]:  # no cases parsed: their issues say why
        issues.append(src.issue(f"train_cases names '{missing}', which is not an evalset case id", "train_cases"))
    listed = set(value)
    return [
        dataclasses.replace(c, tags=(*c.tags, pack.train_tag)) if c.id in listed and pack.train_tag not in c.tags else c
        for c in pack.cases
    ]
