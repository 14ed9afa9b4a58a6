"""Host-registered scorers: a field compared by a function the host registers, the way it
registers tools (docs/pack-format.md, "fields"; docs/eval-report.md).

    # scorers.py, the host's
    def address(expected, actual, *, min_ratio=0.8):
        ...
        return 0.9, "street and city match; postcode differs"
    SCORERS = {"address": address}

    # manifest.yaml, the pack's
    fields:
      address: {compare: "scorer:address", options: {min_ratio: 0.8}, pass: 0.8}

A pack names a scorer, never contains one: the registry comes from the host
(`packforge eval --scorers MODULE:SCORERS`, the studio's PACKFORGE_SCORERS), and a name
it does not hold is refused at load. A scorer gets the expected and the actual value and
the field's `options` as keyword arguments, and returns a score in [0, 1], or (score,
reason). A value matches when its score is at least the field's `pass` (default 1).
Everywhere two values of the field are compared (the eval's verdict, a node's vote, the
trivial baseline, calibration) it is the scorer that compares them. A scorer that raises
or returns something else is the case's error (`ScorerFailed`), not a crash."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.errors import BadSpec, PackforgeError
from runtime.host_import import import_named

__all__ = ["PREFIX", "Scored", "ScorerFailed", "load_scorers", "score"]

PREFIX = "scorer:"
Scorer = Callable[..., Any]


class ScorerFailed(PackforgeError):
    """A scorer raised, returned something that is not a score, or is not registered
    in this process; the message names the field and the scorer."""


@dataclass(frozen=True)
class Scored:
    score: float
    reason: str = ""


def load_scorers(ref: str | None) -> dict[str, Scorer] | None:
    """The scorer registry `ref` names (`MODULE:SCORERS` or `path/to/scorers.py:SCORERS`:
    a dict of name -> function), or None when `ref` is None. BadSpec otherwise."""
    if ref is None:
        return None
    registry = import_named(ref, "scorer registry", "MODULE:SCORERS or path/to/scorers.py:SCORERS")
    if not isinstance(registry, Mapping) or not all(callable(f) for f in registry.values()):
        raise BadSpec(f"scorer registry {ref!r} must be a dict of scorer name -> function")
    return {str(name): f for name, f in registry.items()}


def score(
    field: str, name: str, function: Scorer | None, options: Mapping[str, Any], expected: Any, actual: Any
) -> Scored:
    """Run scorer `name` on one pair of values of `field`; ScorerFailed when it cannot."""
    where = f"fields.{field}: scorer {name!r}"
    if function is None:
        raise ScorerFailed(f"{where} is not registered here; give the host's scorers (--scorers MODULE:SCORERS)")
    try:
        got = function(expected, actual, **dict(options))
    except Exception as exc:  # the host's code: any failure is this case's error
        raise ScorerFailed(f"{where} raised {type(exc).__name__}: {exc}") from None
    value, reason = (got[0], got[1]) if isinstance(got, tuple) and len(got) == 2 else (got, "")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScorerFailed(f"{where} returned {type(value).__name__}, not a score from 0 to 1")
    if not 0.0 <= float(value) <= 1.0:
        raise ScorerFailed(f"{where} returned {value}, not a score from 0 to 1")
    return Scored(float(value), str(reason)[:500])
