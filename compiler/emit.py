"""Emit: a checked plan -> a pack directory the runtime loads.

`emit(plan, spec, out, induction=...)` writes manifest.yaml, graph.yaml, one prompt and
one grammar per generate node (and per human node), a grammar per tool node whose result
schema is known, the fake scripts it is given, the gold cases as evalset.jsonl (byte for
byte: docs/invariants.md, 6) and a README. The runtime's loader is the judge of the result: an
emitted pack that does not load is a compiler bug (tests/compiler/test_emit.py holds emit
to that over generated specs and plans). docs/compiler.md, "Emit", says what each file
holds."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from compiler.errors import CompilerError, PlanInvalid
from compiler.offline_tools import OFFLINE_FAKE, with_tool_args
from compiler.spec_types import rule_document

if TYPE_CHECKING:
    from compiler.hierarchy import Keyed
    from compiler.induce import Induction
    from compiler.plan import Plan, PlanNode
    from compiler.spec import Spec

REPLY_LINE = "Reply with JSON only: "
TRAIN_TAG = "train"  # the manifest's train_tag when the split was seeded, not tagged


@dataclass(frozen=True)
class Shots:
    """A generate node's few-shot examples: how many, and which (docs/pack-format.md)."""

    count: int = 3
    strategy: str = "nearest"  # nearest | fixed
    only: frozenset[str] | None = None  # the train cases the examples may come from (None: all)
    match: tuple[str, ...] = ()  # state fields an example must share with the run (examples.match)


DEFAULT_SHOTS = Shots()
_FAKE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.json$")


class ToolLike(Protocol):
    """What emit reads of a tool's catalogue entry (compiler.tools.ToolSpec meets it)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def args(self) -> Mapping[str, Any]: ...

    @property
    def result(self) -> Mapping[str, Any]: ...


def emit(
    plan: Plan,
    spec: Spec,
    out: Path,
    *,
    induction: Induction,
    catalogue: Mapping[str, ToolLike] | None = None,
    fakes: Mapping[str, Mapping[str, Any]] | None = None,
    model: str | None = None,
    version: str = "1.0",
    train: Sequence[str] | None = None,
    shots: Mapping[str, Shots] | None = None,
    evalset: bytes | None = None,
    choices: Mapping[str, Keyed] | None = None,
    node_keys: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write the pack for `plan` into `out` (which must not exist, or be an empty folder)
    and return `out`. Raises PlanInvalid (before writing anything) for a plan that
    parse_plan accepts but whose pack the runtime would refuse for a reason only the
    field schemas show: a confidence gate on a field that is not a closed choice.

    `induction` gives the schemas of spec outputs (`induce` over the spec's gold);
    `catalogue` maps tool names to their entries (result schemas for tool-written fields);
    `fakes` maps file names (`offline.json`) to scripted-model documents, written under
    fakes/ (the offline script's choose_tool calls get their arguments from `catalogue`:
    compiler.offline_tools.with_tool_args); `model` is the manifest's model (default:
    `fake:fakes/offline.json` when that fake is given, else the spec's model, else none).

    `train` names the train split's case ids (default: the cases carrying the spec's
    `train` tag); few-shot examples come from those cases only. `shots` sets each generate
    node's examples (count and strategy; count 0: none); a node it does not name gets 3
    nearest when there is a train split. `evalset` replaces the gold bytes as the pack's
    evalset.jsonl (the one-call pack's outputs-only projection, compiler.one_call).
    `choices` gives generate nodes keyed choices (compiler.hierarchy): the node's
    `choices:` key and its labels/<field>.yaml. `node_keys` adds graph.yaml keys to nodes
    as they are (a measured label `prior`, compiler.priors)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CompilerError(f"{out}: emit writes a new pack; the folder must not exist or be empty")
    tools = dict(catalogue or {})
    scripts = dict(fakes or {})
    for name in scripts:
        if not _FAKE_NAME.match(name):
            raise CompilerError(f"fake script name {name!r} must be a plain file name ending in .json")
    if OFFLINE_FAKE in scripts and any(n.kind == "choose_tool" for n in plan.nodes):
        scripts[OFFLINE_FAKE] = with_tool_args(scripts[OFFLINE_FAKE], plan, spec, tools)
    schemas = _Schemas(plan, spec, induction, tools)
    _check_gates(plan, schemas)
    train_ids = _train_ids(spec, train)
    keyed = dict(choices or {})
    chosen = {n.id: shots.get(n.id, DEFAULT_SHOTS) if shots is not None else DEFAULT_SHOTS for n in plan.nodes}
    examples = _examples(plan, spec, train_ids, chosen)
    examples = {n: v for n, v in examples.items() if chosen[n].count > 0}
    files: dict[str, str | bytes] = {
        "manifest.yaml": _manifest(plan, spec, scripts, model, version, train_ids if train is not None else None),
        "graph.yaml": _graph(plan, examples, chosen, keyed, node_keys or {}),
        "evalset.jsonl": spec.gold_bytes if evalset is None else evalset,
        "README.md": _readme(plan, spec),
    }
    for node in plan.nodes:
        if node.kind in ("generate", "human"):
            fields = {w: schemas.field(w) for w in node.writes}
            files[f"grammars/{node.id}.json"] = _json(_object_schema(fields, closed=True))
            files[f"prompts/{node.id}.txt"] = _prompt(node, spec, fields)
        elif node.kind == "choose_tool":
            files[f"prompts/{node.id}.txt"] = _choice_prompt(node, spec)
        elif node.kind == "tool":
            known = {w: schemas.tool_field(node, w) for w in node.writes}
            if node.writes and all(s is not None for s in known.values()):
                files[f"grammars/{node.id}.json"] = _json(
                    _object_schema({w: s for w, s in known.items() if s is not None}, closed=False)
                )
    for name, script in scripts.items():
        files[f"fakes/{name}"] = _json(script)
    for rel, text in examples.values():
        files[rel] = text
    for choice in keyed.values():
        files[f"labels/{choice.labels}.yaml"] = choice.yaml_text()
    out.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return out


def _train_ids(spec: Spec, train: Sequence[str] | None) -> set[str] | None:
    if train is not None:
        return set(train)
    if spec.train is None:
        return None
    return {c.id for c in spec.gold if spec.train in c.tags}


def _examples(
    plan: Plan, spec: Spec, train_ids: set[str] | None, shots: Mapping[str, Shots]
) -> dict[str, tuple[str, str]]:
    """Few-shot examples from the train split, per generate node: `examples/<id>.jsonl`
    holds the train cases that have an expected value for every field the node writes and
    every state field it reads (the runtime refuses an example without them); a node whose
    Shots name `only` cases (bootstrapped examples) holds those of them only. A node no
    train case serves gets no examples."""
    if train_ids is None:
        return {}
    held_out = {json.dumps(c.input, sort_keys=True) for c in spec.gold if c.id not in train_ids}
    # a train case whose input equals a held-out case's would show the model that answer
    train = [c for c in spec.gold if c.id in train_ids and json.dumps(c.input, sort_keys=True) not in held_out]
    out: dict[str, tuple[str, str]] = {}
    for node in plan.nodes:
        if node.kind != "generate":
            continue
        needed = set(node.writes) | {r.split(".", 1)[0] for r in node.reads if not r.startswith("input.")}
        only = shots[node.id].only if node.id in shots else None
        lines = [
            json.dumps({"id": c.id, "input": c.input, "expected": c.expected}, ensure_ascii=False) + "\n"
            for c in train
            if needed <= set(c.expected) and (only is None or c.id in only)
        ]
        if lines:
            out[node.id] = (f"examples/{node.id}.jsonl", "".join(lines))
    return out


def _check_gates(plan: Plan, schemas: _Schemas) -> None:
    """A compiled pack gates only a closed-choice field (an enum, a const, a boolean): its
    gate's floor is chosen on validation from a renormalised probability. The runtime
    takes a gate on an open field too (a raw token product, docs/pack-format.md), but
    the compiler does not plan one yet (docs/decisions.md), so the plan is refused here,
    naming the field."""
    problems = []
    for i, node in enumerate(plan.nodes):
        gated = (node.confidence or {}).get("field") if node.kind == "generate" else None
        if isinstance(gated, str) and not _closed(schemas.field(gated)):
            problems.append(
                f"nodes[{i}].confidence.field: '{gated}' is not a closed choice in its schema (no enum, const or "
                "boolean type: gold does not close its values); give it an enum in 'state' or drop the gate"
            )
    if problems:
        raise PlanInvalid(problems)


def _closed(schema: Mapping[str, Any]) -> bool:
    if (isinstance(schema.get("enum"), list) and schema["enum"]) or "const" in schema:
        return True
    kind = schema.get("type")
    types = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
    return bool(types) and types <= {"boolean", "null"} and "boolean" in types


class _Schemas:
    """Where a field's JSON schema comes from: the plan's `state`, else the induced
    schema of a spec output (gold shows it), else a tool's result schema, else the spec's
    declared type (nullable), else anything (`{}`)."""

    def __init__(self, plan: Plan, spec: Spec, induction: Induction, catalogue: Mapping[str, ToolLike]) -> None:
        self.plan = plan
        self.spec = spec
        self.induction = induction
        self.catalogue = catalogue

    def field(self, name: str) -> dict[str, Any]:
        if name in self.plan.state:
            return dict(self.plan.state[name])
        induced = self.induction.fields.get(name)
        if induced is not None:
            schema = induced.schema()
            if schema:
                return schema
        for node in self.plan.nodes:
            if node.kind == "tool" and name in node.writes:
                found = self._result_property(node, name)
                if found is not None:
                    return found
        declared = self.spec.outputs.get(name)
        if declared is not None and declared.type is not None:
            return {"type": [declared.type, "null"]}
        return {}

    def tool_field(self, node: PlanNode, name: str) -> dict[str, Any] | None:
        """A tool-written field's schema: the plan's `state`, else the tool's result
        schema, else the induced schema of a spec output; None when none says."""
        if name in self.plan.state:
            return dict(self.plan.state[name])
        found = self._result_property(node, name)
        if found is None and name in self.spec.outputs and name in self.induction.fields:
            found = self.induction.fields[name].schema() or None
        return found

    def _result_property(self, node: PlanNode, name: str) -> dict[str, Any] | None:
        entry = self.catalogue.get(node.tool or "")
        if entry is None:
            return None
        props = entry.result.get("properties") if isinstance(entry.result, Mapping) else None
        if isinstance(props, Mapping) and isinstance(props.get(name), Mapping):
            return dict(props[name])
        return None


def _object_schema(fields: Mapping[str, dict[str, Any]], *, closed: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(fields), "required": list(fields)}
    if closed:
        schema["additionalProperties"] = False
    return schema


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)


def _manifest(
    plan: Plan, spec: Spec, fakes: Mapping[str, Any], model: str | None, version: str, train_ids: set[str] | None
) -> str:
    used = {n.tool for n in plan.nodes if n.kind == "tool" and n.tool}
    used |= {t for n in plan.nodes if n.kind == "choose_tool" for t in n.tools}
    tools = [t for t in spec.tools if t in used] + sorted(used - set(spec.tools))
    if model is None:
        model = f"fake:fakes/{OFFLINE_FAKE}" if OFFLINE_FAKE in fakes else spec.model
    doc: dict[str, Any] = {
        "name": spec.name,
        "version": version,
        "description": spec.task.strip(),
        "entry": plan.entry,
    }
    if model is not None:
        doc["model"] = model
    doc["inputs"] = list(spec.inputs)
    if tools:
        doc["tools"] = tools
    doc["output"] = list(spec.outputs)
    if train_ids is not None:
        tag = spec.train or TRAIN_TAG
        doc["train_tag"] = tag
        listed = [c.id for c in spec.gold if c.id in train_ids and tag not in c.tags]
        if listed:
            doc["train_cases"] = listed
    elif spec.train is not None:
        doc["train_tag"] = spec.train
    fields = _compare_rules(plan, spec)
    if fields:
        doc["fields"] = fields
    return f"# Compiled from the spec {spec.name!r} (packforge compiler); plan: {plan.name}.\n" + _yaml(doc)


def _compare_rules(plan: Plan, spec: Spec) -> dict[str, dict[str, Any]]:
    """The manifest's `fields:`: the spec's `compare` rules of the fields some node of the
    plan writes (the runtime refuses a rule for a field no node writes), then the plan's
    own `fields`, which win for a field both name, except a host scorer's: a plan cannot
    choose a scorer, so the spec's `scorer:NAME` (its options, its pass) always stands."""
    written = {w for n in plan.nodes for w in n.writes}
    rules = {name: rule for name, rule in spec.compare_rules().items() if name in written}
    out = {name: rule_document(rule) for name, rule in rules.items()}
    out.update({name: dict(body) for name, body in plan.fields.items() if name not in spec.scorers()})
    return out


def _graph(
    plan: Plan,
    examples: Mapping[str, tuple[str, str]],
    shots: Mapping[str, Shots],
    keyed: Mapping[str, Keyed],
    extra: Mapping[str, Mapping[str, Any]],
) -> str:
    nodes: dict[str, Any] = {}
    for n in plan.nodes:
        node: dict[str, Any] = {"kind": n.kind}
        if n.description:
            node["description"] = n.description
        reads = list(n.reads)
        if n.kind == "tool":
            reads += [p for p in n.args.values() if p not in reads]
            node["tool"] = n.tool
            node["args"] = dict(n.args)
        if n.kind != "end" and reads:
            node["reads"] = reads
        if n.kind in ("generate", "human", "tool", "choose_tool") and n.writes:
            node["writes"] = list(n.writes)
        if n.kind == "choose_tool":
            node.update(_choose_keys(n))
        if n.kind == "assert":
            node["expr"] = n.expr
        if n.kind == "generate":
            if n.two_stage:
                node["two_stage"] = True
            if n.samples > 1:
                node["samples"] = n.samples
            if n.agree is not None:
                node["agree"] = n.agree
            if n.confidence is not None:
                node["confidence"] = dict(n.confidence)
            if n.max_tokens is not None:
                node["max_tokens"] = n.max_tokens
            if n.assert_:
                node["assert"] = n.assert_
            if n.id in keyed:
                node["choices"] = {keyed[n.id].field: {"labels": keyed[n.id].labels, "key": keyed[n.id].key}}
            if n.id in examples:
                node["examples"] = {
                    "file": examples[n.id][0],
                    "count": shots[n.id].count,
                    "strategy": shots[n.id].strategy,
                    **({"match": list(shots[n.id].match)} if shots[n.id].match else {}),
                }
        if n.kind == "end" and n.output is not None:
            node["output"] = list(n.output)
        node.update(extra.get(n.id, {}))
        nodes[n.id] = node
    edges: list[dict[str, Any]] = []
    for e in plan.edges:
        edge: dict[str, Any] = {"from": e.source}
        if e.to is not None:
            edge["to"] = e.to
            if e.when is not None:
                edge["when"] = e.when
        elif e.on_fail is not None:
            edge["on_fail"] = e.on_fail
        elif e.on_unsure is not None:
            edge["on_unsure"] = e.on_unsure
        edges.append(edge)
    return _yaml({"nodes": nodes, "edges": edges})


def _choose_keys(n: PlanNode) -> dict[str, Any]:
    """A choose_tool node's own graph.yaml keys, as packs/calculator writes them."""
    keys: dict[str, Any] = {"tools": list(n.tools), "prompt": f"prompts/{n.id}.txt"}
    if n.max_calls is not None:
        keys["max_calls"] = n.max_calls
    if n.min_calls:
        keys["min_calls"] = n.min_calls
    keys["to"] = n.to
    if n.max_tokens is not None:
        keys["max_tokens"] = n.max_tokens
    return keys


def _label(path: str, spec: Spec) -> str:
    root, _, rest = path.partition(".")
    words = (rest if root == "input" and rest else path).replace(".", " ").replace("_", " ").strip()
    label = words[:1].upper() + words[1:]
    if root == "input" and rest in spec.inputs:
        description = spec.inputs[rest].description.strip()
        if description:
            label += f" ({description.rstrip('.')})"
    return label


def _prompt(node: PlanNode, spec: Spec, fields: Mapping[str, dict[str, Any]]) -> str:
    parts = _head(node, spec)
    shown = ", ".join(f"{json.dumps(f)}: {_hint(s)}" for f, s in fields.items())
    parts.append(_escape(REPLY_LINE + "{" + shown + "}"))
    return "\n\n".join(parts) + "\n"


def _head(node: PlanNode, spec: Spec) -> list[str]:
    """A prompt's first parts: the node's instructions (else its description, else the
    task), then each read as a labelled section holding its placeholder."""
    parts = [_escape((node.instructions or node.description or spec.task).strip())]
    for read in node.reads:
        if read.startswith("input."):
            parts.append(f'{_label(read, spec)}:\n"""\n{{{{ {read} }}}}\n"""')
        else:
            parts.append(f"{_label(read, spec)}:\n{{{{ {read} }}}}")
    return parts


def _choice_prompt(node: PlanNode, spec: Spec) -> str:
    """A choose_tool node's prompt, asked before each choice: its instructions and reads as
    a generate node's, then the offered tools (`{{ tools }}`), the calls so far (`{{ calls
    }}`) and how to answer."""
    parts = _head(node, spec)
    parts.append("You answer by calling tools, one call at a time. Tools:\n{{ tools }}")
    parts.append("Calls made so far:\n{{ calls }}")
    parts.append(
        'Reply with the next call as JSON, {"tool": NAME, "args": ARGS} (ARGS: an object holding the '
        'tool\'s arguments), or {"tool": "done"} when the results above are enough to answer.'
    )
    return "\n\n".join(parts) + "\n"


def _escape(text: str) -> str:
    """Text that is not a placeholder: `{{` would start one, so it is broken up."""
    return text.replace("{{", "{ {").replace("}}", "} }")


def _hint(schema: Mapping[str, Any]) -> str:
    """How a field's value looks, in a few words: the enum's values, a const, else its type."""
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    kind = schema.get("type")
    types = (
        [kind] if isinstance(kind, str) else [t for t in kind if isinstance(t, str)] if isinstance(kind, list) else []
    )
    if not types:
        return "<any JSON value>"
    words = []
    for t in types:
        if t == "null":
            continue
        if t == "array":
            words.append("[...]")
        elif t == "object":
            words.append("{...}")
        else:
            words.append(t)
    text = " or ".join(words) if words else "null"
    if "null" in types and words:
        text += " or null"
    return f"<{text}>"


def _readme(plan: Plan, spec: Spec) -> str:
    lines = [
        f"# {spec.name}",
        "",
        f"Compiled from spec {spec.name} ({spec.root}) by the packforge compiler; do not edit by hand,",
        "change the spec and compile again.",
        "",
        spec.task.strip(),
        "",
    ]
    if plan.summary:
        lines += ["## The plan", "", plan.summary.strip(), ""]
    lines += ["## Nodes", ""]
    for n in plan.nodes:
        what = f" - {n.description}" if n.description else ""
        lines.append(f"- `{n.id}` ({n.kind}){what}")
    return "\n".join(lines) + "\n"
