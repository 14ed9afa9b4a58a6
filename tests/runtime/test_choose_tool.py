"""The choose_tool node: a bounded loop in which the model picks tools under a grammar
built from their schemas, and the runtime verifies, calls, journals and counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import PackInvalid, load_pack, open_backend, resume_run, run_pack
from runtime.checkpoint import SQLiteStore
from runtime.evaluate import evaluate, gold_tools
from tests.support.runtime_packs import Killed, Recorder, pf, write_pack

PICK_PROMPT = "Question: {{ input.question }}\nTools:\n{{ tools }}\nCalls so far:\n{{ calls }}\n"
TWO = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
RESULT = {"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]}


class Calculator:
    """Two declared tools that log every call they get."""

    def __init__(self, *, requires: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.requires = requires

    def registry(self) -> dict[str, Any]:
        def add(a: float, b: float) -> dict[str, float]:
            self.calls.append(("add", {"a": a, "b": b}))
            return {"result": a + b}

        def divide(a: float, b: float) -> dict[str, float]:
            self.calls.append(("divide", {"a": a, "b": b}))
            return {"result": a / b}

        add.__packforge_tool__ = {  # type: ignore[attr-defined]
            "description": "Add a and b.",
            "args": TWO,
            "result": RESULT,
            "requires": list(self.requires),
        }
        divide.__packforge_tool__ = {  # type: ignore[attr-defined]
            "description": "Divide a by b.",
            "args": TWO,
            "result": RESULT,
            "requires": list(self.requires),
            "check": lambda args: "b must not be 0" if args.get("b") == 0 else None,
        }
        return {"add": add, "divide": divide}


def calc_pack(tmp_path: Path, picks: list[Any], *, max_calls: int = 3, **pick: Any) -> Path:
    """pick (choose_tool over add, divide) -> answer -> done; on_fail -> review (human)."""
    return write_pack(
        tmp_path / "calc",
        manifest={"tools": ["add", "divide"], "retry": {"resamples": 0, "feedback": 1}},
        nodes={
            "pick": {
                "kind": "choose_tool",
                "reads": ["input.question"],
                "writes": ["calls"],
                "tools": ["add", "divide"],
                "max_calls": max_calls,
                "to": "answer",
                **pick,
            },
            "answer": {"kind": "generate", "reads": ["input.question", "calls"], "writes": ["answer"]},
            "review": {"kind": "human", "reads": ["input.question"], "writes": ["answer"]},
            "done": {"kind": "end"},
        },
        edges=[
            {"from": "pick", "to": "answer"},
            {"from": "pick", "on_fail": "review"},
            {"from": "answer", "to": "done"},
            {"from": "review", "to": "done"},
        ],
        prompts={"pick": PICK_PROMPT},
        grammars={"review": {"type": "object", "properties": {"answer": {"type": "number"}}, "required": ["answer"]}},
        script={"nodes": {"pick": picks, "answer": {"answer": 7}}},
    )


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


DONE = {"tool": "done"}


def run(root: Path, tools: Calculator, **kw: Any) -> tuple[Any, Recorder]:
    pack = load_pack(root, tools={"add", "divide"})
    backend = Recorder(open_backend(pack.model or "", base_dir=pack.root))
    result = run_pack(pack, {"question": "q"}, backend=backend, tools=tools.registry(), **kw)
    return result, backend


def pick_calls(backend: Recorder) -> list[Any]:
    return [c for c in backend.calls if c.node == "pick"]


def test_it_calls_the_chosen_tools_in_order_and_commits_them(tmp_path: Path) -> None:
    tools = Calculator()
    result, backend = run(calc_pack(tmp_path, [call("add", a=3, b=4), call("divide", a=7, b=2), DONE]), tools)
    assert result.status == "done"
    assert tools.calls == [("add", {"a": 3, "b": 4}), ("divide", {"a": 7, "b": 2})]
    assert result.state["calls"] == [
        {"tool": "add", "args": {"a": 3, "b": 4}, "result": {"result": 7}},
        {"tool": "divide", "args": {"a": 7, "b": 2}, "result": {"result": 3.5}},
    ]
    assert result.trace.path == ["pick", "answer", "done"]
    # Each choice is asked with the calls so far in the prompt.
    assert "(no calls yet)" in pick_calls(backend)[0].messages[-1]["content"]
    assert '1. add({"a": 3, "b": 4}) -> {"result": 7}' in pick_calls(backend)[2].messages[-1]["content"]
    stats = result.trace.tool_stats
    assert (stats["model_calls"], stats["tool_calls"], stats["invalid_choices"], stats["repeats"]) == (3, 2, 0, 0)
    assert result.trace.steps[0].tool_stats["stop"] == "done"


def test_it_sends_a_one_of_grammar_built_from_the_offered_tools_schemas(tmp_path: Path) -> None:
    _, backend = run(calc_pack(tmp_path, [DONE]), Calculator())
    grammar = pick_calls(backend)[0].schema
    assert grammar is not None
    options = grammar["oneOf"]
    assert [o["properties"]["tool"] for o in options] == [{"const": "add"}, {"const": "divide"}, {"const": "done"}]
    assert options[0]["properties"]["args"] == TWO
    assert options[0]["required"] == ["tool", "args"]


def test_it_forces_the_final_answer_when_the_budget_runs_out(tmp_path: Path) -> None:
    picks = [call("add", a=1, b=1), call("add", a=2, b=2), call("add", a=3, b=3)]
    tools = Calculator()
    result, backend = run(calc_pack(tmp_path, picks, max_calls=2), tools)
    assert result.status == "done"
    assert len(tools.calls) == 2
    assert len(pick_calls(backend)) == 2  # the model is not asked a third time
    assert result.trace.path == ["pick", "answer", "done"]
    assert result.trace.steps[0].tool_stats["stop"] == "budget"


def test_it_ends_the_loop_on_a_repeated_call_without_making_it(tmp_path: Path) -> None:
    tools = Calculator()
    result, _ = run(calc_pack(tmp_path, [call("add", a=1, b=2), call("add", b=2, a=1), DONE]), tools)
    assert result.status == "done"
    assert tools.calls == [("add", {"a": 1, "b": 2})]
    stats = result.trace.tool_stats
    assert stats["repeats"] == 1 and stats["per_tool"]["add"] == {"calls": 1, "invalid": 0, "repeats": 1}
    assert result.trace.steps[0].tool_stats["stop"] == "repeat"


def test_it_counts_an_invalid_choice_and_asks_again_told_what_was_wrong(tmp_path: Path) -> None:
    tools = Calculator()
    picks = [call("divide", a=1, b=0), call("divide", a=1, b=4), DONE]
    result, backend = run(calc_pack(tmp_path, picks), tools)
    assert result.status == "done"
    assert tools.calls == [("divide", {"a": 1, "b": 4})]  # the refused choice was never called
    again = pick_calls(backend)[1].messages[-1]["content"]
    assert "was rejected" in again and "b must not be 0" in again
    assert all('"b": 0' not in m["content"] for m in pick_calls(backend)[1].messages)  # never its text
    stats = result.trace.tool_stats
    assert stats["invalid_choices"] == 1 and stats["per_tool"]["divide"]["invalid"] == 1


def test_it_counts_an_unparseable_choice_as_invalid(tmp_path: Path) -> None:
    result, _ = run(calc_pack(tmp_path, ["add 1 and 2", call("add", a=1, b=2), DONE]), Calculator())
    assert result.status == "done"
    assert result.trace.tool_stats["invalid_choices"] == 1
    assert [a.category for a in result.trace.attempts if not a.ok] == ["parse"]


def test_it_takes_on_fail_when_invalid_choices_outlast_the_ladder(tmp_path: Path) -> None:
    tools = Calculator()
    result, backend = run(calc_pack(tmp_path, [call("divide", a=1, b=0)]), tools)
    assert result.status == "waiting" and result.waiting_at == "review"  # the escalation
    assert tools.calls == []
    assert len(pick_calls(backend)) == 2  # one sample, one feedback re-ask (the ladder)
    assert result.trace.steps[0].edge is not None and result.trace.steps[0].edge.kind == "on_fail"
    assert result.trace.tool_stats["invalid_choices"] == 2


def test_it_takes_on_fail_without_asking_when_every_offered_tool_is_unavailable(tmp_path: Path) -> None:
    tools = Calculator(requires=("packforge_no_such_module",))
    result, backend = run(calc_pack(tmp_path, [DONE]), tools)
    assert pick_calls(backend) == []
    assert result.waiting_at == "review"
    assert "unavailable: install packforge_no_such_module" in result.trace.steps[0].reason


class KillAfterTools:
    """Die right after the `n`-th tool result is journaled (before the step commits)."""

    def __init__(self, inner: SQLiteStore, n: int) -> None:
        self.inner, self.n, self.seen = inner, n, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        self.inner.append(run_id, fence, kind, node, step, payload)
        self.seen += kind == "tool"
        if kind == "tool" and self.seen == self.n:
            raise Killed()


def test_it_resumes_a_killed_loop_without_calling_a_tool_twice(tmp_path: Path, sqlite_store: Any) -> None:
    root = calc_pack(tmp_path, [call("add", a=1, b=2), call("add", a=3, b=3), DONE])
    pack = load_pack(root, tools={"add", "divide"})
    tools, store = Calculator(), sqlite_store()
    with pytest.raises(Killed):
        run_pack(
            pack,
            {"question": "q"},
            backend=open_backend(pack.model or "", base_dir=pack.root),
            tools=tools.registry(),
            store=KillAfterTools(store, 1),
            run_id="r1",
        )
    assert tools.calls == [("add", {"a": 1, "b": 2})]
    # The scripted model answers by call number: on resume the loop continues after the
    # journaled call, so its next choice is the second one scripted.
    (root / "fakes" / "s2.json").write_text(
        json.dumps({"nodes": {"pick": [call("add", a=3, b=3), DONE], "answer": {"answer": 6}}})
    )
    second = Recorder(open_backend(f"fake:{root / 'fakes' / 's2.json'}"))
    result = resume_run(pack, "r1", backend=second, store=store, tools=tools.registry())
    assert result.status == "done"
    assert tools.calls == [("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 3})]
    assert [c["tool"] for c in result.state["calls"]] == ["add", "add"]
    assert "1. add" in pick_calls(second)[0].messages[-1]["content"]  # asked with the journaled call
    assert [t.replayed for t in result.trace.tool_calls] == [True, False]
    assert result.trace.tool_stats["tool_calls"] == 2


def test_it_refuses_a_tool_the_manifest_does_not_list_and_a_to_that_is_not_a_model_node(tmp_path: Path) -> None:
    root = calc_pack(tmp_path, [DONE], tools=["add", "sqrt"], to="done")
    with pytest.raises(PackInvalid) as err:
        load_pack(root)
    text = str(err.value)
    assert "uses tool 'sqrt', which the manifest's 'tools' does not list" in text
    assert "'to' must be a generate node" in text


def test_it_refuses_a_prompt_placeholder_outside_reads_tools_and_calls(tmp_path: Path) -> None:
    root = calc_pack(tmp_path, [DONE])
    (root / "prompts" / "pick.txt").write_text(PICK_PROMPT + "{{ secret }}")
    with pytest.raises(PackInvalid, match="secret"):
        load_pack(root)


def test_it_reports_tool_precision_invalid_choices_and_repeats_in_an_eval(tmp_path: Path) -> None:
    root = calc_pack(tmp_path, [DONE])
    cases = [
        {"id": "a", "input": {"question": "1+2"}, "expected": {"answer": 7}, "tools": ["add"]},
        {"id": "b", "input": {"question": "1+2 twice"}, "expected": {"answer": 7}, "tools": ["add"]},
        {"id": "c", "input": {"question": "no gold"}, "expected": {"answer": 7}},
    ]
    (root / "evalset.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    script = json.loads((root / "fakes" / "scripted.json").read_text())
    script["cases"] = {
        "a": {"pick": [call("add", a=1, b=2), DONE]},
        "b": {"pick": [call("divide", a=1, b=0), call("add", a=1, b=2), call("divide", a=3, b=1), DONE]},
        "c": {"pick": [call("add", a=5, b=5), call("add", a=5, b=5)]},
    }
    (root / "fakes" / "scripted.json").write_text(json.dumps(script))
    pack = load_pack(root, tools={"add", "divide"})
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root), tools=Calculator().registry())
    t = report.to_dict()["tools"]
    assert (t["tool_calls"], t["invalid_choices"], t["repeats"], t["cases_scored"]) == (4, 1, 1, 2)
    assert t["precision"] == 2 / 3  # cases a and b made 3 calls; their gold paths expect 2
    assert t["per_tool"]["add"]["precision"] == 1.0 and t["per_tool"]["divide"]["precision"] == 0.0
    assert t["per_tool"]["divide"]["invalid"] == 1 and t["per_tool"]["add"]["repeats"] == 1


def test_it_refuses_an_evalset_tools_key_naming_an_unlisted_tool(tmp_path: Path) -> None:
    root = calc_pack(tmp_path, [DONE])
    case = {"id": "a", "input": {"question": "q"}, "expected": {}, "tools": ["sqrt"]}
    (root / "evalset.jsonl").write_text(json.dumps(case) + "\n")
    with pytest.raises(PackInvalid, match="'tools' names 'sqrt', which the manifest's 'tools' does not list"):
        load_pack(root)


def test_it_takes_the_gold_calls_from_the_tool_nodes_on_a_case_path_without_tools() -> None:
    pack = load_pack(Path(__file__).resolve().parents[2] / "packs" / "refund_desk")
    cases = {c.id: c for c in pack.cases}
    assert gold_tools(pack, cases["rd-01"]) == ("lookup_order", "issue_refund")  # path: ... lookup ... refund
    assert gold_tools(pack, cases["rd-02"]) is None  # neither `tools` nor `path`: not scored


def test_it_prints_tool_metrics_in_packforge_eval_and_its_json() -> None:
    calculator = Path(__file__).resolve().parents[2] / "packs" / "calculator"
    tools = f"{calculator / 'tools.py'}:registry"
    out = pf("eval", str(calculator), "--tools", tools)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tool precision 0.96 (27/28 calls expected by the gold path, 21 cases)" in out.stdout
    assert "    divide        2       1.00        8        0" in out.stdout
    data = json.loads(pf("eval", str(calculator), "--tools", tools, "--json").stdout)
    assert data["tools"]["per_tool"]["multiply"]["precision"] == 7 / 8  # c-18's extra multiply
    assert data["tools"]["repeats"] == 1 and data["tools"]["invalid_choices"] == 10


def test_it_offers_done_only_after_min_calls(tmp_path: Path) -> None:
    tools = Calculator()
    result, backend = run(calc_pack(tmp_path, [DONE, call("add", a=1, b=1), DONE], min_calls=1), tools)
    first, second = pick_calls(backend)[0], pick_calls(backend)[1]
    assert first.schema is not None and {"const": "done"} not in [
        o["properties"]["tool"] for o in first.schema["oneOf"]
    ]
    assert '"done"' not in first.messages[-1]["content"]
    assert "tool must be one of: add, divide" in second.messages[-1]["content"]  # "done" was an invalid choice
    assert result.status == "done" and tools.calls == [("add", {"a": 1, "b": 1})]
    assert result.trace.tool_stats["invalid_choices"] == 1
