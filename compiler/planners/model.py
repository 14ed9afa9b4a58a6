"""The model planner: asks an OpenAI-compatible endpoint (the frontier model) for a plan.

One `plan` call: the prompt holds the spec (task, inputs, outputs, rules, tools with their
schemas, the unsure end), the induction report, a sample of gold cases and, on a re-plan,
the loop's feedback (score, failing nodes, blame report). `PLAN_SCHEMA` goes out as the
grammar, so the answer is JSON of the plan's shape by construction; it is still parsed
and checked with `parse_plan`. A rejected answer is re-asked with a description of its
problems, never with its text (docs/invariants.md, 2: a rejected generation never reaches the model
again, and it is not logged). Tries are bounded (`tries`, default 3) and so is what one
call may spend: the spec's `planner_tokens` and `cost_usd` budgets. Tokens are counted
from the endpoint's usage figures. `cancel` stops an in-flight request (the backend
closes the stream) and raises runtime's Cancelled."""

from __future__ import annotations

import json
import threading
from typing import Any

from compiler.errors import PlanInvalid
from compiler.plan import PLAN_SCHEMA, parse_plan
from compiler.planners.shared import PlannerFailed, PlanRequest, PlanResult
from runtime import Backend, Cancelled, ModelCall, open_backend

SYSTEM = (
    "You design Packforge plans: the graph of a workflow that a small language model runs one "
    "short, schema-constrained step at a time. Reply with one JSON plan document only."
)
# How the plan is read, in the planner's words (docs/compiler.md, "The plan").
GUIDE = """A plan has: name, summary, entry (the first node's id), optional state (JSON schemas of fields that are not spec outputs), nodes, edges.
Node kinds:
- generate: one model answer. reads (input.<name> or fields written before), writes (spec outputs or state fields), instructions (what to do, in words). Optional: two_stage (reason first), samples + agree (draw several times; disagreement takes on_unsure), assert (an expression over reads and writes; false takes on_fail), max_tokens.
- tool: calls a host tool: tool (its name), args ({argument: field}), reads (the fields args use), writes (the result's keys).
- choose_tool: the model picks host tools to call, one call at a time, in a bounded loop: tools (the names it may call), writes (one field: the calls made), max_calls, min_calls, to (the generate node that answers from the calls; its one to edge goes there, with no when), instructions.
- assert: expr (an expression over reads); false takes on_fail.
- human: a person answers: reads, writes, instructions (the question).
- end: the run stops here; optional output (fields).
Edges: {"from": A, "to": B, "when": EXPR} (tried in order; the one without when goes last), {"from": A, "on_fail": B}, {"from": A, "on_unsure": B} (needs samples >= 2).
Expressions: comparisons, and/or/not, in, null, 'strings', numbers, field access a.b; functions len lower upper round min max abs get.
Every node except an end needs a to edge; every node must be reachable from entry. Name nodes and ends as the gold cases' path and end do."""
DEFAULT_TRIES = 3
DEFAULT_MAX_TOKENS = 4096
_SECTION_CHARS = 4000


class ModelPlanner:
    """Plans with the model at `spec` (`openai:URL#MODEL`, docs/endpoints.md). `backend`
    replaces opening one (tests); `tries` bounds answers per plan call."""

    def __init__(
        self,
        spec: str,
        *,
        tries: int = DEFAULT_TRIES,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        backend: Backend | None = None,
    ) -> None:
        if tries < 1:
            raise ValueError("tries must be at least 1")
        self.name = spec
        self.tries = tries
        self.max_tokens = max_tokens
        self._backend = backend
        self._lock = threading.Lock()
        self.answers = 0  # answers received, all plan calls together

    def backend(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = open_backend(self.name)
            return self._backend

    def close(self) -> None:
        with self._lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None

    def plan(self, request: PlanRequest, cancel: threading.Event | None = None) -> PlanResult:
        spec = request.spec
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(request)}]
        tokens = 0
        cost = 0.0
        problems: list[str] = []
        answers = 0
        for k in range(1, self.tries + 1):
            if cancel is not None and cancel.is_set():
                raise Cancelled("compile cancelled")
            if tokens >= spec.budgets.planner_tokens or cost > spec.budgets.cost_usd:
                break
            asked = messages if not problems else [*messages, {"role": "user", "content": reask(problems)}]
            call = ModelCall(
                run_id=f"plan-{spec.name}-{request.attempt}",
                node="planner",
                attempt=k,
                messages=asked,
                schema=PLAN_SCHEMA,
                max_tokens=self.max_tokens,
                temperature=0.0,
                cancel=cancel,
            )
            reply = self.backend().complete(call)
            self.answers += 1
            answers += 1
            tokens += reply.prompt_tokens + reply.completion_tokens
            cost += reply.cost_usd
            problems = answer_problems(reply.text, reply.finish_reason)
            if problems:
                continue
            document = json.loads(reply.text)
            try:
                parse_plan(document, spec)
            except PlanInvalid as exc:
                problems = list(exc.problems)
                continue
            return PlanResult(document=document, tokens=tokens, cost_usd=cost)
        raise PlannerFailed(
            f"{self.name} gave no valid plan in {answers} answer{'s' if answers != 1 else ''}", problems, tokens, cost
        )


def answer_problems(text: str, finish_reason: str) -> list[str]:
    """Why an answer is not even a plan object: cut off, not JSON, not an object."""
    if finish_reason == "length":
        return ["$: the answer was cut off at the token limit; write a smaller plan (fewer, shorter instructions)"]
    try:
        document: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"$: the answer is not JSON ({exc.msg} at character {exc.pos})"]
    if not isinstance(document, dict):
        return [f"$: a plan is a JSON object, not {type(document).__name__}"]
    return []


def reask(problems: list[str]) -> str:
    """The re-ask: what was wrong, in words (never the rejected text itself)."""
    listed = "\n".join(f"- {p}" for p in problems[:30])
    more = f"\n(and {len(problems) - 30} more)" if len(problems) > 30 else ""
    return f"Your last plan was rejected. Its problems:\n{listed}{more}\nReply with a corrected plan, JSON only."


def prompt(request: PlanRequest) -> str:
    """The planner's user message for one attempt."""
    spec = request.spec
    parts = [
        f"Design the plan for the workflow '{spec.name}'.",
        f"Task: {' '.join(spec.task.split())}",
        "Inputs (read them as input.<name>):\n"
        + "\n".join(f"- {f.name}: {f.description}" + (f" ({f.type})" if f.type else "") for f in spec.inputs.values()),
        "Outputs (fields generate and human nodes write):\n"
        + "\n".join(f"- {f.name}: {f.description}" + (f" ({f.type})" if f.type else "") for f in spec.outputs.values()),
    ]
    if spec.rules:
        parts.append(
            "Rules:\n"
            + "\n".join(
                f"- {' '.join(r.text.split())}" + (f" As an expression: {' '.join(r.expr.split())}" if r.expr else "")
                for r in spec.rules
            )
        )
    if request.catalogue:
        parts.append(
            "Tools (tool nodes may call these):\n"
            + "\n".join(
                f"- {t.name}: {t.description} args {json.dumps(t.args)} returns {json.dumps(t.result)}"
                for t in request.catalogue.values()
            )
        )
    if spec.unsure_end:
        parts.append(
            f"When the model cannot decide or a check fails, the case goes to '{spec.unsure_end}' "
            "(an end, or a human node when gold cases carry human answers)."
        )
    parts.append("What the gold cases show about each output:\n" + _bounded("\n".join(request.induction.report())))
    sample = [
        {k: v for k, v in (("input", c.input), ("expected", c.expected), ("end", c.end), ("path", c.path)) if v}
        for c in spec.gold[:8]
    ]
    parts.append(
        f"Gold cases ({len(spec.gold)}; the first {len(sample)}):\n"
        + _bounded("\n".join(json.dumps(s, ensure_ascii=False) for s in sample))
    )
    fb = request.feedback
    if fb is not None:
        lines = [f"Attempt {fb.attempt} scored {fb.score:.0%}."]
        if fb.failing_nodes:
            lines.append(f"Failing nodes, most blamed first: {', '.join(fb.failing_nodes)}.")
        if fb.problems:
            lines.append("It did not load:\n" + "\n".join(f"- {p}" for p in fb.problems[:30]))
        else:
            lines.append("Its plan:\n" + _bounded(json.dumps(fb.plan, ensure_ascii=False)))
        if fb.report:
            lines.append("Blame report:\n" + _bounded(fb.report))
        parts.append("Re-plan. " + "\n".join(lines))
    parts.append(GUIDE)
    return "\n\n".join(parts)


def _bounded(text: str) -> str:
    return text if len(text) <= _SECTION_CHARS else text[:_SECTION_CHARS] + "\n[...]"
