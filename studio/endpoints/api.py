"""The endpoints API routes (gathered into studio.api)."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["endpoints"])
