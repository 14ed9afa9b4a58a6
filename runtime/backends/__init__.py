"""Model backends, opened from a configuration object (runtime.backends.config):
`FakeConfig`, `SimConfig`, `OpenAIConfig`. A spec string (`fake:FILE`,
`sim:error=P,seed=N[,base=FILE]`, `openai:BASE_URL#MODEL`) is parsed into one at the
edges: `parse_backend_spec`, or `open_backend` given a string.

Every kind is a row of BACKEND_KINDS: its config class, the parser of its spec string
and the function that opens it. `open_backend` looks the kind up there and special-cases
none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.backends.base import Backend, ModelCall, ModelReply, TokenLogprob
from runtime.backends.config import (
    BackendConfig,
    FakeConfig,
    OpenAIConfig,
    SimConfig,
    parse_fake_spec,
    parse_openai_spec,
    parse_sim_spec,
)
from runtime.backends.scripted import open_fake, open_sim, pack_file
from runtime.errors import BadSpec

__all__ = [
    "BACKEND_KINDS",
    "Backend",
    "BackendConfig",
    "BackendKind",
    "FakeConfig",
    "ModelCall",
    "ModelReply",
    "OpenAIConfig",
    "SimConfig",
    "TokenLogprob",
    "open_backend",
    "pack_file",
    "parse_backend_spec",
    "register_backend_kind",
]

# An opener: (config, label, base_dir, default) -> Backend. `label` is what the backend
# reports as its `spec`; `base_dir` is the pack's directory, for relative files;
# `default` is the pack's own model spec.
Opener = Callable[[Any, str, "Path | None", "str | None"], Backend]


@dataclass(frozen=True)
class BackendKind:
    """One kind of backend: its config class, its spec parser and its opener."""

    config: type[BackendConfig]
    parse: Callable[[str], BackendConfig]
    open: Opener


def _open_openai(config: OpenAIConfig, label: str, base_dir: Path | None, default: str | None) -> Backend:
    from runtime.backends.openai import open_openai  # imports httpx: only when an endpoint is opened

    return open_openai(config, label, base_dir, default)


BACKEND_KINDS: dict[str, BackendKind] = {
    "fake": BackendKind(FakeConfig, parse_fake_spec, open_fake),
    "sim": BackendKind(SimConfig, parse_sim_spec, open_sim),
    "openai": BackendKind(OpenAIConfig, parse_openai_spec, _open_openai),
}


def register_backend_kind(kind: BackendKind) -> None:
    """Add a backend kind; its config class's `kind` is the spec scheme."""
    BACKEND_KINDS[kind.config.kind] = kind


def parse_backend_spec(spec: str) -> BackendConfig:
    """The config a spec string names (`fake:FILE`, `sim:...`, `openai:URL#MODEL;...`).
    Touches neither the network, the environment nor the files it names."""
    scheme, sep, _ = spec.partition(":")
    if not sep:
        raise BadSpec(f"model spec {spec!r} needs a scheme: fake:FILE, sim:..., openai:URL#MODEL")
    kind = BACKEND_KINDS.get(scheme)
    if kind is None:
        raise BadSpec(f"unknown model scheme {scheme!r}; known: {', '.join(sorted(BACKEND_KINDS))}")
    return kind.parse(spec)


def open_backend(model: BackendConfig | str, *, base_dir: Path | None = None, default: str | None = None) -> Backend:
    """Open the backend `model` configures (a spec string is parsed first). `default`
    is the pack's own model spec: when `model` is it, its scripted file is a file of the
    pack at `base_dir`, resolved strictly inside it; other relative files resolve
    against the current directory, then `base_dir` (the pack)."""
    config = parse_backend_spec(model) if isinstance(model, str) else model
    kind = BACKEND_KINDS.get(config.kind)
    if kind is None or not isinstance(config, kind.config):
        raise BadSpec(f"no backend kind {config.kind!r} is registered; known: {', '.join(sorted(BACKEND_KINDS))}")
    return kind.open(config, model if isinstance(model, str) else config.spec, base_dir, default)
