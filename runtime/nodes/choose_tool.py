"""`choose_tool`: the model picks one tool from a declared subset and fills its
arguments, under a grammar built from those tools' argument schemas; the runtime
verifies the choice, calls the tool, and asks again with the calls made so far.

Bounded three ways (docs/tools.md, "choose_tool"): at most `max_calls` tool calls per
visit (then the loop ends without asking the model again: the forced final answer);
the same tool with the same arguments twice ends the loop (a repeat, counted, not
called); an invalid choice (not the grammar, or refused by the tool's own check) is
counted and re-asked told what was wrong, up to the node's retry ladder, past which the
node fails (on_fail, or an escalation with model tiers). When the loop ends, the
node commits the list of calls ({tool, args, result}) to its one write and the graph
routes to `to`, a generate node that gives the final answer from those results.

Every call goes through the run's one tool call path (`RunContext.call_tool`), which
journals its result before the loop moves on; a run killed mid-loop resumes with the
journaled calls replayed in order, never called twice (docs/invariants.md, 4). The node's counters
(model calls, invalid choices, repeats, why the loop stopped) are on its trace step
(`Step.tool_stats`) and summed per run by `Trace.tool_stats`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import best_match

from runtime.errors import ContextOverflow, OutputRejected
from runtime.messages import SYSTEM, truncate_input
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext, may_retry, whole_number
from runtime.tools import args_problem, same_call
from runtime.verify import describe_schema_error, feedback_message, parse_answer

if TYPE_CHECKING:
    from runtime.pack.model import Node
    from runtime.tools import ToolDef

DONE = "done"  # the choice that ends the loop: no more tools, give the final answer
DEFAULT_MAX_CALLS = 3
MAX_MAX_CALLS = 20
# Placeholders a choose_tool prompt may use beside its reads: the offered tools'
# catalogue and the calls made so far in this visit.
PLACEHOLDERS = ("tools", "calls")
STOPS = ("done", "budget", "repeat", "failed")


@dataclass(frozen=True)
class ChooseConfig:
    """A choose_tool node's own keys (Node.config)."""

    tools: tuple[str, ...]  # the subset offered, in the order the prompt lists them
    max_calls: int
    min_calls: int  # "done" is not offered before this many calls were made
    to: str  # the forced final-answer node (a generate node); the graph's edge goes there


@dataclass
class Counters:
    """What one visit counted; `Step.tool_stats` holds `as_dict()`."""

    model_calls: int = 0
    invalid_choices: int = 0
    repeats: int = 0
    stop: str = ""
    per_tool: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, tool: str | None, what: str) -> None:
        if tool is not None:
            row = self.per_tool.setdefault(tool, {"invalid": 0, "repeats": 0})
            row[what] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "model_calls": self.model_calls,
            "invalid_choices": self.invalid_choices,
            "repeats": self.repeats,
            "stop": self.stop,
            "per_tool": {k: dict(v) for k, v in sorted(self.per_tool.items())},
        }


class ChooseToolKind:
    name = "choose_tool"
    keys = frozenset(
        {"tools", "prompt", "max_calls", "min_calls", "to", "max_tokens", "temperature", "retry", "system"}
    )
    drawing = NodeDrawing(shape="barred", css_class="node-choose-tool", label="choose_tool", mermaid=('{{"', '"}}'))
    terminal = False
    can_fail = True
    waits = False
    asks_model = True

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        at = ("nodes", node.id)
        if len(node.writes) != 1:
            loader.error(
                f"choose_tool node '{node.id}' writes exactly one field: the list of calls it made", *at, "writes"
            )
        tools = spec.get("tools")
        if not isinstance(tools, list) or not tools or not all(isinstance(t, str) and t for t in tools):
            loader.error(
                f"choose_tool node '{node.id}' needs 'tools', the list of tool names it may call", *at, "tools"
            )
            tools = []
        elif DONE in tools:
            loader.error(f"'{DONE}' is the choice that ends the loop; it cannot name a tool", *at, "tools")
        elif len(set(tools)) != len(tools):
            loader.error("each tool is listed once", *at, "tools")
        max_calls = spec.get("max_calls", DEFAULT_MAX_CALLS)
        if not isinstance(max_calls, int) or isinstance(max_calls, bool) or not 1 <= max_calls <= MAX_MAX_CALLS:
            loader.error(f"max_calls must be a whole number from 1 to {MAX_MAX_CALLS}", *at, "max_calls")
            max_calls = DEFAULT_MAX_CALLS
        min_calls = spec.get("min_calls", 0)
        if not isinstance(min_calls, int) or isinstance(min_calls, bool) or not 0 <= min_calls <= max_calls:
            loader.error("min_calls must be a whole number from 0 to max_calls", *at, "min_calls")
            min_calls = 0
        to = spec.get("to")
        if not isinstance(to, str) or not to:
            loader.error(f"choose_tool node '{node.id}' needs 'to', the generate node that gives the final answer", *at)
            to = ""
        node.config = ChooseConfig(tuple(tools), max_calls, min_calls, to)
        allowed = node.reads + PLACEHOLDERS
        rel = spec.get("prompt", f"prompts/{node.id}.txt")
        node.prompt = loader.template(rel, allowed, *at, "prompt")
        node.max_tokens = whole_number(spec, "max_tokens", 256, 1, 32768, loader, at)
        temperature = spec.get("temperature", 0.0)
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
            loader.error("temperature must be a number from 0 to 2", *at, "temperature")
        else:
            node.temperature = float(temperature)
        node.retry = loader.retry(spec.get("retry"), *at, "retry")
        if "system" in spec:
            node.system = loader.template(spec["system"], node.reads, *at, "system")

    def run(self, node: Node, walk: RunContext) -> Outcome:
        config: ChooseConfig = node.config
        counters = Counters()
        offered, unavailable = _offered(walk, config.tools)
        if not offered:
            counters.stop = "failed"
            why = "; ".join(unavailable) or "no tools"
            return Outcome(
                "fail", reason=f"none of the offered tools can be called: {why}", tool_stats=counters.as_dict()
            )
        # Calls already journaled at this step (a run resumed after a kill mid-loop, or
        # a tier climb) are where the loop continues from: their choices are not asked
        # again and the tools are not called again (docs/invariants.md, 4).
        calls: list[dict[str, Any]] = [
            {"tool": e.tool, "args": e.args, "result": e.result}
            for e in walk.pending_tools.get((node.id, walk.step), [])
        ]
        prompt = ""
        while True:
            if len(calls) >= config.max_calls:
                counters.stop = "budget"  # the forced final answer: the model is not asked again
                break
            may_stop = len(calls) >= config.min_calls
            messages, prompt = _messages(walk, node, offered, calls, may_stop)
            choice = self._choose(node, walk, messages, choice_grammar(offered, may_stop), offered, may_stop, counters)
            if isinstance(choice, Outcome):
                choice.prompt, choice.tool_stats = prompt, counters.as_dict()
                return choice
            name, args = choice
            if name == DONE:
                counters.stop = "done"
                break
            if any(same_call(c["tool"], c["args"], name, args) for c in calls):
                counters.repeats += 1
                counters.count(name, "repeats")
                counters.stop = "repeat"
                break
            done = walk.call_tool(node, name, args)
            if not done.ok:
                counters.stop = "failed"
                return Outcome("fail", reason=done.reason or done.kind, prompt=prompt, tool_stats=counters.as_dict())
            calls.append({"tool": name, "args": args, "result": done.result})
        return Outcome("ok", writes={node.writes[0]: calls}, prompt=prompt, tool_stats=counters.as_dict())

    def _choose(
        self,
        node: Node,
        walk: RunContext,
        messages: list[dict[str, str]],
        grammar: dict[str, Any],
        offered: dict[str, ToolDef],
        may_stop: bool,
        counters: Counters,
    ) -> tuple[str, dict[str, Any]] | Outcome:
        """One verified choice, re-asked (told what was wrong) up to the retry ladder;
        an Outcome("fail") past it."""
        policy = walk.pack.retry_for(node)
        tries = 0
        reason = ""
        while True:
            tries += 1
            stage = "sample" if tries == 1 else "feedback"
            asked = messages + ([{"role": "user", "content": feedback_message(reason)}] if reason else [])
            try:
                reply, attempt = walk.ask(node, asked, grammar, stage)
            except ContextOverflow as exc:
                counters.stop = "failed"
                return Outcome("fail", reason=f"input does not fit the model's context: {exc}")
            counters.model_calls += 1
            named: str | None = None
            try:
                answer = parse_answer(reply.text, reply.finish_reason)
                named, args = verify_choice(answer, offered, may_stop)
            except OutputRejected as exc:
                walk.record(node, reply, attempt, stage, ok=False, category=exc.category, reason=exc.reason)
                counters.invalid_choices += 1
                counters.count(exc.tool if isinstance(exc, ChoiceRejected) else None, "invalid")
                reason = exc.reason
                if may_retry(policy, tries, walk):
                    continue
                counters.stop = "failed"
                return Outcome("fail", reason=f"invalid tool choice: {exc.reason} (after {tries} attempt(s))")
            walk.record(node, reply, attempt, stage, ok=True)
            return named, args


class ChoiceRejected(OutputRejected):
    """An invalid choice; `tool` names the tool it chose, when it named an offered one."""

    def __init__(self, category: str, reason: str, tool: str | None = None) -> None:
        super().__init__(category, reason)
        self.tool = tool


def choice_grammar(offered: dict[str, ToolDef], may_stop: bool = True) -> dict[str, Any]:
    """The grammar of one choice: `oneOf` one object per offered tool ({tool: its name,
    args: its argument schema}) and, when the loop may stop here, {tool: "done"}."""
    options: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"tool": {"const": name}, "args": tool.args},
            "required": ["tool", "args"],
            "additionalProperties": False,
        }
        for name, tool in offered.items()
    ]
    if may_stop:
        options.append(
            {
                "type": "object",
                "properties": {"tool": {"const": DONE}},
                "required": ["tool"],
                "additionalProperties": False,
            }
        )
    return {"type": "object", "oneOf": options}


def verify_choice(answer: Any, offered: dict[str, ToolDef], may_stop: bool = True) -> tuple[str, dict[str, Any]]:
    """The (tool, args) an answer chooses, or ChoiceRejected saying what was wrong in
    the pack's and the tools' own words (never the answer's text: docs/invariants.md, 2). The
    same rules as `choice_grammar`, checked one part at a time so the reason is precise;
    then the tool's own argument check."""
    names = [*offered, DONE] if may_stop else list(offered)
    if not isinstance(answer, dict) or not isinstance(answer.get("tool"), str):
        raise ChoiceRejected(
            "schema", f'the answer must be an object {{"tool": NAME, "args": {{...}}}}; NAME one of: {", ".join(names)}'
        )
    name = answer["tool"]
    if name == DONE and may_stop:
        if set(answer) != {"tool"}:
            raise ChoiceRejected("schema", f'"{DONE}" takes no other fields: answer {{"tool": "{DONE}"}}')
        return DONE, {}
    tool = offered.get(name)
    if tool is None:
        raise ChoiceRejected("schema", f"tool must be one of: {', '.join(names)}")
    args = answer.get("args")
    if set(answer) - {"tool", "args"} or not isinstance(args, dict):
        raise ChoiceRejected(
            "schema", f'the answer must be {{"tool": "{name}", "args": {{...}}}} with no other fields', name
        )
    error = best_match(tool.args_validator.iter_errors(args))
    if error is not None:
        where = describe_schema_error(error).replace("the answer", "the arguments", 1)
        raise ChoiceRejected("schema", f"args of '{name}': {where}", name)
    problem = args_problem(tool, args)  # the schema holds, so a problem is the tool's own check
    if problem is not None:
        raise ChoiceRejected("assert", problem, name)
    return name, args


def catalogue_text(offered: dict[str, ToolDef], may_stop: bool = True) -> str:
    """The offered tools as the prompt's {{ tools }}: one line each, name, description,
    argument schema; and how to stop, when the loop may stop here."""
    lines = [
        f"- {name}: {tool.description} Arguments: {json.dumps(tool.args, sort_keys=True, separators=(',', ':'))}"
        for name, tool in offered.items()
    ]
    if may_stop:
        lines.append(f'- {DONE}: no more tools; the results so far are enough to answer. Answer {{"tool": "{DONE}"}}.')
    return "\n".join(lines)


def calls_text(calls: list[dict[str, Any]]) -> str:
    """The calls made so far as the prompt's {{ calls }}."""
    if not calls:
        return "(no calls yet)"
    return "\n".join(
        f"{i}. {c['tool']}({json.dumps(c['args'], sort_keys=True)}) -> {json.dumps(c['result'], sort_keys=True)}"
        for i, c in enumerate(calls, 1)
    )


def _offered(walk: RunContext, names: tuple[str, ...]) -> tuple[dict[str, ToolDef], list[str]]:
    """The node's tools the host can call now, and why each other one cannot be."""
    offered: dict[str, ToolDef] = {}
    missing: list[str] = []
    for name in names:
        tool = walk.tools.get(name)
        if tool is None:
            missing.append(f"tool '{name}' is not registered")
        elif not tool.available:
            missing.append(f"tool '{name}' is {tool.state}")
        else:
            offered[name] = tool
    return offered, missing


def _messages(
    walk: RunContext, node: Node, offered: dict[str, ToolDef], calls: list[dict[str, Any]], may_stop: bool
) -> tuple[list[dict[str, str]], str]:
    assert node.prompt is not None
    shown, _ = truncate_input(walk.input, walk.pack.truncate)
    view = {**walk.state, "input": shown}
    system = node.system or walk.pack.system
    prompt = node.prompt.render({**view, "tools": catalogue_text(offered, may_stop), "calls": calls_text(calls)})
    return [
        {"role": "system", "content": system.render(view) if system is not None else SYSTEM},
        {"role": "user", "content": prompt},
    ], prompt
