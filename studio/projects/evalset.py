"""Editing evalset.jsonl one case (one line) at a time.

The file keeps its format: one JSON object per line. Editing or deleting a case
touches only that line; every other line stays byte for byte as it was."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django import forms

FILE = "evalset.jsonl"
NODE_ID = re.compile(r"^[a-z0-9_]+$")
KEY_ORDER = ("id", "input", "expected", "path", "end", "tags", "human", "note")


@dataclass
class Row:
    line: int  # 1-based line number in the file
    raw: str
    case: dict[str, Any] | None  # None when the line is not a JSON object
    error: str = ""

    @property
    def id(self) -> str:
        value = (self.case or {}).get("id")
        return value if isinstance(value, str) and value else f"line-{self.line}"

    def compact(self, key: str) -> str:
        if self.case is None or key not in self.case:
            return ""
        return json.dumps(self.case[key], ensure_ascii=False)

    @property
    def input_json(self) -> str:
        return self.compact("input")

    @property
    def expected_json(self) -> str:
        return self.compact("expected")

    @property
    def path(self) -> list[str]:
        value = (self.case or {}).get("path")
        return [str(v) for v in value] if isinstance(value, list) else []

    @property
    def end(self) -> str:
        value = (self.case or {}).get("end")
        return value if isinstance(value, str) else ""

    @property
    def tags(self) -> list[str]:
        value = (self.case or {}).get("tags")
        return [str(v) for v in value] if isinstance(value, list) else []

    @property
    def input_fields(self) -> list[Field]:
        return fields_of((self.case or {}).get("input"))

    @property
    def expected_fields(self) -> list[Field]:
        return fields_of((self.case or {}).get("expected"))

    def matches(self, query: str) -> bool:
        """Whether `query` (any case) is in the case's id, inputs, expected output, path,
        end, tags or note, as written in the line."""
        return query.casefold() in (self.id + " " + self.raw).casefold()


SHORT_FIELD = 80  # characters of a field's value shown before "more"


@dataclass
class Field:
    """One `key: value` of a case's input or expected output, as the evalset table shows it."""

    key: str
    value: str  # strings as they are, anything else as JSON

    @property
    def long(self) -> bool:
        return len(self.value) > SHORT_FIELD or "\n" in self.value

    @property
    def short(self) -> str:
        first = self.value.split("\n", 1)[0]
        return first[: SHORT_FIELD - 1] + "…" if self.long else self.value


def fields_of(value: Any) -> list[Field]:
    """A mapping's keys and values, in the order written; anything else as one field without a key."""
    if isinstance(value, dict):
        return [Field(str(k), _shown(v)) for k, v in value.items()]
    return [] if value is None else [Field("", _shown(value))]


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def split_lines(text: str) -> list[str]:
    body = text[:-1] if text.endswith("\n") else text
    return body.split("\n") if body else []


def join_lines(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def parse_rows(text: str) -> list[Row]:
    rows = []
    for number, raw in enumerate(split_lines(text), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            rows.append(Row(number, raw, None, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(value, dict):
            rows.append(Row(number, raw, None, "not a JSON object"))
            continue
        rows.append(Row(number, raw, value))
    return rows


def replace_line(text: str, line: int, new: str | None) -> str:
    """`text` with line `line` replaced by `new`, or removed when `new` is None."""
    lines = split_lines(text)
    if new is None:
        del lines[line - 1]
    else:
        lines[line - 1] = new
    return join_lines(lines)


def append_line(text: str, new: str) -> str:
    lines = split_lines(text)
    while lines and not lines[-1].strip():
        lines.pop()
    return join_lines([*lines, new])


def case_line(case: dict[str, Any]) -> str:
    return json.dumps(case, ensure_ascii=False)


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _json_field(label: str, *, required: bool, rows: int = 7, help_text: str = "") -> forms.CharField:
    return forms.CharField(
        label=label,
        required=required,
        strip=True,
        help_text=help_text,
        widget=forms.Textarea(attrs={"rows": rows, "class": "small-code", "spellcheck": "false"}),
    )


def _words(value: str) -> list[str]:
    return [w for w in re.split(r"[\s,]+", value.strip()) if w]


class CaseForm(forms.Form):
    """One gold case. `taken` holds the ids of the other cases, which must differ."""

    case_id = forms.CharField(label="id", max_length=200)
    input = _json_field("input", required=True, help_text="the run input, a JSON object")
    expected = _json_field(
        "expected", required=True, help_text="expected output fields, a JSON object ({} checks only the path)"
    )
    path = forms.CharField(
        label="path", required=False, max_length=2000, help_text="node ids the run must visit in order, comma separated"
    )
    end = forms.CharField(
        label="end", required=False, max_length=200, help_text="the end (or human) node the case stops at"
    )
    tags = forms.CharField(label="tags", required=False, max_length=2000, help_text="comma separated")
    human = _json_field(
        "human", required=False, rows=3, help_text='answers for human nodes: {"node": {...}}, a JSON object'
    )
    note = forms.CharField(label="note", required=False, max_length=2000)
    base = forms.CharField(max_length=40, widget=forms.HiddenInput)
    message = forms.CharField(max_length=500, error_messages={"required": "Write a commit message."})

    def __init__(self, *args: Any, taken: set[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.taken = taken or set()

    def clean_case_id(self) -> str:
        value: str = self.cleaned_data["case_id"].strip()
        if value in self.taken:
            raise forms.ValidationError(f"another case already has the id {value!r}; ids must be unique")
        return value

    def _object(self, name: str) -> dict[str, Any] | None:
        raw = self.cleaned_data.get(name, "")
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('must be a JSON object, like {"ticket": "..."}')
        return value

    def clean_input(self) -> dict[str, Any] | None:
        return self._object("input")

    def clean_expected(self) -> dict[str, Any] | None:
        return self._object("expected")

    def clean_human(self) -> dict[str, Any] | None:
        return self._object("human")

    def clean_path(self) -> list[str]:
        nodes = _words(self.cleaned_data.get("path", ""))
        bad = [n for n in nodes if not NODE_ID.match(n)]
        if bad:
            raise forms.ValidationError(f"not node ids: {', '.join(bad)} (lowercase letters, digits and _)")
        return nodes

    def clean_end(self) -> str:
        value: str = self.cleaned_data.get("end", "").strip()
        if value and not NODE_ID.match(value):
            raise forms.ValidationError("a node id uses lowercase letters, digits and _")
        return value

    def clean_tags(self) -> list[str]:
        return [t.strip() for t in self.cleaned_data.get("tags", "").split(",") if t.strip()]

    def case(self, original: dict[str, Any] | None = None) -> dict[str, Any]:
        """The case as a JSON object: the original's keys (and their order) kept, the
        form's fields set, and optional fields left empty removed."""
        data = self.cleaned_data
        values: dict[str, Any] = {
            "id": data["case_id"],
            "input": data["input"],
            "expected": data["expected"],
            "path": data["path"] or None,
            "end": data["end"] or None,
            "tags": data["tags"] or None,
            "human": data["human"] or None,
            "note": data["note"].strip() or None,
        }
        out = dict(original or {})
        for key in KEY_ORDER:
            if values[key] is None:
                out.pop(key, None)
            else:
                out[key] = values[key]
        return out


def initial_for(row: Row | None) -> dict[str, str]:
    if row is None:
        return {"input": "{\n  \n}", "expected": "{\n  \n}"}
    if row.case is None:
        return {"case_id": f"line-{row.line}", "input": row.raw}
    case = row.case
    return {
        "case_id": row.id,
        "input": pretty(case.get("input")) if "input" in case else "",
        "expected": pretty(case.get("expected")) if "expected" in case else "",
        "path": ", ".join(row.path),
        "end": row.end,
        "tags": ", ".join(row.tags),
        "human": pretty(case["human"]) if "human" in case else "",
        "note": str(case.get("note", "")),
    }
