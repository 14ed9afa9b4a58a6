"""The one regular-expression engine for anything a pack or a spec supplies: RE2, which
matches in linear time, so no pattern can backtrack (a grammar's `pattern`,
`patternProperties`, the expression language's `matches()`, induced patterns).

`compile_pattern` compiles once per distinct pattern (a bounded cache) and raises
`PatternRefused` saying why RE2 will not take it, in words for the pack's author (the
Python constructs RE2 leaves out on purpose are named)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

RE2_MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled pattern and its DFA cache (RE2's default)
CACHED = 256  # compiled patterns kept: 256 x RE2_MAX_MEM at most, in practice far less

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern to stderr
_OPTIONS.max_mem = RE2_MAX_MEM

# RE2's error text for the Python constructs it leaves out on purpose -> what to say instead.
# (These few fixed patterns of our own are the only ones compiled by Python's `re`.)
_UNSUPPORTED = (
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


class PatternRefused(ValueError):
    """RE2 does not compile the pattern; the message says why."""


@lru_cache(maxsize=CACHED)
def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by RE2 (its `.search(text)` is Python's `re.search`, in linear
    time). PatternRefused when RE2 refuses it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except UnicodeEncodeError:  # RE2 reads UTF-8; a lone surrogate has no UTF-8 form
        raise PatternRefused(f"invalid pattern {pattern!r}: it holds a lone surrogate (not text)") from None
    except re2.error as e:
        raw = e.args[0] if e.args else ""
        why = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        for known, say in _UNSUPPORTED:
            if known.search(why):
                why = f"{say}; patterns use RE2 syntax, which matches in linear time"
                break
        raise PatternRefused(f"invalid pattern {pattern!r}: {why}") from None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` (RE2) matches somewhere in `text`."""
    return compile_pattern(pattern).search(text) is not None
