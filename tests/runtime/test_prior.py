"""A generate node's label prior (`prior: {field, values}`): the correction of a verified
answer by the model's label bias, over the loopback fault server's logprobs; loading
the key; and measure_prior."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import load_pack, measure_prior, run_pack
from runtime.backends.base import Backend
from tests.support.fault_server import FaultServer
from tests.support.runtime_packs import issues_of, write_pack

SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "shipping", "technical"]},
        "summary": {"type": "string"},
        "urgent": {"type": "boolean"},
    },
    "required": ["category"],
}
PRIOR = {"field": "category", "values": {"billing": 0.6, "shipping": 0.3, "technical": 0.1}}
# `{"category": ` is one piece (13 characters), the value and the closing brace the next.
HEAD = '{"category": '


@pytest.fixture
def fault() -> Iterator[FaultServer]:
    with FaultServer(chunk_chars=len(HEAD)) as server:
        yield server


def lean(shares: dict[str, float]) -> Any:
    """Fault-server alternatives: at the value's piece, each label at its share."""

    def top(body: dict[str, Any], piece: str) -> list[tuple[str, float]]:
        if not piece.startswith('"'):
            return [(piece, 0.0)]
        return [(f'"{label}"}}', math.log(p)) for label, p in sorted(shares.items(), key=lambda kv: -kv[1])]

    return top


def pack(tmp_path: Path, **node: Any) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={
            "classify": {
                "kind": "generate",
                "reads": ["input.ticket"],
                "writes": ["category"],
                "prior": PRIOR,
                **node,
            },
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": SCHEMA},
    )


def classify(root: Path, backend: Backend, fault: FaultServer, written: str, shares: dict[str, float]) -> Any:
    fault.configure(answer=HEAD + f'"{written}"}}', alternatives=lean(shares))
    return run_pack(load_pack(root), {"ticket": "where is my parcel"}, backend=backend)


# -- at run time -------------------------------------------------------------------------------


def test_it_flips_a_label_the_model_over_predicts(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    # billing 0.55 / 0.6 < shipping 0.40 / 0.3: the model's lean to billing is its bias.
    result = classify(pack(tmp_path), backend, fault, "billing", {"billing": 0.55, "shipping": 0.40, "technical": 0.05})
    assert fault.completions()[0].body["logprobs"] is True  # a prior alone asks for them
    assert result.status == "done" and result.state == {"category": "shipping"}
    step = result.trace.steps[0]
    assert step.writes == {"category": "shipping"}
    assert step.prior is not None and (step.prior["from"], step.prior["to"]) == ("billing", "shipping")
    assert "reason" not in step.prior
    total = 0.55 / 0.6 + 0.40 / 0.3 + 0.05 / 0.1
    assert [v for v, _ in step.prior["scores"]] == ["shipping", "billing", "technical"]
    assert step.prior["scores"][0][1] == pytest.approx(0.40 / 0.3 / total, abs=1e-5)
    assert step.confidence is None  # no gate


def test_it_keeps_the_label_when_the_ratio_still_favours_it(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    # billing 0.70 / 0.6 > shipping 0.25 / 0.3 > technical 0.05 / 0.1.
    result = classify(pack(tmp_path), backend, fault, "billing", {"billing": 0.70, "shipping": 0.25, "technical": 0.05})
    assert result.state == {"category": "billing"}
    prior = result.trace.steps[0].prior
    assert prior is not None and (prior["from"], prior["to"]) == ("billing", "billing")
    assert prior["scores"][0][0] == "billing" and "reason" not in prior


def test_it_does_not_commit_a_flip_that_fails_the_assert(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    root = pack(tmp_path, **{"assert": "category != 'shipping'"})
    result = classify(root, backend, fault, "billing", {"billing": 0.55, "shipping": 0.40, "technical": 0.05})
    assert result.status == "done" and result.state == {"category": "billing"}
    prior = result.trace.steps[0].prior
    assert prior is not None and (prior["from"], prior["to"]) == ("billing", "billing")
    assert prior["scores"][0][0] == "shipping"
    assert prior["reason"].startswith('"shipping" scored best, but the answer with it fails assert')
    assert len(fault.completions()) == 1  # the model's own answer stands: no retry


def test_it_changes_nothing_without_logprobs(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    fault.configure(answer=HEAD + '"billing"}', logprobs=False)
    result = run_pack(load_pack(pack(tmp_path)), {"ticket": "where is my parcel"}, backend=backend)
    assert fault.completions()[0].body["logprobs"] is True
    assert result.state == {"category": "billing"}
    prior = result.trace.steps[0].prior
    assert prior == {
        "field": "category",
        "from": "billing",
        "to": "billing",
        "reason": "the endpoint returned no logprobs",
    }


def test_a_gate_on_the_field_measures_the_corrected_share(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    root = pack(tmp_path, confidence={"field": "category", "min": 0.3})
    result = classify(root, backend, fault, "billing", {"billing": 0.55, "shipping": 0.40, "technical": 0.05})
    step = result.trace.steps[0]
    assert result.state == {"category": "shipping"} and step.status == "ok"
    total = 0.55 / 0.6 + 0.40 / 0.3 + 0.05 / 0.1
    assert step.confidence is not None
    assert step.confidence["value"] == "shipping" and step.confidence["basis"] == "prior"
    assert step.confidence["p"] == pytest.approx(0.40 / 0.3 / total, abs=1e-6)
    assert step.confidence["runner_up"] == "billing"
    assert step.confidence["margin"] == pytest.approx((0.40 / 0.3 - 0.55 / 0.6) / total, abs=1e-6)


def test_an_unlisted_label_counts_as_the_smallest_listed_prior(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    # technical is unlisted, so it counts as 0.3: 0.35 / 0.3 beats billing 0.45 / 0.6 and
    # shipping 0.2 / 0.3. Listed at its own 0.1 it would have won too; at 0.5 it would not.
    root = pack(tmp_path, prior={"field": "category", "values": {"billing": 0.6, "shipping": 0.3}})
    result = classify(root, backend, fault, "billing", {"billing": 0.45, "shipping": 0.2, "technical": 0.35})
    assert result.state == {"category": "technical"}
    root = pack(tmp_path, prior={"field": "category", "values": {"billing": 0.6, "shipping": 0.3, "technical": 0.5}})
    result = classify(root, backend, fault, "billing", {"billing": 0.45, "shipping": 0.2, "technical": 0.35})
    assert result.state == {"category": "billing"}


# -- loading --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prior", "message"),
    [
        (
            {"field": "category", "values": {"billing": 0.5, "refunds": 0.5}},
            "nodes.classify.prior.values.refunds: 'refunds' is not a value of 'category' "
            "(allowed: billing, shipping, technical)",
        ),
        ({"field": "summary", "values": {"x": 0.5}}, "prior: 'summary' is not a closed-choice field"),
        ({"field": "category", "values": {"billing": 0}}, "nodes.classify.prior.values.billing: must be a probability"),
        ({"field": "category", "values": {"billing": 1.5}}, "nodes.classify.prior.values.billing: must be a probabil"),
        ({"field": "category", "values": {}}, "prior: values must be a non-empty mapping"),
        ({"field": "urgent", "values": {"true": 0.5}}, "prior: node 'classify' does not write 'urgent'"),
        ({"field": "category"}, "prior must be a mapping {field: NAME, values: {LABEL: P, ...}}"),
        ({"field": "category", "values": {"billing": 0.5}, "min": 1}, "prior has unknown key(s) 'min'"),
    ],
)
def test_it_refuses_a_bad_prior(tmp_path: Path, prior: dict[str, Any], message: str) -> None:
    root = pack(tmp_path, writes=["category", "summary"], prior=prior)
    [issue] = issues_of(root)
    assert message in issue and issue.startswith("graph.yaml:")


def test_it_reads_boolean_labels_as_their_json(tmp_path: Path) -> None:
    root = pack(tmp_path, writes=["urgent"], prior={"field": "urgent", "values": {"true": 0.8, "false": 0.2}})
    prior = load_pack(root).nodes["classify"].prior
    assert prior is not None and prior.field == "urgent"
    assert (prior.of(True), prior.of(False), prior.of("true")) == (0.8, 0.2, 0.2)
    root = pack(tmp_path, writes=["urgent"], prior={"field": "urgent", "values": {"null": 0.5}})
    assert (
        "nodes.classify.prior.values.null: 'null' is not a value of 'urgent' (allowed: true, false)"
        in issues_of(root)[0]
    )


# -- measure_prior ----------------------------------------------------------------------------------

FILLED = {
    "Answer for classify: N/A": {"billing": 0.6, "shipping": 0.3, "technical": 0.1},
    "Answer for classify: ": {"billing": 0.5, "shipping": 0.4, "technical": 0.1},
    "Answer for classify: [MASK]": {"billing": 0.7, "shipping": 0.2, "technical": 0.1},
}


def by_filler(body: dict[str, Any], piece: str) -> list[tuple[str, float]]:
    return lean(FILLED[body["messages"][-1]["content"]])(body, piece)


def test_measure_prior_averages_the_shares_over_the_fillers(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    fault.configure(answer=HEAD + '"billing"}', alternatives=by_filler)
    found = measure_prior(load_pack(pack(tmp_path)), "classify", backend)
    assert found is not None and set(found) == {"billing", "shipping", "technical"}
    assert found["billing"] == pytest.approx(0.6) and found["shipping"] == pytest.approx(0.3)
    assert found["technical"] == pytest.approx(0.1)
    sent = fault.completions()
    assert [r.body["messages"][-1]["content"] for r in sent] == list(FILLED)
    assert all(r.body["logprobs"] is True for r in sent)
    assert sent[0].body["response_format"]["json_schema"]["schema"] == SCHEMA


def test_measure_prior_gives_none_without_logprobs(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    fault.configure(answer=HEAD + '"billing"}', logprobs=False)
    assert measure_prior(load_pack(pack(tmp_path)), "classify", backend, fillers=("N/A",)) is None
    assert len(fault.completions()) == 1


def test_measure_prior_sets_nested_inputs_and_state(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    root = write_pack(
        tmp_path / "q",
        nodes={
            "detect": {"kind": "generate", "reads": ["input.ticket.body"], "writes": ["lang"]},
            "classify": {"kind": "generate", "reads": ["input.ticket.body", "lang"], "writes": ["category"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "detect", "to": "classify"}, {"from": "classify", "to": "done"}],
        grammars={"classify": SCHEMA},
    )
    fault.configure(answer=HEAD + '"shipping"}', alternatives=lean({"shipping": 0.75, "billing": 0.25}))
    found = measure_prior(load_pack(root), "classify", backend, state={"lang": "de"}, fillers=("-",))
    assert fault.completions()[0].body["messages"][-1]["content"] == "Answer for classify: - de"
    # technical is unlisted: it gets at most the least listed token's share (runtime.confidence).
    assert found is not None and found["shipping"] > found["billing"] > 0
    assert json.dumps(sorted(found)) == '["billing", "shipping", "technical"]'
