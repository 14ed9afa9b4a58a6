"""The gold cases' `tools` lists: the tool calls each case's gold path makes, in order (the
evalset's `tools` key, docs/pack-format.md). The spec loader checks the key (the
runtime's evalset parser) but keeps no copy on `GoldCase`, so it is read back here from
the gold bytes, with the same parser."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime import PackIssue, parse_evalset

if TYPE_CHECKING:
    from compiler.spec import Spec


def gold_tools(spec: Spec) -> dict[str, tuple[str, ...] | None]:
    """Per gold case id, the tools its gold path calls in order; None when it does not say."""
    issues: list[PackIssue] = []
    cases = parse_evalset(spec.gold_bytes.decode("utf-8", errors="replace"), None, issues)
    return {c.id: c.tools for c in cases}
