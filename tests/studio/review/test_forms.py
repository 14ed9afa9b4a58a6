"""The review form is generated from the node's JSON schema, pre-filled with the best
candidate, and escapes everything it shows."""

from __future__ import annotations

from typing import Any

from django import forms
from django.template import Context, Template

from studio.review.forms import AnswerForm

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "decline"]},
        "urgent": {"type": "boolean"},
        "refund_usd": {"type": "number", "minimum": 0, "maximum": 10000},
        "items": {"type": "integer"},
        "code": {"type": "string", "maxLength": 20},
        "reviewer_note": {"type": "string", "maxLength": 500},
        "tags": {"type": "array", "items": {"type": "string"}},
        "order_id": {"type": ["string", "null"]},
    },
    "required": ["decision", "refund_usd", "order_id"],
}


def test_it_makes_one_field_per_property_by_type() -> None:
    form = AnswerForm(schema=SCHEMA)
    widgets = {name: type(field.widget).__name__ for name, field in form.fields.items()}
    assert widgets == {
        "a_decision": "Select",
        "a_urgent": "CheckboxInput",
        "a_refund_usd": "NumberInput",
        "a_items": "NumberInput",
        "a_code": "TextInput",
        "a_reviewer_note": "Textarea",
        "a_tags": "Textarea",
        "a_order_id": "Textarea",
    }
    assert isinstance(form.fields["a_items"], forms.IntegerField)
    assert form.fields["a_refund_usd"].widget.attrs == {"step": "any", "min": 0, "max": 10000}
    assert form.fields["a_decision"].required and not form.fields["a_order_id"].required  # null allowed


def test_it_pre_fills_the_best_candidate() -> None:
    form = AnswerForm(schema=SCHEMA, best={"decision": "decline", "refund_usd": 0, "tags": ["a"]})
    html = str(form)
    assert '<option value="decline" selected>' in html
    assert 'value="0"' in html
    assert "[\n  &quot;a&quot;\n]" in html


def test_it_turns_what_was_typed_into_the_answer() -> None:
    data = {"a_decision": "approve", "a_urgent": "on", "a_refund_usd": "12.5", "a_items": "3", "a_tags": '["x"]'}
    form = AnswerForm(data, schema=SCHEMA)
    assert form.is_valid(), form.errors
    assert form.answer() == {
        "decision": "approve",
        "urgent": True,
        "refund_usd": 12.5,
        "items": 3,
        "tags": ["x"],
        "order_id": None,
    }


def test_it_refuses_json_that_does_not_parse() -> None:
    form = AnswerForm({"a_decision": "approve", "a_refund_usd": "1", "a_tags": "[oops"}, schema=SCHEMA)
    assert not form.is_valid()
    assert "not valid JSON" in form.errors["a_tags"][0]


def test_it_gives_one_json_field_without_an_object_schema() -> None:
    form = AnswerForm({"answer": '{"x": 1}'}, schema=None, best={"x": 0})
    assert list(form.fields) == ["answer"]
    assert form.is_valid() and form.answer() == {"x": 1}


def test_it_escapes_names_descriptions_enum_values_and_the_pre_fill() -> None:
    hostile = "<script>alert(1)</script>"
    schema = {
        "type": "object",
        "properties": {
            "pick": {"type": "string", "enum": [hostile, "b"], "description": hostile},
            hostile: {"type": "string", "maxLength": 10},
        },
    }
    form = AnswerForm(schema=schema, best={"pick": hostile, hostile: hostile})
    html = Template('{% for field in form %}{% include "projects/_field.html" %}{% endfor %}').render(
        Context({"form": form})
    )
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "a_field_1" in html  # a property name that is no identifier gets a field name of its own
