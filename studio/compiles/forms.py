from __future__ import annotations

from typing import Any, cast

from django import forms

from studio.compiles.settings import setting
from studio.compiles.start import planner_endpoints
from studio.endpoints.models import Endpoint


class CompileStartForm(forms.Form):
    planner = forms.ModelChoiceField(
        queryset=Endpoint.objects.none(),
        required=False,
        empty_label="rules: the model-free planner (offline, no key)",
        help_text="who writes the plan: the model-free planner, or a frontier model behind a staff-configured endpoint",
    )
    target = forms.ModelChoiceField(
        queryset=Endpoint.objects.all(),
        required=False,
        empty_label="none: score attempts on the offline test model only",
        help_text="the small model the pack will run on; each attempt is evaluated on it too",
    )
    attempts = forms.IntegerField(
        required=False, min_value=1, help_text="the most attempts (plan, emit, evaluate); empty: the spec's budget"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        planner = cast(forms.ModelChoiceField, self.fields["planner"])
        planner.queryset = Endpoint.objects.filter(pk__in=[e.pk for e in planner_endpoints()])
        self.fields["attempts"].widget.attrs["max"] = setting("PACKFORGE_COMPILE_MAX_ATTEMPTS")

    def clean_attempts(self) -> int | None:
        value: int | None = self.cleaned_data.get("attempts")
        most = setting("PACKFORGE_COMPILE_MAX_ATTEMPTS")
        if value is not None and value > most:
            raise forms.ValidationError(f"at most {most} attempts")
        return value
