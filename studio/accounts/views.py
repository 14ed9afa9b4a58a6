from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from studio.accounts.models import ApiToken
from studio.http import StudioRequest


def tokens_list(request: StudioRequest) -> HttpResponse:
    issued = None
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        if not name or len(name) > 100:
            messages.error(request, "Give the token a name of 1 to 100 characters.")
            return redirect("tokens-list")
        _, issued = ApiToken.issue(request.user, name)
    tokens = ApiToken.objects.filter(user=request.user).order_by("-created_at")
    return render(request, "accounts/tokens.html", {"tokens": tokens, "issued": issued})


@require_POST
def token_revoke(request: StudioRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)
    token.revoked = True
    token.save(update_fields=["revoked"])
    messages.success(request, f"Token {token.name} revoked.")
    return redirect("tokens-list")
