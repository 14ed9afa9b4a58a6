"""The `shown` filter (studio.templating): stored JSON as a person reads it, never a repr."""

from __future__ import annotations

from django.template import Context, Template

from studio.templating import shown


def test_it_shows_json_values_as_json_and_text_as_text() -> None:
    assert shown({"category": "billing", "ok": True, "n": None}) == '{"category": "billing", "n": null, "ok": true}'
    assert shown(["a", 1]) == '["a", 1]'
    assert shown("abc1234") == "abc1234" and shown(None) == ""


def test_every_template_has_it_and_escapes_what_it_shows() -> None:
    html = Template("{{ v|shown }}").render(Context({"v": {"x": "<b>"}}))
    assert html == "{&quot;x&quot;: &quot;&lt;b&gt;&quot;}"
