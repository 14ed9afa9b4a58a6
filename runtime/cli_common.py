"""What the `packforge` commands share: exit statuses, UsageError (one line on stderr,
exit 2), JSON arguments, the model backend and the --escalate-to tiers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from runtime.backends import open_backend
from runtime.errors import PackforgeError
from runtime.pack import Pack
from runtime.tiers import Tier

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING = 0, 1, 2, 3
EXIT_GATE_FAILED = 4  # eval --baseline: a metric regressed beyond its tolerance


class UsageError(PackforgeError):
    pass


def json_arg(value: str, what: str) -> Any:
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {value[1:]}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def backend_for(pack: Pack, spec: str | None) -> Any:
    chosen = spec or pack.model
    if not chosen:
        raise UsageError("no model: pass --model SPEC or set 'model' in the manifest")
    return open_backend(chosen, base_dir=pack.root, default=pack.model)


def tiers_from_args(pack: Pack, args: argparse.Namespace, backend: Any) -> list[Tier] | None:
    """The model tiers of --model and each --escalate-to (None without --escalate-to);
    their backends, tier 0's aside, are opened here and closed by the caller."""
    if not args.escalate_to:
        return None
    tiers = [Tier(args.model or pack.model or backend.spec, backend)]
    for raw in args.escalate_to:
        name, _, spec = raw.partition("=") if _named(raw) else (raw, "", raw)
        if not spec:
            raise UsageError(f"--escalate-to {raw!r}: give a model spec, or NAME=SPEC")
        if any(t.name == name for t in tiers) or name == "person":
            raise UsageError(f"--escalate-to: tier name {name!r} is used twice (or is 'person'); use NAME=SPEC")
        tiers.append(Tier(name, open_backend(spec, base_dir=pack.root, default=pack.model)))
    return tiers


def _named(raw: str) -> bool:
    """Whether `raw` is NAME=SPEC: a plain name before the first '=' (a spec such as
    openai:URL#m;key=v has ':' before it)."""
    head, sep, _ = raw.partition("=")
    return bool(sep) and bool(head) and all(ch.isalnum() or ch in "-_." for ch in head)


def close_tiers(tiers: list[Tier] | None) -> None:
    for tier in (tiers or [])[1:]:
        tier.backend.close()
