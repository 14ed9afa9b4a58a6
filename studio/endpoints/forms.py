from __future__ import annotations

from typing import Any

from django import forms

from studio.endpoints.backends import spec_problem
from studio.endpoints.models import Endpoint


class EndpointForm(forms.ModelForm):
    class Meta:
        model = Endpoint
        fields = ["name", "spec", "key_env", "price_in", "price_out", "concurrency"]
        labels = {"key_env": "Key env var", "price_in": "Price in", "price_out": "Price out"}
        help_texts = {
            "spec": "openai:URL#MODEL[;grammar=...] (docs/endpoints.md), or fake:/abs/path.json",
            "key_env": "the NAME of the environment variable that holds the key, never the key",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        spec = (data.get("spec") or "").strip()
        if spec:
            data["spec"] = spec
            problem = spec_problem(spec, data.get("key_env") or "", data.get("concurrency"))
            if problem:
                self.add_error("spec", problem)
        return data
