from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from studio.endpoints.models import Endpoint


def endpoints_list(request: HttpRequest) -> HttpResponse:
    return render(request, "endpoints/list.html", {"endpoints": Endpoint.objects.all()})
