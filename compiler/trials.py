"""One trial of the search: a plan with per-node settings, emitted as a pack and scored
on some cases of the target model (docs/compiler.md, "The search").

A setting is what the search may change about a generate node without touching the
graph: how many few-shot examples it shows (from the train split only) and which
(`nearest`, `fixed`, or `bootstrap`: the nearest of the train cases the target got right
for this node at the arm's starting setting), which instruction text it gets (`plan`:
the planner's; `brief`: one line per field it writes with its description; `names`: the
field names only, the allowed values shown once, in the reply line; `proposal-<key>`: a
text the model planner proposed from failing validation cases), and whether its closed
field is split by a parent field through keyed `choices` (`hierarchy`,
compiler.hierarchy). During the search every node that
writes a closed-choice field carries a confidence gate whose floor is ~0 (`PROBE_MIN`),
so each case's confidence is measured without the gate holding anything back; the
verdict chooses the real floor on validation."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import threading
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import runtime
from compiler.emit import Shots, emit
from compiler.hierarchy import Keyed
from compiler.hierarchy import candidates as hierarchy_candidates
from compiler.induce import Induction
from compiler.one_call import outputs_only
from compiler.plan import Plan, PlanEdge, PlanNode
from compiler.priors import PriorBook, prior_key
from compiler.spec import Spec
from compiler.target_cache import SCRIPTED
from compiler.tools import ToolSpec
from runtime import Backend, CaseResult, Pack, Scorer, Tool, load_pack

PROMPT_STYLES = ("plan", "brief", "names")  # and proposal-<key>: TrialRunner.proposals
PROBE_MIN = 1e-6  # a confidence floor that holds nothing back: the gate only measures
AGREE = 2  # of DRAWS draws, how many must agree (the draws coordinate)
DRAWS = 3
OVERFLOW = "does not fit the model's context"  # the generate node's reason for a ContextOverflow


@dataclass(frozen=True)
class NodeSetting:
    """What the search sets on one generate node."""

    shots: int = 3
    strategy: str = "nearest"  # nearest | fixed | bootstrap
    prompt: str = "plan"  # plan | brief | names | proposal-<key>
    hierarchy: bool = False  # keyed choices by a parent field (compiler.hierarchy)
    matched: bool = False  # with hierarchy: examples only of the parent's value (examples.match)
    draws: int = 1  # DRAWS: samples, of which AGREE must agree (disagreement takes on_unsure)
    two_stage: bool = False  # reason first, then answer (the runtime's two_stage)
    prior: bool = False  # divide out the target's label prior (compiler.priors)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"shots": self.shots, "strategy": self.strategy, "prompt": self.prompt}
        # the later keys only when set: the keys of settings searched before they existed stay the same
        if self.hierarchy:
            out["hierarchy"] = True
        if self.matched:
            out["matched"] = True
        if self.draws != 1:
            out["draws"] = self.draws
        if self.two_stage:
            out["two_stage"] = True
        if self.prior:
            out["prior"] = True
        return out

    def label(self) -> str:
        shown = "no examples" if self.shots == 0 else f"{self.shots} {self.strategy}"
        extra = [
            *(["keyed choices"] if self.hierarchy else []),
            *(["examples of the parent's value"] if self.matched else []),
            *([f"{self.draws} draws, {AGREE} agree"] if self.draws > 1 else []),
            *(["reasons first"] if self.two_stage else []),
            *(["label prior divided out"] if self.prior else []),
        ]
        return ", ".join([shown, f"{self.prompt} prompt", *extra])


Setting = tuple[tuple[str, NodeSetting], ...]  # (node id, its setting), in plan order: hashable


def setting_dict(setting: Setting) -> dict[str, dict[str, Any]]:
    return {node: s.to_dict() for node, s in setting}


def plan_key(plan: Plan) -> str:
    return hashlib.sha256(plan.to_json().encode()).hexdigest()[:8]


def setting_key(setting: Setting) -> str:
    text = json.dumps(setting_dict(setting), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True, kw_only=True)
class CaseOutcome:
    """One case's run on the target, reduced to what the search and the verdict read."""

    id: str
    passed: bool  # every expected field matches by its rule (a case expecting none: the run passed)
    score: float
    fields: dict[str, bool]  # per expected field: matched
    confidence: float | None  # the lowest gated-step confidence of the run; None: no gate measured it
    eligible: bool  # could be auto: ended done, in the auto tier, not at the unsure end or a person
    calls: int
    tokens: int
    overflow: bool  # a call did not fit the model's context
    prompt_tokens: int = 0  # the largest prompt of the run's calls, as the server counted it
    output: dict[str, Any] = dataclasses.field(default_factory=dict)  # what the run answered ({}: nothing)


def closed_fields(induction: Induction, plan: Plan, spec: Spec) -> dict[str, str]:
    """Per generate node, the first field it writes that is a closed choice (an enum or a
    boolean in its induced or planned schema): the field a confidence gate can measure."""
    out: dict[str, str] = {}
    for node in plan.nodes:
        if node.kind != "generate":
            continue
        for name in node.writes:
            schema = plan.state.get(name) or (induction.fields[name].schema() if name in induction.fields else {})
            kinds = schema.get("type")
            kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
            if "enum" in schema or (kinds and set(kinds) <= {"boolean", "null"}):
                out[node.id] = name
                break
    return out


def apply_setting(
    plan: Plan,
    setting: Setting,
    spec: Spec,
    probes: Mapping[str, str],
    floor: float | None,
    proposals: Mapping[str, str] | None = None,
) -> Plan:
    """`plan` with each node's instruction text per its setting (`proposals` maps a
    `proposal-<key>` prompt to its text), and a confidence gate on each node in `probes`
    (node -> field) at `floor` (PROBE_MIN while searching); with a floor above the probe's
    and a spec unsure end, an on_unsure edge to that end too (and the end itself, in a
    plan that has none: the one-call plan of a spec none of whose rules it checks)."""
    chosen = dict(setting)
    nodes: list[PlanNode] = []
    edges = list(plan.edges)
    for node in plan.nodes:
        if node.kind == "generate":
            s = chosen.get(node.id, NodeSetting())
            text = instructions_for(node, spec, s.prompt, proposals or {})
            if text is not None:
                node = dataclasses.replace(node, instructions=text)
            if s.draws > 1 and node.samples == 1:
                node = dataclasses.replace(node, samples=s.draws, agree=AGREE)
            if s.two_stage:
                node = dataclasses.replace(node, two_stage=True)
            gate_allowed = floor is not None and (floor <= PROBE_MIN or spec.unsure_end is not None)
            if node.id in probes and node.confidence is None and gate_allowed:
                node = dataclasses.replace(node, confidence={"field": probes[node.id], "min": floor or PROBE_MIN})
                gated = floor is not None and floor > PROBE_MIN and spec.unsure_end is not None
                if gated and spec.unsure_end and not any(e.source == node.id and e.on_unsure for e in edges):
                    edges.append(PlanEdge(node.id, None, None, None, spec.unsure_end))
        nodes.append(node)
    targets = {e.target for e in edges}
    if spec.unsure_end and spec.unsure_end in targets and spec.unsure_end not in {n.id for n in nodes}:
        nodes.append(PlanNode(spec.unsure_end, "end", "The model was unsure; a person takes over."))
    return dataclasses.replace(plan, nodes=tuple(nodes), edges=tuple(edges))


def prior_field(plan: Plan, node: str, probes: Mapping[str, str]) -> str | None:
    """The field a node's measured prior is about: the plan's own confidence gate's field
    when it has one (runtime.measure_prior measures that one), else its probed field."""
    planned = next((n.confidence for n in plan.nodes if n.id == node), None)
    if planned and isinstance(planned.get("field"), str):
        return str(planned["field"])
    return probes.get(node)


def instructions_for(node: PlanNode, spec: Spec, style: str, proposals: Mapping[str, str]) -> str | None:
    """The node's instruction text under prompt `style` (None: the planner's, unchanged)."""
    if style == "brief":
        return _brief(node, spec)
    if style == "names":
        return "Fill in: " + ", ".join(node.writes) + "."
    if style.startswith("proposal-"):
        if style not in proposals:
            raise KeyError(f"no proposal text for prompt {style!r}")
        return proposals[style]
    return None


def _brief(node: PlanNode, spec: Spec) -> str:
    lines = []
    for name in node.writes:
        field = spec.outputs.get(name)
        lines.append(f"- {name}: {field.description.strip() if field else name}")
    return "Fill in:\n" + "\n".join(lines)


def proposal_key(text: str) -> str:
    """The prompt value of a proposed instruction text: `proposal-` and its hash."""
    return "proposal-" + hashlib.sha256(text.encode()).hexdigest()[:10]


class TrialRunner:
    """Emits trial packs (once per setting) and scores them on cases of the target,
    keeping every case outcome in memory so a trial scored on a larger minibatch pays
    only for the cases it has not run (and the disk cache for every call it has made)."""

    def __init__(
        self,
        spec: Spec,
        induction: Induction,
        catalogue: Mapping[str, ToolSpec],
        folder: Path,
        backend: Backend,
        *,
        model: str,
        train: Sequence[str],
        tools: Mapping[str, Tool] | None = None,
        scorers: Mapping[str, Scorer] | None = None,
        concurrency: int = 4,
        cancel: threading.Event | None = None,
    ) -> None:
        self.spec = spec
        self.induction = induction
        self.catalogue = catalogue
        self.folder = folder
        self.backend = backend
        self.model = model
        self.train = list(train)
        self.tools = tools
        self.scorers = scorers  # the host's scorers: a trial pack's scorer fields are compared by them
        self.concurrency = concurrency
        self.cancel = cancel
        self.by_id = {c.id: c for c in spec.gold}
        self._packs: dict[tuple[str, str], Pack] = {}
        self._outcomes: dict[tuple[str, str, str], CaseOutcome] = {}
        self._bootstrap: dict[tuple[str, str], dict[str, frozenset[str]]] = {}  # (arm, plan key) -> node -> ids
        self.proposals: dict[str, str] = {}  # proposal-<key> -> instruction text (compiler.proposals)
        self.priors = PriorBook(backend, self.state_for, model.startswith(SCRIPTED))

    def state_for(self, plan: Plan, node: str) -> dict[str, Any]:
        """The state a node's prompt reads while its prior is measured: each state field's
        most frequent value in train (a content-free input, a typical state)."""
        reads = next((n.reads for n in plan.nodes if n.id == node), ())
        out: dict[str, Any] = {}
        for read in reads:
            name = read.split(".", 1)[0]
            if read.startswith("input.") or name in out:
                continue
            seen = [json.dumps(self.by_id[i].expected[name]) for i in self.train if name in self.by_id[i].expected]
            if seen:
                out[name] = json.loads(Counter(seen).most_common(1)[0][0])
        return out

    def prior_for(self, arm: str, plan: Plan, setting: Setting, node: str) -> dict[str, float] | None:
        """The target's prior for `node` under its setting in `setting` (measured once)."""
        base = tuple((n, dataclasses.replace(s, prior=False)) for n, s in setting)
        return self.priors.values(
            (arm, plan_key(plan)), plan, node, dict(base)[node], lambda: self.load(arm, plan, base)
        )

    def field_schema(self, plan: Plan, name: str) -> Mapping[str, Any]:
        """A field's schema as the emitted grammar has it: planned state, else induced."""
        planned = plan.state.get(name)
        if isinstance(planned, dict):
            return planned
        return self.induction.fields[name].schema() if name in self.induction.fields else {}

    def keyed(self, plan: Plan) -> dict[str, Keyed]:
        """The generate nodes of `plan` that hierarchy can split, with their keyed choices
        (learned from the train split only)."""
        schemas = {name: self.field_schema(plan, name) for node in plan.nodes for name in (*node.writes, *node.reads)}
        train = [self.by_id[i] for i in self.train if i in self.by_id]
        return hierarchy_candidates(plan, schemas, train)

    def bootstrap(self, arm: str, plan: Plan, start: Setting) -> dict[str, frozenset[str]]:
        """Per generate node, the train cases the target got right for that node's fields
        at `start` (the arm's starting setting): the source of `bootstrap` examples. Runs
        `start` on the train split once per (arm, plan); a case is never its own example."""
        key = (arm, plan_key(plan))
        if key not in self._bootstrap:
            outcomes = self.score(arm, plan, start, self.train)
            found: dict[str, frozenset[str]] = {}
            for node in plan.nodes:
                if node.kind != "generate":
                    continue
                found[node.id] = frozenset(
                    o.id
                    for o in outcomes
                    if any(w in o.fields for w in node.writes) and all(o.fields.get(w, True) for w in node.writes)
                )
            self._bootstrap[key] = found
        return self._bootstrap[key]

    def has_bootstrap(self, arm: str, plan: Plan) -> bool:
        return (arm, plan_key(plan)) in self._bootstrap

    def loaded(self) -> list[Pack]:
        """The trial packs loaded so far."""
        return list(self._packs.values())

    def pack_dir(self, arm: str, plan: Plan, setting: Setting) -> Path:
        """One folder per (arm, plan, setting): a resumed build whose best plan changed
        never scores the new plan with the old plan's pack."""
        return self.folder / arm / f"{plan_key(plan)}-{setting_key(setting)}" / "pack"

    def emit(self, arm: str, plan: Plan, setting: Setting, out: Path, floor: float | None = PROBE_MIN) -> Path:
        """Emit `plan` under `setting` into `out` (a new folder), the target as its model."""
        probes = closed_fields(self.induction, plan, self.spec)
        shaped = apply_setting(plan, setting, self.spec, probes, floor, self.proposals)
        keyed = self.keyed(plan)
        shots: dict[str, Shots] = {}
        for node, s in setting:
            match = (keyed[node].key,) if s.matched and s.hierarchy and node in keyed else ()
            if s.strategy == "bootstrap":
                if (arm, plan_key(plan)) not in self._bootstrap:
                    raise RuntimeError(f"{arm}: bootstrap examples for {node} asked before TrialRunner.bootstrap ran")
                only = self._bootstrap[(arm, plan_key(plan))].get(node, frozenset())
                shots[node] = Shots(s.shots, "nearest", only, match)
            else:
                shots[node] = Shots(s.shots, s.strategy, match=match)
        choices = {node: keyed[node] for node, s in setting if s.hierarchy and node in keyed}
        node_keys: dict[str, dict[str, Any]] = {}
        for node, s in setting:
            field = prior_field(plan, node, probes)
            values = self.prior_for(arm, plan, setting, node) if s.prior and field else None
            if values and field:
                node_keys[node] = prior_key(field, values)
        evalset = outputs_only(self.spec) if arm == "one_call" else None
        return emit(
            shaped,
            self.spec,
            out,
            induction=self.induction,
            catalogue=self.catalogue,
            model=self.model,
            train=self.train,
            shots=shots,
            evalset=evalset,
            choices=choices,
            node_keys=node_keys,
        )

    def load(self, arm: str, plan: Plan, setting: Setting) -> Pack:
        key = (arm, f"{plan_key(plan)}-{setting_key(setting)}")
        if key not in self._packs:
            for node, s in setting:  # measured even when the pack is on disk: a resume spends what the build did
                if s.prior:
                    self.prior_for(arm, plan, setting, node)
            folder = self.pack_dir(arm, plan, setting)
            if not folder.is_dir():  # emitted next to it, then renamed: a killed emit leaves no half pack here
                staging = folder.with_name(f".pack-{uuid.uuid4().hex[:8]}")
                self.emit(arm, plan, setting, staging)
                os.replace(staging, folder)
            tools = set(self.tools) if self.tools is not None else None
            self._packs[key] = load_pack(folder, tools=tools, scorers=self.scorers)
        return self._packs[key]

    def score(self, arm: str, plan: Plan, setting: Setting, case_ids: Sequence[str]) -> list[CaseOutcome]:
        """Each case's outcome under `setting`, running only those not run before."""
        pack = self.load(arm, plan, setting)
        key = f"{plan_key(plan)}-{setting_key(setting)}"
        todo = [i for i in case_ids if (arm, key, i) not in self._outcomes]
        for o in self.run(pack, todo, f"search-{arm}-{key}"):
            self._outcomes[(arm, key, o.id)] = o
        return [self._outcomes[(arm, key, i)] for i in case_ids]

    def run(self, pack: Pack, case_ids: Sequence[str], run_prefix: str) -> list[CaseOutcome]:
        """The outcomes of `pack`'s cases named in `case_ids`, run on the target now."""
        if not case_ids:
            return []
        wanted = set(case_ids)
        subset = copy.copy(pack)
        subset.cases = [c for c in pack.cases if c.id in wanted]
        report = runtime.evaluate(
            subset, self.backend, tools=self.tools, concurrency=self.concurrency, run_prefix=run_prefix
        )
        return [self.outcome(pack, result) for result in report.cases]

    def outcome(self, pack: Pack, result: CaseResult) -> CaseOutcome:
        case = self.by_id[result.case_id]
        actual = result.output if result.status == "done" else {}  # a run held for a person answered nothing
        fields = runtime.field_matches(pack.fields, case.expected, actual)
        probs = [
            float(s.confidence["p"]) for s in result.trace.steps if s.confidence and s.confidence.get("p") is not None
        ]
        end = result.path[-1] if result.path else None
        people = {n.id for n in pack.nodes.values() if n.kind == "human"}
        eligible = (
            result.status == "done" and result.tier == "auto" and end != self.spec.unsure_end and end not in people
        )
        overflow = any(OVERFLOW in (s.reason or "") for s in result.trace.steps)
        totals = result.trace.totals()
        return CaseOutcome(
            id=result.case_id,
            passed=all(fields.values()) if fields else result.passed,
            score=result.score,
            fields=fields,
            confidence=min(probs) if probs else None,
            eligible=eligible,
            calls=int(totals["model_calls"]),
            tokens=int(totals["prompt_tokens"] + totals["completion_tokens"]),
            overflow=overflow,
            prompt_tokens=max((a.prompt_tokens for a in result.trace.attempts), default=0),
            output=dict(actual),
        )


__all__ = [
    "PROBE_MIN",
    "PROMPT_STYLES",
    "CaseOutcome",
    "NodeSetting",
    "Setting",
    "TrialRunner",
    "apply_setting",
    "closed_fields",
    "instructions_for",
    "proposal_key",
    "setting_dict",
    "setting_key",
]
