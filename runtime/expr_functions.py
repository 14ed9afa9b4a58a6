"""The expression language's function table: each function's argument kinds, required
count and implementation, and `matches()` on RE2 (runtime.expr has the why)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runtime.expr_ops import (
    MAX_PATTERN_CHARS,
    MAX_SUBJECT_CHARS,
    _bad,
    _Ctx,
    _Fail,
    _in,
    _isnum,
    _kind,
    _need,
    _num,
    _sized,
    _truth,
)
from runtime.regex import PatternRefused, compile_pattern

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


def _regex(pattern: str) -> Any:
    """The compiled RE2 pattern (runtime.regex); RE2 matches in linear time, so no pattern can backtrack."""
    _need(len(pattern) <= MAX_PATTERN_CHARS, f"matches() pattern longer than {MAX_PATTERN_CHARS} chars")
    try:
        return compile_pattern(pattern)
    except PatternRefused as e:
        raise _Fail(str(e)) from None


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
