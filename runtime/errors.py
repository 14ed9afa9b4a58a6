"""The runtime's exception tree. Lower-level errors are translated at the seam."""

from __future__ import annotations

from dataclasses import dataclass


class PackforgeError(Exception):
    """Base of every error the runtime raises on purpose."""


# What a pack load problem is about (PackIssue.kind):
PACK_ISSUE_KINDS = (
    "syntax",  # a file does not parse (YAML, JSON, a template) or is not UTF-8 text
    "missing",  # a required file or key is absent
    "unknown_key",  # a key the format does not define
    "reference",  # a name that points at nothing: a node, a tool, a field, an input
    "schema",  # a grammar that is not a usable JSON Schema
    "graph",  # routing, reachability, cycles
    "evalset",  # a gold case that cannot be used
    "value",  # a value of the wrong type or out of range
)


@dataclass(frozen=True)
class PackIssue:
    """One problem found while loading a pack: where it is, what to do, and a
    machine-readable `kind` (one of PACK_ISSUE_KINDS)."""

    file: str
    message: str
    line: int | None = None
    kind: str = "value"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"


class PackInvalid(PackforgeError):
    """A pack failed to load. Carries every issue found, not only the first."""

    def __init__(self, issues: list[PackIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


class ExprError(PackforgeError):
    """An expression was refused at compile time or failed while evaluating."""


class OutputRejected(PackforgeError):
    """A model answer failed verification. `category` is one of REJECTION_CATEGORIES,
    or "answer" for a person's answer refused by `resume_run` (`reasons`: each reason)."""

    def __init__(self, category: str, reason: str, reasons: list[str] | None = None) -> None:
        self.category = category
        self.reason = reason
        self.reasons = reasons if reasons is not None else [reason]
        super().__init__(f"{category}: {reason}")


class BackendError(PackforgeError):
    """A model backend could not produce an answer."""


class ContextOverflow(BackendError):
    """The request does not fit the model's context window (llama-server's HTTP 400
    `exceed_context_size_error`, OpenAI's `context_length_exceeded`). Never retried: the
    same request cannot fit on a second try. A generate node turns it into a node
    failure that takes on_fail."""

    def __init__(self, message: str, request_id: str = "") -> None:
        self.request_id = request_id
        super().__init__(message)


class NoSpareSlot(BackendError):
    """A call made ahead (ModelCall.spare) found every slot of the endpoint's cap taken;
    it is not queued (runtime.lookahead makes it later, in turn)."""


class BadSpec(PackforgeError):
    """A model spec string or tools reference could not be understood."""


class FencedOut(PackforgeError):
    """A checkpoint write carried a stale fencing token: another process owns the run."""


class RunNotFound(PackforgeError):
    """A run id was not found in the checkpoint store."""


class RunStateError(PackforgeError):
    """A run cannot do what was asked in its current state (e.g. resume a finished run)."""


class Cancelled(PackforgeError):
    """The run was cancelled by its host."""


class HostFailed(PackforgeError):
    """The host failed around a tool call (its own storage, say), not the tool: raised
    from a host's wrapper of a tool, it stops the run where it is, with nothing of that
    call journaled, instead of failing the node, so the host can deliver the run again."""
