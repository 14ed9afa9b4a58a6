"""One delivery of one leased row (an eval case, a try-it run, a served run, a compile):
the template every kind of background work runs through, so the rules below are
written once.

1. **Claim** (studio.work.leases.claim): one conditional UPDATE takes the row, or the
   delivery has nothing to do (the row is final, or another delivery holds a live
   lease) and returns None.
2. **Before**: the kind may end the row at once (e.g. its cancel was asked for).
   **Admission**, for an admitted kind (studio.work.admission): a row whose user or
   project has as many runs going as the studio's cap is held back (queued again,
   uncharged) and sent again when one of them ends.
3. **Poison check**: a row claimed more than its kind's `max_claims` setting allows has
   killed that many workers; it is ended as failed with the reason, not tried again.
4. **Watch**: the process's watcher (studio.work.watcher) renews the lease while the
   kind runs, and sets the run's cancel event when its cancel is asked for or the lease
   moved to another delivery (`held.lost`).
5. **Run**: the kind does its work and writes its one outcome under the lease.
6. **Settle**, when the run raised; the ladder from the exception to the row's status:
   - `FencedOut` / `LeaseLost`: another delivery owns the row now (this one stalled
     past its lease); its outcome is the one that counts: write nothing, return None;
   - a database error (or the kind's `transient` errors): give the lease up so a retry
     or a sweep can claim the row, and re-raise (the task retries);
   - anything else ends the row through the kind's `settle`: a cap the run reached
     (studio.work.caps.CapReached) or a refusal the kind knows (`refusal(exc)`: a pack
     that does not load, a spec that does not, ...) with its message; any other exception as "internal error: ..." with the stack in the log.
     A kind may map an exception to another status (a served run's refused answer goes
     back to waiting).

A kind subclasses `Delivery` (one instance per delivery: it may keep what its run opened,
for `settle` to write the trace so far)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Generic, TypeVar

from django.db import InterfaceError, OperationalError, models
from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from runtime import FencedOut
from studio.work import admission, leases, metering
from studio.work.caps import CapReached
from studio.work.leases import LeaseLost
from studio.work.watcher import Held, LeaseWatcher

log = logging.getLogger("packforge.studio.work")

Row = TypeVar("Row", bound=models.Model)


def poisoned(noun: str, claims: int, setting: str, limit: int) -> str:
    """Why a row claimed `claims` times is not tried again."""
    return (
        f"killed its worker {claims - 1} times: {claims - 1} deliveries started this {noun} and none "
        f"finished it ({setting}={limit}); not tried again"
    )


class Delivery(Generic[Row]):
    """One delivery of one row of `model`; see the module's docstring. Subclasses set the
    class attributes and `load`, `watcher`, `max_claims`, `run` and `end`."""

    model: ClassVar[type[models.Model]]
    noun: ClassVar[str]  # "eval case", "try run": how the log and the poison reason say it
    max_claims_setting: ClassVar[str]  # the setting `max_claims` reads, named in the reason
    failed: ClassVar[str] = "failed"  # the status a refusal, a crash or poison ends the row with
    transient: ClassVar[tuple[type[BaseException], ...]] = ()  # release and re-raise, like a database error
    stamps_start: ClassVar[bool] = False  # the model has `started_at`: the first claim sets it
    admitted: ClassVar[admission.Kind | None] = None  # counted against the caps on runs going at once

    def __init__(self, pk: int) -> None:
        self.pk = pk
        self.token = ""
        self.row: Row | None = None

    # -- what a kind says ------------------------------------------------------------------

    def claim_fields(self) -> dict[str, Any]:
        """Columns written by the claiming UPDATE: `started_at` on the first claim; an
        admitted row's waiting note cleared."""
        fields: dict[str, Any] = admission.claim_fields(self.admitted) if self.admitted else {}
        if self.stamps_start:
            fields["started_at"] = Coalesce(F("started_at"), Value(timezone.now(), output_field=DateTimeField()))
        return fields

    def load(self) -> Row:
        raise NotImplementedError

    def watcher(self) -> LeaseWatcher:
        raise NotImplementedError

    def group(self, row: Row) -> int | None:
        """What the row belongs to, for the watcher's checks (an eval case's eval)."""
        return None

    def max_claims(self) -> int:
        raise NotImplementedError

    def before(self, row: Row) -> tuple[bool, str | None]:
        """(True, status) to end the delivery before it runs (status None: nothing was
        written); (False, None) to go on."""
        return False, None

    def run(self, row: Row, held: Held) -> str | None:
        """Do the work and write the outcome under the lease; the status written, or None."""
        raise NotImplementedError

    def end(self, row: Row, status: str, error: str) -> bool:
        """Close the row as `status` with `error`, if this delivery holds the lease."""
        raise NotImplementedError

    def refusal(self, exc: Exception) -> str | None:
        """The message of an exception that ends the row as refused (not a crash); None: a crash."""
        return None

    def settle(self, row: Row, exc: Exception, message: str) -> str | None:
        """End the row after `exc` (message: its refusal, or "internal error: ...")."""
        return self.failed if self.end(row, self.failed, message) else None

    def settled(self, row: Row, status: str) -> None:
        """Called once the delivery wrote `status` (e.g. end an eval whose cases are all final)."""

    # -- the template ----------------------------------------------------------------------

    def deliver(self) -> str | None:
        """Claim the row, then `deliver_held`; None when there was nothing to do."""
        return metering.metered(self.noun, self.pk, "worker", self._claim_and_deliver)

    def _claim_and_deliver(self) -> str | None:
        token = leases.new_token()
        if not leases.claim(self.model, self.pk, token, leases.lease(), **self.claim_fields()):
            log.info("%s %s is gone, final, or held by another delivery; nothing to do", self.noun, self.pk)
            return None
        return self.deliver_held(token)

    def deliver_held(self, token: str, row: Row | None = None) -> str | None:
        """Steps 2-6 for a row this delivery holds by `token` (claimed, or created held)."""
        self.token = token
        self.row = row = row if row is not None else self.load()
        ended, status = self.before(row)
        if not ended:
            kind = self.admitted
            reason = admission.crowded(kind, row) if kind is not None else None
            if kind is not None and reason is not None:
                admission.hold_back(kind, row, token, reason)
                return None
            status = self._poison_or_run(row)
        if status is not None:
            self.settled(row, status)
            if self.admitted is not None:
                admission.wake(self.admitted, row)
        return status

    def _poison_or_run(self, row: Row) -> str | None:
        limit = self.max_claims()
        claims = int(getattr(row, "attempts"))  # noqa: B009  (every leased model has it)
        if claims > limit:
            reason = poisoned(self.noun, claims, self.max_claims_setting, limit)
            log.warning("%s %s: %s", self.noun, self.pk, reason)
            return self.failed if self.end(row, self.failed, reason) else None
        retried: tuple[type[BaseException], ...] = (OperationalError, InterfaceError, *self.transient)
        watcher = self.watcher()
        held = watcher.register(self.pk, self.token, self.group(row))
        try:
            return self.run(row, held)
        except (FencedOut, LeaseLost) as exc:
            log.warning("%s %s was taken over by another delivery; dropping this one: %s", self.noun, self.pk, exc)
            return None
        except retried:
            leases.release(self.model, self.pk, self.token)
            raise
        except Exception as exc:  # the row must end final whatever happened; the log has the rest
            message = str(exc) if isinstance(exc, CapReached) else self.refusal(exc)
            if message is None:
                log.exception("%s %s crashed", self.noun, self.pk)
                message = f"internal error: {type(exc).__name__}: {exc}"
            return self.settle(row, exc, message)
        finally:
            watcher.unregister(self.pk)
