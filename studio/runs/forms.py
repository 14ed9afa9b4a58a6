from __future__ import annotations

import json
from typing import Any

from django import forms

from studio.endpoints.models import Endpoint
from studio.projects.storage import Version


class TryRunForm(forms.Form):
    version = forms.ChoiceField(help_text="the pack as it was at this commit")
    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.all(), required=False)
    input = forms.CharField(
        widget=forms.Textarea(
            attrs={
                "class": "code run-input",
                "rows": 10,
                "spellcheck": "false",
            }
        ),
        help_text="one JSON object: the pack's inputs",
    )

    def __init__(self, *args: Any, versions: list[Version], default_model: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["version"].choices = [  # type: ignore[attr-defined]
            (v.sha, f"{v.sha[:10]} {'(head) ' if i == 0 else ''}{v.message.splitlines()[0][:60] if v.message else ''}")
            for i, v in enumerate(versions)
        ]
        if versions:
            self.fields["version"].initial = versions[0].sha
        own = f" ({default_model})" if default_model else " (none named: choose an endpoint)"
        self.fields["endpoint"].empty_label = f"the pack's own model{own}"  # type: ignore[attr-defined]

    def clean_input(self) -> dict[str, Any]:
        raw = self.cleaned_data["input"]
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"the input is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        if not isinstance(value, dict):
            raise forms.ValidationError('the input must be a JSON object, e.g. {"ticket": "..."}')
        return value
