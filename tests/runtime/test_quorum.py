"""Quorum draws, set-valued fields and requests that do not fit (runtime.nodes.generate):
a rejected draw is left out of the vote instead of failing the node; a repeated item of
a set-valued field is not a reason to reject a draw; a request that cannot fit says
which `truncate:` rule to write."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from runtime import load_pack, run_pack
from runtime.backends.base import ModelCall, ModelReply
from runtime.errors import ContextOverflow
from runtime.nodes.voting import decided
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
    # The redrawn first draw and the second agree: the third cannot change the vote.
    assert [a.stage for a in result.trace.attempts] == ["sample", "resample", "sample"]
    assert "the vote was decided; stopped after 2 of 3 draws" in result.trace.steps[0].notes


def test_every_draw_rejected_fails_the_node(tmp_path: Path) -> None:
    root = quorum_pack(tmp_path, [{"category": "x"}, {"category": "y"}, {"category": "z"}])
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.trace.path == ["approve", "broken"]
    assert result.trace.steps[0].reason.startswith("all 3 draws were rejected; last: schema:")


def test_draws_stop_once_two_agree_when_two_of_three_are_needed(tmp_path: Path) -> None:
    root = quorum_pack(tmp_path, [{"category": "billing"}, {"category": "billing"}, {"category": "other"}])
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.output == {"category": "billing"} and result.tier == "auto"
    assert len(result.trace.attempts) == 2  # the scripted third answer was never asked for
    assert result.trace.steps[0].notes == ["the vote was decided; stopped after 2 of 3 draws"]


def test_draws_stop_once_no_answer_can_reach_agree(tmp_path: Path) -> None:
    root = quorum_pack(tmp_path, [{"category": "billing"}, {"category": "other"}, {"category": "billing"}], agree=3)
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.trace.path == ["approve", "human"]
    assert len(result.trace.attempts) == 2
    assert result.trace.steps[0].reason == "draws disagreed (1, 1 of 2; need 3; stopped after 2 of 3 draws)"


def test_draw_all_makes_every_draw(tmp_path: Path) -> None:
    root = quorum_pack(
        tmp_path, [{"category": "billing"}, {"category": "billing"}, {"category": "other"}], draw_all=True
    )
    result = run_pack(load_pack(root), {"ticket": "t"}, backend=backend_for(root))
    assert result.output == {"category": "billing"}
    assert len(result.trace.attempts) == 3 and result.trace.steps[0].notes == []


def _outcome(labels: tuple[str | None, ...], agree: int) -> tuple[str, int | None]:
    """The vote over draws given as labels (None: a rejected draw), as the node decides it:
    ("ok", index of the committed draw), ("unsure", None) or ("fail", None)."""
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        if label is not None:
            groups.setdefault(label, []).append(i)
    if not groups:
        return ("fail", None)
    best = max(groups.values(), key=len)  # the first of the largest, as runtime.nodes.generate picks
    return ("ok", best[0]) if len(best) >= agree else ("unsure", None)


def test_stopping_early_never_changes_the_vote() -> None:
    """Every sequence of up to 5 draws over two answers and a rejection, every `agree`:
    the vote at the first prefix `decided` accepts equals the vote over every draw."""
    for samples in range(2, 6):
        for agree in range(1, samples + 1):
            for labels in itertools.product(("a", "b", None), repeat=samples):
                for made in range(1, samples + 1):
                    prefix = labels[:made]
                    groups: dict[str, list[int]] = {}
                    for i, label in enumerate(prefix):
                        if label is not None:
                            groups.setdefault(label, []).append(i)
                    if made < samples and decided(list(groups.values()), samples - made, agree):
                        break
                assert _outcome(prefix, agree) == _outcome(labels, agree), (labels, agree, made)


def test_decided_stops_where_it_can() -> None:
    assert decided([[0, 1]], 1, 2)  # two agree, one to come: settled
    assert not decided([[0], [1]], 1, 2)  # a third draw could side with either
    assert decided([[0], [1]], 1, 3)  # unanimity is out of reach
    assert not decided([], 2, 1)  # nothing valid yet: it could still be a failure


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
