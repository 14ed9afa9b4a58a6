"""Quorum draws, set-valued fields and requests that do not fit (runtime.nodes.generate):
a rejected draw is left out of the vote instead of failing the node; a repeated item of
a set-valued field is not a reason to reject a draw; a request that cannot fit says
which `truncate:` rule to write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import load_pack, run_pack
from runtime.backends.base import ModelCall, ModelReply
from runtime.errors import ContextOverflow
from tests.support.runtime_packs import ENUM_SCHEMA, GEN, backend_for, write_pack

NO_RETRY = {"resamples": 0, "feedback": 0}


def quorum_pack(tmp_path: Path, draws: list[Any], **node: Any) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={
            "approve": {**GEN, "samples": 3, "agree": 2, "retry": NO_RETRY, **node},
            "done": {"kind": "end"},
            "human": {"kind": "end"},
            "broken": {"kind": "end"},
        },
        edges=[
            {"from": "approve", "to": "done"},
            {"from": "approve", "on_unsure": "human"},
            {"from": "approve", "on_fail": "broken"},
        ],
        grammars={"approve": ENUM_SCHEMA},
        script={"nodes": {"approve": draws}},
    )


def test_a_rejected_draw_is_left_out_and_the_valid_draws_that_agree_settle_the_node(tmp_path: Path) -> None:
    root = quorum_pack(tmp_path, [{"category": "billing"}, {"category": "nope"}, {"category": "billing"}])
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.trace.path == ["approve", "done"]
    assert result.output == {"category": "billing"} and result.tier == "auto"
    assert [(a.attempt, a.ok, a.category) for a in result.trace.attempts] == [
        (1, True, None),
        (2, False, "schema"),
        (3, True, None),
    ]


def test_too_few_valid_draws_agreeing_is_unsure_not_a_failure(tmp_path: Path) -> None:
    root = quorum_pack(tmp_path, [{"category": "billing"}, {"category": "nope"}, {"category": "other"}])
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.trace.path == ["approve", "human"]
    assert result.trace.steps[0].status == "unsure"
    assert result.trace.steps[0].reason == "draws disagreed (1, 1 of 2 valid; 1 rejected; need 2)"


def test_a_rejected_draw_is_redrawn_within_its_ladder(tmp_path: Path) -> None:
    root = quorum_pack(
        tmp_path,
        [{"category": "nope"}, {"category": "billing"}, {"category": "billing"}, {"category": "other"}],
        retry={"resamples": 1, "feedback": 0},
    )
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.output == {"category": "billing"}
    assert [a.stage for a in result.trace.attempts] == ["sample", "resample", "sample", "sample"]


def test_every_draw_rejected_fails_the_node(tmp_path: Path) -> None:
    root = quorum_pack(tmp_path, [{"category": "x"}, {"category": "y"}, {"category": "z"}])
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.trace.path == ["approve", "broken"]
    assert result.trace.steps[0].reason.startswith("all 3 draws were rejected; last: schema:")


LABELS_SCHEMA = {
    "type": "object",
    "required": ["labels"],
    "properties": {
        "labels": {"type": "array", "items": {"enum": ["bug", "billing", "ui"]}, "uniqueItems": True},
    },
}


def labels_pack(tmp_path: Path, answers: list[Any], fields: dict[str, Any] | None) -> Path:
    return write_pack(
        tmp_path / "p",
        manifest={"fields": fields} if fields else None,
        nodes={
            "tag": {"kind": "generate", "reads": ["input.ticket"], "writes": ["labels"], "retry": NO_RETRY},
            "done": {"kind": "end"},
            "broken": {"kind": "end"},
        },
        edges=[{"from": "tag", "to": "done"}, {"from": "tag", "on_fail": "broken"}],
        grammars={"tag": LABELS_SCHEMA},
        script={"nodes": {"tag": answers}},
    )


def test_a_repeated_label_of_a_set_field_is_dropped_and_said_in_the_trace(tmp_path: Path) -> None:
    root = labels_pack(tmp_path, [{"labels": ["ui", "bug", "ui"]}], {"labels": {"compare": "set"}})
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.status == "done" and result.output == {"labels": ["bug", "ui"]}
    assert result.trace.steps[0].notes == [
        "labels: taken as a set (1 repeated item dropped, sorted; fields.labels is compare: set)"
    ]
    assert result.trace.attempts[0].text == '{"labels": ["ui", "bug", "ui"]}'  # the model's own words are kept


def test_without_compare_set_a_repeated_label_is_still_rejected(tmp_path: Path) -> None:
    root = labels_pack(tmp_path, [{"labels": ["ui", "bug", "ui"]}], None)
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.trace.path == ["tag", "broken"]
    assert result.trace.attempts[0].category == "schema"


class Overflowing:
    """A server whose context no request fits (llama-server's exceed_context_size_error)."""

    spec = "overflowing"

    def complete(self, call: ModelCall) -> ModelReply:
        raise ContextOverflow("request (4350 tokens) exceeds the available context size (4096 tokens)", "r1")

    def close(self) -> None:
        pass


def test_a_request_that_cannot_fit_names_the_truncate_rule_to_write(tmp_path: Path) -> None:
    root = quorum_pack(tmp_path, [{"category": "billing"}])
    result = run_pack(load_pack(root), {"ticket": "x" * 9000, "lang": "en"}, backend=Overflowing())
    reason = result.trace.steps[0].reason
    assert result.trace.path == ["approve", "broken"]
    assert "exceeds the available context size" in reason
    assert "input.ticket is 9000 characters and manifest.yaml has no truncate: rule for it" in reason
    assert "truncate: {ticket: {max_chars: 4500, keep: head}}" in reason
