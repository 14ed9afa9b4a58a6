"""Loading the generate node's prompting keys: `choices` (labels/*.yaml, runtime.choices),
`examples` (an examples file, runtime.fewshot) and `continues` (runtime.messages).
Every problem is reported with its file and line; nothing here runs at call time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.choices import Choice
from runtime.errors import PackIssue
from runtime.fewshot import STRATEGIES, Examples, parse_examples
from runtime.nodes.base import covered
from runtime.paths import path_problem

if TYPE_CHECKING:
    from runtime.nodes.base import LoadContext
    from runtime.pack.model import Node

CHOICE_KEYS = frozenset({"labels", "key"})
EXAMPLES_KEYS = frozenset({"file", "count", "strategy", "match"})


def _inside(rel: Any) -> bool:
    """Whether `rel` is a path a pack can hold (runtime.paths: the one rule for pack paths)."""
    return isinstance(rel, str) and path_problem(rel) is None


def load_choices(node: Node, spec: Any, loader: LoadContext) -> tuple[Choice, ...]:
    """Parse a generate node's `choices:` and load its label files."""
    at = ("nodes", node.id, "choices")
    if spec is None:
        return ()
    if not isinstance(spec, dict) or not spec:
        loader.error("choices must map an output field to {labels: NAME, key: STATE_FIELD}", *at)
        return ()
    props = (node.schema or {}).get("properties", {})
    found: list[Choice] = []
    for field, body in spec.items():
        where = (*at, field)
        if not isinstance(body, dict) or not isinstance(body.get("labels"), str) or not body["labels"]:
            loader.error(f"choices.{field} must be a mapping with 'labels: NAME' (labels/NAME.yaml)", *where)
            continue
        unknown = sorted(set(body) - CHOICE_KEYS)
        if unknown:
            loader.error(
                f"choices.{field}: unknown key '{unknown[0]}'; valid keys: key, labels", *where, kind="unknown_key"
            )
            continue
        name, key = body["labels"], body.get("key")
        if field not in node.writes:
            loader.error(
                f"choices names '{field}', which the node does not write; add it to writes", *where, kind="reference"
            )
            continue
        prop = props.get(field)
        if node.schema is not None and (not isinstance(prop, dict) or prop.get("type") != "string"):
            loader.error(
                f"choices.{field}: grammars/{node.id}.json must declare '{field}' as a string property "
                '({"type": "string"}); its enum is set per call',
                *where,
                kind="schema",
            )
            continue
        if key is not None and (not isinstance(key, str) or not covered(key, node.reads)):
            loader.error(
                f"choices.{field}: key {key!r} is not in the node's reads; add it to reads",
                *where,
                "key",
                kind="reference",
            )
            continue
        if not _inside(name):
            loader.error(
                f"choices.{field}: labels must be a file name under labels/, without '.yaml'", *where, "labels"
            )
            continue
        choice = _load_labels(node, field, name, key, loader)
        if choice is not None:
            found.append(choice)
    return tuple(found)


def _load_labels(node: Node, field: str, name: str, key: str | None, loader: LoadContext) -> Choice | None:
    # Imported here: runtime.pack's package imports the loader, which imports the node kinds.
    from runtime.pack.yamlsrc import SourceMap, load_yaml

    rel = f"labels/{name}.yaml"
    text = loader.read(rel, required=True, why=f"node '{node.id}' takes the labels of '{field}' from it")
    if text is None:
        return None
    src = SourceMap(rel)
    issues: list[PackIssue] = []
    data = load_yaml(text, src, issues)
    if issues:
        for issue in issues:
            loader.report(issue)
        return None
    if key is None:
        if not isinstance(data, list):
            loader.report(
                src.issue(f"without 'key' (node '{node.id}', field '{field}') this file must be a list of labels")
            )
            return None
        plain = _labels(data, src, loader, ())
        return Choice(field, name, None, plain=plain) if plain else None
    if not isinstance(data, dict) or not data:
        loader.report(
            src.issue(f"with key '{key}' (node '{node.id}') this file must map each value of {key} to a list of labels")
        )
        return None
    table: list[tuple[str, tuple[str, ...]]] = []
    ok = True
    for value, items in data.items():
        if not isinstance(value, str):
            loader.report(src.issue(f"key {value!r} must be a string; quote it", value))
            ok = False
        elif not isinstance(items, list):
            loader.report(src.issue(f"'{value}' must map to a list of labels", value))
            ok = False
        else:
            labels = _labels(items, src, loader, (value,))
            ok = ok and bool(labels)
            table.append((value, labels))
    return Choice(field, name, key, table=tuple(table)) if ok else None


def _labels(items: list[Any], src: Any, loader: LoadContext, at: tuple[str, ...]) -> tuple[str, ...]:
    if not items:
        loader.report(src.issue("a list of labels must not be empty", *at))
        return ()
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item:
            loader.report(src.issue(f"label {item!r} must be a non-empty string; quote it", *at, i))
            return ()
    return tuple(items)


def load_examples(node: Node, spec: Any, loader: LoadContext) -> Examples | None:
    """Parse a generate node's `examples:` and load its file."""
    at = ("nodes", node.id, "examples")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        loader.error("examples must be a mapping: {file: examples.jsonl, count: 3, strategy: fixed}", *at)
        return None
    ok = True
    for key in spec:
        if key not in EXAMPLES_KEYS:
            loader.error(
                f"examples: unknown key '{key}'; valid keys: count, file, match, strategy", *at, key, kind="unknown_key"
            )
            ok = False
    rel = spec.get("file", "examples.jsonl")
    count = spec.get("count", 3)
    strategy = spec.get("strategy", "fixed")
    if not _inside(rel):
        loader.error("examples.file must be a path inside the pack, like examples.jsonl", *at, "file")
        ok = False
    elif rel == "evalset.jsonl":
        loader.error("examples.file cannot be the evalset; few-shot examples never come from it", *at, "file")
        ok = False
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 50:
        loader.error("examples.count must be a whole number from 1 to 50", *at, "count")
        ok = False
    if strategy not in STRATEGIES:
        loader.error(f"examples.strategy must be one of: {', '.join(STRATEGIES)}", *at, "strategy")
        ok = False
    match = _match_fields(node, spec.get("match", []), loader)
    if match is None or not ok:
        return None
    text = loader.read(rel, required=True, why=f"node '{node.id}' takes its few-shot examples from it")
    if text is None:
        return None
    issues: list[PackIssue] = []
    items = parse_examples(text, rel, node.id, node.writes, issues, node.reads)
    for issue in issues:
        loader.report(issue)
    if issues:
        return None
    if not items:
        loader.report(PackIssue(rel, "no examples; add at least one line {id, input, expected}", kind="missing"))
        return None
    return Examples(rel, count, strategy, tuple(items), match)


def _match_fields(node: Node, spec: Any, loader: LoadContext) -> tuple[str, ...] | None:
    """`examples.match`: field paths of the state the node reads and does not write
    (their values come from earlier nodes); None after reporting a problem."""
    at = ("nodes", node.id, "examples", "match")
    if not isinstance(spec, list) or not all(isinstance(f, str) and f for f in spec):
        loader.error("examples.match must be a list of state fields the node reads, like [department]", *at)
        return None
    state_reads = tuple(r for r in node.reads if not r.startswith("input."))
    for i, name in enumerate(spec):
        if not covered(name, state_reads) or covered(name, node.writes):
            reads = ", ".join(sorted(set(state_reads) - set(node.writes))) or "none"
            loader.error(
                f"examples.match: '{name}' is not a state field node '{node.id}' reads and does not write "
                f"(its state reads: {reads}); add it to reads or remove it from match",
                *at,
                i,
            )
            return None
    return tuple(dict.fromkeys(spec))


def load_continues(node: Node, spec: dict[str, Any], loader: LoadContext) -> str | None:
    """`continues: NODE`: the node's call goes on from NODE's conversation (its system
    prompt, examples and request, then its answer). The node then has no system prompt
    or examples of its own. That NODE is a generate node is checked with the whole
    graph (runtime.pack.checks)."""
    at = ("nodes", node.id, "continues")
    target = spec["continues"]
    if not isinstance(target, str) or not target:
        loader.error("continues must name a generate node whose conversation this node's call goes on from", *at)
        return None
    for key in ("system", "examples"):
        if key in spec:
            loader.error(
                f"a node that continues '{target}' takes its {key} from that node's conversation; "
                f"remove '{key}' or 'continues'",
                *at,
            )
            return None
    return target
