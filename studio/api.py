"""The one NinjaAPI: every app's Router is gathered here. OpenAPI at /api/docs."""

from __future__ import annotations

from ninja import NinjaAPI

api = NinjaAPI(title="Packforge studio", version="1", urls_namespace="api")
