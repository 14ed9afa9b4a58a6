"""Template filters every studio template has (settings.TEMPLATES "builtins").

`shown`: a stored JSON value as a person reads it: text as it is, anything else as
compact JSON (`{"category": "billing"}`), never Python's repr (`{'category': 'billing'}`,
`None`, `True`); None as nothing."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "), default=str)
