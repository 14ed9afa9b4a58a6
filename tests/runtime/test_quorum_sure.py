"""A quorum's first draw that the model was sure of stands alone (`sure: P`,
runtime.nodes.generate), against the fault server, which streams logprobs as
llama-server does: every piece of the answer at `token_logprob`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from runtime import load_pack, run_pack
from runtime.backends import Backend
from runtime.backends.base import TokenLogprob
from runtime.nodes.voting import least_p
from tests.support.fault_server import FaultServer, in_order
from tests.support.runtime_packs import ENUM_SCHEMA, GEN, issues_of, write_pack


def sure_pack(tmp_path: Path, **node: Any) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={
            "approve": {**GEN, "samples": 3, "agree": 2, **node},
            "done": {"kind": "end"},
            "human": {"kind": "end"},
        },
        edges=[{"from": "approve", "to": "done"}, {"from": "approve", "on_unsure": "human"}],
        grammars={"approve": ENUM_SCHEMA},
    )


def _answer(body: dict[str, Any]) -> str:
    return json.dumps({"category": "billing"})


@pytest.mark.parametrize(("logprob", "calls"), [(math.log(0.6), 1), (math.log(0.4), 2)], ids=["sure", "not-sure"])
def test_the_first_draw_stands_alone_when_every_token_was_likely_enough(
    tmp_path: Path, fault: FaultServer, backend: Backend, logprob: float, calls: int
) -> None:
    fault.configure(answer=_answer, token_logprob=logprob)
    result = run_pack(load_pack(sure_pack(tmp_path, sure=0.5)), {"ticket": "t"}, backend=backend)
    assert result.output == {"category": "billing"} and result.trace.path == ["approve", "done"]
    sent = fault.completions()
    assert len(sent) == calls
    assert sent[0].body.get("logprobs") is True  # the first draw asks for them
    assert all(r.body.get("logprobs") is None for r in sent[1:])  # later draws do not
    notes = result.trace.steps[0].notes
    if calls == 1:
        assert notes == ["settled by its first draw: its least likely token had p=0.600 (sure: 0.5)"]
    else:
        assert "the vote was decided; stopped after 2 of 3 draws" in notes


def test_without_logprobs_the_draws_go_on(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    fault.configure(answer=_answer, logprobs=False)  # a server that ignores `logprobs: true`
    result = run_pack(load_pack(sure_pack(tmp_path, sure=0.01)), {"ticket": "t"}, backend=backend)
    assert result.output == {"category": "billing"}
    assert len(fault.completions()) == 2


@pytest.mark.parametrize(
    ("node", "says"),
    [
        ({"sure": 0}, "sure must be a probability above 0 and at most 1"),
        ({"sure": "high"}, "sure must be a probability above 0 and at most 1"),
        ({"samples": 1, "agree": 1, "sure": 0.5}, "sure needs samples of 2 or more"),
        ({"draw_all": True, "sure": 0.5}, "draw_all makes every one: use one"),
        ({"sure": 0.5, "confidence": {"field": "category", "min": 0.5}}, "a confidence gate measures every draw"),
        ({"sure": 0.5, "prior": {"field": "category", "values": ["billing", "other"]}}, "a prior may commit another"),
    ],
)
def test_a_sure_that_cannot_work_is_refused_at_load(tmp_path: Path, node: dict[str, Any], says: str) -> None:
    root = sure_pack(tmp_path, **node)
    if node.get("samples") == 1:  # no on_unsure edge without draws to disagree
        graph = (root / "graph.yaml").read_text().replace("- from: approve\n  on_unsure: human\n", "")
        (root / "graph.yaml").write_text(graph)
    assert any(says in issue for issue in issues_of(root)), issues_of(root)


def test_a_first_draw_accepted_on_a_retry_does_not_stand_alone(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    """The first call's answer is rejected; the resample is accepted and every token of
    it is likely, yet the quorum goes on: `sure` reads the opening call only."""
    fault.configure(
        answer=in_order("not json", *[json.dumps({"category": "billing"})] * 3), token_logprob=math.log(0.9)
    )
    result = run_pack(load_pack(sure_pack(tmp_path, sure=0.5)), {"ticket": "t"}, backend=backend)
    assert result.output == {"category": "billing"}
    sent = fault.completions()
    assert len(sent) == 3  # the rejected call, its resample, the second draw
    assert [r.body.get("logprobs") for r in sent] == [True, None, None]
    assert not any(n.startswith("settled by its first draw") for n in result.trace.steps[0].notes)


def _tokens(*pairs: tuple[str, float]) -> list[TokenLogprob]:
    return [TokenLogprob(text, math.log(p)) for text, p in pairs]


def test_the_least_likely_token_leaves_out_the_answers_fixed_opening() -> None:
    """`{"` and the first name are the grammar's only way (and with `prefill` not decoded
    at all): `sure` reads the tokens from there on, the same with prefill as without."""
    plain = _tokens(('{"', 0.1), ("category", 0.1), ('":"', 0.9), ("billing", 0.7), ('"}', 0.95))
    prefilled = [TokenLogprob('{"category', 0.0), *plain[2:]]  # as the backend gives it with prefill=true
    assert least_p(plain, '{"category') == pytest.approx(0.7)
    assert least_p(prefilled, '{"category') == pytest.approx(0.7)
    assert least_p(plain) == pytest.approx(0.1)  # no opening given: every token counts
    straddling = _tokens(('{"category":"', 0.2), ("billing", 0.7), ('"}', 0.95))
    assert least_p(straddling, '{"category') == pytest.approx(0.2)  # it runs past the opening: a choice
    other = _tokens(('{"', 0.1), ("kind", 0.5), ('":1}', 0.9))  # does not spell the opening: nothing skipped
    assert least_p(other, '{"category') == pytest.approx(0.1)
    assert least_p([TokenLogprob('{"category', 0.0)], '{"category') == 1.0
