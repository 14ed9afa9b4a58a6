"""The host's scorers in a compile (docs/compiler.md, "Host scorers"): a spec whose
outputs are compared `compare: scorer:NAME` compiles with the studio's scorer registry
(PACKFORGE_SCORERS, studio.host_tools), which the worker hands the loop
(`build(scorers=...)`), so every pack the compile loads compares those fields with the
host's functions. Starting a compile the registry cannot serve is refused, and a worker
that finds it so (the setting changed since) closes the compile as failed, saying why."""

from __future__ import annotations

from compiler import CompilerError, Spec
from compiler.scorers import check_scorers
from runtime import BadSpec, Scorer
from studio.host_tools import scorer_registry
from studio.packs import PackUnrunnable


def spec_scorers(spec: Spec) -> dict[str, Scorer] | None:
    """The studio's scorer registry for compiling `spec`; None when no output of the spec
    is compared by a host scorer. PackUnrunnable when one is and the studio has no
    registry, its registry does not load, or it lacks a scorer the spec names."""
    used = spec.scorers()
    if not used:
        return None
    try:
        registry = scorer_registry()
    except BadSpec as exc:
        raise PackUnrunnable([f"the studio's scorer registry (PACKFORGE_SCORERS) does not load: {exc}"]) from None
    if registry is None:
        shown = ", ".join(f"outputs.{field} (scorer:{name})" for field, name in used.items())
        raise PackUnrunnable(
            [
                f"the spec compares {shown} with a host scorer and the studio has no scorer registry; set "
                "PACKFORGE_SCORERS=MODULE:SCORERS for the studio and its workers"
            ]
        )
    try:
        check_scorers(spec, registry)
    except CompilerError as exc:
        raise PackUnrunnable([f"{exc} (the studio's PACKFORGE_SCORERS)"]) from None
    return registry
