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
import math
import re
import warnings
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

from runtime.errors import ExprError

MAX_SOURCE_CHARS = 1000  # longer source refused at compile
MAX_NODES = 200  # more AST expression nodes refused at compile
MAX_STEPS = 10_000  # evaluation step budget (items iterated); exceeding raises ExprError
MAX_DEPTH = 32  # deepest AST nesting accepted
MAX_SIZE = 100_000  # most chars/items in a string or list the expression builds
MAX_INT = 10**18  # integer results must have abs below this
MAX_PATTERN_CHARS = 200  # longest regex pattern `matches` accepts
MAX_SUBJECT_CHARS = 2000  # longest text `matches` searches (RE2 is linear in it; still bounded)
RE2_MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled pattern and its DFA cache (RE2's default)
_ALIASES: dict[str, Any] = {"true": True, "false": False, "null": None}


class _Fail(Exception):
    """A runtime failure; `Expression.evaluate` turns it into an ExprError."""


class _Ctx:
    __slots__ = ("env", "steps")

    def __init__(self, env: Mapping[str, Any]) -> None:
        self.env = env
        self.steps = 0

    def charge(self, n: int) -> None:
        self.steps += n
        if self.steps > MAX_STEPS:
            raise _Fail(f"evaluation exceeded the step budget of {MAX_STEPS}")


_Fn = Callable[[_Ctx], Any]


def _kind(v: Any) -> str:
    for t, name in (
        (type(None), "null"),
        (bool, "boolean"),
        (int, "number"),
        (float, "number"),
        (str, "string"),
        (list, "list"),
        (Mapping, "object"),
    ):
        if isinstance(v, t):
            return name
    return type(v).__name__


def _isnum(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _num(v: Any) -> Any:
    """Bound a numeric result: finite floats, integers with abs below MAX_INT."""
    if isinstance(v, float):
        if not math.isfinite(v):
            raise _Fail("number result is not finite")
    elif abs(v) >= MAX_INT:
        raise _Fail("integer result out of range (abs must be below 10**18)")
    return v


def _sized(v: Any) -> Any:
    if len(v) > MAX_SIZE:
        raise _Fail(f"{_kind(v)} result too long (over {MAX_SIZE} chars/items)")
    return v


def _truth(v: Any) -> bool:
    if v is None or isinstance(v, (bool, int, float, str, list, Mapping)):
        return bool(v)
    raise _Fail(f"a {type(v).__name__} value cannot be used as a condition")


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise _Fail(what)


def _bad(what: str) -> Any:
    raise _Fail(what)


# --- operators ---------------------------------------------------------------------------


def _weight(v: Any, cap: int) -> int:
    """Chars plus items, counted through nested lists and objects (stops past `cap`).
    Only `*` can repeat one value many times, so only `*` needs the deep count."""
    total, stack = 0, [v]
    while stack and total <= cap:
        x = stack.pop()
        total += len(x) if isinstance(x, (str, list, Mapping)) else 0
        if total <= cap and isinstance(x, list):
            stack.extend(x)
        elif total <= cap and isinstance(x, Mapping):
            stack.extend([*x.keys(), *x.values()])
    return total


def _add(a: Any, b: Any) -> Any:
    if _isnum(a) and _isnum(b):
        return _num(a + b)
    if type(a) is type(b) and isinstance(a, (str, list)):
        _need(len(a) + len(b) <= MAX_SIZE, f"{_kind(a)} result too long (over {MAX_SIZE} chars/items)")
        return a + b
    raise _Fail(f"cannot add {_kind(a)} and {_kind(b)}")


def _mul(a: Any, b: Any) -> Any:
    if _isnum(a) and _isnum(b):
        return _num(a * b)
    if isinstance(a, int) and not isinstance(a, bool):
        a, b = b, a
    if isinstance(a, (str, list)) and isinstance(b, int) and not isinstance(b, bool):
        ok = b <= 1 or _weight(a, MAX_SIZE // b) * b <= MAX_SIZE
        _need(ok, f"{_kind(a)} result too long (over {MAX_SIZE} chars/items, nested ones counted)")
        return a * b
    raise _Fail(f"cannot multiply {_kind(a)} by {_kind(b)}")


def _arith(sym: str, op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def run(a: Any, b: Any) -> Any:
        _need(_isnum(a) and _isnum(b), f"'{sym}' needs numbers, got {_kind(a)} and {_kind(b)}")
        _need(sym == "-" or b != 0, "division by zero")
        return _num(op(a, b))

    return run


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: _add,
    ast.Mult: _mul,
    ast.Sub: _arith("-", lambda a, b: a - b),
    ast.Div: _arith("/", lambda a, b: a / b),
    ast.FloorDiv: _arith("//", lambda a, b: a // b),
    ast.Mod: _arith("%", lambda a, b: a % b),
}
_OP_TEXT: dict[type[ast.AST], str] = {
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Is: "is",
    ast.IsNot: "is not",
}


def _order(sym: str, op: Callable[[Any, Any], bool]) -> Callable[[Any, Any, _Ctx], bool]:
    def run(a: Any, b: Any, ctx: _Ctx) -> bool:
        same = (_isnum(a) and _isnum(b)) or (type(a) is type(b) and isinstance(a, (str, list)))
        _need(same, f"cannot compare {_kind(a)} with {_kind(b)} using '{sym}'")
        return op(a, b)

    return run


def _in(a: Any, b: Any, ctx: _Ctx) -> bool:
    if isinstance(b, str):
        _need(isinstance(a, str), f"'in' on a string needs a string on the left, got {_kind(a)}")
        return a in b
    if isinstance(b, Mapping):
        return isinstance(a, str) and a in b
    _need(isinstance(b, list), f"'in' needs a string, list or object on the right, got {_kind(b)}")
    ctx.charge(len(b))
    return a in b


_CMPS: dict[type[ast.cmpop], Callable[[Any, Any, _Ctx], bool]] = {
    ast.Eq: lambda a, b, c: bool(a == b),
    ast.NotEq: lambda a, b, c: bool(a != b),
    ast.Lt: _order("<", lambda a, b: a < b),
    ast.LtE: _order("<=", lambda a, b: a <= b),
    ast.Gt: _order(">", lambda a, b: a > b),
    ast.GtE: _order(">=", lambda a, b: a >= b),
    ast.In: _in,
    ast.NotIn: lambda a, b, c: not _in(a, b, c),
}

# --- functions -----------------------------------------------------------------------------
# Argument kinds: s string, n number, p string/number/boolean, x scalar (also null),
# c string/list/object, L list and O object (both charged per item), * anything.
_ARG_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "s": ("a string", lambda v: isinstance(v, str)),
    "n": ("a number", _isnum),
    "p": ("a number or string", lambda v: isinstance(v, (str, int, float))),
    "x": ("a string, number, boolean or null", lambda v: v is None or isinstance(v, (str, int, float))),
    "c": ("a string, list or object", lambda v: isinstance(v, (str, list, Mapping))),
    "L": ("a list", lambda v: isinstance(v, list)),
    "O": ("an object", lambda v: isinstance(v, Mapping)),
    "*": ("anything", lambda v: True),
}


def _subject(text: str) -> str:
    _need(len(text) <= MAX_SUBJECT_CHARS, f"matches() text longer than {MAX_SUBJECT_CHARS} chars")
    return text


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # RE2 would print every refused pattern to stderr
_RE2_OPTIONS.max_mem = RE2_MAX_MEM
# RE2's error text for the Python constructs it leaves out on purpose -> what to say instead.
_RE2_UNSUPPORTED = (
    (re.compile(r"invalid escape sequence: \\[1-9]"), "backreferences (\\1) are not supported"),
    (re.compile(r"invalid perl operator: \(\?P$"), "backreferences (?P=name) are not supported"),
    (
        re.compile(r"invalid (?:perl operator|named capture group): \(\?<?[=!]"),
        "lookaround is not supported",
    ),
    (re.compile(r"invalid perl operator: \(\?>"), "atomic groups (?>...) are not supported (nor needed)"),
    (re.compile(r"bad repetition operator: [*+?}]\+"), "possessive quantifiers are not supported (nor needed)"),
    (re.compile(r"invalid escape sequence: \\Z"), "use \\z or $ instead of \\Z"),
)


@lru_cache(maxsize=64)  # 64 x RE2_MAX_MEM at most
def _regex(pattern: str) -> Any:
    """The compiled RE2 pattern; RE2 matches in linear time, so no pattern can backtrack."""
    _need(len(pattern) <= MAX_PATTERN_CHARS, f"matches() pattern longer than {MAX_PATTERN_CHARS} chars")
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except UnicodeEncodeError:  # RE2 reads UTF-8; a lone surrogate has no UTF-8 form
        raise _Fail(f"invalid pattern {pattern!r}: it holds a lone surrogate (not text)") from None
    except re2.error as e:
        raw = e.args[0] if e.args else ""
        why = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        for known, say in _RE2_UNSUPPORTED:
            if known.search(why):
                why = f"{say}; patterns use RE2 syntax, which matches in linear time"
                break
        raise _Fail(f"invalid pattern {pattern!r}: {why}") from None


def _minmax(op: Callable[[list[Any]], Any]) -> Callable[..., Any]:
    def run(ctx: _Ctx, *args: Any) -> Any:
        items = args[0] if len(args) == 1 else list(args)
        _need(isinstance(items, list), f"{op.__name__}() needs a list or several arguments")
        ctx.charge(len(items))
        _need(bool(items), f"{op.__name__}() of an empty list")
        ok = all(_isnum(x) for x in items) or all(isinstance(x, str) for x in items)
        _need(ok, f"{op.__name__}() needs all numbers or all strings")
        return op(items)

    return run


def _round(ctx: _Ctx, x: Any, nd: Any = None) -> Any:
    _need(nd is None or (type(nd) is int and abs(nd) <= 20), "round() digits must be an integer from -20 to 20")
    return _num(round(x, nd))


def _convert(ctx: _Ctx, x: Any, to: type[int] | type[float]) -> Any:
    _need(not isinstance(x, str) or len(x) <= 400, f"{to.__name__}() of a string over 400 chars")
    try:
        return _num(to(x.strip() if isinstance(x, str) else x))
    except ValueError:
        raise _Fail(f"cannot convert {x!r} to {'an integer' if to is int else 'a number'}") from None


def _get(ctx: _Ctx, obj: Any, key: Any, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default) if isinstance(key, str) else default
    if isinstance(obj, list):
        ok = type(key) is int and -len(obj) <= key < len(obj)
        return obj[key] if ok else default
    _need(obj is None, f"get() needs an object, list or null, got {_kind(obj)}")
    return default


# name -> (argument kinds, required count, implementation(ctx, *args)); messages list them in order.
_FUNCS: dict[str, tuple[str, int, Callable[..., Any]]] = {
    "len": ("c", 1, lambda ctx, x: len(x)),
    "lower": ("s", 1, lambda ctx, s: _sized(s.lower())),
    "upper": ("s", 1, lambda ctx, s: _sized(s.upper())),
    "strip": ("s", 1, lambda ctx, s: s.strip()),
    "matches": ("ss", 2, lambda ctx, s, p: _regex(p).search(_subject(s)) is not None),
    "startswith": ("ss", 2, lambda ctx, s, p: s.startswith(p)),
    "endswith": ("ss", 2, lambda ctx, s, p: s.endswith(p)),
    "contains": ("**", 2, lambda ctx, c, x: _in(x, c, ctx)),
    "abs": ("n", 1, lambda ctx, x: abs(x)),
    "min": ("*" * 50, 1, _minmax(min)),
    "max": ("*" * 50, 1, _minmax(max)),
    "round": ("n*", 1, _round),
    "int": ("p", 1, lambda ctx, x: _convert(ctx, x, int)),
    "float": ("p", 1, lambda ctx, x: _convert(ctx, x, float)),
    "str": ("x", 1, lambda ctx, x: "null" if x is None else str(x).lower() if isinstance(x, bool) else str(x)),
    "bool": ("*", 1, lambda ctx, x: _truth(x)),
    "sum": ("L", 1, lambda ctx, xs: _num(sum(x if _isnum(x) else _bad("sum() needs a list of numbers") for x in xs))),
    "any": ("L", 1, lambda ctx, xs: any(_truth(x) for x in xs)),
    "all": ("L", 1, lambda ctx, xs: all(_truth(x) for x in xs)),
    "keys": ("O", 1, lambda ctx, obj: list(obj)),
    "get": ("***", 2, _get),
}
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
