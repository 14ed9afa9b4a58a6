"""The runs API routes (gathered into studio.api)."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["runs"])
