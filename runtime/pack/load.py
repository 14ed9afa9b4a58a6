"""Strict pack loading: every error names its file, its line and what to do."""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from jsonschema.exceptions import SchemaError

from runtime.errors import ExprError, PackInvalid, PackIssue
from runtime.expr import Expression, compile_expr
from runtime.fewshot import overlap_issues
from runtime.nodes import NODE_KINDS
from runtime.nodes.base import COMMON_KEYS, NodeKind, covered
from runtime.pack.checks import check_graph
from runtime.pack.evalset import parse_evalset
from runtime.pack.fields import check_fields, load_fields
from runtime.pack.model import TRUNCATE_KEEPS, Edge, Node, Pack, RetryPolicy, Truncation
from runtime.pack.train import tag_train_cases, train_tag
from runtime.pack.yamlsrc import SourceMap, load_yaml, nearest
from runtime.paths import path_problem
from runtime.schemas import check_schema, schema_validator
from runtime.templates import Template, TemplateError, parse_template

MANIFEST_KEYS = frozenset(
    {
        "name",
        "version",
        "entry",
        "description",
        "model",
        "tools",
        "inputs",
        "output",
        "retry",
        "max_steps",
        "system",
        "truncate",
        "fields",
        "train_tag",
        "train_cases",
    }
)
GRAPH_KEYS = frozenset({"nodes", "edges"})
EDGE_KEYS = frozenset({"from", "to", "when", "on_fail", "on_unsure"})
RETRY_KEYS = frozenset({"resamples", "feedback", "budget", "max_attempts"})
NODE_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


@functools.lru_cache(maxsize=512)
def _compiled_schema(text: str) -> tuple[Any, Any]:
    """Parse and check a grammar once per distinct text: checking a schema against the
    metaschema dominates loading, and the studio validates the same pack on every keystroke."""
    schema = json.loads(text)
    check_schema(schema)
    return schema, schema_validator(schema)


class NodeLoader:
    """What a node kind needs while loading (runtime.nodes.base.LoadContext): the pack's
    files and a place for issues."""

    def __init__(self, root: Path, graph: SourceMap, issues: list[PackIssue]) -> None:
        self.root = root
        self.graph = graph
        self.issues = issues
        self.files: dict[str, bytes] = {}

    def error(self, message: str, *path: str | int, kind: str = "value") -> None:
        self.issues.append(self.graph.issue(message, *path, kind=kind))

    def read(self, rel: str, *, required: bool, why: str) -> str | None:
        path = self.root / rel
        if not path.is_file():
            if required:
                self.issues.append(PackIssue(rel, f"missing file: {why}; create it", kind="missing"))
            return None
        data = path.read_bytes()
        self.files[rel] = data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.issues.append(PackIssue(rel, f"not UTF-8 text (byte {exc.start}); save it as UTF-8", kind="syntax"))
            return None

    def report(self, issue: PackIssue) -> None:
        self.issues.append(issue)

    def template(self, rel: Any, reads: tuple[str, ...] | None, *path: str | int) -> Template | None:
        """Load the prompt template at `rel`, named at `path` of this loader's document."""
        if not isinstance(rel, str) or path_problem(rel) is not None:
            self.error("expected the path of a template inside the pack, like prompts/system.txt", *path)
            return None
        text = self.read(rel, required=True, why=f"{'.'.join(str(p) for p in path)} names it")
        return self._checked_template(rel, text, reads, path)

    def prompt(self, node: Node, *, required: bool) -> Template | None:
        """Load prompts/<node>.txt; every placeholder must be one of the node's reads."""
        rel = f"prompts/{node.id}.txt"
        text = self.read(rel, required=required, why=f"node '{node.id}' needs a prompt template")
        return self._checked_template(rel, text, node.reads, ("nodes", node.id, "reads"))

    def _checked_template(
        self, rel: str, text: str | None, reads: tuple[str, ...] | None, path: tuple[str | int, ...]
    ) -> Template | None:
        """Parse a template; each placeholder outside `reads` (unless None) is an issue at `path`."""
        if text is None:
            return None
        try:
            template = parse_template(text)
        except TemplateError as exc:
            self.issues.append(PackIssue(rel, str(exc), exc.line, "syntax"))
            return None
        for name in sorted(template.fields) if reads is not None else ():
            if not covered(name, reads or ()):
                self.error(
                    f"{rel} uses {{{{ {name} }}}}, which is not in the node's reads; add it to reads",
                    *path,
                    kind="reference",
                )
        return template

    def schema(self, node_id: str, *, required: bool) -> tuple[dict[str, Any] | None, Any]:
        rel = f"grammars/{node_id}.json"
        text = self.read(rel, required=required, why=f"node '{node_id}' needs a JSON schema for its answer")
        if text is None:
            return None, None
        try:
            schema, validator = _compiled_schema(text)
        except json.JSONDecodeError as exc:
            self.issues.append(
                PackIssue(rel, f"JSON syntax error: {exc.msg} (column {exc.colno})", exc.lineno, "syntax")
            )
            return None, None
        except RecursionError:  # a schema nested thousands of levels deep
            self.issues.append(PackIssue(rel, "the schema is nested too deeply to read; flatten it", kind="schema"))
            return None, None
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            self.issues.append(PackIssue(rel, f"invalid JSON Schema at {where}: {exc.message}", kind="schema"))
            return None, None
        if not isinstance(schema, dict) or schema.get("type") != "object":
            self.issues.append(
                PackIssue(rel, 'the answer schema must be an object schema: {"type": "object", ...}', kind="schema")
            )
            return None, None
        return copy.deepcopy(schema), validator

    def expr(self, source: Any, *path: str | int) -> Expression | None:
        if not isinstance(source, str):
            self.error(f"expected an expression string, got {type(source).__name__}", *path)
            return None
        try:
            return compile_expr(source)
        except ExprError as exc:
            self.error(f"bad expression {source!r}: {exc}", *path, kind="syntax")
            return None

    def retry(self, spec: Any, *path: str | int) -> RetryPolicy | None:
        if spec is None:
            return None
        if not isinstance(spec, dict):
            self.error("retry must be a mapping", *path)
            return None
        values: dict[str, Any] = {}
        for key, value in spec.items():
            if key not in RETRY_KEYS:
                self.error(f"unknown retry key '{key}'; {nearest(key, RETRY_KEYS)}", *path, key, kind="unknown_key")
            elif value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                self.error(f"retry.{key} must be a whole number >= 0", *path, key)
            else:
                values[key] = value
        return RetryPolicy(**values)

    def field_list(self, value: Any, *path: str | int) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.error("expected a list of field names", *path)
            return ()
        return tuple(value)


def load_pack(root: str | Path, tools: Collection[str] | None = None, scorers: Mapping[str, Any] | None = None) -> Pack:
    """Load and validate the pack at `root`. Raises PackInvalid listing every issue.

    `tools` is the set of tool names the host registered; when given, a pack naming
    any other tool is refused. When None, tool names are checked against the
    manifest only (what `packforge validate` does without `--tools`). `scorers`, the
    host's scorer registry (runtime.scorers), likewise for `compare: scorer:NAME`."""
    root = Path(root)
    if not root.is_dir():
        raise PackInvalid([PackIssue(str(root), "not a pack directory", kind="missing")])
    issues: list[PackIssue] = []
    manifest_src, graph_src = SourceMap("manifest.yaml"), SourceMap("graph.yaml")
    loader = NodeLoader(root, graph_src, issues)
    manifest_text = loader.read("manifest.yaml", required=True, why="every pack has a manifest")
    graph_text = loader.read("graph.yaml", required=True, why="every pack has a graph")
    manifest = _document(
        manifest_text, manifest_src, issues, "the manifest must be a mapping of keys (name, version, entry, ...)"
    )
    graph = _document(graph_text, graph_src, issues, "the graph must be a mapping with 'nodes' and 'edges'")
    if manifest_text is not None and manifest is None:
        manifest_text = None  # reported already; skip the checks that need it
    manifest = manifest or {}
    for key in manifest:
        if key not in MANIFEST_KEYS:
            issues.append(
                manifest_src.issue(f"unknown key '{key}'; {nearest(key, MANIFEST_KEYS)}", key, kind="unknown_key")
            )
    for key in ("name", "version", "entry"):
        if manifest_text is not None and manifest.get(key) in (None, ""):
            issues.append(manifest_src.issue(f"'{key}' is required", kind="missing"))

    nodes = _load_nodes((graph or {}).get("nodes"), loader, NODE_KINDS) if graph else {}
    unresolved: list[tuple[str | None, str | None]] = []
    edges = _load_edges((graph or {}).get("edges"), loader, nodes, unresolved) if graph else []
    for key in graph or {}:
        if key not in GRAPH_KEYS:
            issues.append(graph_src.issue(f"unknown key '{key}'; {nearest(key, GRAPH_KEYS)}", key, kind="unknown_key"))

    manifest_tools = _str_list(manifest.get("tools"), manifest_src, issues, "tools")
    if tools is not None:
        for name in manifest_tools:
            if name not in tools:
                registered = ", ".join(sorted(tools)) or "none"
                issues.append(
                    manifest_src.issue(
                        f"tool '{name}' is not registered by the host (registered: {registered}); "
                        "pass a registry that provides it with --tools",
                        "tools",
                        kind="reference",
                    )
                )
    retry = NodeLoader(root, manifest_src, issues).retry(manifest.get("retry"), "retry") or RetryPolicy()
    max_steps = manifest.get("max_steps", 200)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        issues.append(manifest_src.issue("max_steps must be a whole number >= 1", "max_steps"))
        max_steps = 200
    inputs = manifest.get("inputs")
    output = manifest.get("output")
    manifest_loader = NodeLoader(root, manifest_src, issues)
    manifest_loader.files = loader.files  # one digest over every file read
    system = manifest_loader.template(manifest["system"], None, "system") if "system" in manifest else None
    truncate = _truncate(manifest.get("truncate"), manifest_src, issues)
    pack = Pack(
        root=root,
        name=str(manifest.get("name", root.name)),
        version=str(manifest.get("version", "")),
        entry=str(manifest.get("entry", "")),
        description=str(manifest.get("description", "")),
        model=manifest.get("model") if isinstance(manifest.get("model"), str) else None,
        tools=manifest_tools,
        inputs=_str_list(inputs, manifest_src, issues, "inputs") if inputs is not None else None,
        output=_str_list(output, manifest_src, issues, "output") if output is not None else None,
        retry=retry,
        max_steps=max_steps,
        system=system,
        truncate=truncate,
        nodes=nodes,
        edges=edges,
        cases=[],
        fields=load_fields(manifest.get("fields"), manifest_src, issues, scorers),
        train_tag=train_tag(manifest.get("train_tag"), manifest_src, issues),
    )
    if graph is not None and manifest_text is not None:
        check_graph(pack, graph_src, manifest_src, issues, unresolved=unresolved)
        _check_prompt_inputs(pack, manifest_src, graph_src, issues)
    evalset_text = loader.read("evalset.jsonl", required=False, why="")
    if evalset_text is not None:
        pack.cases = parse_evalset(evalset_text, pack, issues)
    pack.cases = tag_train_cases(pack, manifest.get("train_cases"), manifest_src, issues)
    for node in nodes.values():
        if node.examples is not None:
            issues.extend(overlap_issues(node.examples, pack.cases, pack.train_tag))
    gold = [(c.id, c.line, c.expected) for c in pack.cases]
    check_fields(pack.fields, {w for n in nodes.values() for w in n.writes}, gold, manifest_src, issues)
    if issues:
        raise PackInvalid(issues)
    pack.digest = hashlib.sha256(
        b"".join(name.encode() + b"\0" + data for name, data in sorted(loader.files.items()))
    ).hexdigest()[:16]
    return pack


def _truncate(spec: Any, src: SourceMap, issues: list[PackIssue]) -> dict[str, Truncation]:
    """`truncate: {FIELD: {max_chars: N, keep: head|tail|middle}}`, per input field."""
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        issues.append(src.issue("truncate must map input fields to {max_chars: N, keep: head}", "truncate"))
        return {}
    rules: dict[str, Truncation] = {}
    for name, body in spec.items():
        at = ("truncate", name)
        if not isinstance(name, str) or not isinstance(body, dict):
            issues.append(src.issue(f"truncate.{name} must be a mapping {{max_chars: N, keep: head}}", *at))
            continue
        unknown = sorted(set(body) - {"max_chars", "keep"})
        if unknown:
            hint = nearest(unknown[0], {"max_chars", "keep"})
            issues.append(src.issue(f"truncate.{name}: unknown key '{unknown[0]}'; {hint}", *at, kind="unknown_key"))
            continue
        n, keep = body.get("max_chars"), body.get("keep", "head")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            issues.append(src.issue(f"truncate.{name}.max_chars must be a whole number >= 1", *at, "max_chars"))
        elif keep not in TRUNCATE_KEEPS:
            issues.append(src.issue(f"truncate.{name}.keep must be one of: {', '.join(TRUNCATE_KEEPS)}", *at, "keep"))
        else:
            rules[name] = Truncation(n, keep)
    return rules


def _check_prompt_inputs(pack: Pack, manifest_src: SourceMap, graph_src: SourceMap, issues: list[PackIssue]) -> None:
    """The pack's system template reads only what every model node using it reads, and
    `truncate` names declared inputs."""
    if pack.system is not None:
        for node in pack.nodes.values():
            if node.kind != "generate" or node.system is not None:
                continue
            for name in sorted(pack.system.fields):
                if not covered(name, node.reads):
                    issues.append(
                        manifest_src.issue(
                            f"the system template uses {{{{ {name} }}}}, which node '{node.id}' does not read; "
                            "add it to that node's reads or give the node its own system:",
                            "system",
                            kind="reference",
                        )
                    )
    if pack.inputs is not None:
        for name in pack.truncate:
            if name not in pack.inputs:
                issues.append(
                    manifest_src.issue(
                        f"truncate names '{name}', which is not in inputs", "truncate", name, kind="reference"
                    )
                )


def _document(text: str | None, src: SourceMap, issues: list[PackIssue], shape: str) -> dict[str, Any] | None:
    if text is None:
        return None
    before = len(issues)
    value = load_yaml(text, src, issues)
    if len(issues) > before:
        return None
    if not isinstance(value, dict):
        issues.append(src.issue(shape))
        return None
    return value


def _str_list(value: Any, src: SourceMap, issues: list[PackIssue], key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        issues.append(src.issue(f"'{key}' must be a list of names", key))
        return ()
    return tuple(value)


def _load_nodes(spec: Any, loader: NodeLoader, kinds: dict[str, NodeKind]) -> dict[str, Node]:
    if not isinstance(spec, dict) or not spec:
        loader.error("'nodes' must be a non-empty mapping of node id to node", "nodes")
        return {}
    nodes: dict[str, Node] = {}
    for node_id, body in spec.items():
        at = ("nodes", node_id)
        if not node_id or not set(node_id) <= NODE_ID_CHARS:
            loader.error(f"node id '{node_id}' must use lowercase letters, digits and '_'", *at)
            continue
        if not isinstance(body, dict):
            loader.error(f"node '{node_id}' must be a mapping with at least 'kind'", *at)
            continue
        kind_name = body.get("kind", "")
        kind = kinds.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None:
            loader.error(
                f"node '{node_id}': unknown kind {body.get('kind')!r}; use one of: {', '.join(sorted(kinds))}",
                *at,
                "kind",
                kind="reference",
            )
            continue
        valid = COMMON_KEYS | kind.keys
        for key in body:
            if key not in valid:
                loader.error(
                    f"node '{node_id}': unknown key '{key}' for kind {kind.name}; {nearest(key, valid)}",
                    *at,
                    key,
                    kind="unknown_key",
                )
        node = Node(
            id=node_id,
            kind=kind.name,
            reads=loader.field_list(body.get("reads"), *at, "reads"),
            writes=loader.field_list(body.get("writes"), *at, "writes"),
            line=loader.graph.line(*at),
        )
        for w in node.writes:
            if "." in w or w == "input":
                loader.error(f"node '{node_id}': cannot write '{w}'; writes are top-level state fields", *at, "writes")
        kind.load(node, body, loader)
        nodes[node_id] = node
    return nodes


def _load_edges(
    spec: Any, loader: NodeLoader, nodes: dict[str, Node], unresolved: list[tuple[str | None, str | None]]
) -> list[Edge]:
    """The edges that name known nodes; an edge naming an unknown one is reported and
    noted in `unresolved` as (source, target), each None where unknown."""
    if spec is None:
        return []
    if not isinstance(spec, list):
        loader.error("'edges' must be a list of {from, to} mappings", "edges")
        return []
    edges: list[Edge] = []
    for i, body in enumerate(spec):
        at = ("edges", i)
        if not isinstance(body, dict):
            loader.error("an edge must be a mapping like {from: a, to: b}", *at)
            continue
        for key in body:
            if key not in EDGE_KEYS:
                loader.error(f"unknown edge key '{key}'; {nearest(key, EDGE_KEYS)}", *at, key, kind="unknown_key")
        targets = [k for k in ("to", "on_fail", "on_unsure") if k in body]
        if len(targets) != 1:
            loader.error("an edge needs exactly one of 'to', 'on_fail', 'on_unsure'", *at)
            continue
        kind = "next" if targets[0] == "to" else targets[0]
        source, target = body.get("from"), body[targets[0]]
        ok = True
        for role, name in (("from", source), (targets[0], target)):
            if not isinstance(name, str) or name not in nodes:
                known = difflib.get_close_matches(str(name), list(nodes), n=1)
                hint = f" (did you mean '{known[0]}'?)" if known else ""
                loader.error(f"edge {role} unknown node {name!r}{hint}", *at, role, kind="reference")
                ok = False
        when = None
        if "when" in body:
            if kind != "next":
                loader.error(f"'when' applies to 'to' edges only, not {kind}", *at, "when")
            when = loader.expr(body["when"], *at, "when")
        if not ok:
            unresolved.append(
                (
                    source if isinstance(source, str) and source in nodes else None,
                    target if isinstance(target, str) and target in nodes else None,
                )
            )
        if ok:
            edges.append(Edge(source=str(source), target=str(target), kind=kind, when=when, index=i))
    return edges
