"""benchmarks/real_models.py's one-call arm shows the pack's own few-shot examples in the
order the runtime shows them (runtime.fewshot.choose: the nearest last, next to the
question). It once showed them nearest first; SmolLM2-135M mostly repeats the answer
just before the question, so that baseline repeated the least similar example's labels
and looked far weaker than one call is (docs/decisions.md)."""

from __future__ import annotations

from benchmarks import real_models
from runtime import load_pack
from runtime.fewshot import choose


def test_one_call_shows_the_examples_the_pack_node_shows_in_the_same_order() -> None:
    task = real_models.load_task("helpdesk_routing")
    node = load_pack(task.root).nodes["department"]
    assert node.examples is not None and task.shots == node.examples.count == 2
    for case in task.cases[:20]:
        shown = [m["content"] for m in real_models.one_call_messages(task, case["input"]) if m["role"] == "user"][:-1]
        runtime = [e.input["message"] for e in choose(node.examples, case["input"])]
        assert len(shown) == len(runtime) == 2
        assert all(message in text for message, text in zip(runtime, shown, strict=True)), case["id"]


def test_the_nearest_arm_copies_the_example_shown_last() -> None:
    task = real_models.load_task("helpdesk_routing")
    node = load_pack(task.root).nodes["department"]
    assert node.examples is not None
    cases = task.cases[:20]
    rows = real_models.run_nearest(task, cases)
    for case, row in zip(cases, rows, strict=True):
        last = choose(node.examples, case["input"])[-1]
        assert row.got == {name: last.expected.get(name) for name in task.fields}, case["id"]
    assert 0 < sum(r.exact for r in rows) < len(rows)  # it is scored, not assumed right
