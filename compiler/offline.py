"""The offline test model: a `fake:` script derived from the gold cases that tests a plan's
graph with no model (docs/compiler.md, "The offline test model").

For each gold case, every generate node answers the case's expected values for the
fields it writes (a value seen in gold, or a typed blank, for a field the case does not
give). That is a perfect model, so a case that still fails is the graph's fault: routing
that cannot reach the case's end, an assert that rejects gold values, a missing node.

Some cases are meant to leave the happy path: their `end` is the spec's `unsure_end`,
they carry a person's answers for it, their `path` takes an on_fail / on_unsure edge, or
they end at a node that only failure edges lead to. For those a static walk of the plan
(the case's expected values as state, `when:` evaluated with the runtime's expression
language, the case's `path` followed where it says where to go) finds the gate that must
give way, and the script makes it do so by the node's own mechanism:

- a generate node with `samples` >= 2 and an on_unsure edge: draws that disagree (values
  the gold cases hold for its writes, spread so that no group reaches `agree`);
- a generate node with a `confidence` gate and an on_unsure edge: `$probs` below `min`;
- a generate node with an on_fail edge: an answer that is not JSON, every attempt;
- an assert node: the model node that last wrote what it reads answers a value that
  breaks the assert (checked with the expression language where the assert reads only
  model-written fields; where it reads a tool's result, a value well above the gold one)
  and still passes that node's own assert;
- a choose_tool node with an on_fail edge: an answer that is not JSON, every attempt
  (invalid choices past the retry ladder). On the happy path it calls the tools the
  case's gold `tools` list names, with arguments from the catalogue's argument schemas,
  then says `done` (compiler.offline_tools).

What it cannot express is listed under the script's `notes` (case id -> why), and those
cases fail offline: an assert whose reads no model node writes; a tool that must fail on
a case where the real tool does not; a node that must give way on one visit and answer on
a later one by the on_fail mechanism (its non-JSON answer repeats); a gate with only an
on_unsure edge and neither samples nor a confidence gate (parse_plan refuses that plan)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from compiler.gold_tools import gold_tools
from compiler.induce import Induction, induce
from compiler.offline_tools import Catalogue, collapse, visit_choices
from compiler.spec import GoldCase, Spec
from runtime import ExprError, PatternRefused, compile_expr, compile_pattern, schema_validator

if TYPE_CHECKING:
    from compiler.plan import Plan, PlanNode

NOT_JSON = "(offline test model: no answer)"  # fails any node's parse: the node takes on_fail
LOW_PROB = 0.01  # $probs for a confidence gate that must be unsure
MAX_STEPS = 64  # a static walk stops here (a plan with a cycle the gold values never leave)

_MODEL_KINDS = ("generate",)


def offline_script(plan: Plan, spec: Spec, catalogue: Catalogue | None = None) -> dict[str, Any]:
    """The `fake:` script that answers every generate node of `plan` perfectly for each
    gold case of `spec` (`cases: {case id: {node: answer}}`), with the gates that gold
    sends off the happy path made to give way. A choose_tool node calls the case's gold
    `tools`, with arguments from `catalogue`'s argument schemas (without a catalogue,
    `{}`: emit fills them in, compiler.offline_tools.with_tool_args). It answers the gold
    cases only: it has no `nodes` defaults, so a pack deployed on it fails a call on any other input, saying so,
    instead of answering it with a gold case's answer (runtime.backends.scripted). `notes`
    says which cases the offline model cannot express and why (module docstring)."""
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())
    values = _gold_values(spec)
    filler = {f: _filler(f, plan, values) for n in plan.nodes if n.kind in _MODEL_KINDS for f in n.writes}
    cases: dict[str, dict[str, Any]] = {}
    notes: dict[str, str] = {}
    listed = gold_tools(spec) if any(n.kind == "choose_tool" for n in plan.nodes) else {}
    for case in spec.gold:
        walk = _Walk(plan, spec, case, induction, values, filler, catalogue, listed.get(case.id))
        walk.run()
        cases[case.id] = walk.answers()
        if walk.notes:
            notes[case.id] = "; ".join(walk.notes)
    script: dict[str, Any] = {"cases": cases}
    if notes:
        script["notes"] = notes
    return script


def _gold_values(spec: Spec) -> dict[str, list[Any]]:
    """Per output field, its distinct gold values in the order first seen."""
    out: dict[str, list[Any]] = {}
    for case in spec.gold:
        sources = [case.expected, *(a for a in case.human.values() if isinstance(a, Mapping))]
        for source in sources:
            for name, value in source.items():
                seen = out.setdefault(name, [])
                if value not in seen:
                    seen.append(value)
    return out


def _filler(name: str, plan: Plan, values: Mapping[str, list[Any]]) -> Any:
    """A schema-valid value for a field a case does not give: one gold holds (the
    grammar is induced from gold, so it fits), else a blank of the plan's state type."""
    if values.get(name):
        return values[name][0]
    schema = plan.state.get(name) or {}
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if schema.get("enum"):
        return schema["enum"][0]
    return {"object": {}, "array": [], "string": "", "number": 0, "integer": 0, "boolean": False}.get(
        kind if isinstance(kind, str) else ""
    )


class _Walk:
    """One gold case walked through the plan statically, collecting each generate
    node's answers call by call (the fake model gives a node's Nth call in a run the
    Nth item of its list; the last repeats)."""

    def __init__(
        self,
        plan: Plan,
        spec: Spec,
        case: GoldCase,
        induction: Induction,
        values: Mapping[str, list[Any]],
        filler: Mapping[str, Any],
        catalogue: Catalogue | None = None,
        listed: tuple[str, ...] | None = None,
    ) -> None:
        self.plan = plan
        self.spec = spec
        self.case = case
        self.induction = induction
        self.values = values
        self.filler = filler
        self.catalogue = catalogue
        self.listed = listed  # the case's gold `tools`: the calls its gold path makes
        self.env: dict[str, Any] = {**filler, **case.expected, "input": case.input}
        self.answer_of: dict[str, dict[str, Any]] = {}  # generate node -> its perfect answer (steered)
        self.calls: dict[str, list[Any]] = {}
        self.last_visit: dict[str, tuple[int, int]] = {}  # node -> (first call index, calls) of its last visit
        self.order: list[str] = []  # generate nodes in the order visited
        self.notes: list[str] = []
        self.targets = self._failure_targets()

    # -- which ends gold reaches off the happy path ----------------------------------

    def _failure_targets(self) -> set[str]:
        """The nodes this case must reach through an on_fail / on_unsure edge: the unsure
        end when the case ends there, answers for it, or names it in its path; and its end
        when only failure edges lead there."""
        case, unsure = self.case, self.spec.unsure_end
        out: set[str] = set()
        if unsure is not None and (
            case.end == unsure or unsure in case.human or (case.path is not None and unsure in case.path)
        ):
            out.add(unsure)
        if case.end is not None:
            leads = [e for e in self.plan.edges if e.target == case.end]
            if leads and all(e.to is None for e in leads):
                out.add(case.end)
        return out

    # -- the walk ------------------------------------------------------------------------

    def run(self) -> None:
        node_id: str | None = self.plan.entry
        path = self.case.path or ()
        at = 0  # how much of the case's path has been matched
        for _ in range(MAX_STEPS):
            if node_id is None:
                return
            try:
                node = self.plan.node(node_id)
            except KeyError:
                return
            matched = at < len(path) and path[at] == node_id
            if matched:
                at += 1
            if node.kind == "end":
                return
            normal = self._normal_next(node_id)
            failures = {e.target: e for e in self.plan.outgoing(node_id) if e.to is None}
            gate: str | None = None
            if matched and at < len(path):
                if path[at] in failures and path[at] != normal:
                    gate = path[at]
            else:
                gate = next((t for t in failures if t in self.targets), None)
            if gate is not None and not self._give_way(node, failures[gate]):
                gate = None
            if gate is None:
                self._visit(node, path[at:])
                if node.kind == "human" and node_id not in self.case.human:
                    return  # the run waits here for a person
                node_id = normal
            else:
                self.targets.discard(gate)
                node_id = gate

    def _normal_next(self, node_id: str) -> str | None:
        for edge in self.plan.outgoing(node_id):
            if edge.to is None:
                continue
            if edge.when is None:
                return edge.to
            try:
                if compile_expr(edge.when).truthy(self.env):
                    return edge.to
            except ExprError:
                continue  # reads a value the walk does not know (a tool's result): not taken
        return None

    def _visit(self, node: PlanNode, path_left: tuple[str, ...] = ()) -> None:
        """Pass `node` on the happy path."""
        if node.kind == "generate":
            steered = self._steer(node, path_left)
            self.answer_of[node.id] = steered
            self.env.update(steered)
            answer = dict(steered)
            if node.confidence:
                answer["$probs"] = {str(node.confidence.get("field")): 1.0}
            self._add_calls(node, [answer] * max(1, node.samples))
        elif node.kind == "choose_tool":
            choices, notes = visit_choices(node, self.case, self.listed, self.catalogue)
            self.notes += notes
            self._add_calls(node, choices)
            if node.writes:
                made = [{**c, "result": None} for c in choices if c.get("tool") != "done"]
                self.env[node.writes[0]] = made
        elif node.kind == "human":
            self.env.update(self.case.human.get(node.id) or {})

    def _answer(self, node: PlanNode) -> dict[str, Any]:
        """The perfect answer: the case's expected values, a steered or blank value for
        the fields the case does not give."""
        if node.id in self.answer_of:
            return dict(self.answer_of[node.id])
        return {f: self._value(f) for f in node.writes}

    def _value(self, name: str) -> Any:
        if name in self.case.expected:
            return self.case.expected[name]
        found = self._from_input(name)
        return found if found is not None else self.filler.get(name)

    def _from_input(self, name: str) -> str | None:
        """A field gold copies from the input, whose values share a pattern: the first
        match of that pattern in this case's input text (an order number, say)."""
        source = self.induction.copied.get(name)
        induced = self.induction.fields.get(name)
        pattern = induced.schema().get("pattern") if induced is not None else None
        text = self.case.input.get(source) if source is not None else None
        if not isinstance(pattern, str) or not isinstance(text, str):
            return None
        try:
            found = compile_pattern(pattern.removeprefix("^").removesuffix("$")).search(text)
        except PatternRefused:
            return None
        return found.group(0) if found else None

    def _steer(self, node: PlanNode, path_left: tuple[str, ...]) -> dict[str, Any]:
        """The answer for `node`; for the writes the case does not give, values gold holds
        elsewhere, chosen so that the graph's routing reaches the case's end (and the rest
        of its path) from here, when some choice does."""
        answer = self._answer(node)
        unknown = [f for f in node.writes if f not in self.case.expected]
        if not unknown or (self.case.end is None and not path_left):
            return answer
        options = [answer]
        for case in self.spec.gold:
            source = {**case.expected, **{k: v for a in case.human.values() for k, v in a.items()}}
            if all(f in source for f in unknown):
                option = {**answer, **{f: source[f] for f in unknown}}
                if option not in options:
                    options.append(option)
        for option in options:
            if self._passes_own_assert(node, option) and self._reaches(node.id, option, path_left):
                return option
        return answer

    def _reaches(self, node_id: str, answer: Mapping[str, Any], path_left: tuple[str, ...]) -> bool:
        """Whether the happy path from `node_id` with `answer` committed visits the rest
        of the case's path, in order, and stops at its end."""
        saved = self.env
        self.env = {**saved, **answer}
        try:
            visited: list[str] = []
            at: str | None = self._normal_next(node_id)
            while at is not None and len(visited) < MAX_STEPS:
                visited.append(at)
                try:
                    if self.plan.node(at).kind == "end":
                        break
                except KeyError:
                    return False
                at = self._normal_next(at)
        finally:
            self.env = saved
        it = iter(visited)
        in_order = all(any(v == p for v in it) for p in path_left)
        return in_order and (self.case.end is None or (bool(visited) and visited[-1] == self.case.end))

    def _add_calls(self, node: PlanNode, answers: list[Any]) -> None:
        calls = self.calls.setdefault(node.id, [])
        self.last_visit[node.id] = (len(calls), len(answers))
        calls.extend(answers)
        self.order.append(node.id)

    # -- making a gate give way --------------------------------------------------------

    def _give_way(self, node: PlanNode, edge: Any) -> bool:
        """Script `node` to take `edge` (on_fail / on_unsure); False when it cannot."""
        if node.kind == "generate":
            return self._unsure_generate(node, edge)
        if node.kind == "assert":
            return self._break_assert(node)
        if node.kind == "tool":
            return True  # the real tool decides; the path says it fails here
        if node.kind == "choose_tool" and edge.on_fail is not None:
            self._add_calls(node, [NOT_JSON])  # invalid choices past the ladder
            return True
        self.notes.append(f"node '{node.id}' ({node.kind}) cannot be made to take its {_edge_kind(edge)} edge")
        return False

    def _unsure_generate(self, node: PlanNode, edge: Any) -> bool:
        answer = self._answer(node)
        if edge.on_unsure is not None and node.samples >= 2:
            draws = self._disagreeing_draws(node)
            if draws is not None:
                self._add_calls(node, draws)
                return True
        if edge.on_unsure is not None and node.confidence:
            field = str(node.confidence.get("field"))
            minimum = float(node.confidence.get("min", 0.5))
            self._add_calls(node, [{**answer, "$probs": {field: min(LOW_PROB, minimum / 2)}}] * max(1, node.samples))
            return True
        fails_to = [e for e in self.plan.outgoing(node.id) if e.on_fail is not None and e.on_fail == edge.target]
        if edge.on_fail is not None or fails_to:
            self._add_calls(node, [NOT_JSON])
            return True
        self.notes.append(
            f"node '{node.id}' has an on_unsure edge but neither samples >= 2 with draws that can disagree "
            "nor a confidence gate: the offline model cannot make it unsure"
        )
        return False

    def _disagreeing_draws(self, node: PlanNode) -> list[dict[str, Any]] | None:
        """`samples` draws, each one the node would accept, no `agree` of them equal."""
        agree = node.agree if node.agree is not None else node.samples // 2 + 1
        options: list[dict[str, Any]] = []
        for case in self.spec.gold:
            combo = {f: case.expected.get(f, self.filler.get(f)) for f in node.writes}
            if combo not in options and self._passes_own_assert(node, combo):
                options.append(combo)
        if len(options) < 2 or math.ceil(node.samples / len(options)) >= agree:
            return None
        return [options[i % len(options)] for i in range(node.samples)]

    def _passes_own_assert(self, node: PlanNode, answer: Mapping[str, Any]) -> bool:
        if not node.assert_:
            return True
        verdict = _check(node.assert_, {**self.env, **answer})
        return verdict is not False

    def _break_assert(self, node: PlanNode) -> bool:
        """Rewrite the last visit of the model node that wrote what `node` reads, so that
        `node`'s expression fails on its answer."""
        expr = node.expr or ""
        reads = {r.split(".", 1)[0] for r in node.reads}
        try:
            reads |= set(compile_expr(expr).roots)
        except ExprError:
            pass
        reads.discard("input")
        for writer_id in reversed(self.order):
            writer = self.plan.node(writer_id)
            if writer.kind != "generate":
                continue
            fields = [f for f in writer.writes if f in reads]
            if not fields:
                continue
            broken = self._breaking_answer(writer, fields, expr)
            if broken is None:
                continue
            start, count = self.last_visit[writer_id]
            calls = self.calls[writer_id]
            calls[start : start + count] = [broken] * count
            self.env.update({k: v for k, v in broken.items() if k != "$probs"})
            return True
        self.notes.append(f"no model answer the offline model can give makes assert '{node.id}' fail")
        return False

    def _breaking_answer(self, writer: PlanNode, fields: list[str], expr: str) -> dict[str, Any] | None:
        base = self._answer(writer)
        fallback: dict[str, Any] | None = None
        for name in fields:
            for value in self._alternatives(name, base.get(name)):
                answer = {**base, name: value}
                if not self._fits(name, value) or not self._passes_own_assert(writer, answer):
                    continue
                verdict = _check(expr, {**self.env, **answer})
                if verdict is False:
                    return answer
                if verdict is None and fallback is None:
                    fallback = answer
        return fallback

    def _alternatives(self, name: str, value: Any) -> list[Any]:
        """Other values for a field, most likely first to break a check: a much larger
        number (caps, totals), a nearby one, the other boolean, other gold values."""
        out: list[Any] = []
        if isinstance(value, bool):
            out.append(not value)
        elif isinstance(value, int | float):
            big = value * 10 + 1000
            out += [int(big) if isinstance(value, int) else float(big), value + 1]
        out += [v for v in self.values.get(name, []) if v != value]
        return out

    def _fits(self, name: str, value: Any) -> bool:
        induced = self.induction.fields.get(name)
        if induced is None:
            return True
        try:
            return bool(schema_validator(induced.schema()).is_valid(value))
        except PatternRefused:  # an induced pattern RE2 does not take fits nothing
            return False

    # -- the result --------------------------------------------------------------------

    def answers(self) -> dict[str, Any]:
        """Every generate node's answer for this case: its calls as the walk scripted
        them (one object when they are all the same), the perfect answer when unvisited."""
        out: dict[str, Any] = {}
        for node in self.plan.nodes:
            if node.kind not in (*_MODEL_KINDS, "choose_tool"):
                continue
            calls = self.calls.get(node.id)
            if not calls and node.kind == "choose_tool":
                calls = visit_choices(node, self.case, self.listed, self.catalogue)[0]
            if not calls:
                out[node.id] = self._answer(node)
            else:  # a tool loop's choices stay a list: its calls may be alike until emit fills their arguments
                out[node.id] = calls if node.kind == "choose_tool" else collapse(calls)
        return out


def _check(source: str, env: Mapping[str, Any]) -> bool | None:
    """True / False: what the expression says on `env`; None when it reads a name `env`
    does not hold (a tool's result), so the walk cannot tell."""
    try:
        expr = compile_expr(source)
    except ExprError:
        return None
    if any(root not in env for root in expr.roots):
        return None
    try:
        return bool(expr.truthy(env))
    except ExprError:
        return False  # an assert whose expression fails to evaluate fails


def _edge_kind(edge: Any) -> str:
    return "on_fail" if edge.on_fail is not None else "on_unsure" if edge.on_unsure is not None else "to"
