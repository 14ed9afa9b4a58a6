"""The expression language's values: its limits, the evaluation context that charges
the step budget, the checks on values (kinds, sizes, truth) and the operators
(arithmetic, comparisons, `in`), as runtime.expr compiles them."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Any

MAX_SOURCE_CHARS = 1000  # longer source refused at compile
MAX_NODES = 200  # more AST expression nodes refused at compile
MAX_STEPS = 10_000  # evaluation step budget (items iterated); exceeding raises ExprError
MAX_DEPTH = 32  # deepest AST nesting accepted
MAX_SIZE = 100_000  # most chars/items in a string or list the expression builds
MAX_INT = 10**18  # integer results must have abs below this
MAX_PATTERN_CHARS = 200  # longest regex pattern `matches` accepts
MAX_SUBJECT_CHARS = 2000  # longest text `matches` searches (RE2 is linear in it; still bounded)
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
