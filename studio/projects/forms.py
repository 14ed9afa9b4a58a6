from __future__ import annotations

from django import forms
from django.conf import settings

from studio.projects.models import slug_validator


def example_choices() -> list[tuple[str, str]]:
    root = settings.EXAMPLE_PACKS
    names = sorted(p.name for p in root.iterdir() if (p / "manifest.yaml").exists()) if root.exists() else []
    return [("", "(a skeleton pack: one node, one case)")] + [(n, n) for n in names]


class ProjectCreateForm(forms.Form):
    slug = forms.CharField(max_length=63, validators=[slug_validator], help_text="used in URLs and downloads")
    name = forms.CharField(max_length=200, required=False)
    example = forms.ChoiceField(required=False, choices=())
    archive = forms.FileField(required=False, help_text=".zip or .tar.gz of a pack folder")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["example"].choices = example_choices()  # type: ignore[attr-defined]

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("example") and data.get("archive"):
            raise forms.ValidationError("Choose an example or upload an archive, not both.")
        return data
