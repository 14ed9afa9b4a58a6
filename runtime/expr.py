"""The safe expression language of `assert` nodes and `when:` edges.

Source is parsed with Python's `ast` (mode='eval'), checked against an allowlist of
node types and function names, and compiled to nested closures. Nothing can reach a
Python attribute, builtin or import: `a.b` is a key lookup on a JSON object. Every
failure, at compile time or while evaluating, is an ExprError with a clear message.
Booleans are not numbers here: `true + 1` and `true < 2` are refused, while `==`
follows Python (`1 == 1.0`).

`matches()` runs on RE2 (google-re2), not Python's `re`: RE2 matches in time linear in
the text for every pattern, so no pattern a pack carries (`(a|a)*b`, `a*a*a*a*b`) can
pin a worker. The price is RE2's syntax: no backreferences, no lookaround, no atomic
groups or possessive quantifiers, and `\\w \\d \\s \\b` are ASCII (use `\\pL`, `\\pN`);
such patterns are refused when the expression is compiled (at pack load for a literal).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Mapping
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

from runtime.errors import ExprError
from runtime.expr_functions import _ARG_KINDS, _FUNCS, _regex
from runtime.expr_ops import _ALIASES, _BINOPS, _CMPS, _OP_TEXT, _Ctx, _Fail, _Fn, _isnum, _kind, _need, _num, _truth
from runtime.expr_ops import MAX_DEPTH as MAX_DEPTH
from runtime.expr_ops import MAX_INT as MAX_INT
from runtime.expr_ops import MAX_NODES as MAX_NODES
from runtime.expr_ops import MAX_PATTERN_CHARS as MAX_PATTERN_CHARS
from runtime.expr_ops import MAX_SIZE as MAX_SIZE
from runtime.expr_ops import MAX_SOURCE_CHARS as MAX_SOURCE_CHARS
from runtime.expr_ops import MAX_STEPS as MAX_STEPS
from runtime.expr_ops import MAX_SUBJECT_CHARS as MAX_SUBJECT_CHARS
from runtime.regex import RE2_MAX_MEM as RE2_MAX_MEM

_REFUSED: dict[type[ast.AST], str] = {
    ast.Lambda: "lambda is",
    ast.ListComp: "list comprehensions are",
    ast.SetComp: "set comprehensions are",
    ast.DictComp: "dict comprehensions are",
    ast.GeneratorExp: "generator expressions are",
    ast.NamedExpr: "the walrus operator ':=' is",
    ast.Starred: "starred expressions ('*x') are",
    ast.JoinedStr: "f-strings are",
    ast.FormattedValue: "f-strings are",
    ast.Set: "set literals are",
    ast.Slice: "slices ('a[1:2]') are",
    ast.Await: "await is",
    ast.Yield: "yield is",
    ast.YieldFrom: "yield is",
}


# --- compiler ------------------------------------------------------------------------------


def _short(s: str) -> str:
    return repr(s if len(s) <= 80 else s[:77] + "...")


class _Compiler:
    def __init__(self, source: str) -> None:
        self.source = source

    def refuse(self, msg: str, node: ast.expr | None = None, tail: str = "") -> ExprError:
        where = ""
        if node is not None:  # `tail`: point at this text at the node's end (an attribute name)
            lineno = (node.end_lineno or node.lineno) if tail else node.lineno
            offset = (node.end_col_offset or 0) - len(tail.encode()) if tail else node.col_offset
            lines = re.split(r"\r\n|\r|\n", self.source)
            line = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
            col = len(line.encode()[:offset].decode("utf-8", "ignore")) + 1
            where = f" (line {lineno}, column {col})" if len(lines) > 1 else f" (column {col})"
        return ExprError(f"expression {_short(self.source)}: {msg}{where}")

    def field(self, name: str, node: ast.expr, tail: str = "") -> None:
        if name.startswith("_"):
            raise self.refuse(f"field names may not start with '_' ({name!r})", node, tail)

    def c(self, node: ast.expr, depth: int) -> _Fn:
        if depth > MAX_DEPTH:
            raise self.refuse(f"nested too deeply (more than {MAX_DEPTH} levels)", node)
        handler = getattr(self, "c_" + type(node).__name__, None)
        if handler is None:
            what = _REFUSED.get(type(node), f"'{type(node).__name__}' expressions are")
            raise self.refuse(f"{what} not allowed", node)
        fn: _Fn = handler(node, depth + 1)
        return fn

    def c_Constant(self, node: ast.Constant, d: int) -> _Fn:
        v = node.value
        if not (v is None or isinstance(v, (bool, int, float, str))):
            raise self.refuse(f"{type(v).__name__} literals are not allowed", node)
        if _isnum(v):
            try:
                _num(v)
            except _Fail as e:
                raise self.refuse(f"literal {str(e).replace(' result', '')}", node) from None
        return lambda ctx: v

    def c_Name(self, node: ast.Name, d: int) -> _Fn:
        name = node.id
        if name in _ALIASES:
            v = _ALIASES[name]
            return lambda ctx: v
        self.field(name, node)

        def f(ctx: _Ctx) -> Any:
            try:
                return ctx.env[name]
            except KeyError:
                raise _Fail(f"field {name!r} is not set") from None

        return f

    def c_Attribute(self, node: ast.Attribute, d: int) -> _Fn:
        if not isinstance(node.value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
            raise self.refuse(f"'.{node.attr}' is only allowed on fields, not on a literal or other expression", node)
        self.field(node.attr, node, node.attr)
        base, attr, path, btext = self.c(node.value, d), node.attr, ast.unparse(node)[:80], ast.unparse(node.value)[:80]

        def f(ctx: _Ctx) -> Any:
            obj = base(ctx)
            _need(isinstance(obj, Mapping), f"cannot read {path!r}: {btext!r} is a {_kind(obj)}, not an object")
            try:
                return obj[attr]
            except KeyError:
                raise _Fail(f"field {path!r} is not set") from None

        return f

    def c_Subscript(self, node: ast.Subscript, d: int) -> _Fn:
        base, key, btext = self.c(node.value, d), self.c(node.slice, d), ast.unparse(node.value)[:80]

        def f(ctx: _Ctx) -> Any:
            obj, k = base(ctx), key(ctx)
            if isinstance(obj, Mapping):
                _need(isinstance(k, str), f"object keys are strings; {btext!r} was indexed with a {_kind(k)}")
                try:
                    return obj[k]
                except KeyError:
                    raise _Fail(f"key {k!r} is not set in {btext!r}") from None
            _need(isinstance(obj, (list, str)), f"cannot index {btext!r}: it is a {_kind(obj)}")
            _need(isinstance(k, int) and not isinstance(k, bool), f"index into {btext!r} must be an integer")
            _need(-len(obj) <= k < len(obj), f"index {k} is out of range for {btext!r} (length {len(obj)})")
            return obj[k]

        return f

    def c_Compare(self, node: ast.Compare, d: int) -> _Fn:
        for op in node.ops:
            if type(op) not in _CMPS:
                raise self.refuse(f"operator '{_OP_TEXT.get(type(op), type(op).__name__)}' is not allowed", node)
        left, rights = self.c(node.left, d), [self.c(x, d) for x in node.comparators]
        ops = [_CMPS[type(op)] for op in node.ops]
        if len(ops) == 1:
            op0, right = ops[0], rights[0]
            return lambda ctx: op0(left(ctx), right(ctx), ctx)

        def f(ctx: _Ctx) -> bool:
            a = left(ctx)
            for op, r in zip(ops, rights, strict=False):
                b = r(ctx)
                if not op(a, b, ctx):
                    return False
                a = b
            return True

        return f

    def c_BoolOp(self, node: ast.BoolOp, d: int) -> _Fn:
        parts, is_and = [self.c(v, d) for v in node.values], isinstance(node.op, ast.And)

        def f(ctx: _Ctx) -> Any:
            v = None
            for p in parts:
                v = p(ctx)
                if _truth(v) != is_and:
                    return v
            return v

        return f

    def c_UnaryOp(self, node: ast.UnaryOp, d: int) -> _Fn:
        operand = self.c(node.operand, d)
        if isinstance(node.op, ast.Not):
            return lambda ctx: not _truth(operand(ctx))
        if isinstance(node.op, ast.Invert):
            raise self.refuse("operator '~' is not allowed", node)
        sign = -1 if isinstance(node.op, ast.USub) else 1

        def f(ctx: _Ctx) -> Any:
            v = operand(ctx)
            _need(_isnum(v), f"unary '{'-' if sign < 0 else '+'}' needs a number, got {_kind(v)}")
            return -v if sign < 0 else v

        return f

    def c_BinOp(self, node: ast.BinOp, d: int) -> _Fn:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.refuse(f"operator '{_OP_TEXT.get(type(node.op), type(node.op).__name__)}' is not allowed", node)
        left, right = self.c(node.left, d), self.c(node.right, d)
        return lambda ctx: op(left(ctx), right(ctx))

    def c_IfExp(self, node: ast.IfExp, d: int) -> _Fn:
        test, body, orelse = self.c(node.test, d), self.c(node.body, d), self.c(node.orelse, d)
        return lambda ctx: body(ctx) if _truth(test(ctx)) else orelse(ctx)

    def c_List(self, node: ast.List | ast.Tuple, d: int) -> _Fn:
        elts = [self.c(e, d) for e in node.elts]
        return lambda ctx: [e(ctx) for e in elts]

    c_Tuple = c_List  # `x in (1, 2)` works; tuples are lists

    def c_Dict(self, node: ast.Dict, d: int) -> _Fn:
        if any(k is None for k in node.keys):
            raise self.refuse("'**' unpacking is not allowed", node)
        pairs = [(self.c(k, d), self.c(v, d)) for k, v in zip(node.keys, node.values, strict=False) if k is not None]

        def f(ctx: _Ctx) -> dict[str, Any]:
            out = {}
            for kf, vf in pairs:
                k = kf(ctx)
                _need(isinstance(k, str), f"object keys must be strings, got {_kind(k)}")
                out[k] = vf(ctx)
            return out

        return f

    def c_Call(self, node: ast.Call, d: int) -> _Fn:
        allowed = ", ".join(_FUNCS)
        if not isinstance(node.func, ast.Name):
            if isinstance(node.func, ast.Attribute):
                raise self.refuse(
                    f"method calls are not allowed ('.{node.func.attr}(...)'); use a function instead: {allowed}", node
                )
            raise self.refuse(f"only named functions may be called: {allowed}", node)
        name = node.func.id
        if name not in _FUNCS:
            raise self.refuse(f"function {name!r} is not allowed; allowed: {allowed}", node)
        if node.keywords:
            raise self.refuse(f"keyword arguments are not allowed (in call to {name!r})", node)
        kinds, lo, impl = _FUNCS[name]
        if not lo <= len(node.args) <= len(kinds):
            want = str(lo) if lo == len(kinds) else f"{lo} to {len(kinds)}"
            raise self.refuse(f"function {name!r} takes {want} argument(s), got {len(node.args)}", node)
        if name == "matches" and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            try:
                _regex(node.args[1].value)
            except _Fail as e:
                raise self.refuse(str(e), node.args[1]) from None
        args = [
            (self.c(a, d), *_ARG_KINDS[k], i + 1, k in "LO")
            for i, (a, k) in enumerate(zip(node.args, kinds, strict=False))
        ]

        def f(ctx: _Ctx) -> Any:
            vals = []
            for fn, desc, ok, i, charged in args:
                v = fn(ctx)
                _need(ok(v), f"{name}() argument {i} must be {desc}, got {_kind(v)}")
                if charged:
                    ctx.charge(len(v))
                vals.append(v)
            return impl(ctx, *vals)

        return f


def _refs(node: ast.AST, out: set[str]) -> None:
    """Collect dotted field paths; a constant-key chain collapses to its longest path."""
    if isinstance(node, (ast.Attribute, ast.Subscript, ast.Name)):
        segs: list[str] = []
        keys: list[ast.AST] = []
        cur: ast.AST = node
        while isinstance(cur, (ast.Attribute, ast.Subscript)):
            if isinstance(cur, ast.Attribute):
                segs.append(cur.attr)
            elif (
                isinstance(cur.slice, ast.Constant)
                and isinstance(cur.slice.value, str)
                and cur.slice.value
                and "." not in cur.slice.value
            ):
                segs.append(cur.slice.value)
            else:
                segs, keys = [], [*keys, cur.slice]
            cur = cur.value
        if isinstance(cur, ast.Name):
            if cur.id not in _ALIASES:
                out.add(".".join([cur.id, *reversed(segs)]))
        else:
            _refs(cur, out)
        for k in keys:
            _refs(k, out)
        return
    children = node.args if isinstance(node, ast.Call) else list(ast.iter_child_nodes(node))
    for child in children:
        _refs(child, out)


class Expression:
    """A compiled expression. Build with `compile_expr`; evaluate against a JSON env."""

    __slots__ = ("_fn", "_refs", "source")

    def __init__(self, source: str, fn: _Fn, refs: frozenset[str]) -> None:
        self.source = source
        self._fn = fn
        self._refs = refs

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"

    @property
    def references(self) -> frozenset[str]:
        return self._refs

    @property
    def roots(self) -> frozenset[str]:
        return frozenset(r.split(".", 1)[0] for r in self._refs)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        try:
            return self._fn(_Ctx(env))
        except (
            _Fail,
            TypeError,
            ValueError,
            ArithmeticError,
            LookupError,
            RecursionError,
            MemoryError,
            re2.error,
        ) as e:
            raise ExprError(f"expression {_short(self.source)}: {e}") from None

    def truthy(self, env: Mapping[str, Any]) -> bool:
        value = self.evaluate(env)
        try:
            return _truth(value)
        except _Fail as e:
            raise ExprError(f"expression {_short(self.source)}: {e}") from None


def compile_expr(source: str) -> Expression:
    """Parse, validate and compile `source`; raises ExprError saying what is wrong and where."""
    if not isinstance(source, str):
        raise ExprError(f"expression must be a string, got {type(source).__name__}")
    comp = _Compiler(source)
    if len(source) > MAX_SOURCE_CHARS:
        raise comp.refuse(f"too long ({len(source)} chars; the limit is {MAX_SOURCE_CHARS})")
    if not source.strip():
        raise comp.refuse("empty expression")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as e:
        where = f" (column {e.offset})" if e.offset and "\n" not in source.strip() else ""
        raise ExprError(f"expression {_short(source)}: invalid syntax: {e.msg}{where}") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise comp.refuse(f"cannot be parsed: {e}") from None
    nodes = sum(1 for n in ast.walk(tree) if isinstance(n, ast.expr))
    if nodes > MAX_NODES:
        raise comp.refuse(f"too complex ({nodes} nodes; the limit is {MAX_NODES})")
    comp.source = source.strip()
    fn = comp.c(tree.body, 1)
    refs: set[str] = set()
    _refs(tree.body, refs)
    return Expression(source, fn, frozenset(refs))
