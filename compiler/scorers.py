"""Host scorers in a compile (docs/compiler.md, "Host scorers"): a spec output declared
`compare: scorer:NAME` is compared by the host's function of that name everywhere the
compiler compares two of its values (the offline check, the attempts' validation
scores, the search's trials, the trivial baseline, the verdict). The compile gets the
host's registry the way it gets its tools (`build(scorers=...)`, `packforge build
--scorers MODULE:SCORERS`, the studio's PACKFORGE_SCORERS) and hands it to every
`load_pack`, so each emitted pack's `fields:` rule is bound to the function."""

from __future__ import annotations

from collections.abc import Mapping

from compiler.errors import CompilerError
from compiler.spec_types import Spec
from runtime import Scorer


def check_scorers(spec: Spec, scorers: Mapping[str, Scorer] | None) -> None:
    """CompilerError when `spec` compares an output with a host scorer and `scorers` (the
    host's registry) is None or lacks it: every case would otherwise be a scorer error."""
    used = spec.scorers()
    if not used:
        return
    shown = ", ".join(f"outputs.{field} (scorer:{name})" for field, name in used.items())
    if scorers is None:
        raise CompilerError(
            f"the spec compares {shown} with a host scorer: give the host's scorers "
            "(packforge build --scorers MODULE:SCORERS; the studio's PACKFORGE_SCORERS)"
        )
    missing = [f"outputs.{field}: unknown scorer '{name}'" for field, name in used.items() if name not in scorers]
    if missing:
        known = ", ".join(sorted(scorers)) or "none"
        raise CompilerError(f"{'; '.join(missing)}; the host registers: {known}")


__all__ = ["check_scorers"]
