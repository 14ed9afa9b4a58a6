"""Model backends, chosen by a spec string: `fake:FILE`, `sim:error=P,seed=N[,base=FILE]`,
`openai:BASE_URL#MODEL`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runtime.backends.base import Backend, ModelCall, ModelReply
from runtime.backends.scripted import FakeBackend, Script, SimBackend, parse_sim_spec
from runtime.errors import BadSpec

__all__ = ["Backend", "ModelCall", "ModelReply", "open_backend", "register_scheme"]

Opener = Callable[[str, str, "Path | None", "str | None"], Backend]
_SCHEMES: dict[str, Opener] = {}


def register_scheme(scheme: str, opener: Opener) -> None:
    """Make `scheme:...` spec strings open with `opener(spec, body, base_dir, default)`."""
    _SCHEMES[scheme] = opener


def _resolve(path: str, base_dir: Path | None) -> Path:
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists() or base_dir is None:
        return candidate
    return base_dir / candidate


def _open_fake(spec: str, body: str, base_dir: Path | None, default: str | None) -> Backend:
    if not body:
        raise BadSpec("fake: needs a file, e.g. fake:fakes/scripted.json")
    return FakeBackend(Script(_resolve(body, base_dir)), spec)


def _open_sim(spec: str, body: str, base_dir: Path | None, default: str | None) -> Backend:
    options = parse_sim_spec(body)
    base = options.get("base")
    if base is None:
        if default is None or not default.startswith("fake:"):
            raise BadSpec(
                "sim: needs base=FILE (a scripted model with the correct answers) "
                "when the pack's default model is not fake:FILE"
            )
        base = default.removeprefix("fake:")
    try:
        error = float(options.get("error", "0.1"))
        seed = int(options.get("seed", "0"))
        invalid = float(options.get("invalid", "0.2"))
    except ValueError as exc:
        raise BadSpec(f"bad sim option value: {exc}") from None
    if not 0.0 <= error <= 1.0 or not 0.0 <= invalid <= 1.0:
        raise BadSpec("sim error and invalid must be between 0 and 1")
    return SimBackend(Script(_resolve(base, base_dir)), spec, error, seed, invalid)


register_scheme("fake", _open_fake)
register_scheme("sim", _open_sim)


def open_backend(spec: str, *, base_dir: Path | None = None, default: str | None = None) -> Backend:
    """Open the backend named by `spec`. Relative files resolve against the current
    directory, then `base_dir` (the pack). `default` is the pack's own model spec."""
    scheme, sep, body = spec.partition(":")
    if not sep:
        raise BadSpec(f"model spec {spec!r} needs a scheme: fake:FILE, sim:..., openai:URL#MODEL")
    if scheme == "openai" and scheme not in _SCHEMES:
        try:
            import runtime.backends.openai  # noqa: F401  (registers the scheme)
        except ImportError:
            pass
    opener = _SCHEMES.get(scheme)
    if opener is None:
        raise BadSpec(f"unknown model scheme {scheme!r}; known: {', '.join(sorted(_SCHEMES))}")
    return opener(spec, body, base_dir, default)
