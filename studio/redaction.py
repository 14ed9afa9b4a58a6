"""One rule for model text that failed verification: rejected text is shown to the
pack's authors only. It may be wrong in ways that mislead, or carry what the input
held; everyone else sees that an attempt was rejected, its category and its reason,
never the text. Try-it runs, eval case pages and the API all show a trace through
`visible_trace`, over one format: the runtime's trace dict (Trace.to_dict), stored with
the rejected text so that authors can read it.

Two more rules live here. Every text the studio stores that a server or a model wrote
(an endpoint check's answer and error, a run's or a case's trace, output and error)
goes through `stored` first: runtime.redact_data takes out every key the process has
opened (runtime.logs' secret registry, which the openai backend fills as it reads a
key), every environment value whose name says KEY/TOKEN/SECRET/PASSWORD, and bearer
tokens; a server that echoes its Authorization header puts nothing in the database. And
an endpoint check's details (answer, error, latency) are for staff (`visible_check`):
others see whether it passed and when."""

from __future__ import annotations

from typing import Any

from runtime import redact_data
from studio.accounts.models import Role

CHECK_SUMMARY = ("state", "ok", "checked_at", "requested_at")


def sees_rejected_text(role: Role) -> bool:
    """The rule: who may read a rejected generation's text."""
    return role.can_edit


def visible_attempt(attempt: dict[str, Any], *, shown: bool) -> dict[str, Any]:
    """A copy of one attempt as a reader sees it. A rejected attempt says whether its
    text was withheld (`hidden`); a withheld text is ""."""
    if attempt.get("ok"):
        return dict(attempt)
    withheld = {"text": attempt.get("text", "") if shown else ""}
    if "given" in attempt:  # a quorum's settled values that completed the answer: withheld with it
        withheld["given"] = attempt["given"] if shown else None
    return {**attempt, "hidden": not shown, **withheld}


def visible_trace(trace: dict[str, Any], role: Role) -> dict[str, Any]:
    """A copy of a runtime trace dict as `role` may see it."""
    shown = sees_rejected_text(role)
    return {**trace, "attempts": [visible_attempt(a, shown=shown) for a in trace.get("attempts") or []]}


def stored(value: Any) -> Any:
    """`value` (a trace dict, a check result, an error text) as the studio stores it:
    every key and secret in it redacted (runtime.redact_data)."""
    return redact_data(value)


def visible_check(check: dict[str, Any] | None, *, staff: bool) -> dict[str, Any] | None:
    """An endpoint's `last_check` as a reader sees it: all of it for staff; for others
    whether it passed and when (CHECK_SUMMARY), no answer, error or timings."""
    if check is None or staff:
        return check
    return {k: check[k] for k in CHECK_SUMMARY if k in check}
