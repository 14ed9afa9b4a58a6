"""Signals other apps listen to (the review queue, studio/review/).

`run_waiting` is sent (after the transaction commits) with `run=` the ServedRun each
time a served run goes `waiting` at a node: a human node, or a node escalated past
the deployment's last model tier. `sender` is ServedRun."""

from __future__ import annotations

from django.dispatch import Signal

run_waiting = Signal()
