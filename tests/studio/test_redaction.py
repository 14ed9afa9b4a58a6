"""The one rule for rejected model text (studio.redaction): authors read it; reviewers
and viewers see that an attempt was rejected and why, never the text. The pages and
the API are tested on each surface (tests/studio/runs, tests/studio/evals)."""

from __future__ import annotations

from typing import Any

import pytest

from studio.accounts.models import Role
from studio.redaction import visible_trace

TRACE: dict[str, Any] = {
    "status": "done",
    "steps": [{"node": "classify", "step": 1}],
    "attempts": [
        {"node": "classify", "step": 1, "attempt": 1, "ok": False, "reason": "not JSON", "text": "a secret guess"},
        {"node": "classify", "step": 1, "attempt": 2, "ok": True, "reason": None, "text": '{"category": "billing"}'},
    ],
}


def test_it_shows_rejected_text_to_an_author() -> None:
    shown = visible_trace(TRACE, Role.AUTHOR)
    assert [(a["text"], a.get("hidden")) for a in shown["attempts"]] == [
        ("a secret guess", False),
        ('{"category": "billing"}', None),
    ]


@pytest.mark.parametrize("role", [Role.REVIEWER, Role.VIEWER])
def test_it_withholds_rejected_text_from_other_members(role: Role) -> None:
    shown = visible_trace(TRACE, role)
    rejected, accepted = shown["attempts"]
    assert (rejected["text"], rejected["hidden"], rejected["reason"]) == ("", True, "not JSON")
    assert accepted["text"] == '{"category": "billing"}'
    assert "a secret guess" not in str(shown)


def test_it_leaves_the_stored_trace_alone() -> None:
    visible_trace(TRACE, Role.VIEWER)
    assert TRACE["attempts"][0]["text"] == "a secret guess"


@pytest.mark.parametrize(("role", "given"), [(Role.AUTHOR, {"name": "ann"}), (Role.VIEWER, None)])
def test_a_rejected_later_draws_given_values_go_with_its_text(role: Role, given: dict[str, str] | None) -> None:
    """A quorum's later draw (sure_fields) keeps the settled values it was given."""
    attempt = {"node": "n", "step": 1, "attempt": 2, "ok": False, "text": '{"city": "x"}', "given": {"name": "ann"}}
    shown = visible_trace({**TRACE, "attempts": [attempt]}, role)
    assert shown["attempts"][0]["given"] == given
