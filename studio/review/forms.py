"""The review form, generated from the node's JSON schema for the run's state.

One field per property of an object schema: an `enum` is a select, a boolean a
checkbox, a number or integer a number input, a string a text input (a textarea when
it may be long: over 120 characters, or unbounded without a pattern or format), anything else (arrays, objects, a property with no type) a JSON
textarea. A schema that is not an object with properties, or none at all, gives one
JSON textarea for the whole answer. The form only turns what was typed into a JSON
answer; whether that answer may be committed is the runtime's call (check_answer),
made by the decision, so the schema's rules are written once. Templates escape every
value (labels, descriptions, enum values, the pre-fill)."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from studio.review.models import ReviewItem

PREFIX = "a_"
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,80}$")
LONG_TEXT = 120  # a string that may be longer than this is a textarea
NOTE_MAX = 2000


def _types(spec: dict[str, Any]) -> tuple[str | None, bool]:
    """The property's one non-null type (None when it has none or several) and whether
    null is allowed."""
    raw = spec.get("type")
    types = [raw] if isinstance(raw, str) else [t for t in raw if isinstance(t, str)] if isinstance(raw, list) else []
    nullable = "null" in types or (isinstance(spec.get("enum"), list) and None in spec["enum"])
    rest = [t for t in types if t != "null"]
    return (rest[0] if len(rest) == 1 else None), nullable


def _enum_key(value: Any) -> str:
    """An enum value as an option's value: a string as itself, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class JSONText(forms.CharField):
    """A textarea holding one JSON value."""

    def __init__(self, *, rows: int = 4, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": rows, "class": "small-code", "spellcheck": "false"}))
        super().__init__(strip=True, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        return "" if value is None else json.dumps(value, ensure_ascii=False, indent=2)

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if text in ("", None):
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None


class EnumField(forms.ChoiceField):
    def __init__(self, values: list[Any], **kwargs: Any) -> None:
        self.values = {_enum_key(v): v for v in values}
        choices = [(k, k) for k in self.values]
        if not kwargs.get("required", True):
            choices.insert(0, ("", "—"))
        super().__init__(choices=choices, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return value if isinstance(value, str) else ("" if value is None else _enum_key(value))

    def clean(self, value: Any) -> Any:
        key = super().clean(value)
        return self.values.get(key) if key != "" else None


def field_for(name: str, spec: Any, *, required: bool) -> forms.Field:
    """The form field for one schema property."""
    if not isinstance(spec, dict):
        spec = {}
    kind, nullable = _types(spec)
    required = required and not nullable
    label = name
    help_text = str(spec.get("description") or "")
    common: dict[str, Any] = {"label": label, "required": required, "help_text": help_text}
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return EnumField([v for v in spec["enum"] if v is not None], **common)
    if kind == "boolean":
        return forms.BooleanField(**{**common, "required": False})
    if kind in ("number", "integer"):
        attrs: dict[str, Any] = {"step": "1" if kind == "integer" else "any"}
        for key, attr in (("minimum", "min"), ("maximum", "max")):
            if isinstance(spec.get(key), int | float):
                attrs[attr] = spec[key]
        field_class = forms.IntegerField if kind == "integer" else forms.FloatField
        return field_class(widget=forms.NumberInput(attrs=attrs), **common)
    if kind == "string":
        most = spec.get("maxLength")
        # No stated bound is long text, unless a pattern or format says it is one token.
        bounded = isinstance(most, int) or "pattern" in spec or "format" in spec
        long = most > LONG_TEXT if isinstance(most, int) else not bounded
        widget = forms.Textarea(attrs={"rows": 3}) if long else forms.TextInput()
        if isinstance(most, int):
            widget.attrs["maxlength"] = most
        return forms.CharField(widget=widget, strip=False, **common)
    return JSONText(**common)


def properties(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The object schema's properties, or None when the form is one JSON field."""
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return None
    return props


class AnswerForm(forms.Form):
    """The answer fields, generated from `schema` and pre-filled with `best`."""

    def __init__(self, *args: Any, schema: dict[str, Any] | None, best: Any = None, **kwargs: Any) -> None:
        self.props = properties(schema)
        self.names: dict[str, str] = {}  # form field name -> property name
        if self.props is None:
            kwargs.setdefault("initial", {"answer": best})
        else:
            initial = {}
            for i, prop in enumerate(self.props):
                fname = PREFIX + (prop if NAME.match(prop) else f"field_{i}")
                self.names[fname] = prop
                if isinstance(best, dict) and prop in best:
                    initial[fname] = best[prop]
            kwargs.setdefault("initial", initial)
        super().__init__(*args, **kwargs)
        if self.props is None:
            self.fields["answer"] = JSONText(label="answer (JSON)", required=True, rows=8)
            return
        required = set((schema or {}).get("required") or [])
        for fname, prop in self.names.items():
            self.fields[fname] = field_for(prop, self.props[prop], required=prop in required)

    def answer(self) -> Any:
        """The answer as JSON, from valid data: an empty field that may be null is null,
        any other empty field is left out (check_answer then says if it was required)."""
        data = self.cleaned_data
        if self.props is None:
            return data.get("answer")
        out: dict[str, Any] = {}
        for fname, prop in self.names.items():
            value = data.get(fname)
            field = self.fields[fname]
            if isinstance(field, forms.BooleanField):
                out[prop] = bool(value)
                continue
            if value is None or value == "":
                spec = self.props[prop] if isinstance(self.props[prop], dict) else {}
                if _types(spec)[1]:
                    out[prop] = None
                continue
            out[prop] = value
        return out


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=ReviewItem.Decision.choices)
    note = forms.CharField(required=False, max_length=NOTE_MAX, widget=forms.Textarea(attrs={"rows": 2}))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("decision") == ReviewItem.Decision.REJECT and not (data.get("note") or "").strip():
            self.add_error("note", "Say why you reject it: the note becomes the run's error.")
        return data
