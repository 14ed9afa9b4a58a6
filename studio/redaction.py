"""One rule for model text that failed verification: rejected text is shown to the
pack's authors only. It may be wrong in ways that mislead, or carry what the input
held; everyone else sees that an attempt was rejected, its category and its reason,
never the text. Try-it runs, eval case pages and the API all show a trace through
`visible_trace`, over one format: the runtime's trace dict (Trace.to_dict), stored with
the rejected text so that authors can read it."""

from __future__ import annotations

from typing import Any

from studio.accounts.models import Role


def sees_rejected_text(role: Role) -> bool:
    """The rule: who may read a rejected generation's text."""
    return role.can_edit


def visible_attempt(attempt: dict[str, Any], *, shown: bool) -> dict[str, Any]:
    """A copy of one attempt as a reader sees it. A rejected attempt says whether its
    text was withheld (`hidden`); a withheld text is ""."""
    if attempt.get("ok"):
        return dict(attempt)
    return {**attempt, "hidden": not shown, "text": attempt.get("text", "") if shown else ""}


def visible_trace(trace: dict[str, Any], role: Role) -> dict[str, Any]:
    """A copy of a runtime trace dict as `role` may see it."""
    shown = sees_rejected_text(role)
    return {**trace, "attempts": [visible_attempt(a, shown=shown) for a in trace.get("attempts") or []]}
