"""The webhook a deployment may name: one signed POST when a run ends (done, failed,
cancelled), sent by a Celery task retried with backoff, never by the run's own walk.

Body: {"deployment", "run_id", "status", "output", "error", "tier", "finished_at"} as
JSON. Header `X-Packforge-Signature: sha256=<hex>`: HMAC-SHA256 of the exact body with
the deployment's webhook secret (none without a secret)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import urllib.error
import urllib.request
from typing import Any

from django.db import transaction

from studio.deployments.models import ServedRun
from studio.deployments.settings import setting

log = logging.getLogger("packforge.studio.deployments")

SIGNATURE_HEADER = "X-Packforge-Signature"
WEBHOOK_TASK = "deployments.send_webhook"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body_for(run: ServedRun) -> bytes:
    data: dict[str, Any] = {
        "deployment": run.deployment.name,
        "run_id": run.run_id,
        "status": run.status,
        "output": run.output,
        "error": run.error,
        "tier": run.tier,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
    return json.dumps(data, sort_keys=True).encode()


def send_on_end(pk: int, webhook_url: str | None = None) -> None:
    """Queue the webhook of run `pk` once the transaction commits, when its deployment has
    one (`webhook_url`: the deployment's, when the caller has read it)."""
    if webhook_url is None:
        webhook_url = ServedRun.objects.filter(pk=pk).values_list("deployment__webhook_url", flat=True).first() or ""
    if not webhook_url:
        return

    def send() -> None:
        from studio.celery import app

        try:
            queue = setting("PACKFORGE_SERVE_QUEUE") or None
            app.signature(WEBHOOK_TASK, args=(pk,)).apply_async(queue=queue)
        except Exception:  # a webhook never stops a run
            log.exception("could not queue the webhook of served run %s", pk)

    transaction.on_commit(send)


class WebhookFailed(Exception):
    pass


def deliver(pk: int) -> int | None:
    """POST run `pk`'s end to its deployment's webhook; the HTTP status (None: no webhook).
    Raises WebhookFailed on a network error or a non-2xx answer (the task retries)."""
    run = ServedRun.objects.select_related("deployment").filter(pk=pk).first()
    if run is None or not run.deployment.webhook_url:
        return None
    body = body_for(run)
    headers = {"Content-Type": "application/json", "User-Agent": "packforge-studio"}
    if run.deployment.webhook_secret:
        headers[SIGNATURE_HEADER] = signature(run.deployment.webhook_secret, body)
    request = urllib.request.Request(run.deployment.webhook_url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=setting("PACKFORGE_WEBHOOK_TIMEOUT_S")) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        raise WebhookFailed(f"webhook answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise WebhookFailed(f"webhook unreachable: {exc}") from None
    if not 200 <= status < 300:
        raise WebhookFailed(f"webhook answered {status}")
    return status
